//! What the tracer reports per interval: per cgroup, its run-queue latency histogram, whom it
//! lost the CPU to, and its throttling and pressure.

use tailhunt_model::evidence::runq::{CgroupInterval, CgroupRef, Counters, ProgramCost};

use crate::event::RunqEvent;

/// The per-CPU counter array, summed over CPUs, in `enum runq_counter` order (`runq.h`).
pub fn counters_from_slots(s: &[u64]) -> Counters {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    Counters {
        emitted: at(0),
        ring_dropped: at(1),
        rate_limited: at(2),
        cgroups_full: at(3),
        pairs_full: at(4),
        timestamps_full: at(5),
        beyond_history: at(6),
    }
}

/// One interval of tracing.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// Start, ns on the monotonic clock.
    pub start_ns: i64,
    /// End, ns.
    pub end_ns: i64,
    /// Cgroups with waits in the interval, most waits first.
    pub cgroups: Vec<CgroupInterval>,
    /// Events received in the interval (outliers, or every wait with `all_events`), with the
    /// names of their cgroups.
    pub events: Vec<(RunqEvent, CgroupRef, CgroupRef)>,
    /// Kernel-side counters in the interval.
    pub counters: Counters,
    /// What each program cost in the interval (empty when the statistics are unavailable).
    pub programs: Vec<ProgramCost>,
}
