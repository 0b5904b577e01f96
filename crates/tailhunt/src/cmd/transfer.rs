//! `tailhunt transfer server|client`: the bulk-transfer test, stored as runs of kind
//! `transfer` (one per end and connection) with each end's TCP_INFO series and findings.

use anyhow::Result;
use std::net::SocketAddr;
use std::time::Duration;
use tailhunt_model::RunKind;
use tailhunt_report::sock::{
    render_transfer, render_transfer_server, TransferDoc, TransferServerDoc,
};
use tailhunt_sock::transfer::{self, Transfer, TransferOptions};
use tailhunt_store::Store;

use crate::cli::{
    Cli, SocketOptionArgs, TransferArgs, TransferClientArgs, TransferServerArgs, TransferSide,
};
use crate::output;
use crate::signals;

pub fn run(cli: &Cli, a: &TransferArgs) -> Result<()> {
    match &a.side {
        TransferSide::Server(s) => server(cli, s),
        TransferSide::Client(c) => client(cli, c),
    }
}

/// A socket buffer size (`64k` = 65536, as `dd` counts), from 1 byte to 2 GiB (the kernel's
/// `int`).
fn buffer_size(flag: &str, n: u64) -> Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|n| *n > 0 && *n <= i32::MAX as u32)
        .ok_or_else(|| anyhow::anyhow!("{flag} {n}: a socket buffer is from 1 byte to 2 GiB"))
}

fn options(o: &SocketOptionArgs, timeout: Option<Duration>) -> Result<TransferOptions> {
    // Each end keeps a TCP_INFO reading per interval for the whole transfer.
    if o.sample_interval < Duration::from_millis(1) {
        anyhow::bail!(
            "--sample-interval {}: give 1ms or more (each end keeps a reading per interval for the whole transfer)",
            crate::flags::show(o.sample_interval)
        );
    }
    Ok(TransferOptions {
        rcvbuf: o.rcvbuf.map(|n| buffer_size("--rcvbuf", n)).transpose()?,
        sndbuf: o.sndbuf.map(|n| buffer_size("--sndbuf", n)).transpose()?,
        nodelay: o.nodelay,
        sample_interval: o.sample_interval,
        timeout,
    })
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
    let mut run = store.begin_run(RunKind::Transfer, params, t.origin)?;
    t.record(&mut run)
        .map_err(|e| anyhow::anyhow!("storing the transfer: {e}"))?;
    let run_id = run.finish(serde_json::json!({}))?;
    let diagnosis = tailhunt_diagnose::diagnose_and_store(store, &run_id)?;
    Ok(TransferDoc {
        run_id,
        bound_ratio: r.bound_ratio(),
        report: r.clone(),
        findings: diagnosis.findings,
    })
}

fn client(cli: &Cli, a: &TransferClientArgs) -> Result<()> {
    let opts = options(&a.opts, a.timeout)?;
    let server = addr("ADDR", &a.server)?;
    let bytes = a.bytes;
    let mut db = crate::cmd::open_tagged(cli)?;
    let t = transfer::download(server, bytes, &opts)?;
    let doc = store(&mut db, &t)?;
    output::print(cli.json, &doc, render_transfer)
}

fn server(cli: &Cli, a: &TransferServerArgs) -> Result<()> {
    let opts = options(&a.opts, None)?;
    let listen = addr("--listen", &a.listen)?;
    let mut db = crate::cmd::open_tagged(cli)?;
    let server = transfer::Server::bind(listen, opts)?;
    let local = server.local_addr()?;
    tell!("transfer server listening on {local}");
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
                tell!(
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
                tell!("connection failed: {e}");
                doc.errors.push(e.to_string());
            }
        }
    }
    output::print(cli.json, &doc, render_transfer_server)
}
