//! `tailhunt import`.

use anyhow::Result;

use crate::cli::{Cli, ImportArgs};
use crate::{ingest, output};

pub fn run(cli: &Cli, a: &ImportArgs) -> Result<()> {
    let doc = ingest::import_file(cli, a)?;
    if a.quiet {
        return output::print(false, &doc, |d| format!("{}\n", d.run_id));
    }
    output::print(cli.json, &doc, tailhunt_report::terminal::render_import)
}
