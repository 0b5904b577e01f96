//! `tailhunt lab link`: what the emulated link carried, as a document and as text.

use serde::Serialize;
use tailhunt_netlab::link::DirectionStats;

/// What `lab link` prints when it stops (`--json`: this document).
#[derive(Debug, Serialize)]
pub struct LinkDoc {
    /// Namespace of end A.
    pub a_ns: String,
    /// Namespace of end B.
    pub b_ns: String,
    /// End A's address.
    pub a_addr: String,
    /// End B's address.
    pub b_addr: String,
    /// One-way delay, each direction, ns.
    pub delay_ns: u64,
    /// Jitter around the delay, ns.
    pub jitter_ns: u64,
    /// Rate limit each way, bits/s (none: unlimited).
    pub rate_bps: Option<u64>,
    /// Drop-tail queue in front of the rate limit, bytes.
    pub queue_bytes: u64,
    /// Probability of dropping each packet, each way.
    pub loss: f64,
    /// How long the link ran, ns.
    pub ran_ns: u64,
    /// A to B.
    pub forward: DirectionStats,
    /// B to A.
    pub reverse: DirectionStats,
}

/// `lab link` for people: what crossed each way and how late the emulator released it.
pub fn render_link(d: &LinkDoc) -> String {
    let mut s = format!(
        "ran {:.1} s\n{:<8} {:>10} {:>12} {:>10} {:>12} {:>10} {:>10} {:>12} {:>12}\n",
        d.ran_ns as f64 / 1e9,
        "dir",
        "pkts in",
        "bytes in",
        "forwarded",
        "bytes fwd",
        "drop q",
        "drop loss",
        "late p99",
        "late max"
    );
    for (name, x) in [("a->b", &d.forward), ("b->a", &d.reverse)] {
        s.push_str(&format!(
            "{name:<8} {:>10} {:>12} {:>10} {:>12} {:>10} {:>10} {:>10}us {:>10}us\n",
            x.packets_in,
            x.bytes_in,
            x.packets_forwarded,
            x.bytes_forwarded,
            x.dropped_queue,
            x.dropped_loss,
            x.lateness_p99_ns / 1000,
            x.lateness_max_ns / 1000,
        ));
    }
    s
}
