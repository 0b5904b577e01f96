//! `tailhunt analyze`.

use anyhow::{Context, Result};
use tailhunt_analyze::AnalyzeOptions;
use tailhunt_report::analysis::{analyze_run, AnalyzeRequest};

use super::open_existing;
use crate::cli::{AnalyzeArgs, Cli, ImportArgs};
use crate::{ingest, output};

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
    let doc = ingest::import_file(cli, &args)?;
    if !cli.json {
        tell!(
            "imported {} samples from {} as run {}",
            doc.samples,
            doc.file,
            doc.run_id
        );
    }
    Ok(Some(doc.run_id))
}

pub fn run(cli: &Cli, a: &AnalyzeArgs) -> Result<()> {
    let imported = import_first(cli, a)?;
    let store = open_existing(&cli.db)?;
    let run = match imported {
        Some(id) => id,
        None => store.resolve_run(&a.run)?,
    };
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
    let interval_ns = match &a.interval {
        None => None,
        Some(text) => {
            let ns = tailhunt_model::parse_duration_ns(text, None)
                .with_context(|| format!("--interval '{text}' (write a duration such as 1m)"))?;
            anyhow::ensure!(ns > 0, "--interval '{text}' must be longer than zero");
            Some(ns)
        }
    };
    let doc = analyze_run(
        &store,
        &AnalyzeRequest {
            run,
            series: a.series.clone(),
            opts,
            ok_only: a.ok_only,
            floor_from: a.floor_from.clone(),
            compare: a.compare.clone(),
            over_time: a.over_time,
            interval_ns,
        },
    )?;
    output::print(cli.json, &doc, tailhunt_report::terminal::render_analyze)
}
