//! Running one step of load: a rate for a duration, over a pool of connections, on worker
//! threads. Each worker owns its connections and its share of the schedule (rate x its
//! connections / all connections) and runs one epoll loop; nothing is shared on the hot path.
//!
//! Every scheduled request ends as a sample with its intended, actual-send and completion times:
//! requests that wait for a connection wait in the client (send lag, counted in the latency),
//! requests that time out are samples with outcome `timeout`, requests on a connection that broke
//! are `error`s. Nothing scheduled is dropped.

mod datagram;
mod stream;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tailhunt_model::Sample;
use thiserror::Error;

use crate::breakdown::Breakdown;
use crate::clock;
use crate::schedule::Arrival;
use crate::target::{Scheme, Target};

/// How to run one step.
#[derive(Debug, Clone)]
pub struct StepConfig {
    /// Where to send.
    pub target: Target,
    /// Offered rate, requests/s.
    pub rate: f64,
    /// Measured duration.
    pub duration: Duration,
    /// Warm-up before it (samples kept apart).
    pub warmup: Duration,
    /// Connections (UDP: sockets).
    pub conns: usize,
    /// Worker threads.
    pub threads: usize,
    /// Requests in flight per connection before new ones wait in the client.
    pub max_inflight: usize,
    /// Give up on a request this long after its intended time.
    pub timeout: Duration,
    /// TCP_NODELAY on the client's sockets.
    pub nodelay: bool,
    /// Write each request in two pieces.
    pub split_writes: bool,
    /// Request size (tcp/udp body, http request).
    pub request_bytes: usize,
    /// Arrival process.
    pub arrival: Arrival,
    /// Seed for Poisson arrivals.
    pub seed: u64,
    /// Collect the per-request breakdown (server timestamps).
    pub breakdown: bool,
}

/// Counters of a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests written to a socket.
    pub sent: u64,
    /// Requests scheduled but never written (no usable connection before their timeout).
    pub unsent: u64,
    /// Connections opened.
    pub connects: u64,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// Connections closed by the server or broken.
    pub disconnects: u64,
    /// Most requests waiting in the client for a connection at once.
    pub max_backlog: u64,
}

impl Counters {
    fn add(&mut self, o: &Counters) {
        self.sent += o.sent;
        self.unsent += o.unsent;
        self.connects += o.connects;
        self.connect_failures += o.connect_failures;
        self.disconnects += o.disconnects;
        self.max_backlog = self.max_backlog.max(o.max_backlog);
    }
}

/// What a step produced.
#[derive(Debug, Clone, Default)]
pub struct StepOutcome {
    /// Samples in intended-time order (warm-up included: see `measure_from_ns`).
    pub samples: Vec<Sample>,
    /// Per-request breakdowns (when asked and the server sent timestamps), same order.
    pub breakdowns: Vec<Breakdown>,
    /// Monotonic time the schedule started.
    pub start_ns: i64,
    /// Intended times before this are warm-up.
    pub measure_from_ns: i64,
    /// End of the send window.
    pub end_ns: i64,
    /// Counters.
    pub counters: Counters,
    /// First error seen, for the message.
    pub first_error: Option<String>,
    /// Whether the step was stopped early (Ctrl-C).
    pub interrupted: bool,
}

/// Why a step could not run at all.
#[derive(Debug, Error)]
pub enum LoadError {
    /// No connection could be opened.
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// Target.
        url: String,
        /// Why, with a hint.
        reason: String,
    },
    /// Bad parameters.
    #[error("{0}")]
    Config(String),
    /// Local failure (epoll, threads).
    #[error("load generator: {0}")]
    Io(#[from] std::io::Error),
}

/// Live counters for a progress line.
#[derive(Debug, Default)]
pub struct Live {
    /// Requests written.
    pub sent: AtomicU64,
    /// Requests finished (any outcome).
    pub done: AtomicU64,
}

/// Explains a connect error the way a user can act on it.
pub fn connect_hint(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    let hint = match e.kind() {
        ConnectionRefused => " (nothing listens there: is the server running, on that port?)",
        TimedOut => " (no answer: is the host reachable, or a firewall dropping packets?)",
        NetworkUnreachable | HostUnreachable => {
            " (no route to the host: check the address and the network)"
        }
        AddrNotAvailable => " (no local address can reach it)",
        PermissionDenied => " (not permitted: check firewall rules)",
        _ => "",
    };
    format!("{e}{hint}")
}

/// Runs one step; blocks until it is done (send window plus drain of what is in flight).
pub fn run_step(
    cfg: &StepConfig,
    live: &Arc<Live>,
    stop: &Arc<AtomicBool>,
) -> Result<StepOutcome, LoadError> {
    if !(cfg.rate.is_finite() && cfg.rate > 0.0) {
        return Err(LoadError::Config(format!(
            "rate {} must be a positive number of requests per second",
            cfg.rate
        )));
    }
    if cfg.conns == 0 || cfg.threads == 0 || cfg.max_inflight == 0 {
        return Err(LoadError::Config(
            "--conns, --threads and --max-inflight must be at least 1".into(),
        ));
    }
    let threads = cfg.threads.min(cfg.conns);
    // Connections are opened before the clock starts, so connect time is not latency.
    let mut workers = Vec::with_capacity(threads);
    let mut connect_errors = Vec::new();
    for i in 0..threads {
        let conns = cfg.conns / threads + usize::from(i < cfg.conns % threads);
        let w = match cfg.target.scheme {
            Scheme::Udp => datagram::Worker::connect(cfg, conns).map(WorkerKind::Datagram),
            _ => stream::Worker::connect(cfg, conns).map(WorkerKind::Stream),
        };
        match w {
            Ok(w) => workers.push((w, conns)),
            Err(e) => connect_errors.push(e),
        }
    }
    if workers.is_empty() {
        let reason = connect_errors
            .first()
            .map_or_else(|| "no connections".into(), connect_hint);
        return Err(LoadError::Connect {
            url: format!("{}://{}", cfg.target.scheme.name(), cfg.target.addr),
            reason,
        });
    }
    let live_conns: usize = workers.iter().map(|(_, c)| c).sum();
    // Polling for sends due soon pays only when every worker has a CPU of its own: workers that
    // share one (say `taskset -c 1 tailhunt load --threads 2`) would spend their turns polling
    // while the other waits to send.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spin_ns = if workers.len() <= cpus { SPIN_NS } else { 0 };
    let start_ns = clock::mono_ns() + 20_000_000;
    let measure_from_ns = start_ns + cfg.warmup.as_nanos() as i64;
    let end_ns = measure_from_ns + cfg.duration.as_nanos() as i64;
    let handles: Vec<_> = workers
        .into_iter()
        .enumerate()
        .map(|(i, (w, conns))| {
            let rate = cfg.rate * conns as f64 / live_conns as f64;
            let phase = i as f64 * 1e9 / cfg.rate;
            let (live, stop) = (Arc::clone(live), Arc::clone(stop));
            let cfg = cfg.clone();
            std::thread::Builder::new()
                .name(format!("load-{i}"))
                .spawn(move || {
                    clock::tighten_timer_slack();
                    let window = Window {
                        start_ns,
                        end_ns,
                        rate,
                        phase_ns: phase,
                        seed: cfg.seed.wrapping_add(i as u64),
                        spin_ns,
                    };
                    match w {
                        WorkerKind::Stream(w) => w.run(&cfg, window, &live, &stop),
                        WorkerKind::Datagram(w) => w.run(&cfg, window, &live, &stop),
                    }
                })
        })
        .collect::<Result<_, _>>()?;
    let mut out = StepOutcome {
        start_ns,
        measure_from_ns,
        end_ns,
        ..StepOutcome::default()
    };
    out.counters.connect_failures += connect_errors.len() as u64;
    if let Some(e) = connect_errors.first() {
        out.first_error = Some(format!("connect: {}", connect_hint(e)));
    }
    for h in handles {
        let part = h
            .join()
            .map_err(|_| LoadError::Config("a load worker thread panicked".into()))?;
        out.samples.extend(part.samples);
        out.breakdowns.extend(part.breakdowns);
        out.counters.add(&part.counters);
        out.first_error = out.first_error.or(part.first_error);
        out.interrupted |= part.interrupted;
    }
    // Keep samples and breakdowns in the same (intended-time) order.
    if out.breakdowns.len() == out.samples.len() && !out.breakdowns.is_empty() {
        let mut pairs: Vec<_> = out.samples.into_iter().zip(out.breakdowns).collect();
        pairs.sort_by_key(|(s, _)| s.intended_ns);
        (out.samples, out.breakdowns) = pairs.into_iter().unzip();
    } else {
        out.samples.sort_by_key(|s| s.intended_ns);
    }
    Ok(out)
}

/// One worker's share of the schedule.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub start_ns: i64,
    pub end_ns: i64,
    pub rate: f64,
    pub phase_ns: f64,
    pub seed: u64,
    /// Waits shorter than this poll instead of sleeping (0: always sleep).
    pub spin_ns: i64,
}

enum WorkerKind {
    Stream(stream::Worker),
    Datagram(datagram::Worker),
}

/// What one worker hands back.
#[derive(Debug, Default)]
pub(crate) struct WorkerResult {
    pub samples: Vec<Sample>,
    pub breakdowns: Vec<Breakdown>,
    pub counters: Counters,
    pub first_error: Option<String>,
    pub interrupted: bool,
}

impl WorkerResult {
    pub fn note_error(&mut self, e: impl FnOnce() -> String) {
        if self.first_error.is_none() {
            self.first_error = Some(e());
        }
    }
}

/// Waits shorter than this poll instead of sleeping (when each worker has a CPU).
pub(crate) const SPIN_NS: i64 = 50_000;

/// Longest epoll sleep, so Ctrl-C and deadlines are noticed.
pub(crate) const MAX_WAIT_NS: i64 = 50_000_000;

/// Waits up to `wait_ns` for events (nanosecond precision: epoll_pwait2). A signal ends the
/// wait early without an error.
pub(crate) fn wait_events(
    epoll: &rustix::fd::OwnedFd,
    events: &mut Vec<rustix::event::epoll::Event>,
    wait_ns: i64,
    spin_ns: i64,
) -> rustix::io::Result<()> {
    // A send due within spin_ns is waited for by polling: on a VM a sleep and wake-up costs
    // more CPU than the wait, and the wake-up comes late.
    let wait_ns = if wait_ns < spin_ns {
        0
    } else {
        wait_ns - spin_ns / 2
    };
    let ts = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: wait_ns.clamp(0, 999_999_999),
    };
    events.clear();
    match rustix::event::epoll::wait(epoll, rustix::buffer::spare_capacity(events), Some(&ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e),
    }
}

pub(crate) fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed)
}
