//! Running one step of load: a rate for a duration, over a pool of connections, on worker
//! threads. Each worker owns its connections and its share of the schedule (rate x its
//! connections / all connections) and runs one epoll loop; nothing is shared on the hot path.
//!
//! Every scheduled request ends as a sample with its intended, actual-send and completion times:
//! requests that wait for a connection wait in the client (send lag, counted in the latency),
//! requests that time out are samples with outcome `timeout`, requests on a connection that broke
//! are `error`s. Nothing scheduled is dropped. Finished requests go to the caller's
//! [`StepSink`] while the step runs, in intended-time order ([`handoff`]).

mod datagram;
pub mod handoff;
mod stream;
pub mod timing;
pub mod tls;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use tailhunt_model::{Sample, SinkError};
use thiserror::Error;

use crate::breakdown::Breakdown;
use crate::clock;
use crate::schedule::Arrival;
use crate::target::{Scheme, Target};

use handoff::{Batch, Outbox, Reorder};
pub use handoff::{Collect, Finished, StepSink};
pub use timing::Timing;

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
    /// HTTP: the method, headers and body of every request.
    pub http: crate::proto::HttpRequest,
    /// HTTPS: how the server's certificate is checked.
    pub tls: tls::TlsOptions,
    /// When workers poll instead of sleeping, and where they run.
    pub timing: Timing,
}

/// The longest warm-up a step gets when none is asked for.
pub const MAX_DEFAULT_WARMUP: Duration = Duration::from_secs(1);

/// The warm-up of a step measured for `measured` when none is asked for: a fifth of it, at most
/// [`MAX_DEFAULT_WARMUP`] (enough for connections, caches and the server's threads to be warm,
/// short enough that a short step is mostly measured).
pub fn default_warmup(measured: Duration) -> Duration {
    MAX_DEFAULT_WARMUP.min(measured / 5)
}

/// The warm-up of a step that must fit in `total` with its measured time, by the same rule as
/// [`default_warmup`] (so `total - warm-up` gets `default_warmup` of itself).
pub fn default_warmup_within(total: Duration) -> Duration {
    MAX_DEFAULT_WARMUP.min(total / 6)
}

/// Counters of a step (what the requests' outcomes do not say; those are in the samples).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
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
        self.connects += o.connects;
        self.connect_failures += o.connect_failures;
        self.disconnects += o.disconnects;
        self.max_backlog = self.max_backlog.max(o.max_backlog);
    }
}

/// The server went away during a step: every connection was down at the end, and connecting
/// (or, for UDP, sending) was refused after the last response.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLost {
    /// Monotonic time of the last response (`None`: it never answered in this step).
    pub last_response_ns: Option<i64>,
    /// What the last attempt to reach it said.
    pub reason: String,
}

/// What a step produced (its requests went to the [`StepSink`]).
#[derive(Debug, Clone, Default)]
pub struct StepOutcome {
    /// Monotonic time the schedule started.
    pub start_ns: i64,
    /// Intended times before this are warm-up.
    pub measure_from_ns: i64,
    /// Planned end of the send window.
    pub end_ns: i64,
    /// When sending actually stopped: `end_ns`, or earlier when the step was stopped.
    pub sent_until_ns: i64,
    /// Counters.
    pub counters: Counters,
    /// First error seen, for the message.
    pub first_error: Option<String>,
    /// Whether the step was stopped early (a signal).
    pub interrupted: bool,
    /// CPU time the busiest worker thread used over its run, as a share of that run's wall
    /// time (0..1): the client's own load, apart from the rest of the host.
    pub client_cpu: f64,
    /// Set when the server went away during the step.
    pub server_lost: Option<ServerLost>,
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
    /// The sink refused the step's requests (a store that cannot write); what it took before
    /// is kept.
    #[error("storing the step's requests: {0}")]
    Sink(SinkError),
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

/// Runs one step; blocks until it is done (send window plus drain of what is in flight),
/// handing finished requests to `sink` as it goes. `stop` ends sending early; what is in
/// flight is still waited for (up to the timeout).
pub fn run_step(
    cfg: &StepConfig,
    live: &Arc<Live>,
    stop: &Arc<AtomicBool>,
    sink: &mut dyn StepSink,
) -> Result<StepOutcome, LoadError> {
    crate::limits::check_step(cfg).map_err(|e| LoadError::Config(e.to_string()))?;
    let (workers, connect_errors) = connect(cfg)?;
    let start_ns = clock::mono_ns() + 20_000_000;
    let measure_from_ns = start_ns + cfg.warmup.as_nanos() as i64;
    let mut out = StepOutcome {
        start_ns,
        measure_from_ns,
        end_ns: measure_from_ns + cfg.duration.as_nanos() as i64,
        ..StepOutcome::default()
    };
    out.sent_until_ns = out.end_ns;
    out.counters.connect_failures += connect_errors.len() as u64;
    if let Some(e) = connect_errors.first() {
        out.first_error = Some(format!("connect: {}", connect_hint(e)));
    }
    // The workers stop on the caller's flag, or when the sink fails (the caller's flag would
    // then read as an interruption).
    let halt = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Batch>();
    let n_workers = workers.len();
    let handles = spawn(cfg, workers, &out, live, &halt, tx)?;
    let mut order = Reorder::new(n_workers);
    let sink_error = pump(&rx, &mut order, sink, stop, &halt);
    let mut lost = Vec::new();
    for h in handles {
        let part = h
            .join()
            .map_err(|_| LoadError::Config("a load worker thread panicked".into()))?;
        out.counters.add(&part.counters);
        out.first_error = out.first_error.or(part.first_error);
        out.interrupted |= part.stopped_at_ns.is_some();
        if let Some(t) = part.stopped_at_ns {
            out.sent_until_ns = out.sent_until_ns.min(t);
        }
        out.client_cpu = out.client_cpu.max(part.cpu_share);
        lost.push((part.lost, part.last_response_ns));
    }
    if let Some(e) = sink_error {
        return Err(LoadError::Sink(e));
    }
    order.release(sink, true).map_err(LoadError::Sink)?;
    out.server_lost = server_lost(&lost);
    Ok(out)
}

/// Workers with their connections, and how many connections each has.
type Workers = Vec<(WorkerKind, usize)>;

/// Opens the step's connections (before the clock starts, so connect time is not latency),
/// spread over its worker threads; fails only when none opens.
fn connect(cfg: &StepConfig) -> Result<(Workers, Vec<std::io::Error>), LoadError> {
    let threads = cfg.threads.min(cfg.conns);
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
    Ok((workers, connect_errors))
}

/// Starts one thread per worker, each with its share of the rate and its own window.
fn spawn(
    cfg: &StepConfig,
    workers: Workers,
    times: &StepOutcome,
    live: &Arc<Live>,
    halt: &Arc<AtomicBool>,
    tx: mpsc::Sender<Batch>,
) -> std::io::Result<Vec<std::thread::JoinHandle<WorkerResult>>> {
    let live_conns: usize = workers.iter().map(|(_, c)| c).sum();
    let cpus = rustix::thread::sched_getaffinity(None)
        .map(|set| set.count() as usize)
        .unwrap_or(1);
    let spin_ns = cfg.timing.spin_ns(workers.len(), cpus);
    workers
        .into_iter()
        .enumerate()
        .map(|(i, (w, conns))| {
            let window = Window {
                start_ns: times.start_ns,
                measure_from_ns: times.measure_from_ns,
                end_ns: times.end_ns,
                rate: cfg.rate * conns as f64 / live_conns as f64,
                phase_ns: i as f64 * 1e9 / cfg.rate,
                seed: cfg.seed.wrapping_add(i as u64),
                spin_ns,
                reply_spin: cfg.timing.reply_spin(),
            };
            let (live, halt) = (Arc::clone(live), Arc::clone(halt));
            let (cfg, tx) = (cfg.clone(), tx.clone());
            std::thread::Builder::new()
                .name(format!("load-{i}"))
                .spawn(move || {
                    clock::tighten_timer_slack();
                    let pinned = cfg.timing.pin_worker(i);
                    let out = Outbox::new(tx, i, clock::mono_ns());
                    let (cpu0, wall0) = (clock::thread_cpu_ns(), clock::mono_ns());
                    let mut r = match w {
                        WorkerKind::Stream(w) => w.run(&cfg, window, &live, &halt, out),
                        WorkerKind::Datagram(w) => w.run(&cfg, window, &live, &halt, out),
                    };
                    let wall = (clock::mono_ns() - wall0).max(1) as f64;
                    r.cpu_share = (clock::thread_cpu_ns() - cpu0) as f64 / wall;
                    if let Err(e) = pinned {
                        r.note_error(|| format!("--pin: pinning worker {i}: {e}"));
                    }
                    r.out.close(clock::mono_ns());
                    r
                })
        })
        .collect()
}

/// Passes the workers' batches to `sink` in order until every worker has closed, copying the
/// caller's stop flag to the workers; returns the sink's error, if it failed (the workers are
/// then halted and what they still send is dropped).
fn pump(
    rx: &mpsc::Receiver<Batch>,
    order: &mut Reorder,
    sink: &mut dyn StepSink,
    stop: &AtomicBool,
    halt: &AtomicBool,
) -> Option<SinkError> {
    let mut sink_error = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(b) => order.add(b),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return sink_error,
        }
        if stop.load(Ordering::Relaxed) {
            halt.store(true, Ordering::Relaxed);
        }
        if sink_error.is_none() {
            if let Err(e) = order.release(sink, false).and_then(|_| sink.tick()) {
                sink_error = Some(e);
                halt.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// The server went away when every worker lost it (see [`ServerLost`]).
fn server_lost(workers: &[(Option<String>, Option<i64>)]) -> Option<ServerLost> {
    if workers.is_empty() || workers.iter().any(|(l, _)| l.is_none()) {
        return None;
    }
    Some(ServerLost {
        last_response_ns: workers.iter().filter_map(|(_, t)| *t).max(),
        reason: workers[0].0.clone().unwrap_or_default(),
    })
}

/// One worker's share of the schedule.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub start_ns: i64,
    /// Requests due before this are warm-up.
    pub measure_from_ns: i64,
    pub end_ns: i64,
    pub rate: f64,
    pub phase_ns: f64,
    pub seed: u64,
    /// Poll instead of sleeping this long before a send (0: always sleep).
    pub spin_ns: i64,
    /// Also poll for up to `spin_ns` after a send while its reply is expected.
    pub reply_spin: bool,
}

enum WorkerKind {
    Stream(stream::Worker),
    Datagram(datagram::Worker),
}

/// What one worker hands back when it ends (its requests went through its [`Outbox`]).
pub(crate) struct WorkerResult {
    pub out: Outbox,
    pub counters: Counters,
    pub first_error: Option<String>,
    /// When it noticed the stop flag, if it did before its window ended.
    pub stopped_at_ns: Option<i64>,
    /// Its thread's CPU time over its run, as a share of that run's wall time.
    pub cpu_share: f64,
    /// Its last response from the server.
    pub last_response_ns: Option<i64>,
    /// Set (with the last refusal) when it ended with no connection and had been refused
    /// since its last response.
    pub lost: Option<String>,
    /// Requests due before this are warm-up.
    measure_from_ns: i64,
}

impl WorkerResult {
    pub fn new(out: Outbox, w: &Window) -> WorkerResult {
        WorkerResult {
            measure_from_ns: w.measure_from_ns,
            out,
            counters: Counters::default(),
            first_error: None,
            stopped_at_ns: None,
            cpu_share: 0.0,
            last_response_ns: None,
            lost: None,
        }
    }

    pub fn note_error(&mut self, e: impl FnOnce() -> String) {
        if self.first_error.is_none() {
            self.first_error = Some(e());
        }
    }

    /// Records a finished request; `breakdown` only when the step collects them.
    pub fn finish(&mut self, sample: Sample, sent: bool, breakdown: Option<Breakdown>) {
        if sent && sample.outcome == tailhunt_model::Outcome::Ok {
            self.last_response_ns = Some(self.last_response_ns.unwrap_or(0).max(sample.end_ns));
        }
        self.out.push(Finished {
            sample,
            sent,
            measured: sample.intended_ns >= self.measure_from_ns,
            breakdown,
        });
    }

    /// Hands finished requests over when due; `watermark` is only computed then.
    pub fn hand_off(&mut self, now_ns: i64, watermark: impl FnOnce() -> i64) {
        if self.out.due(now_ns) {
            self.out.send(now_ns, watermark());
        }
    }

    /// Notes the stop flag the first time it is seen.
    pub fn note_stop(&mut self, stop: &AtomicBool, now_ns: i64, window_end_ns: i64) {
        if self.stopped_at_ns.is_none() && stopped(stop) && now_ns < window_end_ns {
            self.stopped_at_ns = Some(now_ns);
        }
    }
}

/// Longest epoll sleep, so Ctrl-C and deadlines are noticed.
pub(crate) const MAX_WAIT_NS: i64 = 50_000_000;

pub(crate) use timing::wait_events;

pub(crate) fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_that_must_fit_a_total_warms_up_as_one_measured_for_the_rest() {
        for ms in [100, 600, 3_000, 5_990, 6_000, 6_010, 60_000] {
            let total = Duration::from_millis(ms);
            let warm = default_warmup_within(total);
            let measured = total - warm;
            let again = default_warmup(measured);
            let diff = again.abs_diff(warm);
            assert!(
                diff <= Duration::from_nanos(5),
                "{total:?}: {warm:?} vs {again:?}"
            );
        }
        assert_eq!(default_warmup(Duration::from_secs(10)), MAX_DEFAULT_WARMUP);
        assert_eq!(
            default_warmup(Duration::from_secs(2)),
            Duration::from_millis(400)
        );
    }
}
