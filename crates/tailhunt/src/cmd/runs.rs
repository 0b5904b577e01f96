//! `tailhunt runs`.

use anyhow::Result;
use tailhunt_report::doc::RunsDoc;

use crate::cli::{Cli, RunsArgs};
use crate::output;

pub fn run(cli: &Cli, a: &RunsArgs) -> Result<()> {
    let db = cli.db.display().to_string();
    if !cli.db.exists() {
        // An empty listing, not an error: nothing recorded yet.
        let doc = RunsDoc {
            db,
            runs: Vec::new(),
        };
        return output::print(cli.json, &doc, tailhunt_report::terminal::render_runs);
    }
    let mut store = super::open_existing(&cli.db)?;
    if let Some(spec) = &a.delete {
        let id = store.resolve_run(spec)?;
        store.delete_run(&id)?;
        if !cli.json {
            tell!("deleted run {id}");
        }
    }
    let doc = RunsDoc {
        db,
        runs: store.runs()?,
    };
    output::print(cli.json, &doc, tailhunt_report::terminal::render_runs)
}
