//! Capture runs: the `capture` document (bursts, flows, stalls) and the request latencies the
//! capture paired, plus those of another run named with `--requests RUN[:SERIES]`.

use tailhunt_model::evidence::capture::CaptureReport;
use tailhunt_model::{Finding, Run, SeriesKind};
use tailhunt_store::{SeriesInfo, Store};

use super::DiagnoseError;
use crate::channels::{answered, RequestKind, Requests, Span};

/// Request latencies for the microburst and link-saturated detectors: the capture's own
/// `latency{server_port}` series, its `queue_delay` series (the upstream wait of packets that
/// made no burst) and, when the run names one (`params.requests`, from `--requests`), another
/// run's latency series with their times moved to epoch ns (the capture's clock); each with
/// its [`RequestKind`].
pub fn capture_requests(
    store: &Store,
    run: &Run,
) -> Result<Vec<(String, Vec<Span>, RequestKind)>, DiagnoseError> {
    requests_of(store, run, true)
}

/// [`capture_requests`], the capture's own series left out unless `with_own`.
fn requests_of(
    store: &Store,
    run: &Run,
    with_own: bool,
) -> Result<Vec<(String, Vec<Span>, RequestKind)>, DiagnoseError> {
    let mut out = Vec::new();
    let own = if with_own {
        store.series(&run.id)?
    } else {
        Vec::new()
    };
    for info in own {
        let port = info.labels.get("server_port").map(String::as_str);
        let kind = Requests::kind_of(&info.name, port);
        let requests = match kind {
            RequestKind::Exchanges { .. } => true,
            RequestKind::QueueDelay => info.labels.is_empty(),
            RequestKind::External => false,
        };
        if requests && info.kind == SeriesKind::Samples {
            let spans = answered_spans(store, &info, |t| t)?;
            out.push((info.display_name.clone(), spans, kind));
        }
    }
    if let Some(spec) = run.params.get("requests").and_then(|r| r.as_str()) {
        out.extend(external_requests(store, spec)?);
    }
    Ok(out)
}

/// `--requests RUN[:SERIES]` with RUN resolved to a full id, as the capture run stores it.
pub fn requests_spec(store: &Store, spec: &str) -> Result<String, DiagnoseError> {
    let (run, series) = spec.split_once(':').unwrap_or((spec, ""));
    let id = store
        .resolve_run(run)
        .map_err(|e| DiagnoseError::Reference {
            flag: "--requests",
            spec: spec.to_string(),
            reason: e.to_string(),
        })?;
    Ok(if series.is_empty() {
        id
    } else {
        format!("{id}:{series}")
    })
}

/// Latency series of another run (`RUN[:SERIES]`, the run id already resolved), with times
/// moved to epoch ns.
fn external_requests(
    store: &Store,
    spec: &str,
) -> Result<Vec<(String, Vec<Span>, RequestKind)>, DiagnoseError> {
    let (run, series) = spec.split_once(':').unwrap_or((spec, "latency"));
    let reference = |reason: String| DiagnoseError::Reference {
        flag: "--requests",
        spec: spec.to_string(),
        reason,
    };
    let info = store.run(run).map_err(|e| reference(e.to_string()))?;
    let mut out = Vec::new();
    for s in store.series(run)? {
        if s.name != series && s.display_name != series {
            continue;
        }
        if s.kind == SeriesKind::Samples {
            let spans = answered_spans(store, &s, |t| info.origin.to_wall(t))?;
            out.push((
                format!("{run}:{}", s.display_name),
                spans,
                RequestKind::External,
            ));
        }
    }
    if out.is_empty() {
        return Err(reference(format!(
            "run {run} has no sample series named '{series}' (see `tailhunt analyze {run}`)"
        )));
    }
    Ok(out)
}

/// A stored sample series' answered requests ([`answered`]), read a block at a time into one
/// list sized from the series' count, with `time` applied to each timestamp.
fn answered_spans(
    store: &Store,
    info: &SeriesInfo,
    time: impl Fn(i64) -> i64,
) -> Result<Vec<Span>, DiagnoseError> {
    let mut spans = Vec::with_capacity(usize::try_from(info.count).unwrap_or(0));
    store.each_sample_block(info.id, &mut |block| {
        spans.extend(answered(block).map(|(s, e)| (time(s), time(e))));
    })?;
    Ok(spans)
}

pub(super) fn diagnose(store: &Store, run: &Run) -> Result<Vec<Finding>, DiagnoseError> {
    let report =
        store
            .evidence::<CaptureReport>(&run.id)?
            .ok_or_else(|| DiagnoseError::NoEvidence {
                run: run.id.clone(),
                kind: run.kind.clone(),
                what: "capture report",
                why: "its writer stopped before the analysis ended",
            })?;
    diagnose_report(store, run, &report)
}

/// The capture detectors on `report`, the run's stored report already read by the caller.
pub(super) fn diagnose_report(
    store: &Store,
    run: &Run,
    report: &CaptureReport,
) -> Result<Vec<Finding>, DiagnoseError> {
    // Request latencies are only held against bursts: without any, the two detectors that
    // read them have nothing to find, and the capture's own series are not read (100,000
    // exchanges are 1.6 MB). Another run's series (`--requests`) still is, so that a name
    // it does not hold is still an error.
    let owned = requests_of(store, run, !report.bursts.is_empty())?;
    let requests: Vec<Requests<'_>> = owned
        .iter()
        .map(|(series, spans, kind)| Requests {
            series: series.clone(),
            answered: spans,
            kind: *kind,
        })
        .collect();
    Ok(crate::capture::diagnose_capture(report, &requests))
}
