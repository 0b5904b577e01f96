//! `tailhunt transfer server|client`: the bulk-transfer test, stored as runs of kind
//! `transfer` (one per end and connection) with each end's TCP_INFO series and findings.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::net::SocketAddr;
use tailhunt_model::{ClockOrigin, RunKind};
use tailhunt_report::sock::{
    render_transfer, render_transfer_server, TransferDoc, TransferServerDoc,
};
use tailhunt_sock::transfer::{self, Transfer, TransferOptions};
use tailhunt_store::Store;

use crate::cli::Cli;
use crate::output;
use crate::signals;

/// `tailhunt transfer`.
#[derive(Debug, Args)]
pub struct TransferArgs {
    /// Which end.
    #[command(subcommand)]
    pub side: TransferSide,
}

/// The two ends.
#[derive(Debug, Subcommand)]
pub enum TransferSide {
    /// Listen and send each client the bytes it asks for (one connection at a time).
    Server(TransferServerArgs),
    /// Connect, download, report (and give up after --timeout like a real client).
    Client(TransferClientArgs),
}

/// Options either end may set.
#[derive(Debug, Args)]
pub struct SocketOptionArgs {
    /// SO_RCVBUF to set before connect/listen (64k = 64KiB = 65536, 64KB = 64000). Setting it turns
    /// the kernel's receive-buffer autotuning off for the socket; leave it out to autotune.
    #[arg(long, value_name = "SIZE")]
    pub rcvbuf: Option<String>,
    /// SO_SNDBUF to set (same units); leave it out to autotune.
    #[arg(long, value_name = "SIZE")]
    pub sndbuf: Option<String>,
    /// Set TCP_NODELAY.
    #[arg(long)]
    pub nodelay: bool,
    /// How often each end reads its socket's TCP_INFO.
    #[arg(long, default_value = "5ms", value_name = "D")]
    pub sample_interval: String,
}

/// `tailhunt transfer server`.
#[derive(Debug, Args)]
pub struct TransferServerArgs {
    /// Address to listen on (port 0 picks one; it is printed on stderr).
    #[arg(long, default_value = "0.0.0.0:7400", value_name = "ADDR")]
    pub listen: String,
    /// Serve this many connections, then exit (default: until Ctrl-C).
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    #[command(flatten)]
    pub opts: SocketOptionArgs,
}

/// `tailhunt transfer client`.
#[derive(Debug, Args)]
pub struct TransferClientArgs {
    /// The server, `HOST:PORT`.
    #[arg(value_name = "ADDR")]
    pub server: String,
    /// Bytes to download (10M = 10 MiB = 10,485,760; 10MB = 10,000,000: sizes count as `dd` does).
    #[arg(long, default_value = "10MB", value_name = "SIZE")]
    pub bytes: String,
    /// Give up this long after the request and close the connection, as a client's request
    /// timeout does.
    #[arg(long, value_name = "D")]
    pub timeout: Option<String>,
    #[command(flatten)]
    pub opts: SocketOptionArgs,
}

pub fn run(cli: &Cli, a: &TransferArgs) -> Result<()> {
    match &a.side {
        TransferSide::Server(s) => server(cli, s),
        TransferSide::Client(c) => client(cli, c),
    }
}

/// A socket buffer size (`64k` = 65536, as `dd` counts), from 1 byte to 2 GiB (the kernel's
/// `int`).
fn buffer_size(flag: &str, text: &str) -> Result<u32> {
    let n = tailhunt_model::units::parse_bytes(text).with_context(|| flag.to_string())?;
    u32::try_from(n)
        .ok()
        .filter(|n| *n > 0 && *n <= i32::MAX as u32)
        .ok_or_else(|| anyhow::anyhow!("{flag} '{text}': a socket buffer is from 1 byte to 2 GiB"))
}

fn options(o: &SocketOptionArgs, timeout: Option<&str>) -> Result<TransferOptions> {
    Ok(TransferOptions {
        rcvbuf: o
            .rcvbuf
            .as_deref()
            .map(|t| buffer_size("--rcvbuf", t))
            .transpose()?,
        sndbuf: o
            .sndbuf
            .as_deref()
            .map(|t| buffer_size("--sndbuf", t))
            .transpose()?,
        nodelay: o.nodelay,
        sample_interval: sample_interval(&o.sample_interval)?,
        timeout: timeout
            .map(|t| super::duration_flag("--timeout", t))
            .transpose()?,
    })
}

/// `--sample-interval`, at least 1 ms: each end keeps a TCP_INFO reading per interval for the
/// whole transfer.
fn sample_interval(text: &str) -> Result<std::time::Duration> {
    let d = super::duration_flag("--sample-interval", text)?;
    if d < std::time::Duration::from_millis(1) {
        anyhow::bail!(
            "--sample-interval {text}: give 1ms or more (each end keeps a reading per interval for the whole transfer)"
        );
    }
    Ok(d)
}

fn addr(flag: &str, text: &str) -> Result<SocketAddr> {
    text.parse().map_err(|_| {
        anyhow::anyhow!(
            "{flag} '{text}' is not IP:PORT: write it like 198.18.6.2:7400 or [::1]:7400"
        )
    })
}

/// Stores one end's transfer as a run and runs the detectors on it.
fn store(store: &mut Store, t: &Transfer) -> Result<TransferDoc> {
    let r = &t.report;
    let params = serde_json::json!({ "role": r.role, "flow": r.flow });
    let mut run = store.begin_run(RunKind::Transfer, params, ClockOrigin::now())?;
    t.record(&mut run)
        .map_err(|e| anyhow::anyhow!("storing the transfer: {e}"))?;
    let run_id = run.finish(serde_json::json!({}))?;
    let diagnosis = tailhunt_diagnose::diagnose_run(store, &run_id)?;
    tailhunt_diagnose::store_findings(store, &run_id, &diagnosis)?;
    Ok(TransferDoc {
        run_id,
        bound_ratio: r.bound_ratio(),
        report: r.clone(),
        findings: diagnosis.findings,
    })
}

fn client(cli: &Cli, a: &TransferClientArgs) -> Result<()> {
    let opts = options(&a.opts, a.timeout.as_deref())?;
    let server = addr("ADDR", &a.server)?;
    let bytes = tailhunt_model::units::parse_bytes(&a.bytes).context("--bytes")?;
    let mut db = Store::open(&cli.db)?;
    let t = transfer::download(server, bytes, &opts)?;
    let doc = store(&mut db, &t)?;
    output::print(cli.json, &doc, render_transfer)
}

fn server(cli: &Cli, a: &TransferServerArgs) -> Result<()> {
    let opts = options(&a.opts, None)?;
    let listen = addr("--listen", &a.listen)?;
    let mut db = Store::open(&cli.db)?;
    let server = transfer::Server::bind(listen, opts)?;
    let local = server.local_addr()?;
    eprintln!("transfer server listening on {local}");
    // A signal ends the server after the connection in progress; a second one ends it at once.
    signals::install();
    let mut doc = TransferServerDoc {
        listen: local.to_string(),
        connections: Vec::new(),
        errors: Vec::new(),
    };
    while a
        .count
        .is_none_or(|n| ((doc.connections.len() + doc.errors.len()) as u64) < n)
    {
        match server.serve_next(signals::flag()) {
            Ok(None) => break,
            Ok(Some(t)) => {
                let d = store(&mut db, &t)?;
                eprintln!(
                    "served {} -> {}: {} ({} bytes), run {}",
                    t.report.peer,
                    t.report.local,
                    t.report.outcome.name(),
                    t.report.bytes_transferred,
                    d.run_id
                );
                doc.connections.push(d);
            }
            Err(e) => {
                eprintln!("connection failed: {e}");
                doc.errors.push(e.to_string());
            }
        }
    }
    output::print(cli.json, &doc, render_transfer_server)
}
