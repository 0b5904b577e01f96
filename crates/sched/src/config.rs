//! How to trace: the knobs of [`crate::trace`].

use std::path::PathBuf;
use std::time::Duration;

use tailhunt_model::evidence::runq::{Attach, Hierarchy, TimestampStore};

/// The value of `enum runq_store` in `runq.h` for a [`TimestampStore`] (where a woken task's
/// timestamp waits for its switch-in).
///
/// The default store was chosen by measurement (`bench/runq.sh`, results in `bench/results/runq.md`: this project's
/// 2-vCPU VM, kernel 6.18, kernel BPF statistics, mean ns per hook over the three programs,
/// median of 3 rounds): under `perf bench sched pipe` / `sched messaging`, an array indexed by
/// pid 168 / 222 ns, task storage 177 / 313 ns, a hash keyed by pid 297 / 392 ns (raw_tp with
/// the array: 266 / 406 ns; libbpf-tools runqlat: 352 / 484 ns). The array is the default: a
/// lookup is an index, and its entry is cleared when the task runs, so a recycled pid never
/// inherits a stamp. Its cost is memory: pid_max entries of 8 bytes (256 KiB at pid_max 32768,
/// 32 MiB at 4194304); task storage grows only with the tasks that wait, at 5-40% more per hook
/// (`--store task-storage`, tp_btf only: raw_tp task pointers are untrusted).
pub(crate) fn store_code(store: TimestampStore) -> u32 {
    match store {
        TimestampStore::TaskStorage => 0,
        TimestampStore::Array => 1,
        TimestampStore::Hash => 2,
    }
}

/// Cgroups the kernel maps may hold at most: each has a histogram (about 8 KB) in kernel memory.
pub const MAX_CGROUPS: u32 = 16_384;

impl TracerConfig {
    /// Checks the settings before anything is loaded; the message names the flag.
    pub fn validate(&self) -> Result<(), crate::SchedError> {
        let bad = |m: String| Err(crate::SchedError::Config(m));
        if self.interval < Duration::from_millis(10) {
            return bad(format!(
                "--interval {:?} is too short: use 10ms or more",
                self.interval
            ));
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return bad("--duration 0: give how long to trace, e.g. --duration 30s (or leave it out and stop with Ctrl-C)".into());
        }
        if !(1..=MAX_CGROUPS).contains(&self.max_cgroups) {
            return bad(format!(
                "--max-cgroups {}: give 1 to {MAX_CGROUPS} (each cgroup's histogram takes about 8 KB of kernel memory; waits of cgroups past the limit are counted as lost)",
                self.max_cgroups
            ));
        }
        Ok(())
    }
}

/// Everything [`crate::trace`] needs.
#[derive(Debug, Clone)]
pub struct TracerConfig {
    /// Reporting interval.
    pub interval: Duration,
    /// Stop after this long (`None`: until stopped).
    pub duration: Option<Duration>,
    /// Program kind.
    pub attach: Attach,
    /// Timestamp store (`None`: the array).
    pub store: Option<TimestampStore>,
    /// Which hierarchy's cgroups waits are charged to.
    pub hierarchy: Hierarchy,
    /// Only these cgroups (and their descendants); empty: all.
    pub cgroups: Vec<PathBuf>,
    /// Also time kernel threads' own waits (they are always counted as preemptors).
    pub kernel_threads: bool,
    /// Send every wait through the ring buffer, not only outliers (for validation; costs
    /// ~2 µs per wait).
    pub all_events: bool,
    /// Waits at least this long are sent as outlier events, ns.
    pub outlier_ns: u64,
    /// Outlier budget per cgroup per CPU: one event per this gap, ns ...
    pub outlier_gap_ns: u64,
    /// ... with bursts of up to this many.
    pub outlier_burst: u32,
    /// Cgroups the kernel keeps histograms for; waits of more are counted as lost.
    pub max_cgroups: u32,
}

impl Default for TracerConfig {
    fn default() -> Self {
        TracerConfig {
            interval: Duration::from_secs(1),
            duration: None,
            attach: Attach::Auto,
            store: None,
            hierarchy: Hierarchy::V2,
            cgroups: Vec::new(),
            kernel_threads: false,
            all_events: false,
            outlier_ns: 1_000_000,
            outlier_gap_ns: 20_000_000,
            outlier_burst: 8,
            max_cgroups: 1024,
        }
    }
}
