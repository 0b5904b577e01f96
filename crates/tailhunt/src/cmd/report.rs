//! `tailhunt report`: the detectors on each run, then one self-contained HTML file.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tailhunt_report::html::{build, HtmlReport, ReportRequest, ReportRun};

use super::open_existing;
use crate::cli::{Cli, CompareBy, ReportArgs};
use crate::output;

/// What `report --json` prints.
#[derive(Debug, Serialize)]
struct ReportDoc {
    /// The file written.
    output: PathBuf,
    /// Its size.
    bytes: u64,
    #[serde(flatten)]
    report: HtmlReport,
}

pub fn run(cli: &Cli, a: &ReportArgs) -> Result<()> {
    if a.label.len() > a.runs.len() {
        bail!(
            "{} --label values for {} runs: give at most one label per run, in the order of the runs",
            a.label.len(),
            a.runs.len()
        );
    }
    let mut store = open_existing(&cli.db)?;
    let mut runs = Vec::with_capacity(a.runs.len());
    for (i, spec) in a.runs.iter().enumerate() {
        let id = store.resolve_run(spec)?;
        let diagnosis = tailhunt_diagnose::diagnose_and_store(&mut store, &id)
            .with_context(|| format!("running the detectors on run {id}"))?;
        let group = match a.compare_by {
            CompareBy::All => None,
            CompareBy::Tag => run_tag(&store, &id)?,
        };
        runs.push(ReportRun {
            id,
            label: a.label.get(i).cloned(),
            findings: diagnosis.findings,
            group,
        });
    }
    let path = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("tailhunt-report-{}.html", runs[0].id)));
    let report = build(
        &store,
        &ReportRequest {
            runs,
            title: Some(a.title.clone()),
        },
    )?;
    tailhunt_report::html::write(&path, &report)
        .with_context(|| format!("cannot write the report to '{}'", path.display()))?;
    let doc = ReportDoc {
        bytes: report.html.len() as u64,
        output: path,
        report,
    };
    output::print(cli.json, &doc, render)
}

/// The run's `--tag` (lab runs carry their scenario).
fn run_tag(store: &tailhunt_store::Store, id: &str) -> Result<Option<String>> {
    let run = store.run(id)?;
    Ok(run
        .params
        .get("tag")
        .and_then(|t| t.as_str())
        .map(String::from))
}

fn render(d: &ReportDoc) -> String {
    let mut s = format!(
        "wrote {} ({} KiB): {} charts for {} run{}, {} findings\n",
        d.output.display(),
        d.bytes.div_ceil(1024),
        d.report.charts.len(),
        d.report.runs.len(),
        if d.report.runs.len() == 1 { "" } else { "s" },
        d.report.findings
    );
    for m in &d.report.missing {
        s.push_str(&format!("  not drawn: {m}\n"));
    }
    s
}
