//! Probe runs (and timestamped imports): every latency series over time, and the variants of
//! each probe against each other.

use tailhunt_analyze::timeline::{analyze_over_time, interval_origin, TimeAnalysis, TimeOptions};
use tailhunt_analyze::{analyze, AnalyzeOptions, Distribution};
use tailhunt_model::evidence::probe::ProbeRecord;
use tailhunt_model::{Run, SeriesData, Timing};
use tailhunt_store::Store;

use super::DiagnoseError;
use crate::probe::{cold, floor, fragile_time, periodic, step, ProbeSeries};
use tailhunt_model::Finding;

/// Name of a probe run's latency series.
pub const PROBE_SERIES: &str = "probe_latency";

/// The run's timed latency series with samples: `probe_latency` for a probe run, `latency`
/// otherwise (an import with timestamps).
pub fn timed_series(store: &Store, run: &Run) -> Result<Vec<ProbeSeries>, DiagnoseError> {
    let name = if run.kind == tailhunt_model::RunKind::Probe {
        PROBE_SERIES
    } else {
        "latency"
    };
    let mut out = Vec::new();
    for info in store.series(&run.id)? {
        if info.name != name || info.timing != Timing::Timed {
            continue;
        }
        if let SeriesData::Samples(samples) = store.load_series(&info)?.data {
            out.push(ProbeSeries {
                display_name: info.display_name.clone(),
                labels: info.labels.clone(),
                samples,
            });
        }
    }
    Ok(out)
}

/// The run's round cadence (`interval_ns` in its parameters), when it has one.
pub fn round_interval_ns(run: &Run) -> Option<i64> {
    run.params
        .get("interval_ns")
        .and_then(serde_json::Value::as_i64)
        .filter(|&i| i > 0)
}

/// One series over time, intervals counted from the run's origin (probe runs) or from the
/// first sample (imports, whose clock is the file's).
pub fn time_analysis(run: &Run, s: &ProbeSeries, interval_ns: Option<i64>) -> Option<TimeAnalysis> {
    let origin_ns = interval_origin(run, &s.samples)?;
    analyze_over_time(
        &s.samples,
        &TimeOptions {
            interval_ns,
            origin_ns,
            ..TimeOptions::default()
        },
    )
}

/// The over-time detectors on every timed series, and the floor and cold-path detectors across
/// a probe run's series.
pub(super) fn diagnose(store: &Store, run: &Run) -> Result<Vec<Finding>, DiagnoseError> {
    let series = timed_series(store, run)?;
    let mut findings = Vec::new();
    let opts = AnalyzeOptions::default();
    for s in &series {
        if s.samples.is_empty() {
            continue;
        }
        let a = time_analysis(run, s, None);
        let start = run.origin.mono_ns.min(s.samples[0].intended_ns);
        if let Some(a) = &a {
            findings.extend(step::step_change(s, a, start));
            findings.extend(periodic::periodic_tail(s, a));
        }
        let whole = analyze(&Distribution::from_samples(&s.samples, false), &opts);
        findings.extend(fragile_time::fragile_over_time(s, a.as_ref(), &whole));
    }
    if run.kind == tailhunt_model::RunKind::Probe {
        // The hosts come from the prober's document when it has one (older runs: none).
        let hosts = store
            .evidence::<ProbeRecord>(&run.id)
            .ok()
            .flatten()
            .map(|r| {
                r.probes
                    .into_iter()
                    .filter_map(|p| p.host.map(|h| (p.name, h)))
                    .collect()
            })
            .unwrap_or_default();
        findings.extend(floor::latency_floor(&series, &hosts));
        if let Some(interval) = round_interval_ns(run) {
            findings.extend(cold::cold_path(&series, run.origin.mono_ns, interval));
        }
    }
    Ok(findings)
}

/// A timestamped import's series over time: `step-change` and `periodic-tail`, and the
/// display names of the series where either found something (a gap between modes in such a
/// series' whole distribution comes from that change, so its `fragile-percentile` is dropped).
pub(super) fn diagnose_timed_import(
    store: &Store,
    run: &Run,
) -> Result<(Vec<Finding>, Vec<String>), DiagnoseError> {
    let mut findings = Vec::new();
    let mut changed = Vec::new();
    for s in timed_series(store, run)? {
        let Some(first) = s.samples.iter().map(|x| x.intended_ns).min() else {
            continue;
        };
        if let Some(a) = time_analysis(run, &s, None) {
            let before = findings.len();
            findings.extend(step::step_change(&s, &a, first));
            findings.extend(periodic::periodic_tail(&s, &a));
            if findings.len() > before {
                changed.push(s.display_name.clone());
            }
        }
    }
    Ok((findings, changed))
}
