//! One module per subcommand.

mod analyze;
pub(crate) mod diagnose;
mod export;
pub(crate) mod import;
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
use tailhunt_store::{SeriesInfo, Store};

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
    }
}

/// Opens the store for reading: a missing file is an error, not a new empty store, and a store
/// this user may not write is opened read-only.
fn open_existing(db: &Path) -> Result<Store> {
    Ok(Store::open_for_reading(db)?)
}

/// The series of `run` selected by `--series` (all when none given); an error names the
/// series that exist when a selection matches nothing.
fn select_series(store: &Store, run: &str, wanted: &[String]) -> Result<Vec<SeriesInfo>> {
    let all = store.series(run)?;
    if all.is_empty() {
        anyhow::bail!("run {run} has no series (its writer stopped before writing any)");
    }
    if wanted.is_empty() {
        // Warm-up series are kept but not analysed unless asked for by name.
        // Breakdown parts (network, server_app, ...) are shown with their latency series.
        let measured: Vec<SeriesInfo> = all
            .iter()
            .filter(|s| s.labels.get("phase").is_none_or(|p| p != "warmup"))
            .cloned()
            .collect();
        // Latency distributions first: `latency`, or a source's own (`runq_latency`); counts
        // and readings over time (`runq_waits`, `cpu_throttled_ns`) only when asked for.
        let latency: Vec<SeriesInfo> = measured
            .iter()
            .filter(|s| s.name == "latency" || s.name.ends_with("_latency"))
            .cloned()
            .collect();
        return Ok(if !latency.is_empty() {
            latency
        } else if measured.is_empty() {
            all
        } else {
            measured
        });
    }
    let picked: Vec<SeriesInfo> = all
        .iter()
        .filter(|s| wanted.iter().any(|w| *w == s.name || *w == s.display_name))
        .cloned()
        .collect();
    if picked.is_empty() {
        let names: Vec<&str> = all.iter().map(|s| s.display_name.as_str()).collect();
        anyhow::bail!(
            "run {run} has no series named {}; it has: {}",
            wanted.join(", "),
            names.join(", ")
        );
    }
    Ok(picked)
}

/// A duration flag (`--duration 10s`), with an error naming the flag.
fn duration_flag(flag: &str, text: &str) -> Result<std::time::Duration> {
    let ns = tailhunt_model::parse_duration_ns(text, None).map_err(|e| {
        anyhow::anyhow!("{flag} '{text}': {e} (write a duration such as 10s or 500ms)")
    })?;
    Ok(std::time::Duration::from_nanos(ns as u64))
}

/// Splits `RUN[:SERIES]`.
fn split_run_series(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once(':') {
        Some((r, s)) if !s.is_empty() => (r, Some(s)),
        Some((r, _)) => (r, None),
        None => (spec, None),
    }
}
