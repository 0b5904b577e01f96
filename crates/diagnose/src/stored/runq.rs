//! Run-queue runs: each cgroup's timeline rebuilt from the `runq_*` and `cpu_*` series and the
//! `runq` document (quotas, the threads behind outliers).

use std::collections::BTreeMap;

use tailhunt_model::evidence::runq::{CgroupTimeline, RunqRecord, RunqStep};
use tailhunt_model::{Finding, Run, RunKind, SeriesData};
use tailhunt_store::Store;

use super::DiagnoseError;

/// What the detectors read; outlier events and pressure are not loaded.
const USED: [&str; 7] = [
    "runq_latency",
    "runq_run_ns",
    "runq_preemptions",
    "runq_waits",
    "runq_wait_ns",
    "cpu_throttled_periods",
    "cpu_throttled_ns",
];

/// Each cgroup's timeline in run `run_id`: its intervals (histogram, whom it waited behind,
/// throttling), its quota and its outliers' blockers.
pub fn timelines(store: &Store, run_id: &str) -> Result<Vec<CgroupTimeline>, DiagnoseError> {
    let record = store.evidence::<RunqRecord>(run_id)?.unwrap_or_default();
    let mut steps: BTreeMap<String, BTreeMap<i64, RunqStep>> = BTreeMap::new();
    for info in store.series(run_id)? {
        let Some(cgroup) = info.labels.get("cgroup").cloned() else {
            continue;
        };
        if !USED.contains(&info.name.as_str()) {
            continue;
        }
        let series = store.load_series(&info)?;
        let per = steps.entry(cgroup).or_default();
        match (&series.data, info.name.as_str()) {
            (SeriesData::Histograms(hs), "runq_latency") => {
                for h in hs {
                    let s = per
                        .entry(h.end_ns)
                        .or_insert_with(|| RunqStep::empty(h.end_ns));
                    s.start_ns = h.start_ns;
                    s.latency = h.histogram.clone();
                }
            }
            (SeriesData::Values(points), name) => {
                let by = info.labels.get("by").cloned();
                for p in points {
                    let s = per.entry(p.t_ns).or_insert_with(|| RunqStep::empty(p.t_ns));
                    let v = u64::try_from(p.value).unwrap_or(0);
                    match (name, &by) {
                        ("runq_preemptions", Some(b)) => {
                            s.by.entry(b.clone()).or_default().preemptions = v
                        }
                        ("runq_waits", Some(b)) => s.by.entry(b.clone()).or_default().waits = v,
                        ("runq_wait_ns", Some(b)) => s.by.entry(b.clone()).or_default().wait_ns = v,
                        ("runq_run_ns", _) => s.run_ns = Some(v),
                        ("cpu_throttled_periods", _) => s.throttled_periods = Some(v),
                        ("cpu_throttled_ns", _) => s.throttled_ns = Some(v),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(steps
        .into_iter()
        .map(|(cgroup, per)| CgroupTimeline {
            quota: record.cgroups.get(&cgroup).and_then(|c| c.quota),
            blockers: record
                .blockers
                .iter()
                .filter(|b| b.cgroup == cgroup)
                .cloned()
                .collect(),
            cgroup,
            steps: per.into_values().collect(),
            wait_charge: record.wait_charge,
        })
        .collect())
}

/// The run-queue detectors on a stored `runq` run, against its `--baseline` run when it had one
/// that still exists.
pub(super) fn diagnose(store: &Store, run: &Run) -> Result<Vec<Finding>, DiagnoseError> {
    let record = store.evidence::<RunqRecord>(&run.id)?.unwrap_or_default();
    let baseline = match &record.baseline_run {
        Some(b) if store.run(b).is_ok_and(|r| r.kind == RunKind::Runq) => timelines(store, b)?,
        _ => Vec::new(),
    };
    Ok(crate::runq::diagnose(
        &timelines(store, &run.id)?,
        &baseline,
    ))
}

/// The run `--baseline SPEC` names (`latest`, an id or a prefix), which must be a `runq` run.
pub fn runq_run(store: &Store, spec: &str) -> Result<String, DiagnoseError> {
    let reference = |reason: String| DiagnoseError::Reference {
        flag: "--baseline",
        spec: spec.to_string(),
        reason,
    };
    let id = store
        .resolve_run(spec)
        .map_err(|e| reference(e.to_string()))?;
    let kind = store.run(&id)?.kind;
    if kind != RunKind::Runq {
        return Err(reference(format!(
            "run {id} is a '{kind}' run; give a run recorded by `tailhunt runq` (see `tailhunt runs`)"
        )));
    }
    Ok(id)
}
