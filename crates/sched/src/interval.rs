//! What the tracer reports per interval: per cgroup, its run-queue latency histogram, whom it
//! lost the CPU to, and its throttling and pressure.

use serde::{Deserialize, Serialize};
use tailhunt_histogram::{Histogram, Layout};

use crate::cgroups::CgroupRef;
use crate::cpu_stat::{Quota, Throttling};
use crate::event::RunqEvent;

/// Sub-bucket bits of the in-kernel histograms (`RUNQ_SUB_BITS` in `src/bpf/runq.h`): 16
/// buckets per power of two, each at most 6.25% wide, so a quantile read from them is within
/// 3.1% of the exact one.
pub const KERNEL_SUB_BITS: u32 = 4;

/// The bucket layout the kernel side uses.
pub fn kernel_layout() -> Layout {
    Layout::new(KERNEL_SUB_BITS).unwrap_or_default()
}

/// Another cgroup's share in one cgroup's waits and preemptions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// The other cgroup (kind `idle` when the CPU was idle).
    pub other: CgroupRef,
    /// Times a task of this cgroup, still runnable, was switched out for one of `other`.
    pub preemptions: u64,
    /// Waits of this cgroup's tasks that ended right after a task of `other` ran.
    pub waits: u64,
    /// Their total length, ns.
    pub wait_ns: u64,
}

/// One cgroup in one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupInterval {
    /// The cgroup the waits are charged to.
    pub cgroup: CgroupRef,
    /// Run-queue latency of its tasks, ns ([`kernel_layout`]).
    pub latency: Histogram,
    /// Whom it waited behind and was preempted by, largest wait first.
    pub by: Vec<Attribution>,
    /// Throttling in the interval (its cpu controller's `cpu.stat`), when readable.
    pub throttling: Option<Throttling>,
    /// The CPU quota on it, when there is one.
    pub quota: Option<Quota>,
    /// Time some task of it waited for a CPU according to PSI (`cpu.pressure`), µs.
    pub pressure_some_us: Option<u64>,
    /// Path of its v1 cpu cgroup, on hybrid hosts.
    pub cpu_cgroup: Option<String>,
}

/// Counters of the kernel side, per interval (deltas) or in total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Events written to the ring buffer.
    pub emitted: u64,
    /// Events lost because the ring buffer was full.
    pub ring_dropped: u64,
    /// Outliers not sent: over the per-cgroup, per-CPU budget.
    pub rate_limited: u64,
    /// Waits not counted because the cgroup map was full (`--max-cgroups`).
    pub cgroups_full: u64,
    /// Attributions not counted because the pair map was full.
    pub pairs_full: u64,
    /// Wakeups not timed because the timestamp store was full.
    pub timestamps_full: u64,
}

impl Counters {
    /// From the per-CPU counter array, summed over CPUs, in `enum runq_counter` order.
    pub fn from_slots(s: &[u64]) -> Counters {
        let at = |i: usize| s.get(i).copied().unwrap_or(0);
        Counters {
            emitted: at(0),
            ring_dropped: at(1),
            rate_limited: at(2),
            cgroups_full: at(3),
            pairs_full: at(4),
            timestamps_full: at(5),
        }
    }

    /// `self - earlier`.
    pub fn since(&self, e: &Counters) -> Counters {
        Counters {
            emitted: self.emitted.saturating_sub(e.emitted),
            ring_dropped: self.ring_dropped.saturating_sub(e.ring_dropped),
            rate_limited: self.rate_limited.saturating_sub(e.rate_limited),
            cgroups_full: self.cgroups_full.saturating_sub(e.cgroups_full),
            pairs_full: self.pairs_full.saturating_sub(e.pairs_full),
            timestamps_full: self.timestamps_full.saturating_sub(e.timestamps_full),
        }
    }

    /// Whether anything was lost (events or counts).
    pub fn lost_anything(&self) -> bool {
        self.ring_dropped + self.cgroups_full + self.pairs_full + self.timestamps_full > 0
    }
}

impl std::ops::Add for Counters {
    type Output = Counters;

    fn add(self, b: Counters) -> Counters {
        Counters {
            emitted: self.emitted + b.emitted,
            ring_dropped: self.ring_dropped + b.ring_dropped,
            rate_limited: self.rate_limited + b.rate_limited,
            cgroups_full: self.cgroups_full + b.cgroups_full,
            pairs_full: self.pairs_full + b.pairs_full,
            timestamps_full: self.timestamps_full + b.timestamps_full,
        }
    }
}

/// What one BPF program cost, from the kernel's own statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCost {
    /// Program name (`runq_switch`, ...).
    pub name: String,
    /// Times it ran.
    pub run_cnt: u64,
    /// Time it ran, ns.
    pub run_time_ns: u64,
}

impl ProgramCost {
    /// Mean cost per run, ns.
    pub fn ns_per_run(&self) -> Option<f64> {
        (self.run_cnt > 0).then(|| self.run_time_ns as f64 / self.run_cnt as f64)
    }
}

/// Mean cost per hook over several programs, ns (all runs of all of them).
pub fn mean_ns_per_hook(programs: &[ProgramCost]) -> Option<f64> {
    let runs: u64 = programs.iter().map(|p| p.run_cnt).sum();
    let ns: u64 = programs.iter().map(|p| p.run_time_ns).sum();
    (runs > 0).then(|| ns as f64 / runs as f64)
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
