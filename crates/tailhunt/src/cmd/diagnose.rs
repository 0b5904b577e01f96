//! `tailhunt diagnose`: run every detector that has the evidence it needs.

use std::collections::BTreeMap;

use anyhow::Result;
use tailhunt_analyze::{analyze, AnalyzeOptions, Distribution};
use tailhunt_diagnose::{fragile, nagle};
use tailhunt_model::{Finding, Sample, SeriesData};
use tailhunt_pcap::analysis::CaptureReport;
use tailhunt_report::doc::DiagnoseDoc;
use tailhunt_store::Store;

use super::open_existing;
use crate::cli::{Cli, DiagnoseArgs};
use crate::output;

/// Detectors this build runs on load and import runs.
pub const DETECTORS: [&str; 2] = [nagle::DETECTOR, fragile::DETECTOR];

/// Whether a run holds a capture analysis (`tailhunt pcap` or `tailhunt capture`).
fn is_capture(run: &tailhunt_store::RunInfo) -> bool {
    matches!(run.kind.as_str(), "pcap" | "capture") || run.params.get("capture").is_some()
}

/// Runs the detectors on a run, stores their findings (replacing earlier ones) and returns them.
pub fn diagnose_run(store: &mut Store, run_id: &str) -> Result<Vec<Finding>> {
    let run = store.run(run_id)?;
    if run.kind == "runq" {
        return super::runq::diagnose_stored(store, run_id);
    }
    if let Some(findings) = super::transfer::stored_findings(&run.kind, &run.params)? {
        store.replace_findings(run_id, &findings)?;
        return Ok(findings);
    }
    if is_capture(&run) {
        // A compressed document; runs of older versions kept it in params as one JSON string
        // (or, older still, an object).
        let parsed = match (store.document(run_id, "capture")?, run.params.get("capture")) {
            (Some(text), _) => serde_json::from_str(&text),
            (None, Some(v)) => match v.as_str() {
                Some(text) => serde_json::from_str(text),
                None => serde_json::from_value(v.clone()),
            },
            (None, None) => anyhow::bail!(
                "run {run_id} has no stored capture report (its writer stopped before the analysis ended): re-run `tailhunt pcap` on the capture"
            ),
        };
        let report: CaptureReport = parsed.map_err(|e| {
            anyhow::anyhow!("run {run_id}'s stored capture report does not read back ({e}): re-run `tailhunt pcap` on the capture")
        })?;
        let requests = run.params.get("requests").and_then(|r| r.as_str());
        return Ok(super::pcap::diagnose_stored(store, run_id, &report, requests)?.1);
    }
    let mut by_rate: BTreeMap<u64, (f64, Vec<Sample>)> = BTreeMap::new();
    let mut findings = Vec::new();
    let opts = AnalyzeOptions::default();
    for info in store.series(run_id)? {
        if info.labels.get("phase").is_some_and(|p| p == "warmup") || info.name != "latency" {
            continue;
        }
        let series = store.load_series(&info)?;
        let rate = info
            .labels
            .get("rate")
            .and_then(|r| tailhunt_load::sweep::parse_rates(r).ok())
            .and_then(|r| r.first().copied());
        match (rate, &series.data) {
            (Some(rate), SeriesData::Samples(s)) => {
                // Repeats of a rate merge into one distribution.
                by_rate
                    .entry(rate.to_bits())
                    .or_insert_with(|| (rate, Vec::new()))
                    .1
                    .extend_from_slice(s);
            }
            _ => {
                let dist = Distribution::from_series(&series, false);
                if dist.count() > 0 {
                    findings.extend(fragile::fragile_percentiles(
                        &info.display_name,
                        &analyze(&dist, &opts),
                    ));
                }
            }
        }
    }
    let steps: Vec<nagle::RateStep> = by_rate
        .into_values()
        .filter(|(_, s)| !s.is_empty())
        .map(|(rate, samples)| nagle::RateStep {
            series: format!("latency{{rate={}}}", tailhunt_model::format_rate(rate)),
            rate,
            analysis: analyze(&Distribution::from_samples(&samples, false), &opts),
        })
        .collect();
    findings.extend(nagle::latency_rises_as_load_falls(&steps));
    store.replace_findings(run_id, &findings)?;
    Ok(findings)
}

pub fn run(cli: &Cli, a: &DiagnoseArgs) -> Result<()> {
    let mut store = open_existing(&cli.db)?;
    let run_id = store.resolve_run(&a.run)?;
    let findings = diagnose_run(&mut store, &run_id)?;
    let run = store.run(&run_id)?;
    let detectors: &[&str] = if run.kind == "runq" {
        &tailhunt_diagnose::runq::DETECTORS
    } else if matches!(run.kind.as_str(), "transfer" | "sockets") {
        &tailhunt_diagnose::sock::DETECTORS
    } else if is_capture(&run) {
        &tailhunt_diagnose::capture::DETECTORS
    } else {
        &DETECTORS
    };
    let doc = DiagnoseDoc {
        run,
        findings,
        detectors: detectors.iter().map(|d| d.to_string()).collect(),
        saved: !store.findings_unsaved(),
    };
    output::print(cli.json, &doc, tailhunt_report::terminal::render_diagnose)
}
