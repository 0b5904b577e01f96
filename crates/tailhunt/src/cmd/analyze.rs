//! `tailhunt analyze`.

use anyhow::{Context, Result};
use tailhunt_analyze::breakdown::{tail_owner, PartShare};
use tailhunt_analyze::{analyze, compare::compare, AnalyzeOptions, Distribution};
use tailhunt_model::{Sample, Series};
use tailhunt_report::doc::{AnalyzeDoc, ComparisonDoc, SeriesAnalysis};
use tailhunt_store::{SeriesInfo, Store};

use super::{open_existing, select_series, split_run_series};
use crate::cli::{AnalyzeArgs, Cli, ImportArgs};
use crate::output;

fn load(store: &Store, info: &SeriesInfo) -> Result<Series> {
    store
        .load_series(info)
        .with_context(|| format!("reading series {}", info.display_name))
}

fn distribution(store: &Store, info: &SeriesInfo, ok_only: bool) -> Result<Distribution> {
    Ok(Distribution::from_series(&load(store, info)?, ok_only))
}

/// A series of another run, from `RUN[:SERIES]`; without SERIES, the one named like `like`
/// or else the first.
fn other_series(
    store: &Store,
    spec: &str,
    like: Option<&str>,
    flag: &str,
) -> Result<(String, SeriesInfo)> {
    let (run_spec, series) = split_run_series(spec);
    let run = store
        .resolve_run(run_spec)
        .with_context(|| format!("{flag} {spec}"))?;
    let wanted: Vec<String> = series.map(|s| vec![s.to_string()]).unwrap_or_default();
    let candidates =
        select_series(store, &run, &wanted).with_context(|| format!("{flag} {spec}"))?;
    let pick = like
        .and_then(|name| {
            candidates
                .iter()
                .find(|c| c.display_name == name || c.name == name)
        })
        .unwrap_or(&candidates[0])
        .clone();
    Ok((run, pick))
}

/// `analyze FILE`: imports the file first and returns the new run's id. Run ids are hex, so an
/// argument with a `.` or a `/` that is not a file is a file that is missing, not a run.
fn import_first(cli: &Cli, a: &AnalyzeArgs) -> Result<Option<String>> {
    let path = std::path::Path::new(&a.run);
    if a.run == "latest" || !path.is_file() {
        if a.run.contains(['.', '/']) {
            let why = if path.exists() {
                "it is not a regular file"
            } else {
                "no such file"
            };
            anyhow::bail!(
                "cannot read '{}': {why} (give a file to import, or a run id from `tailhunt runs`)",
                a.run
            );
        }
        return Ok(None);
    }
    let args = ImportArgs {
        file: path.to_path_buf(),
        format: None,
        unit: a.unit.clone(),
        name: "latency".into(),
        quiet: false,
    };
    let doc = super::import::import(cli, &args)?;
    if !cli.json {
        eprintln!(
            "imported {} samples from {} as run {}",
            doc.samples, doc.file, doc.run_id
        );
    }
    Ok(Some(doc.run_id))
}

/// Parts of the request path stored next to a latency series (same labels), if any.
const PARTS: [&str; 4] = ["client_stack", "network", "server_stack", "server_app"];

/// Which part owns the tail of `latency` (the loaded series of `info`), from the parts stored
/// beside it among `all` (the run's series).
fn breakdown(
    store: &Store,
    all: &[SeriesInfo],
    info: &SeriesInfo,
    latency: &[Sample],
) -> Result<Option<Vec<PartShare>>> {
    if info.name != "latency" {
        return Ok(None);
    }
    let siblings: Vec<&SeriesInfo> = all
        .iter()
        .filter(|s| {
            PARTS.contains(&s.name.as_str()) && s.labels == info.labels && s.count == info.count
        })
        .collect();
    if siblings.is_empty() || latency.is_empty() {
        return Ok(None);
    }
    let totals: Vec<i64> = latency.iter().map(|s| s.latency_ns()).collect();
    let mut parts = vec![(
        "send_lag".to_string(),
        latency.iter().map(|s| s.send_lag_ns()).collect(),
    )];
    for s in siblings {
        parts.push((
            s.name.clone(),
            store
                .load_samples(s.id)?
                .iter()
                .map(|x| x.latency_ns())
                .collect(),
        ));
    }
    Ok(tail_owner(&totals, &parts, 0.99))
}

pub fn run(cli: &Cli, a: &AnalyzeArgs) -> Result<()> {
    let imported = import_first(cli, a)?;
    let store = open_existing(&cli.db)?;
    let run_id = match imported {
        Some(id) => id,
        None => store.resolve_run(&a.run)?,
    };
    let run = store.run(&run_id)?;
    let selected = select_series(&store, &run_id, &a.series)?;
    let mut opts = AnalyzeOptions {
        // Exact fractions travel as f64 and come back exact in the rank rule.
        quantiles: a.percentiles.iter().map(|q| q.as_f64()).collect(),
        ..AnalyzeOptions::default()
    };
    if let Some(floor) = &a.expect_floor {
        let ns = tailhunt_model::parse_duration_ns(floor, None).with_context(|| {
            format!("--expect-floor '{floor}' (write a duration such as 450us)")
        })?;
        opts.expected_floor_ns = Some(ns as u64);
        opts.floor_source = Some(format!("--expect-floor {floor}"));
    }
    if let Some(spec) = &a.floor_from {
        let (other, info) = other_series(&store, spec, None, "--floor-from")?;
        let min = distribution(&store, &info, true)?
            .histogram()
            .min()
            .with_context(|| {
                format!("--floor-from {spec}: series {} is empty", info.display_name)
            })?;
        opts.expected_floor_ns = Some(min);
        opts.floor_source = Some(format!(
            "minimum of run {other} series {}",
            info.display_name
        ));
    }
    let mut series = Vec::new();
    let all = store.series(&run_id)?;
    for info in selected {
        let loaded = load(&store, &info)?;
        let dist = Distribution::from_series(&loaded, a.ok_only);
        if dist.count() == 0 {
            anyhow::bail!(
                "series {} of run {run_id} has no samples to analyse",
                info.display_name
            );
        }
        series.push(SeriesAnalysis {
            analysis: analyze(&dist, &opts),
            breakdown: breakdown(&store, &all, &info, loaded.samples().unwrap_or_default())?,
            series: info,
        });
    }
    let comparison = match &a.compare {
        None => None,
        Some(spec) => {
            let after = &series[0];
            let (other, info) =
                other_series(&store, spec, Some(&after.series.display_name), "--compare")?;
            let before = analyze(&distribution(&store, &info, a.ok_only)?, &opts);
            Some(ComparisonDoc {
                baseline_run: other,
                baseline_series: info.display_name,
                series: after.series.display_name.clone(),
                comparison: compare(&before, &after.analysis),
            })
        }
    };
    let doc = AnalyzeDoc {
        run,
        series,
        comparison,
    };
    output::print(cli.json, &doc, tailhunt_report::terminal::render_analyze)
}
