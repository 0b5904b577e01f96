//! The prober run continuously into a rolling local store, the detectors on each window.
//!
//! In: the checked probe [`Config`], a store path, the window length and the retention bounds,
//! the shared [`Aggregator`] and [`WindowState`], and a stop flag. Out: one probe run per
//! window in the store (each a complete run `tailhunt diagnose` and `tailhunt report` read
//! like any other), the aggregator fed with every sample as it is stored, and after each
//! window the active findings in [`WindowStatus::findings`]: a finding stays active until
//! [`Retention::findings_clear_after`] windows in a row did not report it (`findings` has the
//! rule), with since when it is active and when it was last reported.
//!
//! Retention: after each window, the agent's own runs (params `agent_window: true`; other
//! runs in the store are never touched) created more than `retention` ago are deleted, then
//! the oldest of them until the store's used bytes are within `retention_bytes` (the newest
//! window is always kept). SQLite reuses the freed pages, so the file stops growing at about
//! the bound.
//!
//! A window that fails (the disk full, a store error) is reported in
//! [`WindowStatus::last_error`] and the next window is tried after a pause: the agent keeps
//! exporting what it can. An unreachable target is not a failure: its probes are error or
//! timeout samples.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tailhunt_model::{ClockOrigin, RunKind};
use tailhunt_probe::config::Config;
use tailhunt_probe::kind;
use tailhunt_probe::run::{self, Length, Live};
use tailhunt_store::Store;

use crate::exposition::{FindingState, ScalarMetric};
use crate::probing::{Aggregator, Tee};

mod findings;
pub use findings::{finding_gauges, FindingTracker, Seen, DEFAULT_CLEAR_AFTER};

/// Where and how long the windows are kept.
#[derive(Debug, Clone)]
pub struct Retention {
    /// The SQLite store file.
    pub store: PathBuf,
    /// Length of one window (one run).
    pub window: Duration,
    /// Windows older than this are deleted.
    pub max_age: Duration,
    /// The store's used bytes are kept at or under this (the newest window always stays).
    pub max_bytes: u64,
    /// A finding is cleared by this many windows in a row without it.
    pub findings_clear_after: u32,
}

/// What the window loop reports to the exporter.
#[derive(Debug, Clone, Default)]
pub struct WindowStatus {
    /// The active findings: of the last closed window, and of earlier ones until
    /// `findings_clear_after` windows in a row went without them.
    pub findings: Vec<FindingState>,
    /// Windows closed (stored and diagnosed).
    pub windows: u64,
    /// Windows that failed.
    pub failed_windows: u64,
    /// Runs deleted by retention.
    pub deleted_runs: u64,
    /// The agent's runs in the store now.
    pub kept_runs: u64,
    /// The store's used bytes after the last retention pass.
    pub store_bytes: u64,
    /// The run being written.
    pub current_run: Option<String>,
    /// The last failure, if any.
    pub last_error: Option<String>,
}

impl WindowStatus {
    /// The status as exported metrics: (counters, gauges).
    pub fn metrics(&self) -> (Vec<ScalarMetric>, Vec<ScalarMetric>) {
        let m = |name: &str, help: &str, value: u64| ScalarMetric {
            name: format!("tailhunt_agent_{name}"),
            help: help.into(),
            labels: vec![],
            value: value as f64,
        };
        let counters = vec![
            m(
                "windows",
                "Probe windows stored and diagnosed.",
                self.windows,
            ),
            m(
                "windows_failed",
                "Probe windows that failed (the store or the disk).",
                self.failed_windows,
            ),
            m(
                "runs_deleted",
                "Stored windows deleted by retention.",
                self.deleted_runs,
            ),
        ];
        let gauges = vec![
            m(
                "store_bytes",
                "Bytes the rolling store holds after the last retention pass.",
                self.store_bytes,
            ),
            m(
                "store_runs",
                "Windows kept in the rolling store.",
                self.kept_runs,
            ),
            m(
                "findings",
                "Active findings (kept until enough windows in a row went without them).",
                self.findings.len() as u64,
            ),
            m(
                "window_failing",
                "1 while the last window failed (its error is printed by the agent).",
                u64::from(self.last_error.is_some()),
            ),
        ];
        let mut gauges = gauges;
        gauges.extend(finding_gauges(&self.findings));
        (counters, gauges)
    }
}

/// Shared [`WindowStatus`]; clones share it.
pub type WindowState = crate::Shared<WindowStatus>;

/// Why the window loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum RollingError {
    /// The store could not be opened.
    #[error("store {path}: {source} (give a writable path with store = \"...\")")]
    Store {
        /// The path.
        path: String,
        /// What failed.
        source: tailhunt_store::StoreError,
    },
    /// A probe could not be built.
    #[error(transparent)]
    Probe(#[from] tailhunt_probe::ProbeError),
}

/// Builds every probe once, so a probe that cannot start is refused before the agent runs.
pub fn check_probes(cfg: &Config) -> Result<(), RollingError> {
    for p in &cfg.probes {
        kind::build(p)?;
    }
    Ok(())
}

pub(crate) fn now_wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// What the window loop reads and feeds.
pub struct Windows<'a> {
    /// The probes.
    pub cfg: &'a Config,
    /// Where and how long windows are kept.
    pub retention: &'a Retention,
    /// Fed with every sample as it is stored.
    pub aggregator: &'a Aggregator,
    /// Findings and counts for the exporter.
    pub state: &'a WindowState,
    /// The prober's own counters, over all windows.
    pub live: &'a Live,
    /// Set to stop (the current window is kept as a partial run).
    pub stop: &'a Arc<AtomicBool>,
}

/// SQLite page cache per agent store. The default (2 MB per connection) fills as the file
/// grows, so the agent's resident memory rose for its first quarter of an hour (measured with
/// heaptrack: the cache was the only heap that kept growing); the agent appends and reads back
/// one window at a time, which needs little cache.
pub const STORE_CACHE_BYTES: u64 = 256 * 1024;

/// Opens an agent store with its page cache capped at [`STORE_CACHE_BYTES`].
pub fn open_store(path: &std::path::Path) -> Result<Store, tailhunt_store::StoreError> {
    let store = Store::open(path)?;
    store.limit_cache(STORE_CACHE_BYTES)?;
    Ok(store)
}

/// Runs windows until `w.stop` is set.
pub fn run(w: &Windows<'_>) -> Result<(), RollingError> {
    let (retention, state, stop) = (w.retention, w.state, w.stop);
    let mut store = open_store(&retention.store).map_err(|source| RollingError::Store {
        path: retention.store.display().to_string(),
        source,
    })?;
    let mut tracker = FindingTracker::new(retention.findings_clear_after);
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        if let Err(e) = window(&mut store, w, &mut tracker) {
            let mut s = state.lock();
            s.failed_windows += 1;
            s.current_run = None;
            s.last_error = Some(e);
            drop(s);
            // Do not spin on a failure that repeats (a full disk): wait for the rest of a
            // window's worth, at least a second, watching the stop flag.
            let pause = retention
                .window
                .saturating_sub(started.elapsed())
                .max(Duration::from_secs(1));
            let until = Instant::now() + pause;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    Ok(())
}

/// One window: a probe run, its diagnosis, then retention. Errors as text for the status.
fn window(store: &mut Store, w: &Windows<'_>, tracker: &mut FindingTracker) -> Result<(), String> {
    let (cfg, retention, aggregator, state) = (w.cfg, w.retention, w.aggregator, w.state);
    let probes = cfg
        .probes
        .iter()
        .map(kind::build)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let params = json!({
        "agent_window": true,
        "window_ns": retention.window.as_nanos() as u64,
        "interval_ns": cfg.interval.as_nanos() as u64,
        "timeout_ns": cfg.probes.iter().map(|p| p.timeout.as_nanos() as u64).max().unwrap_or(0),
        "probes": cfg.probes, "seed": cfg.seed,
    });
    let origin = ClockOrigin::now();
    let start_ms = now_wall_ns() / 1_000_000;
    let mut writer = store
        .begin_run(RunKind::Probe, params, origin)
        .map_err(|e| format!("cannot start a window's run: {e}"))?;
    let id = writer.id().to_string();
    state.lock().current_run = Some(id.clone());
    let ran = {
        let mut tee = Tee::new(&mut writer, aggregator);
        run::run(
            cfg,
            probes,
            origin.mono_ns,
            Length::For(retention.window),
            &mut tee,
            w.live,
            w.stop,
        )
    };
    let finished = ran.map_err(|e| format!("run {id}: {e}"))?;
    writer
        .finish_as(finished.interrupted, json!({}))
        .map_err(|e| format!("run {id}: {e}"))?;
    let (findings, (deleted, kept, bytes)) =
        close_window(store, retention, &id, start_ms, tracker)?;
    let mut s = state.lock();
    s.findings = findings;
    s.windows += 1;
    s.deleted_runs += deleted;
    s.kept_runs = kept;
    s.store_bytes = bytes;
    s.current_run = None;
    s.last_error = None;
    Ok(())
}

/// A window's findings as exported: each about its first evidence's series (else the run).
pub fn findings_of(run_id: &str, findings: Vec<tailhunt_model::Finding>) -> Vec<FindingState> {
    findings
        .into_iter()
        .map(|finding| FindingState {
            subject: finding
                .evidence
                .first()
                .map_or_else(|| format!("run {run_id}"), |e| e.series.clone()),
            finding,
            seen: None,
        })
        .collect()
}

/// Ends a stored window (a finished run `id`, begun at `start_ms`) the same way whatever it
/// measured: its detectors run and their findings are stored, the tracker's window closes on
/// them, and retention applies. Gives the active findings and retention's (deleted, kept,
/// used bytes).
pub fn close_window(
    store: &mut Store,
    retention: &Retention,
    id: &str,
    start_ms: i64,
    tracker: &mut FindingTracker,
) -> Result<(Vec<FindingState>, RetentionCounts), String> {
    let diagnosis = tailhunt_diagnose::diagnose_and_store(store, id)
        .map_err(|e| format!("diagnosing run {id} and storing its findings: {e}"))?;
    let findings = tracker
        .close_window(
            start_ms,
            now_wall_ns() / 1_000_000,
            findings_of(id, diagnosis.findings),
        )
        .to_vec();
    let counts = apply_retention(store, retention, id)?;
    Ok((findings, counts))
}

/// What retention did: runs deleted, runs kept, the store's used bytes.
pub type RetentionCounts = (u64, u64, u64);

/// Deletes the agent's runs past the age bound, then the oldest past the size bound; `newest`
/// stays. Returns (deleted, kept, used bytes).
pub fn apply_retention(
    store: &mut Store,
    retention: &Retention,
    newest: &str,
) -> Result<RetentionCounts, String> {
    let err = |e: tailhunt_store::StoreError| format!("retention: {e}");
    let mut runs: Vec<_> = store
        .runs()
        .map_err(err)?
        .into_iter()
        .filter(|r| r.params.get("agent_window") == Some(&serde_json::Value::Bool(true)))
        .filter(|r| r.id != newest)
        .collect();
    runs.sort_by_key(|r| r.created_wall_ns);
    let oldest_kept = now_wall_ns() - retention.max_age.as_nanos() as i64;
    let mut deleted = 0u64;
    while let Some(r) = runs.first() {
        if r.created_wall_ns >= oldest_kept {
            break;
        }
        store.delete_run(&r.id).map_err(err)?;
        runs.remove(0);
        deleted += 1;
    }
    let mut bytes = store.used_bytes().map_err(err)?;
    while bytes > retention.max_bytes && !runs.is_empty() {
        let r = runs.remove(0);
        store.delete_run(&r.id).map_err(err)?;
        deleted += 1;
        bytes = store.used_bytes().map_err(err)?;
    }
    // The WAL would otherwise keep the deleted pages' old contents on disk until SQLite
    // checkpoints on its own.
    store.checkpoint().map_err(err)?;
    Ok((deleted, runs.len() as u64 + 1, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::{Outcome, Sample, SeriesMeta, SeriesSink};

    /// A run with `n` samples; an agent window when `agent`.
    fn stored_run(store: &mut Store, agent: bool, n: i64) -> String {
        let params = if agent {
            json!({ "agent_window": true })
        } else {
            json!({ "by": "hand" })
        };
        let mut w = store
            .begin_run(RunKind::Probe, params, ClockOrigin::now())
            .unwrap();
        let h = w
            .open_series(&SeriesMeta::latency("probe_latency"))
            .unwrap();
        let samples: Vec<Sample> = (0..n)
            .map(|i| {
                Sample::new(
                    i * 1_000_000,
                    i * 1_000_000,
                    i * 1_000_000 + (i * 7919) % 900_000,
                    Outcome::Ok,
                )
            })
            .collect();
        w.push_samples(h, &samples).unwrap();
        w.finish(json!({})).unwrap()
    }

    fn retention(store: PathBuf, max_age: Duration, max_bytes: u64) -> Retention {
        Retention {
            store,
            window: Duration::from_secs(1),
            max_age,
            max_bytes,
            findings_clear_after: DEFAULT_CLEAR_AFTER,
        }
    }

    #[test]
    fn old_windows_go_by_age_and_size_and_other_runs_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let mut store = Store::open(&path).unwrap();
        let mine = stored_run(&mut store, false, 1000);
        let a = stored_run(&mut store, true, 200_000);
        let b = stored_run(&mut store, true, 200_000);
        let c = stored_run(&mut store, true, 200_000);
        let ids = |s: &Store| {
            s.runs()
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect::<Vec<_>>()
        };
        // Nothing is old yet and the bound is wide: all stay.
        let r = retention(path.clone(), Duration::from_secs(3600), 1 << 40);
        assert_eq!(apply_retention(&mut store, &r, &c).unwrap().0, 0);
        assert_eq!(ids(&store).len(), 4);
        // A size bound under what three windows hold: the oldest go first, the newest stays.
        let full = store.used_bytes().unwrap();
        let r = retention(path.clone(), Duration::from_secs(3600), full * 2 / 3);
        let (deleted, kept, bytes) = apply_retention(&mut store, &r, &c).unwrap();
        assert!(deleted >= 1, "nothing deleted at {full} bytes");
        assert!(bytes <= full * 2 / 3, "{bytes} of {full} bytes left");
        let left = ids(&store);
        assert!(!left.contains(&a), "the oldest window stayed: {left:?}");
        assert!(left.contains(&c) && left.contains(&mine), "{left:?}");
        assert_eq!(kept as usize, left.len() - 1);
        // An age bound every window is past: all but the newest go; the hand-made run stays.
        let r = retention(path, Duration::from_nanos(1), 1 << 40);
        std::thread::sleep(Duration::from_millis(5));
        apply_retention(&mut store, &r, &c).unwrap();
        let mut left = ids(&store);
        left.sort();
        let mut want = vec![mine, c];
        want.sort();
        assert_eq!(left, want);
        let _ = b;
    }
}
