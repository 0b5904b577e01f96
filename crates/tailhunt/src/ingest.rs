//! Importing a file as a new run: what `tailhunt import` and `tailhunt analyze FILE` share.

use std::fs::File;
use std::io::{BufReader, Read};

use anyhow::{Context, Result};
use serde_json::json;
use tailhunt_import::{import_reader, ImportOptions, ImportSummary};
use tailhunt_model::{ClockOrigin, RunKind, RunStatus};
use tailhunt_report::doc::{ImportDoc, Outcomes};

use crate::cli::{Cli, ImportArgs};
use crate::progress::Watched;

/// Opens the input (a file, or stdin for `-`) behind a progress and signal watcher.
fn open_input(a: &ImportArgs, file: &str) -> Result<BufReader<Box<dyn Read>>> {
    let watched: Box<dyn Read> = if a.file.as_os_str() == "-" {
        Box::new(Watched::new(
            std::io::stdin().lock(),
            "importing <stdin>".into(),
            None,
        ))
    } else {
        let f = File::open(&a.file).with_context(|| format!("cannot read '{file}'"))?;
        let size = f.metadata().ok().map(|m| m.len());
        Box::new(Watched::new(f, format!("importing {file}"), size))
    };
    Ok(BufReader::with_capacity(1 << 16, watched))
}

fn options(a: &ImportArgs) -> Result<ImportOptions> {
    if let Some(unit) = &a.unit {
        if tailhunt_model::unit_scale_ns(unit).is_none() {
            anyhow::bail!("unknown unit '{unit}' for --unit (use ns, us, ms or s)");
        }
    }
    Ok(ImportOptions {
        format: a.format,
        unit: a.unit.clone(),
        series_name: a.name.clone(),
    })
}

/// Imports `a.file` as a new run.
pub fn import_file(cli: &Cli, a: &ImportArgs) -> Result<ImportDoc> {
    let file = a.file.display().to_string();
    let opts = options(a)?;
    let mut reader = open_input(a, &file)?;
    crate::signals::install();
    let mut store = crate::cmd::open_tagged(cli)?;
    let now = ClockOrigin::now();
    let params = json!({ "file": file, "unit": a.unit, "name": a.name });
    let db = store.path().display().to_string();
    // Untimed and relative times count from 0 at the moment of the import.
    let mut writer = store.begin_run(
        RunKind::Import,
        params,
        ClockOrigin {
            wall_ns: now.wall_ns,
            mono_ns: 0,
        },
    )?;
    let summary: ImportSummary = match import_reader(&file, &mut reader, &opts, &mut writer) {
        Ok(s) => s,
        // A full disk or a bad line stops an import part way: what was read is kept, and
        // the message says as which run and where.
        Err(e) => {
            return Err(crate::cmd::abandoned(writer, e.into(), |id, n| {
                format!("kept the {n} samples read before it stopped as partial run {id} in {db}")
            }))
        }
    };
    if let Some(first) = summary.first_epoch_ns {
        writer.set_origin(ClockOrigin::wall(first))?;
    }
    let run_id = writer.id().to_string();
    writer
        .finish(json!({ "format": summary.format.name(), "lines": summary.lines }))
        .with_context(|| format!("finishing run {run_id}"))?;
    Ok(ImportDoc {
        run_id,
        status: RunStatus::Complete,
        file,
        format: summary.format.name().to_string(),
        series: summary.series,
        samples: summary.samples,
        lines: summary.lines,
        outcomes: Outcomes {
            ok: summary.outcomes[0],
            error: summary.outcomes[1],
            timeout: summary.outcomes[2],
        },
    })
}
