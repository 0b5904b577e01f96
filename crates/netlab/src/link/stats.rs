//! Per-direction counters, written by the direction's thread and read by anyone.
//!
//! In: one call per packet event. Out: [`DirectionStats`] snapshots. The lateness histogram
//! (how long after its due time a packet was written) has 1 µs buckets up to 10 ms and an
//! overflow bucket; quantiles read from it are bucket upper bounds, so within 1 µs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use serde::Serialize;

const BUCKETS: usize = 10_000;
const BUCKET_NS: u64 = 1_000;

/// One direction's counts since the link started. Packets still in flight are
/// `packets_in - packets_forwarded - dropped_queue - dropped_loss - write_errors`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DirectionStats {
    /// Packets read from the sending end.
    pub packets_in: u64,
    /// Their bytes (IP packets).
    pub bytes_in: u64,
    /// Packets written to the receiving end.
    pub packets_forwarded: u64,
    /// Their bytes.
    pub bytes_forwarded: u64,
    /// Packets dropped because the queue was full.
    pub dropped_queue: u64,
    /// Packets dropped by the random loss.
    pub dropped_loss: u64,
    /// Packets the receiving device refused (counted, not fatal).
    pub write_errors: u64,
    /// Median of how late packets were written after their due time, in ns (the emulator's
    /// own timing error; 0 when nothing was forwarded).
    pub lateness_p50_ns: u64,
    /// 99th percentile of that lateness, in ns.
    pub lateness_p99_ns: u64,
    /// Largest lateness, in ns.
    pub lateness_max_ns: u64,
    /// The sending end's TUN device disappeared (its namespace was deleted while the link
    /// ran), so this direction stopped.
    pub input_gone: bool,
}

/// Both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LinkStats {
    /// From `a` to `b`.
    pub forward: DirectionStats,
    /// From `b` to `a`.
    pub reverse: DirectionStats,
}

/// The live counters behind a [`DirectionStats`].
#[derive(Debug)]
pub(crate) struct Counters {
    packets_in: AtomicU64,
    bytes_in: AtomicU64,
    packets_forwarded: AtomicU64,
    bytes_forwarded: AtomicU64,
    dropped_queue: AtomicU64,
    dropped_loss: AtomicU64,
    write_errors: AtomicU64,
    lateness: Vec<AtomicU64>,
    lateness_max_ns: AtomicU64,
    input_gone: AtomicBool,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            packets_in: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            packets_forwarded: AtomicU64::new(0),
            bytes_forwarded: AtomicU64::new(0),
            dropped_queue: AtomicU64::new(0),
            dropped_loss: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            lateness: (0..=BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            lateness_max_ns: AtomicU64::new(0),
            input_gone: AtomicBool::new(false),
        }
    }
}

/// What happened to a packet, for counting.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    In(u64),
    DroppedQueue,
    DroppedLoss,
    Forwarded { bytes: u64, late_ns: u64 },
    WriteError,
    InputGone,
}

impl Counters {
    pub(crate) fn record(&self, event: Event) {
        match event {
            Event::In(bytes) => {
                self.packets_in.fetch_add(1, Relaxed);
                self.bytes_in.fetch_add(bytes, Relaxed);
            }
            Event::DroppedQueue => {
                self.dropped_queue.fetch_add(1, Relaxed);
            }
            Event::DroppedLoss => {
                self.dropped_loss.fetch_add(1, Relaxed);
            }
            Event::InputGone => self.input_gone.store(true, Relaxed),
            Event::WriteError => {
                self.write_errors.fetch_add(1, Relaxed);
            }
            Event::Forwarded { bytes, late_ns } => {
                self.packets_forwarded.fetch_add(1, Relaxed);
                self.bytes_forwarded.fetch_add(bytes, Relaxed);
                let b = ((late_ns / BUCKET_NS) as usize).min(BUCKETS);
                self.lateness[b].fetch_add(1, Relaxed);
                self.lateness_max_ns.fetch_max(late_ns, Relaxed);
            }
        }
    }

    pub(crate) fn snapshot(&self) -> DirectionStats {
        let counts: Vec<u64> = self.lateness.iter().map(|c| c.load(Relaxed)).collect();
        let max = self.lateness_max_ns.load(Relaxed);
        DirectionStats {
            packets_in: self.packets_in.load(Relaxed),
            bytes_in: self.bytes_in.load(Relaxed),
            packets_forwarded: self.packets_forwarded.load(Relaxed),
            bytes_forwarded: self.bytes_forwarded.load(Relaxed),
            dropped_queue: self.dropped_queue.load(Relaxed),
            dropped_loss: self.dropped_loss.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            lateness_p50_ns: quantile(&counts, 0.5, max),
            lateness_p99_ns: quantile(&counts, 0.99, max),
            lateness_max_ns: max,
            input_gone: self.input_gone.load(Relaxed),
        }
    }
}

/// Nearest-rank quantile over the buckets: the upper bound of the bucket holding it, capped by
/// the largest value seen.
fn quantile(counts: &[u64], q: f64, max: u64) -> u64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0;
    }
    let rank = tailhunt_histogram::nearest_rank(q, total);
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank && i < BUCKETS {
            return ((i as u64 + 1) * BUCKET_NS).min(max);
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_quantiles_come_from_the_buckets() {
        let c = Counters::default();
        for i in 0..100u64 {
            let late_ns = if i < 98 { 3_500 } else { 20_000_000 };
            c.record(Event::Forwarded { bytes: 10, late_ns });
        }
        let s = c.snapshot();
        assert_eq!(s.packets_forwarded, 100);
        assert_eq!(s.bytes_forwarded, 1000);
        assert_eq!(s.lateness_p50_ns, 4_000);
        assert_eq!(s.lateness_p99_ns, 20_000_000);
        assert_eq!(s.lateness_max_ns, 20_000_000);
    }
}
