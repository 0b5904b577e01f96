//! Bounds on the flags that size a load run's memory or its clock arithmetic, checked before
//! anything is opened or allocated.
//!
//! In: a step's [`StepConfig`] (and, for a sweep, its rates and number of steps). Out: `Ok`, or
//! a [`LimitError`] naming the flag, the value, the limit and why the limit is there. Memory
//! in a run grows with the requests of a step (each finished request is kept for the step's
//! summary), with connections (a read buffer and a descriptor each) and with requests in
//! flight; every such product is bounded here, so no allocation is ever sized by an unchecked
//! product of flags.

use std::time::Duration;

use thiserror::Error;

use crate::engine::StepConfig;
use crate::target::Scheme;
use crate::wire;

/// Highest offered rate, requests/s: far above what one client host sends (a tailhunt worker
/// thread reaches ~100k/s; `bench/load.sh`), low enough that the timetable's float arithmetic
/// stays exact to the nanosecond.
pub const MAX_RATE: f64 = 10_000_000.0;

/// Most requests one step may schedule (warm-up included): each finished request is kept in
/// memory, 32 bytes, for the step's exact percentiles (640 MB at this limit).
pub const MAX_STEP_REQUESTS: f64 = 20_000_000.0;

/// Most connections (UDP sockets): each holds a 64 KiB read buffer and a file descriptor.
pub const MAX_CONNS: usize = 10_000;

/// Most requests in flight over all connections (`--conns` x `--max-inflight`): each keeps its
/// times until its reply comes.
pub const MAX_IN_FLIGHT: u64 = 1_000_000;

/// Most worker threads (a thread per CPU is enough; more only take turns).
pub const MAX_THREADS: usize = 256;

/// Most steps in a sweep (`--sweep` rates x `--repeat`): each is a series and a summary row.
pub const MAX_STEPS: usize = 10_000;

/// Longest `--duration`, `--warmup` and `--timeout` (30 days): sample times are nanoseconds
/// in 64 bits, and a longer step is better run as several.
pub const MAX_SPAN: Duration = Duration::from_secs(30 * 24 * 3600);

/// Largest UDP request: the most one IPv4 datagram carries.
pub const MAX_UDP_REQUEST: usize = 65_507;

/// Largest HTTP request: the padding goes into one header, and servers refuse request heads
/// past 8-64 KiB (tailhunt's own at 64 KiB).
pub const MAX_HTTP_REQUEST: usize = 64 << 10;

/// A flag outside its bounds.
#[derive(Debug, Error, PartialEq)]
#[error("{0}")]
pub struct LimitError(pub String);

fn refuse(text: String) -> Result<(), LimitError> {
    Err(LimitError(text))
}

/// Checks a sweep: its rates and how many steps `--repeat` makes of them.
pub fn check_sweep(rates: &[f64], repeat: usize) -> Result<(), LimitError> {
    if let Some(r) = rates.iter().copied().find(|r| r.is_nan() || *r > MAX_RATE) {
        return refuse(format!(
            "rate {r} requests/s is above the limit of {} requests/s: no client host sends that fast (a tailhunt worker thread reaches about 100k/s); lower --rate",
            MAX_RATE
        ));
    }
    let steps = rates.len().saturating_mul(repeat.max(1));
    if repeat == 0 || steps > MAX_STEPS {
        return refuse(format!(
            "--repeat {repeat} with {} rate(s) makes {steps} steps; give --repeat 1 to {} (at most {MAX_STEPS} steps: each is a series and a row of the summary)",
            rates.len(),
            MAX_STEPS / rates.len().max(1)
        ));
    }
    Ok(())
}

/// Checks one step's flags; every message names the flag, the limit and why.
pub fn check_step(cfg: &StepConfig) -> Result<(), LimitError> {
    check_sweep(&[cfg.rate], 1)?;
    cfg.timing.check().map_err(LimitError)?;
    if let Err(e) = crate::proto::for_target(&cfg.target, cfg.request_bytes, &cfg.http) {
        return refuse(e.to_string());
    }
    if cfg.target.scheme == Scheme::Https {
        if cfg.breakdown {
            return refuse(
                "--breakdown needs tailhunt's reference servers, which do not speak TLS: leave it off for https://".into(),
            );
        }
        crate::engine::tls::client_config(&cfg.tls).map_err(LimitError)?;
        crate::engine::tls::server_name(&cfg.target.host).map_err(LimitError)?;
    }
    if !(cfg.rate.is_finite() && cfg.rate > 0.0) {
        return refuse(format!(
            "rate {} must be a positive number of requests per second",
            cfg.rate
        ));
    }
    if cfg.duration.is_zero() {
        return refuse("--duration must be above 0: it is the time measured".into());
    }
    if cfg.timeout.is_zero() {
        return refuse(
            "--timeout must be above 0: a request unanswered that long counts as a timeout".into(),
        );
    }
    for (flag, d) in [
        ("--duration", cfg.duration),
        ("--warmup", cfg.warmup),
        ("--timeout", cfg.timeout),
    ] {
        if d > MAX_SPAN {
            return refuse(format!(
                "{flag} {d:?} is above the limit of 30 days: times are kept in 64-bit nanoseconds; run several shorter steps (--repeat)"
            ));
        }
    }
    let requests = cfg.rate * (cfg.duration + cfg.warmup).as_secs_f64();
    if requests > MAX_STEP_REQUESTS {
        return refuse(format!(
            "--rate {} for {:?} (with {:?} of warm-up) schedules {:.0} requests in one step, above the limit of {:.0}: each is kept in memory (32 bytes) for the step's exact percentiles; lower --rate or --duration, or split the step with --repeat",
            cfg.rate, cfg.duration, cfg.warmup, requests, MAX_STEP_REQUESTS
        ));
    }
    if cfg.conns == 0 || cfg.threads == 0 || cfg.max_inflight == 0 {
        return refuse("--conns, --threads and --max-inflight must be at least 1".into());
    }
    if cfg.conns > MAX_CONNS {
        return refuse(format!(
            "--conns {} is above the limit of {MAX_CONNS}: each connection holds a 64 KiB read buffer and a file descriptor; one client rarely needs more than a few hundred (raise --max-inflight to pipeline instead)",
            cfg.conns
        ));
    }
    let in_flight = cfg.conns as u64 * cfg.max_inflight as u64;
    if in_flight > MAX_IN_FLIGHT {
        return refuse(format!(
            "--conns {} x --max-inflight {} allows {in_flight} requests in flight, above the limit of {MAX_IN_FLIGHT}: each keeps its times until its reply comes; lower either",
            cfg.conns, cfg.max_inflight
        ));
    }
    if cfg.threads > MAX_THREADS {
        return refuse(format!(
            "--threads {} is above the limit of {MAX_THREADS}: one worker thread per CPU is enough, more only take turns",
            cfg.threads
        ));
    }
    let (max_request, why) = match cfg.target.scheme {
        Scheme::Udp => (MAX_UDP_REQUEST, "the most one IPv4 datagram carries"),
        Scheme::Http | Scheme::Https => (MAX_HTTP_REQUEST, "servers refuse larger request heads"),
        _ => (wire::MAX_BODY, "the largest frame tailhunt's servers take"),
    };
    if cfg.request_bytes > max_request {
        return refuse(format!(
            "--request-bytes {} is above the limit of {max_request} for {}: {why}",
            cfg.request_bytes,
            cfg.target.scheme.name()
        ));
    }
    check_descriptors(cfg.conns)
}

/// Refuses more connections than the process may open files (`ulimit -n`), with room for the
/// store, epoll and the standard streams.
fn check_descriptors(conns: usize) -> Result<(), LimitError> {
    const SPARE: u64 = 64;
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    match limit.current {
        Some(n) if conns as u64 + SPARE > n => refuse(format!(
            "--conns {conns} needs {conns} file descriptors but this process may open {n} (ulimit -n); raise it (ulimit -n {}) or use fewer --conns",
            conns as u64 + SPARE
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Arrival;
    use crate::target::parse_target;

    fn cfg(rate: f64) -> StepConfig {
        StepConfig {
            target: parse_target("tcp://127.0.0.1:7").unwrap(),
            rate,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            conns: 4,
            threads: 1,
            max_inflight: 1000,
            timeout: Duration::from_secs(5),
            nodelay: false,
            split_writes: false,
            request_bytes: 64,
            arrival: Arrival::Fixed,
            seed: 1,
            breakdown: false,
            http: Default::default(),
            tls: Default::default(),
            timing: Default::default(),
        }
    }

    #[test]
    fn absurd_flags_are_refused_naming_the_limit() {
        assert_eq!(check_step(&cfg(1000.0)), Ok(()));
        let e = check_step(&cfg(1e9)).unwrap_err().0;
        assert!(e.contains("above the limit of 10000000 requests/s"), "{e}");
        let e = check_step(&cfg(1e20)).unwrap_err().0;
        assert!(e.contains("above the limit"), "{e}");
        assert!(check_step(&cfg(f64::NAN)).is_err());
        let e = check_step(&cfg(5e6)).unwrap_err().0;
        assert!(e.contains("schedules 55000000 requests"), "{e}");
        let mut c = cfg(100.0);
        c.conns = 1_000_000;
        assert!(check_step(&c).unwrap_err().0.contains("--conns 1000000"));
        c.conns = 2000;
        c.max_inflight = 1000;
        assert!(check_step(&c)
            .unwrap_err()
            .0
            .contains("2000000 requests in flight"));
        let mut c = cfg(100.0);
        c.threads = 100_000;
        assert!(check_step(&c).unwrap_err().0.contains("--threads 100000"));
        let mut c = cfg(100.0);
        c.request_bytes = 1 << 30;
        assert!(check_step(&c).unwrap_err().0.contains("--request-bytes"));
        let mut c = cfg(100.0);
        c.timeout = Duration::from_secs(u64::MAX / 4);
        assert!(check_step(&c).unwrap_err().0.contains("--timeout"));
        c.timeout = Duration::ZERO;
        assert!(check_step(&c)
            .unwrap_err()
            .0
            .contains("--timeout must be above 0"));
        let mut c = cfg(100.0);
        c.duration = Duration::ZERO;
        assert!(check_step(&c)
            .unwrap_err()
            .0
            .contains("--duration must be above 0"));
        assert!(check_sweep(&[1.0, 2.0], usize::MAX)
            .unwrap_err()
            .0
            .contains("--repeat"));
    }
}
