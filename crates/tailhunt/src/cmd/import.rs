//! `tailhunt import`.

use anyhow::{Context, Result};
use serde_json::json;
use tailhunt_import::{import_path, import_reader, Format, ImportOptions};
use tailhunt_model::{ClockOrigin, RunStatus};
use tailhunt_report::doc::{ImportDoc, Outcomes};
use tailhunt_store::Store;

use crate::cli::{Cli, ImportArgs, InputFormat};
use crate::output;

pub fn run(cli: &Cli, a: &ImportArgs) -> Result<()> {
    let file = a.file.display().to_string();
    let opts = ImportOptions {
        format: a.format.map(|f| match f {
            InputFormat::Csv => Format::Csv,
            InputFormat::Jsonl => Format::JsonLines,
            InputFormat::Hlog => Format::HdrLog,
        }),
        unit: a.unit.clone(),
        series_name: a.name.clone(),
    };
    if let Some(unit) = &a.unit {
        if tailhunt_model::unit_scale_ns(unit).is_none() {
            anyhow::bail!("unknown unit '{unit}' for --unit (use ns, us, ms or s)");
        }
    }
    let mut store = Store::open(&cli.db)?;
    let now = ClockOrigin::now();
    let params = json!({ "file": file, "unit": a.unit, "name": a.name });
    let mut writer = store.begin_run(
        "import",
        params,
        ClockOrigin {
            wall_ns: now.wall_ns,
            mono_ns: 0,
        },
    )?;
    let run_id = writer.id().to_string();
    let result = if a.file.as_os_str() == "-" {
        import_reader("-", &mut std::io::stdin().lock(), &opts, &mut writer)
    } else {
        import_path(&a.file, &opts, &mut writer)
    };
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            // Keep what was read before the error, marked partial, and say so.
            writer.flush().ok();
            drop(writer);
            let kept = store.run(&run_id).map(|r| r.samples).unwrap_or(0);
            if kept == 0 {
                store.delete_run(&run_id).ok();
                return Err(e.into());
            }
            return Err(anyhow::Error::new(e).context(format!(
                "kept the {kept} samples read before the error as partial run {run_id}"
            )));
        }
    };
    if let Some(first) = summary.first_epoch_ns {
        writer.set_origin(ClockOrigin::wall(first))?;
    }
    writer
        .finish(json!({ "format": summary.format.name(), "lines": summary.lines }))
        .with_context(|| format!("finishing run {run_id}"))?;
    let doc = ImportDoc {
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
    };
    if a.quiet {
        return output::print(false, &doc, |d| format!("{}\n", d.run_id));
    }
    output::print(cli.json, &doc, tailhunt_report::terminal::render_import)
}
