//! Run-queue tracing inside the agent: the eBPF tracer of `tailhunt-sched` (the one `tailhunt
//! runq` loads; there is no second loader) run continuously, its per-cgroup intervals folded
//! into exported histograms and counters, and stored window by window in the rolling store.
//!
//! In: the checked [`RunqSettings`], the rolling store's [`Retention`] (when windows are
//! stored), a shared [`RunqState`] and a stop flag. Out, in the state, cumulative since the
//! agent started:
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `tailhunt_runq_latency_seconds` | histogram (classic and native) | `cgroup` |
//! | `tailhunt_runq_preempted_total` | counter: involuntary switches of `cgroup`'s tasks in favour of `by`'s | `cgroup`, `by` |
//! | `tailhunt_runq_wait_by_seconds_total` | counter: how long `by` ran on the CPU while `cgroup`'s tasks waited | `cgroup`, `by` |
//! | `tailhunt_runq_throttled_seconds_total`, `tailhunt_runq_throttled_periods_total` | counters from the cgroup's `cpu.stat` | `cgroup` |
//!
//! plus the tracer's own state (`tailhunt_runq_intervals_total`, `tailhunt_runq_windows_total`,
//! `tailhunt_runq_cgroups_folded_total`, ...). `by` is another cgroup, the cgroup itself,
//! `idle` or `unattributed` (as `tailhunt runq` names them).
//!
//! Memory is bounded by [`RunqSettings::max_cgroups`]: the first that many cgroup names seen
//! (busiest first within an interval) get their own label; every later one is exported as
//! `cgroup="other"` (and `by="other"`), and each such fold is counted. So at most
//! `max_cgroups + 1` histograms (about 8 KiB each at most) and `(max_cgroups + 1) *
//! (max_cgroups + 3)` pair counters are kept, however many containers come and go.
//!
//! Windows: with a store, each window is one `runq` run (params `agent_window: true`) traced
//! for the window's length, in a file of its own beside the probe store ([`runq_store`]: SQLite
//! lets one writer at a time into a file, and a runq window writing into the probe store made
//! the prober wait for it: measured, the probes' latency from their intended start went from
//! under 1 ms to over a second). The same retention bounds apply to that file; the detectors
//! (`noisy-neighbor`, `cpu-throttled`) run when it closes and their findings replace the
//! previous runq window's. The programs are loaded again for each window, which leaves a gap
//! of the load time (tens of milliseconds) between windows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tailhunt_histogram::Histogram;
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::evidence::runq::{Attribution, CgroupInterval, TracerSetup};
use tailhunt_model::{ClockOrigin, RunKind, SinkError};
use tailhunt_sched::record::Recorder;
use tailhunt_sched::{Interval, Observer, TracerConfig};
use tailhunt_store::Store;

use crate::exposition::{FindingState, HistogramMetric, ScalarMetric, Snapshot};
use crate::rolling::{apply_retention, findings_of, now_wall_ns, FindingTracker, Retention};

/// The label value cgroups past the cap are exported under.
pub const OTHER: &str = "other";

/// Name of the exported run-queue latency histogram.
pub const LATENCY_METRIC: &str = "tailhunt_runq_latency_seconds";
/// Name of the exported preemption counter (`_total` added by the formats).
pub const PREEMPTED_METRIC: &str = "tailhunt_runq_preempted";

/// The `[runq]` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RunqSettings {
    /// Trace at all (still switched off, with the reason, without root or BTF).
    pub enabled: bool,
    /// How often the kernel maps are read and folded in.
    pub interval: Duration,
    /// Cgroup label values exported; the rest are `other`.
    pub max_cgroups: usize,
    /// Store one runq run per window and run the detectors on it.
    pub store_windows: bool,
}

impl Default for RunqSettings {
    fn default() -> Self {
        RunqSettings {
            enabled: true,
            interval: Duration::from_secs(5),
            max_cgroups: 50,
            store_windows: true,
        }
    }
}

/// Cumulative numbers of one exported cgroup.
#[derive(Debug, Clone, Default)]
struct CgroupTotals {
    latency: Option<Histogram>,
    preempted: BTreeMap<String, u64>,
    wait_by_ns: BTreeMap<String, u64>,
    throttled_ns: u64,
    throttled_periods: u64,
}

/// What the tracer thread shares with the exporter.
#[derive(Debug, Clone, Default)]
pub struct RunqStatus {
    /// Whether the programs are attached now.
    pub running: bool,
    /// Why tracing is off or stopped (`None` while it runs or before it starts).
    pub off_reason: Option<String>,
    /// How the programs were attached (`tp_btf`, `raw_tp`), once started.
    pub attach: Option<String>,
    /// Intervals folded in.
    pub intervals: u64,
    /// Windows stored and diagnosed.
    pub windows: u64,
    /// Windows whose storing failed (tracing and export go on).
    pub failed_windows: u64,
    /// Cgroup intervals exported as `other` because the cap was reached.
    pub folded: u64,
    /// Waits the kernel could not keep because its cgroup table was full.
    pub kernel_cgroups_full: u64,
    /// Findings of the last stored window.
    pub findings: Vec<FindingState>,
    /// The last failure of a window, if any.
    pub last_error: Option<String>,
    labels: BTreeSet<String>,
    cgroups: BTreeMap<String, CgroupTotals>,
}

/// Shared [`RunqStatus`]; clones share it.
pub type RunqState = crate::Shared<RunqStatus>;

impl RunqStatus {
    /// The exported label of `name`: its own while under the cap, else [`OTHER`].
    fn admit(&mut self, name: &str, max: usize) -> Option<String> {
        if self.labels.contains(name) {
            return Some(name.to_string());
        }
        if self.labels.len() < max {
            self.labels.insert(name.to_string());
            return Some(name.to_string());
        }
        None
    }

    /// The label of the other side of an attribution: the special sides keep their names.
    fn admit_by(&mut self, a: &Attribution, max: usize) -> String {
        use tailhunt_model::evidence::runq::CgroupKind;
        if matches!(a.other.kind, CgroupKind::Idle | CgroupKind::Unattributed) {
            return a.other.name.clone();
        }
        self.admit(&a.other.name, max)
            .unwrap_or_else(|| OTHER.to_string())
    }

    /// Folds one interval in, with at most `max` cgroup labels.
    pub fn fold(&mut self, iv: &Interval, max: usize) {
        self.intervals += 1;
        self.kernel_cgroups_full += iv.counters.cgroups_full;
        for cg in &iv.cgroups {
            self.fold_cgroup(cg, max);
        }
    }

    fn fold_cgroup(&mut self, cg: &CgroupInterval, max: usize) {
        let label = match self.admit(&cg.cgroup.name, max) {
            Some(l) => l,
            None => {
                self.folded += 1;
                OTHER.to_string()
            }
        };
        let by: Vec<(String, &Attribution)> =
            cg.by.iter().map(|a| (self.admit_by(a, max), a)).collect();
        let t = self.cgroups.entry(label).or_default();
        match &mut t.latency {
            Some(h) => h.merge(&cg.latency),
            None => t.latency = Some(cg.latency.clone()),
        }
        for (name, a) in by {
            if a.preemptions > 0 {
                *t.preempted.entry(name.clone()).or_default() += a.preemptions;
            }
            if a.wait_ns > 0 {
                *t.wait_by_ns.entry(name).or_default() += a.wait_ns;
            }
        }
        if let Some(th) = &cg.throttling {
            t.throttled_ns += th.throttled_ns;
            t.throttled_periods += th.throttled_periods;
        }
    }

    /// Cgroup labels exported now (at most the cap, plus `other`).
    pub fn exported_cgroups(&self) -> usize {
        self.cgroups.len()
    }

    /// Adds the run-queue metrics to `snapshot`.
    pub fn fill(&self, snapshot: &mut Snapshot) {
        let counter =
            |name: &str, help: &str, labels: Vec<(String, String)>, value: f64| ScalarMetric {
                name: name.into(),
                help: help.into(),
                labels,
                value,
            };
        let cg_label = |c: &str| vec![("cgroup".to_string(), c.to_string())];
        let pair = |c: &str, by: &str| {
            vec![
                ("cgroup".to_string(), c.to_string()),
                ("by".to_string(), by.to_string()),
            ]
        };
        for (name, t) in &self.cgroups {
            if let Some(h) = &t.latency {
                snapshot.histograms.push(HistogramMetric {
                    name: LATENCY_METRIC.into(),
                    help: "Run-queue latency of the cgroup's tasks (runnable to on a CPU), traced with eBPF.".into(),
                    labels: cg_label(name),
                    histogram: h.clone(),
                });
            }
            for (by, n) in &t.preempted {
                snapshot.counters.push(counter(
                    PREEMPTED_METRIC,
                    "Involuntary switches of the cgroup's tasks in favour of a task of `by` (the neighbour that took the CPU).",
                    pair(name, by),
                    *n as f64,
                ));
            }
            for (by, ns) in &t.wait_by_ns {
                snapshot.counters.push(counter(
                    "tailhunt_runq_wait_by_seconds",
                    "Time `by` ran on the CPU while the cgroup's tasks waited for it.",
                    pair(name, by),
                    *ns as f64 / 1e9,
                ));
            }
            snapshot.counters.push(counter(
                "tailhunt_runq_throttled_seconds",
                "Time the cgroup was throttled by its CPU quota (cpu.stat), while traced.",
                cg_label(name),
                t.throttled_ns as f64 / 1e9,
            ));
            snapshot.counters.push(counter(
                "tailhunt_runq_throttled_periods",
                "Quota periods in which the cgroup ran out of CPU (cpu.stat), while traced.",
                cg_label(name),
                t.throttled_periods as f64,
            ));
        }
        let own = [
            ("intervals", "Run-queue intervals folded in.", self.intervals),
            ("windows", "Run-queue windows stored and diagnosed.", self.windows),
            ("windows_failed", "Run-queue windows that could not be stored.", self.failed_windows),
            ("cgroups_folded", "Cgroup intervals exported as cgroup=\"other\" because the cap on cgroup labels was reached.", self.folded),
            ("kernel_cgroups_full", "Waits the kernel dropped because its cgroup table was full.", self.kernel_cgroups_full),
        ];
        for (n, help, v) in own {
            snapshot.counters.push(counter(
                &format!("tailhunt_runq_{n}"),
                help,
                vec![],
                v as f64,
            ));
        }
        snapshot.gauges.push(counter(
            "tailhunt_runq_cgroups",
            "Cgroup labels the run-queue metrics carry now (the cap plus `other` at most).",
            vec![],
            self.cgroups.len() as f64,
        ));
    }
}

/// Folds every interval into the state and, with a store, passes it to the run's recorder.
struct Fold<'a, 'r> {
    state: &'a RunqState,
    max: usize,
    recorder: Option<&'a mut Recorder<'r>>,
    store_error: Option<String>,
    intervals: u64,
}

impl<'r> Fold<'_, 'r> {
    /// A store failure stops the storing of this window, not the tracing.
    fn store(&mut self, f: impl FnOnce(&mut Recorder<'r>) -> Result<(), SinkError>) {
        if let Some(r) = self.recorder.as_deref_mut() {
            if let Err(e) = f(r) {
                self.store_error = Some(e.to_string());
                self.recorder = None;
            }
        }
    }
}

impl Observer for Fold<'_, '_> {
    fn started(&mut self, started: &TracerSetup) -> Result<(), SinkError> {
        let mut s = self.state.lock();
        s.running = true;
        s.off_reason = None;
        s.attach = Some(format!("{:?}", started.attach));
        drop(s);
        self.store(|r| r.started(started));
        Ok(())
    }

    fn interval(&mut self, iv: &Interval) -> Result<(), SinkError> {
        self.state.lock().fold(iv, self.max);
        self.intervals += 1;
        self.store(|r| r.interval(iv));
        Ok(())
    }
}

/// Why the tracer thread stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum RunqError {
    /// The tracer could not start (no BTF, not permitted, a program refused).
    #[error("run-queue tracing could not start: {0}")]
    Trace(#[from] tailhunt_sched::SchedError),
}

/// What the tracer thread needs.
pub struct Tracing<'a> {
    /// The settings.
    pub settings: &'a RunqSettings,
    /// The rolling store, when windows are stored.
    pub retention: Option<&'a Retention>,
    /// The shared state.
    pub state: &'a RunqState,
    /// Set to stop.
    pub stop: &'a AtomicBool,
}

/// Traces until `t.stop` is set: window after window with a store, else one long trace.
/// Returns an error only when the programs could not be started at all (the state says why).
pub fn run(t: &Tracing<'_>) -> Result<(), RunqError> {
    let mut cfg = TracerConfig {
        interval: t.settings.interval,
        ..TracerConfig::default()
    };
    let retention = t.retention.map(|r| Retention {
        store: runq_store(&r.store),
        ..r.clone()
    });
    let mut store = match &retention {
        Some(r) if t.settings.store_windows => match open_store(&r.store) {
            Ok(s) => Some((s, r)),
            Err(e) => {
                t.state.lock().last_error = Some(format!(
                    "{e}; run-queue windows are not stored, the metrics still are"
                ));
                None
            }
        },
        _ => None,
    };
    // Run-queue findings persist across windows by the same rule as the probe windows'.
    let mut tracker = FindingTracker::new(t.retention.map_or(1, |r| r.findings_clear_after));
    let mut first = true;
    while !t.stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        let result = match &mut store {
            Some((store, retention)) => {
                cfg.duration = Some(retention.window);
                window(store, retention, &cfg, t, &mut tracker)
            }
            None => {
                let mut fold = Fold {
                    state: t.state,
                    max: t.settings.max_cgroups,
                    recorder: None,
                    store_error: None,
                    intervals: 0,
                };
                tailhunt_sched::trace(&cfg, t.stop, &mut fold)
                    .map(|_| ())
                    .map_err(WindowError::Trace)
            }
        };
        // Between two good windows the part counts as running (the reload takes milliseconds).
        match result {
            Ok(()) => first = false,
            Err(WindowError::Trace(e)) if first => {
                let mut s = t.state.lock();
                s.running = false;
                s.off_reason = Some(e.to_string());
                return Err(RunqError::Trace(e));
            }
            Err(e) => {
                let mut s = t.state.lock();
                s.running = matches!(e, WindowError::Store(_));
                s.failed_windows += 1;
                s.last_error = Some(e.to_string());
                drop(s);
                first = false;
                // A failure that repeats must not spin: wait a little before the next window.
                let until = began + Duration::from_secs(1).max(t.settings.interval);
                while Instant::now() < until && !t.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
    let mut s = t.state.lock();
    s.running = false;
    s.off_reason = Some("stopped".into());
    Ok(())
}

/// The file the runq windows go into: `STORE-runq.db` beside the probe store `STORE.db`.
pub fn runq_store(store: &Path) -> PathBuf {
    let stem = store
        .file_stem()
        .map_or_else(|| "agent".into(), |s| s.to_string_lossy().into_owned());
    store.with_file_name(format!("{stem}-runq.db"))
}

fn open_store(path: &Path) -> Result<Store, String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("store {}: cannot create its directory: {e}", path.display()))?;
    }
    crate::rolling::open_store(path).map_err(|e| format!("store {}: {e}", path.display()))
}

/// How one window failed.
#[derive(Debug, thiserror::Error)]
enum WindowError {
    #[error("run-queue tracing stopped: {0}")]
    Trace(tailhunt_sched::SchedError),
    #[error("{0}")]
    Store(String),
}

/// One window: a runq run traced for the window's length, its diagnosis, then retention.
fn window(
    store: &mut Store,
    retention: &Retention,
    cfg: &TracerConfig,
    t: &Tracing<'_>,
    tracker: &mut FindingTracker,
) -> Result<(), WindowError> {
    let start_ms = now_wall_ns() / 1_000_000;
    let params = json!({
        "agent_window": true,
        "baseline_run": null,
        "window_ns": retention.window.as_nanos() as u64,
        "interval_ns": cfg.interval.as_nanos() as u64,
        "hierarchy": format!("{:?}", cfg.hierarchy),
        "outlier_ns": cfg.outlier_ns,
    });
    let serr = |what: &str, e: &dyn std::fmt::Display| WindowError::Store(format!("{what}: {e}"));
    let mut writer = store
        .begin_run(RunKind::Runq, params, ClockOrigin::now())
        .map_err(|e| serr("cannot start a run-queue window's run", &e))?;
    let id = writer.id().to_string();
    let mut recorder = Recorder::new(&mut writer);
    let (result, store_error, intervals) = {
        let mut fold = Fold {
            state: t.state,
            max: t.settings.max_cgroups,
            recorder: Some(&mut recorder),
            store_error: None,
            intervals: 0,
        };
        let r = tailhunt_sched::trace(cfg, t.stop, &mut fold);
        (r, fold.store_error, fold.intervals)
    };
    let record = recorder.record();
    let kept = put_evidence(&mut writer, &record);
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            // What was traced stays as a partial run; an empty run goes.
            let _ = writer.finish_partial(json!({}));
            if intervals == 0 {
                let _ = store.delete_run(&id);
            }
            return Err(WindowError::Trace(e));
        }
    };
    if let Some(e) = store_error.or(kept.err().map(|e| e.to_string())) {
        let _ = writer.finish_partial(json!({}));
        return Err(WindowError::Store(format!("run {id}: {e}")));
    }
    writer
        .finish_as(summary.interrupted, json!({}))
        .map_err(|e| serr(&format!("run {id}"), &e))?;
    let diagnosis = tailhunt_diagnose::diagnose_run(store, &id)
        .map_err(|e| serr(&format!("diagnosing run {id}"), &e))?;
    tailhunt_diagnose::store_findings(store, &id, &diagnosis)
        .map_err(|e| serr(&format!("storing the findings of run {id}"), &e))?;
    let findings = tracker
        .close_window(
            start_ms,
            now_wall_ns() / 1_000_000,
            findings_of(&id, diagnosis.findings),
        )
        .to_vec();
    apply_retention(store, retention, &id).map_err(WindowError::Store)?;
    let mut s = t.state.lock();
    s.findings = findings;
    s.windows += 1;
    s.last_error = None;
    Ok(())
}

#[cfg(test)]
mod tests;
