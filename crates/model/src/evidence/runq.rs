//! Run-queue evidence: per cgroup and interval, the latency histogram, whom its waits ended
//! behind and who preempted it, throttling and pressure; the tracer's set-up and cost.
//!
//! In: what `tailhunt-sched` measures (it fills [`CgroupInterval`], [`DegradedInterval`],
//! [`TracerSetup`], [`Counters`], [`ProgramCost`]) and records ([`RunqRecord`], the `runq`
//! document, beside the `runq_*` series). Out: [`CgroupTimeline`]s, which the stored-run
//! reader of `tailhunt-diagnose` rebuilds for the `noisy-neighbor` and `cpu-throttled`
//! detectors, and the rows the report prints.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tailhunt_histogram::{Histogram, Layout};

use super::Document;
use crate::{format_duration_ns, ClockOrigin};

/// Sub-bucket bits of the in-kernel histograms (`RUNQ_SUB_BITS` in `crates/sched/src/bpf/runq.h`):
/// 16 buckets per power of two, each at most 6.25% wide, so a quantile read from them is within
/// 3.1% of the exact one.
pub const KERNEL_SUB_BITS: u32 = 4;

/// The bucket layout the kernel side uses.
pub fn kernel_layout() -> Layout {
    Layout::new(KERNEL_SUB_BITS).unwrap_or_default()
}

/// A cgroup hierarchy the tracer can charge waits to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Hierarchy {
    /// cgroup2 (`task->cgroups->dfl_cgrp`): every modern host has it.
    V2,
    /// The cgroup v1 `cpu` controller (hybrid hosts), which governs CPU shares and quota there.
    V1Cpu,
}

/// What kind of workload a cgroup holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CgroupKind {
    /// The root cgroup, or one that could not be resolved: host processes.
    System,
    /// A Docker container.
    Docker,
    /// A container of a Kubernetes pod (containerd, CRI-O or Docker underneath).
    Kubernetes,
    /// A systemd service, scope or slice.
    Systemd,
    /// Any other cgroup, named by its path.
    Cgroup,
    /// Not a cgroup: the CPU was idle (the other side of a wait or preemption).
    Idle,
    /// Not a cgroup: the part of a wait older than its CPU's remembered history, whose
    /// runners are unknown.
    Unattributed,
}

/// The `by` name under which a run stores the attributions beyond the busiest few others,
/// summed (`tailhunt-sched`'s recorder).
pub const OTHER_CGROUPS: &str = "other cgroups";

/// The name of [`CgroupRef::unattributed`].
pub const UNATTRIBUTED: &str = "unattributed";
/// The id the kernel side gives it (`RUNQ_UNATTRIBUTED` in `crates/sched/src/bpf/runq.h`).
pub const UNATTRIBUTED_ID: u64 = u64::MAX - 1;

/// A cgroup as reported: id, path in its hierarchy and a readable name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupRef {
    /// kernfs id (directory inode); 0 for the idle task.
    pub id: u64,
    /// Path relative to the hierarchy's mount (`/` for the root); empty when unresolved.
    pub path: String,
    /// Name for people: `docker:3f2a1c9e0b7d`, `pod 1234-...:nginx-5f6e`, `nginx.service`,
    /// the path, `system`, or `idle`.
    pub name: String,
    /// Kind.
    pub kind: CgroupKind,
}

impl CgroupRef {
    /// The idle task's side of a wait: no cgroup.
    pub fn idle() -> CgroupRef {
        CgroupRef {
            id: 0,
            path: String::new(),
            name: "idle".into(),
            kind: CgroupKind::Idle,
        }
    }

    /// The other side of the part of a wait older than its CPU's remembered history.
    pub fn unattributed() -> CgroupRef {
        CgroupRef {
            id: UNATTRIBUTED_ID,
            path: String::new(),
            name: UNATTRIBUTED.into(),
            kind: CgroupKind::Unattributed,
        }
    }

    /// An id that no walk of the hierarchy found (the cgroup was created and removed between
    /// two walks): charged to "system" but keeping its id.
    pub fn unknown(id: u64) -> CgroupRef {
        CgroupRef {
            id,
            path: String::new(),
            name: format!("system (cgroup {id}, gone)"),
            kind: CgroupKind::System,
        }
    }
}

/// Where the two hierarchies the tracer uses are mounted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mounts {
    /// The cgroup2 mount (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on hybrid hosts).
    pub v2: Option<PathBuf>,
    /// The cgroup v1 mount that carries the `cpu` controller, when there is one.
    pub v1_cpu: Option<PathBuf>,
}

impl Mounts {
    /// The mount of a hierarchy.
    pub fn root(&self, h: Hierarchy) -> Option<&Path> {
        match h {
            Hierarchy::V2 => self.v2.as_deref(),
            Hierarchy::V1Cpu => self.v1_cpu.as_deref(),
        }
    }

    /// The mounts, for messages.
    pub fn describe(&self) -> String {
        let list: Vec<String> = [&self.v2, &self.v1_cpu]
            .into_iter()
            .flatten()
            .map(|p| p.display().to_string())
            .collect();
        if list.is_empty() {
            "no cgroup mount (none in /proc/self/mountinfo)".into()
        } else {
            list.join(" or ")
        }
    }
}

/// A CPU quota: `quota_us` of CPU time per `period_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    /// CPU time allowed per period, µs.
    pub quota_us: u64,
    /// Period, µs.
    pub period_us: u64,
}

impl Quota {
    /// CPUs' worth of time the quota allows (0.1 for 10 ms per 100 ms).
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us.max(1) as f64
    }
}

/// `10.0ms per 100ms (0.10 CPU)`.
impl std::fmt::Display for Quota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} per {} ({:.2} CPU)",
            format_duration_ns(self.quota_us as f64 * 1e3),
            format_duration_ns(self.period_us as f64 * 1e3),
            self.cpus()
        )
    }
}

/// Cumulative throttling counters of one cgroup (or their change over an interval).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttling {
    /// Enforcement periods that elapsed with tasks runnable.
    pub periods: u64,
    /// Periods in which the group ran out of quota.
    pub throttled_periods: u64,
    /// Time the group's tasks spent throttled, ns.
    pub throttled_ns: u64,
}

impl Throttling {
    /// `self - earlier`, saturating (a counter reset reads as zero, not as a huge number).
    pub fn since(&self, earlier: &Throttling) -> Throttling {
        Throttling {
            periods: self.periods.saturating_sub(earlier.periods),
            throttled_periods: self
                .throttled_periods
                .saturating_sub(earlier.throttled_periods),
            throttled_ns: self.throttled_ns.saturating_sub(earlier.throttled_ns),
        }
    }
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
    /// Waits that reached back past their CPU's remembered history of who ran (its last 64
    /// changes of running cgroup): that part of them is charged to `unattributed`.
    #[serde(default)]
    pub beyond_history: u64,
}

impl Counters {
    /// `self - earlier`.
    pub fn since(&self, e: &Counters) -> Counters {
        Counters {
            emitted: self.emitted.saturating_sub(e.emitted),
            ring_dropped: self.ring_dropped.saturating_sub(e.ring_dropped),
            rate_limited: self.rate_limited.saturating_sub(e.rate_limited),
            cgroups_full: self.cgroups_full.saturating_sub(e.cgroups_full),
            pairs_full: self.pairs_full.saturating_sub(e.pairs_full),
            timestamps_full: self.timestamps_full.saturating_sub(e.timestamps_full),
            beyond_history: self.beyond_history.saturating_sub(e.beyond_history),
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
            beyond_history: self.beyond_history + b.beyond_history,
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

/// How a run charged each wait to the cgroups it waited behind ([`Attribution`], [`Share`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitCharge {
    /// Runs recorded before the split: the whole wait went to the task that held the CPU just
    /// before the waiter got it (a task sitting in every hand-over took the blame).
    #[default]
    LastRunner,
    /// The wait is split among the cgroups that ran on the waiter's CPU while it waited, in
    /// proportion to how long each ran.
    RanDuring,
}

/// Another cgroup's share in one cgroup's waits and preemptions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// The other cgroup (kind `idle` when the CPU was idle, `unattributed` for what is older
    /// than the CPU's remembered history).
    pub other: CgroupRef,
    /// Times a task of this cgroup, still runnable, was switched out for one of `other`.
    pub preemptions: u64,
    /// Waits of this cgroup's tasks during which tasks of `other` ran on their CPU.
    pub waits: u64,
    /// How long `other` ran during them, ns: its part of their wait time.
    pub wait_ns: u64,
}

/// One cgroup in one interval of tracing.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupInterval {
    /// The cgroup the waits are charged to.
    pub cgroup: CgroupRef,
    /// Run-queue latency of its tasks, ns ([`kernel_layout`]).
    pub latency: Histogram,
    /// Time its tasks ran, on all CPUs, ns (None where not measured).
    pub run_ns: Option<u64>,
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

/// One cgroup's waits in one interval of the degraded mode (`/proc/<pid>/schedstat`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DegradedCgroup {
    /// The cgroup.
    pub cgroup: CgroupRef,
    /// Total time its threads were runnable but not running, ns.
    pub wait_ns: u64,
    /// Timeslices its threads ran.
    pub timeslices: u64,
    /// Threads that ran or waited in the interval.
    pub threads: usize,
}

impl DegradedCgroup {
    /// Mean wait per timeslice, ns.
    pub fn mean_wait_ns(&self) -> Option<f64> {
        (self.timeslices > 0).then(|| self.wait_ns as f64 / self.timeslices as f64)
    }
}

/// One interval of the degraded mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DegradedInterval {
    /// Start, ns on the monotonic clock.
    pub start_ns: i64,
    /// End, ns.
    pub end_ns: i64,
    /// Cgroups with waits, largest total wait first.
    pub cgroups: Vec<DegradedCgroup>,
}

/// Which kind of tracepoint program to attach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Attach {
    /// `tp_btf`, falling back to `raw_tp` when the kernel refuses it.
    #[default]
    Auto,
    /// BTF-typed tracepoints (Linux 5.5+): direct, checked reads of the task structs.
    TpBtf,
    /// Raw tracepoints: every read goes through `bpf_probe_read_kernel`.
    RawTp,
}

/// Where a woken task's timestamp waits for its switch-in (the measurements behind the default
/// are in `tailhunt-sched`'s `TracerConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum TimestampStore {
    /// BPF task-local storage.
    TaskStorage,
    /// An array indexed by pid (pid_max entries).
    Array,
    /// A hash keyed by pid.
    Hash,
}

/// What was set up, reported once tracing has started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TracerSetup {
    /// The program kind that loaded (`tp-btf` or `raw-tp`).
    pub attach: Attach,
    /// Why `tp_btf` was not used, when `raw_tp` is the fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
    /// The timestamp store.
    pub store: TimestampStore,
    /// The hierarchy waits are charged to.
    pub hierarchy: Hierarchy,
    /// Cgroup mounts found.
    pub mounts: Mounts,
    /// Cgroups in the filter (with descendants), empty when tracing all.
    pub filter: Vec<CgroupRef>,
    /// Whether the kernel's per-program statistics are on (for the overhead report).
    pub program_stats: bool,
    /// When tracing started, both clocks.
    pub origin: ClockOrigin,
}

/// What a run records about one cgroup besides its series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgroupInfo {
    /// kernfs id.
    pub id: u64,
    /// Path in the charged hierarchy.
    pub path: String,
    /// Kind.
    pub kind: CgroupKind,
    /// Its v1 cpu cgroup, on hybrid hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cgroup: Option<String>,
    /// Its CPU quota, when one was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
}

/// The threads a cgroup's outliers waited behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocker {
    /// The cgroup that waited.
    pub cgroup: String,
    /// The cgroup of the thread that ran just before.
    pub by: String,
    /// That thread's command.
    pub comm: String,
    /// Thread id.
    pub pid: u32,
    /// Outlier waits behind it.
    pub count: u64,
    /// Longest of them, ns.
    #[serde(default)]
    pub max_ns: u64,
}

/// How the run-queue latency was measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunqMode {
    /// eBPF tracepoints: histograms per cgroup, attribution, outliers.
    #[default]
    Bpf,
    /// `/proc/<pid>/schedstat` means per cgroup only.
    Schedstat,
}

/// The `runq` document: what a run-queue run records besides its series (which hold the
/// histograms and attributions per interval).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunqRecord {
    /// How it was measured.
    #[serde(default)]
    pub mode: RunqMode,
    /// Why the degraded mode was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    /// The tracer's set-up (BPF mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<TracerSetup>,
    /// Every cgroup seen, by name.
    #[serde(default)]
    pub cgroups: BTreeMap<String, CgroupInfo>,
    /// The threads behind outliers, most outliers first (at most 200).
    #[serde(default)]
    pub blockers: Vec<Blocker>,
    /// Kernel-side counters over the run.
    #[serde(default)]
    pub counters: Counters,
    /// Each program's cost over the run.
    #[serde(default)]
    pub programs: Vec<ProgramCost>,
    /// An earlier calm run to compare with (`--baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_run: Option<String>,
    /// How its waits were charged to other cgroups (runs without the field: to the last
    /// runner).
    #[serde(default)]
    pub wait_charge: WaitCharge,
}

impl Document for RunqRecord {
    const NAME: &'static str = "runq";
    const VERSION: u32 = 1;

    /// Runs written before the document kept it as `params.runq`, the baseline as
    /// `params.baseline_run`.
    fn from_params(params: &serde_json::Value) -> Option<Result<Self, String>> {
        let runq = params.get("runq")?;
        Some(
            serde_json::from_value::<RunqRecord>(runq.clone())
                .map(|mut r| {
                    r.baseline_run = params["baseline_run"].as_str().map(str::to_string);
                    r
                })
                .map_err(|e| e.to_string()),
        )
    }
}

/// Another cgroup's part in one cgroup's waits over one interval, as the detectors read it
/// (what the numbers mean depends on the run's [`WaitCharge`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Share {
    /// Preemptions of this cgroup's tasks by the other's.
    pub preemptions: u64,
    /// Waits during which the other ran on the waiter's CPU ([`WaitCharge::LastRunner`]: waits
    /// that ended right after it ran).
    pub waits: u64,
    /// How long the other ran during them, ns ([`WaitCharge::LastRunner`]: the whole length
    /// of those waits).
    pub wait_ns: u64,
}

/// One cgroup in one interval, as the detectors read it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunqStep {
    /// Interval start, ns.
    pub start_ns: i64,
    /// Interval end, ns.
    pub end_ns: i64,
    /// Run-queue latency, ns.
    pub latency: Histogram,
    /// Time its tasks ran, on all CPUs, ns: its own activity (None in runs that did not
    /// record it).
    pub run_ns: Option<u64>,
    /// Other cgroups by name (`idle` for an idle CPU).
    pub by: BTreeMap<String, Share>,
    /// Periods throttled in the interval (None: not readable).
    pub throttled_periods: Option<u64>,
    /// Time throttled in the interval, ns.
    pub throttled_ns: Option<u64>,
}

impl RunqStep {
    /// An interval ending at `end_ns` with nothing in it yet.
    pub fn empty(end_ns: i64) -> RunqStep {
        RunqStep {
            start_ns: end_ns,
            end_ns,
            latency: Histogram::with_layout(kernel_layout()),
            run_ns: None,
            by: BTreeMap::new(),
            throttled_periods: None,
            throttled_ns: None,
        }
    }
}

/// One cgroup over a run: the detectors' input.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupTimeline {
    /// Its name as reported (`docker:3f2a1c9e0b7d`, `/a/b`, `system`).
    pub cgroup: String,
    /// Its intervals in time order.
    pub steps: Vec<RunqStep>,
    /// Its CPU quota, when one was set.
    pub quota: Option<Quota>,
    /// Threads its outliers waited behind, most first.
    pub blockers: Vec<Blocker>,
    /// How the run charged its waits to others.
    pub wait_charge: WaitCharge,
}
