//! `tailhunt export`: the run's series through the report crate's exporters.

use std::io::Write;

use anyhow::{Context, Result};
use tailhunt_model::SeriesKind;
use tailhunt_report::doc::WrittenDoc;
use tailhunt_report::export::exporter;

use tailhunt_report::analysis::select_series;

use super::open_existing;
use crate::cli::{Cli, ExportArgs};
use crate::output;

pub fn run(cli: &Cli, a: &ExportArgs) -> Result<()> {
    let store = open_existing(&cli.db)?;
    let run_id = store.resolve_run(&a.run)?;
    let run = store.run(&run_id)?;
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
    if let Some(path) = &a.output {
        let doc = WrittenDoc {
            file: path.display().to_string(),
            format: format.name().into(),
            values,
        };
        output::print(cli.json, &doc, |d| {
            format!("wrote {} values to {} ({})\n", d.values, d.file, d.format)
        })?;
    }
    Ok(())
}
