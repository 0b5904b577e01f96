//! How to trace: the knobs of [`crate::trace`].

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cgroups::Hierarchy;

/// Which kind of tracepoint program to attach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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

/// Where a woken task's timestamp waits for its switch-in.
///
/// Measured on this project's 2-vCPU VM (kernel 6.18, `perf bench sched pipe`, kernel BPF
/// statistics, mean over the three programs; `bench/runq.sh` repeats it): task storage 227-271
/// ns per hook, an array indexed by pid 219-241 ns, a hash keyed by pid 390-440 ns, and the
/// raw_tp programs with the array 378-385 ns. Task storage and the array cost the same; task
/// storage is the default because it needs no pid_max-sized map (32 MiB at pid_max 4194304)
/// and dies with its task, so a recycled pid never inherits a stale timestamp. raw_tp programs
/// cannot use task storage (their task pointers are untrusted) and use the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimestampStore {
    /// BPF task-local storage.
    TaskStorage,
    /// An array indexed by pid (pid_max entries).
    Array,
    /// A hash keyed by pid.
    Hash,
}

impl TimestampStore {
    /// The value of `enum runq_store` in `runq.h`.
    pub(crate) fn code(self) -> u32 {
        match self {
            TimestampStore::TaskStorage => 0,
            TimestampStore::Array => 1,
            TimestampStore::Hash => 2,
        }
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
    /// Timestamp store (`None`: task storage with tp_btf, the array with raw_tp).
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
