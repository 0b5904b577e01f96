//! `tailhunt export`: the run's series through the report crate's exporters.

use std::io::Write;

use anyhow::{Context, Result};
use tailhunt_model::evidence::capture::CaptureReport;
use tailhunt_model::SeriesKind;
use tailhunt_report::doc::WrittenDoc;
use tailhunt_report::export::exporter;
use tailhunt_report::export::flows::write_flows_csv;

use tailhunt_report::analysis::select_series;

use super::open_existing;
use crate::cli::{Cli, ExportArgs};
use crate::output;

pub fn run(cli: &Cli, a: &ExportArgs) -> Result<()> {
    let store = open_existing(&cli.db)?;
    let run_id = store.resolve_run(&a.run)?;
    let run = store.run(&run_id)?;
    if a.flows {
        return export_flows(cli, &store, &run_id, &run.kind.to_string(), a);
    }
    let selected = select_series(&store, &run_id, &a.series)?;
    let format = a.format;
    let kinds: Vec<SeriesKind> = selected.iter().map(|s| s.kind).collect();
    let mut out = output::open_output(a.output.as_deref())?;
    let mut values = 0u64;
    let mut writer = exporter(format, &mut out, &kinds, run.origin)?;
    for info in &selected {
        let series = store
            .load_series(info)
            .with_context(|| format!("reading series {}", info.display_name))?;
        values += writer.write_series(&info.display_name, &series)?;
    }
    writer.finish()?;
    out.flush()?;
    drop(out);
    say_written(cli, a, format.name(), values, "values")
}

/// `--flows`: every flow of a capture run, read one at a time from the run's rows.
fn export_flows(
    cli: &Cli,
    store: &tailhunt_store::Store,
    run_id: &str,
    kind: &str,
    a: &ExportArgs,
) -> Result<()> {
    let Some(report) = store.evidence::<CaptureReport>(run_id)? else {
        anyhow::bail!(
            "run {run_id} ({kind}) has no flows: --flows needs a pcap or capture run (see `tailhunt runs`)"
        );
    };
    let mut out = output::open_output(a.output.as_deref())?;
    write_flows_csv(&mut out, store, run_id, &report)?;
    out.flush()?;
    drop(out);
    say_written(cli, a, "csv", report.flow_count(), "flows")
}

/// With `--output`, says what was written where (`values` of `what`).
fn say_written(cli: &Cli, a: &ExportArgs, format: &str, values: u64, what: &str) -> Result<()> {
    if let Some(path) = &a.output {
        let doc = WrittenDoc {
            file: path.display().to_string(),
            format: format.into(),
            values,
        };
        output::print(cli.json, &doc, |d| {
            format!("wrote {} {what} to {} ({})\n", d.values, d.file, d.format)
        })?;
    }
    Ok(())
}
