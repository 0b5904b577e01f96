//! Importing a file as a new run: what `tailhunt import` and `tailhunt analyze FILE` share.

use std::fs::File;
use std::io::{BufReader, Read};

use anyhow::{Context, Result};
use serde_json::json;
use tailhunt_import::{import_reader, ImportOptions, ImportSummary};
use tailhunt_model::{ClockOrigin, RunKind, RunStatus};
use tailhunt_report::doc::{ImportDoc, Outcomes};
use tailhunt_store::Store;

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

/// Ends a failed import once its writer is dropped (which flushes and commits, leaving the run
/// partial): keeps what was read as a partial run, or removes an empty one, and says which and
/// where (a full disk or a bad line stops an import part way).
fn keep_partial(store: &mut Store, run_id: &str, error: anyhow::Error) -> anyhow::Error {
    let kept = store.run(run_id).map(|r| r.samples).unwrap_or(0);
    let db = store.path().display().to_string();
    if kept == 0 {
        if store.delete_run(run_id).is_ok() {
            return error;
        }
        return error.context(format!(
            "no samples were kept (run {run_id} in {db} is empty)"
        ));
    }
    error.context(format!(
        "kept the {kept} samples read before it stopped as partial run {run_id} in {db}"
    ))
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
        Err(e) => {
            let run_id = writer.id().to_string();
            drop(writer);
            return Err(keep_partial(&mut store, &run_id, e.into()));
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
