//! `tailhunt diagnose`: run every detector that has the evidence it needs.

use anyhow::Result;
use tailhunt_report::doc::DiagnoseDoc;

use super::open_existing;
use crate::cli::{Cli, DiagnoseArgs};
use crate::output;

pub fn run(cli: &Cli, a: &DiagnoseArgs) -> Result<()> {
    let mut store = open_existing(&cli.db)?;
    let run_id = store.resolve_run(&a.run)?;
    let diagnosis = tailhunt_diagnose::diagnose_and_store(&mut store, &run_id)?;
    let doc = DiagnoseDoc {
        run: store.run(&run_id)?,
        findings: diagnosis.findings,
        detectors: diagnosis.detectors.iter().map(|d| d.to_string()).collect(),
        saved: !store.findings_unsaved(),
    };
    output::print(cli.json, &doc, tailhunt_report::terminal::render_diagnose)
}
