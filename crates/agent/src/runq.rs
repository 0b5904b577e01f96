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
//! previous runq window's. The programs are loaded once and stay attached: the intervals go
//! through a channel to a thread of their own that cuts them into windows, so no wait falls
//! between two windows and a slow store does not delay the tracer (the channel holds 256
//! intervals; beyond that the tracer waits for the store).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
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
use crate::rolling::{close_window, now_wall_ns, FindingTracker, Retention};

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

/// What the tracer hands the window writer.
enum ToWindows {
    Setup(TracerSetup),
    Interval(Box<Interval>),
}

/// Folds every interval into the state and, with a store, hands it to the window writer.
struct Fold<'a> {
    state: &'a RunqState,
    max: usize,
    windows: Option<mpsc::SyncSender<ToWindows>>,
}

impl Fold<'_> {
    /// A window writer that has gone (its store failed for good) stops the storing, not the
    /// tracing.
    fn send(&mut self, m: ToWindows) {
        if let Some(tx) = &self.windows {
            if tx.send(m).is_err() {
                self.windows = None;
            }
        }
    }
}

impl Observer for Fold<'_> {
    fn started(&mut self, started: &TracerSetup) -> Result<(), SinkError> {
        let mut s = self.state.lock();
        s.running = true;
        s.off_reason = None;
        s.attach = Some(format!("{:?}", started.attach));
        drop(s);
        self.send(ToWindows::Setup(started.clone()));
        Ok(())
    }

    fn interval(&mut self, iv: &Interval) -> Result<(), SinkError> {
        self.state.lock().fold(iv, self.max);
        self.send(ToWindows::Interval(Box::new(iv.clone())));
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

/// Traces until `t.stop` is set. The programs are loaded once and stay attached; with a store,
/// a thread of its own cuts the intervals into windows, each stored as a runq run and
/// diagnosed, so storing never delays the tracer and no wait falls between two windows.
/// Returns an error only when the programs could not be started at all (the state says why).
pub fn run(t: &Tracing<'_>) -> Result<(), RunqError> {
    let cfg = TracerConfig {
        interval: t.settings.interval,
        duration: None,
        ..TracerConfig::default()
    };
    let retention = t.retention.map(|r| Retention {
        store: runq_store(&r.store),
        ..r.clone()
    });
    let store = match &retention {
        Some(r) if t.settings.store_windows => match open_store(&r.store) {
            Ok(s) => Some((s, r.clone())),
            Err(e) => {
                t.state.lock().last_error = Some(format!(
                    "{e}; run-queue windows are not stored, the metrics still are"
                ));
                None
            }
        },
        _ => None,
    };
    let base = json!({
        "agent_window": true,
        "baseline_run": null,
        "hierarchy": format!("{:?}", cfg.hierarchy),
        "outlier_ns": cfg.outlier_ns,
        "interval_ns": cfg.interval.as_nanos() as u64,
    });
    let (tx, writer) = match store {
        Some((store, retention)) => {
            // Room for a window of one-second intervals: the tracer never waits on the store
            // unless the store falls a whole window behind.
            let (tx, rx) = mpsc::sync_channel(256);
            let state = t.state.clone();
            let handle = std::thread::Builder::new()
                .name("runq-windows".into())
                .spawn(move || write_windows(store, &retention, &base, &rx, &state));
            match handle {
                Ok(h) => (Some(tx), Some(h)),
                Err(e) => {
                    t.state.lock().last_error = Some(format!(
                        "cannot start the run-queue window thread: {e}; windows are not stored"
                    ));
                    (None, None)
                }
            }
        }
        None => (None, None),
    };
    let result = trace_until_stopped(t, &cfg, tx);
    if let Some(h) = writer {
        let _ = h.join();
    }
    let mut s = t.state.lock();
    s.running = false;
    s.off_reason = Some("stopped".into());
    drop(s);
    result
}

/// Runs the tracer until the stop flag, starting it again (after a pause) if it fails after
/// having started; `windows` is dropped at the end, which closes the last window.
fn trace_until_stopped(
    t: &Tracing<'_>,
    cfg: &TracerConfig,
    windows: Option<mpsc::SyncSender<ToWindows>>,
) -> Result<(), RunqError> {
    let mut fold = Fold {
        state: t.state,
        max: t.settings.max_cgroups,
        windows,
    };
    let mut first = true;
    while !t.stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        match tailhunt_sched::trace(cfg, t.stop, &mut fold) {
            Ok(_) => first = false,
            Err(e) if first => {
                let mut s = t.state.lock();
                s.running = false;
                s.off_reason = Some(e.to_string());
                return Err(RunqError::Trace(e));
            }
            Err(e) => {
                let mut s = t.state.lock();
                s.running = false;
                s.last_error = Some(format!("run-queue tracing stopped: {e}; starting it again"));
                drop(s);
                // A failure that repeats must not spin: wait a little before starting again.
                let until = began + Duration::from_secs(1).max(t.settings.interval);
                while Instant::now() < until && !t.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
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

/// The window writer: intervals from `rx` cut into windows of `retention.window`, each a runq
/// run, diagnosed when it closes; ends when the tracer side hangs up (the last window is kept,
/// marked interrupted).
fn write_windows(
    mut store: Store,
    retention: &Retention,
    params: &serde_json::Value,
    rx: &mpsc::Receiver<ToWindows>,
    state: &RunqState,
) {
    // Run-queue findings persist across windows by the same rule as the probe windows'.
    let mut tracker = FindingTracker::new(retention.findings_clear_after);
    let mut setup: Option<TracerSetup> = None;
    loop {
        // A window opens with its first interval.
        let first = match rx.recv() {
            Ok(ToWindows::Setup(s)) => {
                setup = Some(s);
                continue;
            }
            Ok(ToWindows::Interval(iv)) => iv,
            Err(_) => return,
        };
        let opened = Window {
            params,
            first: &first,
            setup: setup.as_ref(),
            rx,
            retention,
        };
        let (result, ended) = opened.write(&mut store, &mut tracker);
        let mut s = state.lock();
        match result {
            Ok(findings) => {
                s.findings = findings;
                s.windows += 1;
                s.last_error = None;
            }
            Err(e) => {
                s.failed_windows += 1;
                s.last_error = Some(e);
            }
        }
        drop(s);
        if ended {
            return;
        }
    }
}

/// One window being written.
struct Window<'a> {
    params: &'a serde_json::Value,
    first: &'a Interval,
    setup: Option<&'a TracerSetup>,
    rx: &'a mpsc::Receiver<ToWindows>,
    retention: &'a Retention,
}

impl Window<'_> {
    /// Stores the window's intervals as one run, diagnoses it, applies retention; gives its
    /// active findings (or why it failed) and whether the tracer side has hung up.
    fn write(
        self,
        store: &mut Store,
        tracker: &mut FindingTracker,
    ) -> (Result<Vec<FindingState>, String>, bool) {
        let start_ms = now_wall_ns() / 1_000_000;
        let mut params = self.params.clone();
        params["window_ns"] = json!(self.retention.window.as_nanos() as u64);
        // The run begins where its first interval does (it arrives as that interval ends), so
        // no interval is drawn before the run's origin.
        let now = ClockOrigin::now();
        let origin = now.at(self.first.start_ns.min(now.mono_ns));
        let mut writer = match store.begin_run(RunKind::Runq, params, origin) {
            Ok(w) => w,
            Err(e) => {
                // The window's intervals are still read, so the next window starts on time.
                let ended = self.drain();
                return (
                    Err(format!("cannot start a run-queue window's run: {e}")),
                    ended,
                );
            }
        };
        let id = writer.id().to_string();
        let mut recorder = Recorder::new(&mut writer);
        let mut stored = self
            .setup
            .map_or(Ok(()), |s| recorder.started(s))
            .and_then(|()| recorder.interval(self.first));
        let (ended, n) = self.rest(|iv| {
            if stored.is_ok() {
                stored = recorder.interval(iv);
            }
        });
        let record = recorder.record();
        let stored = stored.and_then(|()| put_evidence(&mut writer, &record));
        if let Err(e) = stored {
            let _ = writer.finish_partial(json!({}));
            return (Err(format!("run {id} ({n} interval(s)): {e}")), ended);
        }
        if let Err(e) = writer.finish_as(ended, json!({})) {
            return (Err(format!("run {id}: {e}")), ended);
        }
        let closed = close_window(store, self.retention, &id, start_ms, tracker);
        (closed.map(|(findings, _)| findings), ended)
    }

    /// Hands `each` the window's further intervals until its length has passed; gives
    /// whether the tracer side hung up, and how many intervals the window held.
    fn rest(&self, mut each: impl FnMut(&Interval)) -> (bool, usize) {
        let until = Instant::now() + self.retention.window;
        let mut n = 1;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (false, n);
            }
            match self.rx.recv_timeout(left) {
                Ok(ToWindows::Interval(iv)) => {
                    n += 1;
                    each(&iv);
                }
                Ok(ToWindows::Setup(_)) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => return (false, n),
                Err(mpsc::RecvTimeoutError::Disconnected) => return (true, n),
            }
        }
    }

    /// Reads and drops the window's intervals (its run could not be started).
    fn drain(&self) -> bool {
        self.rest(|_| {}).0
    }
}

#[cfg(test)]
mod tests;
