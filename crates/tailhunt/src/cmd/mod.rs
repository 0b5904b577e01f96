//! One module per subcommand.

mod analyze;
pub(crate) mod diagnose;
mod export;
mod hunt;
mod import;
mod lab;
mod load;
pub(crate) mod pcap;
pub(crate) mod runq;
mod runs;
mod serve;
pub(crate) mod sockets;
pub(crate) mod transfer;

use std::path::Path;

use anyhow::Result;
use tailhunt_store::Store;

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
        Command::Diagnose(a) => diagnose::run(cli, a),
        Command::Pcap(a) => pcap::run_files(cli, a),
        Command::Capture(a) => pcap::run_live(cli, a),
        Command::Runq(a) => runq::run(cli, a),
        Command::Lab(l) => match &l.command {
            LabCommand::Synth(a) => lab::synth(cli, a),
            LabCommand::Link(a) => lab::link(cli, a),
        },
        Command::Transfer(a) => transfer::run(cli, a),
        Command::Sockets(a) => sockets::run(cli, a),
        Command::Hunt(a) => hunt::run(cli, a),
    }
}

/// Opens the store for reading: a missing file is an error, not a new empty store, and a store
/// this user may not write is opened read-only.
fn open_existing(db: &Path) -> Result<Store> {
    Ok(Store::open_for_reading(db)?)
}
