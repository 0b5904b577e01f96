//! One module per subcommand.

mod agent;
mod analyze;
pub(crate) mod diagnose;
mod export;
mod hunt;
mod import;
mod lab;
mod lab_method;
pub use lab_method::NotAllPassed;
mod load;
mod mesh;
pub(crate) mod pcap;
mod probe;
mod report;
pub(crate) mod runq;
mod runs;
mod serve;
pub(crate) mod sockets;
pub(crate) mod transfer;

use std::path::Path;

use anyhow::Result;
use tailhunt_store::{Abandoned, RunWriter, Store};

use crate::cli::{Cli, Command, LabCommand};

/// Runs the chosen subcommand.
pub fn run(cli: &Cli) -> Result<()> {
    match &cli.command {
        Command::Import(a) => import::run(cli, a),
        Command::Runs(a) => runs::run(cli, a),
        Command::Analyze(a) => analyze::run(cli, a),
        Command::Export(a) => export::run(cli, a),
        Command::Load(a) => load::run(cli, a),
        Command::Serve(a) => serve::run(cli, a),
        Command::Probe(a) => probe::run(cli, a),
        Command::Agent(a) => agent::run(a),
        Command::Mesh(a) => mesh::run(cli, a),
        Command::Diagnose(a) => diagnose::run(cli, a),
        Command::Report(a) => report::run(cli, a),
        Command::Pcap(a) => pcap::run_files(cli, a),
        Command::Capture(a) => pcap::run_live(cli, a),
        Command::Runq(a) => runq::run(cli, a),
        Command::Lab(l) => match &l.command {
            LabCommand::Synth(a) => lab::synth(cli, a),
            LabCommand::Link(a) => lab::link(cli, a),
            LabCommand::List => lab_method::list(cli),
            LabCommand::Run(a) => lab_method::run(cli, a),
            LabCommand::Clean => lab_method::clean(cli),
            LabCommand::Work(a) => lab_method::work(a),
        },
        Command::Transfer(a) => transfer::run(cli, a),
        Command::Sockets(a) => sockets::run(cli, a),
        Command::Hunt(a) => hunt::run(cli, a),
    }
}

/// Opens (or creates) the store for recording runs, each tagged with `--tag` when given.
pub(crate) fn open_tagged(cli: &Cli) -> Result<Store, tailhunt_store::StoreError> {
    let mut store = Store::open(&cli.db)?;
    store.set_tag(cli.tag.clone());
    Ok(store)
}

/// Opens the store for reading: a missing file is an error, not a new empty store, and a store
/// this user may not write is opened read-only.
fn open_existing(db: &Path) -> Result<Store> {
    Ok(Store::open_for_reading(db)?)
}

/// Ends the run of a command whose source failed ([`RunWriter::abandon`]) and returns the
/// error to report: with `kept(run, samples)` as its context when what was measured was kept,
/// as it is when the empty run was removed, and with a note when even ending the run failed
/// (the source's error is the one that matters either way).
pub(crate) fn abandoned(
    writer: RunWriter<'_>,
    error: anyhow::Error,
    kept: impl FnOnce(&str, u64) -> String,
) -> anyhow::Error {
    match writer.abandon(serde_json::json!({})) {
        Ok(Abandoned::Kept { id, samples }) => error.context(kept(&id, samples)),
        Ok(Abandoned::Removed { .. }) => error,
        Err(e) => error.context(format!("ending its run failed too: {e}")),
    }
}
