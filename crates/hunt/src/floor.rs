//! The network floor: how long a TCP connect to the target takes, the least any request can
//! cost on this path.
//!
//! In: the target's address, how many connects and how far apart. Out: a [`Floor`] (every
//! connect time, with the summary), or the first connect's error when the target refuses or
//! cannot be reached, which ends the hunt before anything is stored. A connect is a SYN and a
//! SYN-ACK: one round trip plus both stacks, without the application.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use tailhunt_load::clock::mono_ns;
use tailhunt_model::{quantile, ClockOrigin, Outcome, Sample, SeriesMeta, SeriesSink, SinkError};

/// How long one connect may take before the target counts as unreachable: a path slower
/// than this is not one a latency hunt can help with.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The connect times to the target.
#[derive(Debug, Clone, Serialize)]
pub struct Floor {
    /// What was measured (`tcp-connect`).
    pub probe: String,
    /// Connects that succeeded.
    pub connects: usize,
    /// Connects that failed after the first succeeded.
    pub failures: usize,
    /// Fastest connect, ns: the floor.
    pub min_ns: u64,
    /// Median connect, ns.
    pub p50_ns: u64,
    /// Slowest connect, ns.
    pub max_ns: u64,
    /// Every connect: intended start, end and outcome (kept for the store, not the JSON).
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// The clocks when the first connect began: the stored run's origin, so that its
    /// connects fall at and after its start, not before it.
    #[serde(skip)]
    pub origin: ClockOrigin,
}

/// Connects `count` times, `gap` apart (or until `stop`). The first connect's error is
/// returned as it is: a refused or unreachable target ends the hunt at once.
pub fn measure(
    addr: SocketAddr,
    count: usize,
    gap: Duration,
    stop: &AtomicBool,
) -> std::io::Result<Floor> {
    let origin = ClockOrigin::now();
    let mut samples = Vec::with_capacity(count);
    let mut failures = 0;
    for i in 0..count.max(1) {
        if i > 0 && stop.load(Ordering::Relaxed) {
            break;
        }
        let at = mono_ns();
        let started = Instant::now();
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                let took = started.elapsed().as_nanos() as i64;
                drop(s);
                samples.push(Sample::from_latency(at, took, Outcome::Ok));
            }
            Err(e) if samples.is_empty() && failures == 0 => return Err(e),
            Err(_) => {
                failures += 1;
                let took = started.elapsed().as_nanos() as i64;
                samples.push(Sample::from_latency(at, took, Outcome::Error));
            }
        }
        std::thread::sleep(gap);
    }
    Ok(summarise(origin, samples, failures))
}

fn summarise(origin: ClockOrigin, samples: Vec<Sample>, failures: usize) -> Floor {
    let mut ok: Vec<u64> = samples
        .iter()
        .filter(|s| s.outcome == Outcome::Ok)
        .map(|s| s.latency_ns().max(0) as u64)
        .collect();
    ok.sort_unstable();
    Floor {
        probe: "tcp-connect".into(),
        connects: ok.len(),
        failures,
        min_ns: ok.first().copied().unwrap_or(0),
        p50_ns: quantile::of_sorted(&ok, 0.5).unwrap_or(0),
        max_ns: ok.last().copied().unwrap_or(0),
        samples,
        origin,
    }
}

impl Floor {
    /// Stores the connects as the series `latency{probe=tcp-connect}`.
    pub fn record(&self, sink: &mut dyn SeriesSink) -> Result<(), SinkError> {
        let mut meta = SeriesMeta::latency("latency");
        meta.labels.insert("probe".into(), self.probe.clone());
        let h = sink.open_series(&meta)?;
        sink.push_samples(h, &self.samples)?;
        sink.commit_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn connects_to_a_listener_and_summarises_the_times() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let f = measure(addr, 5, Duration::from_millis(1), &AtomicBool::new(false)).unwrap();
        assert_eq!((f.connects, f.failures), (5, 0));
        assert!(f.min_ns > 0 && f.min_ns <= f.p50_ns && f.p50_ns <= f.max_ns);
        assert_eq!(f.samples.len(), 5);
        assert!(
            f.samples.iter().all(|s| s.intended_ns >= f.origin.mono_ns),
            "every connect is at or after the run's origin"
        );
    }

    #[test]
    fn a_refusing_target_is_the_first_connects_error() {
        let addr = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let e = measure(addr, 3, Duration::ZERO, &AtomicBool::new(false)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    }
}
