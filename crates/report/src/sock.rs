//! Documents and text for the socket commands: `tailhunt transfer` and `tailhunt sockets`.
//!
//! In: the sources' reports (`tailhunt_sock`), the run id and the findings. Out: documents
//! that serialise to the `--json` output (`schema/transfer.schema.json`,
//! `schema/sockets.schema.json`) and their text rendering.

use std::fmt::Write;

use serde::Serialize;
use tailhunt_model::evidence::sock::{ConnectionCounts, SocketsReport, TransferReport};
use tailhunt_model::Finding;

use crate::terminal::{render_duration, render_findings};

/// One transfer, from one end.
#[derive(Debug, Clone, Serialize)]
pub struct TransferDoc {
    /// The stored run.
    pub run_id: String,
    /// The report.
    #[serde(flatten)]
    pub report: TransferReport,
    /// Achieved / window bound.
    pub bound_ratio: Option<f64>,
    /// What the detectors found.
    pub findings: Vec<Finding>,
}

/// What `transfer server` served before it stopped.
#[derive(Debug, Clone, Serialize)]
pub struct TransferServerDoc {
    /// The address it listened on.
    pub listen: String,
    /// One document per connection, in order.
    pub connections: Vec<TransferDoc>,
    /// Connections that failed before a transfer started (not the protocol, ...).
    pub errors: Vec<String>,
}

/// `tailhunt sockets`.
#[derive(Debug, Clone, Serialize)]
pub struct SocketsDoc {
    /// The stored run.
    pub run_id: String,
    /// The report.
    #[serde(flatten)]
    pub report: SocketsReport,
    /// What the detectors found.
    pub findings: Vec<Finding>,
}

fn mbit(bps: f64) -> String {
    format!("{:.2} Mbit/s", bps / 1e6)
}

fn kib(b: f64) -> String {
    format!("{:.1} KiB", b / 1024.0)
}

/// Text for one transfer.
pub fn render_transfer(d: &TransferDoc) -> String {
    let r = &d.report;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "transfer {} ({}): {} pid {} ({}), run {}",
        r.flow,
        r.role,
        r.outcome.name(),
        r.pid,
        r.comm,
        d.run_id
    );
    let _ = writeln!(
        out,
        "  {} of {} bytes in {}: {}",
        r.bytes_transferred,
        r.bytes_requested,
        render_duration(r.transfer_ns),
        mbit(r.throughput_bps)
    );
    if let Some(e) = &r.error {
        let _ = writeln!(out, "  {e}");
    }
    let buf = |req: Option<u32>, eff: u32| match req {
        Some(n) => format!("{n} asked, {eff} effective (autotuning off)"),
        None => format!("autotuned ({eff} now)"),
    };
    let _ = writeln!(
        out,
        "  SO_RCVBUF {}; SO_SNDBUF {}; TCP_NODELAY {}",
        buf(r.rcvbuf_requested, r.rcvbuf_effective),
        buf(r.sndbuf_requested, r.sndbuf_effective),
        r.nodelay
    );
    if let (Some(w), Some(rtt), Some(b)) = (r.window_bytes, r.rtt_ns, r.window_bound_bps) {
        let _ = writeln!(
            out,
            "  window {} / RTT {} = {} bound; achieved {:.0}% of it",
            kib(w),
            render_duration(rtt),
            mbit(b),
            d.bound_ratio.unwrap_or(0.0) * 100.0
        );
    }
    let share = |s: Option<f64>| s.map_or_else(|| "?".into(), |v| format!("{:.0}%", v * 100.0));
    let view = r.sender.as_ref().map(|s| &s.tcp).unwrap_or(&r.tcp);
    let whose = if r.sender.is_some() || r.role == "server" {
        "sender"
    } else {
        "this end"
    };
    let _ = writeln!(
        out,
        "  {whose}: rwnd-limited {} and sndbuf-limited {} of busy time; cwnd up to {} segments; {} retransmissions",
        share(view.rwnd_limited_share),
        share(view.sndbuf_limited_share),
        view.snd_cwnd_max,
        view.total_retrans
    );
    let _ = writeln!(
        out,
        "  {} TCP_INFO readings; {}",
        r.tcp.readings,
        r.kernel.cite_window()
    );
    render_findings(&d.findings, &mut out);
    out
}

/// Text for a server's connections.
pub fn render_transfer_server(d: &TransferServerDoc) -> String {
    let mut out = format!(
        "served {} connection(s) on {}\n",
        d.connections.len(),
        d.listen
    );
    for c in &d.connections {
        out.push_str(&render_transfer(c));
    }
    for e in &d.errors {
        let _ = writeln!(out, "  error: {e}");
    }
    out
}

/// How many connections had readings and are listed, and why the others are not.
fn render_counts(r: &SocketsReport, out: &mut String) {
    // Runs stored before the counts existed: count now.
    let c = if r.counts.seen == r.connections.len() as u64 {
        r.counts.clone()
    } else {
        ConnectionCounts::of(&r.connections)
    };
    let without = c.seen - c.with_readings;
    let _ = write!(
        out,
        "  {} with TCP_INFO readings: {} moved data or were flagged (listed), {} idle",
        c.with_readings,
        c.active,
        c.with_readings - c.active
    );
    if without > 0 {
        let states: Vec<String> = c
            .without_readings
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        let _ = write!(
            out,
            "; {without} without a reading ({}: the kernel keeps no TCP_INFO for TIME_WAIT and SYN_RECV sockets)",
            states.join(", ")
        );
    }
    out.push('\n');
}

/// Text for `tailhunt sockets`.
pub fn render_sockets(d: &SocketsDoc) -> String {
    let r = &d.report;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sampled {} connection(s) in {} every {} for {} ({} rounds), run {}",
        r.connections.len(),
        r.namespaces.join(", "),
        render_duration(r.interval_ns),
        render_duration(r.duration_ns),
        r.rounds,
        d.run_id
    );
    render_counts(r, &mut out);
    for c in r.connections.iter().filter(|c| c.is_active()) {
        let owner = c
            .owner
            .as_ref()
            .map_or_else(|| "owner unknown".into(), |o| o.describe());
        let _ = writeln!(
            out,
            "  [{}] {} {}: sent {} B, received {} B{}{}",
            c.netns,
            c.flow,
            owner,
            c.bytes_sent,
            c.bytes_received,
            c.throughput_bps
                .map_or_else(String::new, |t| format!(", {}", mbit(t))),
            if c.flags.is_empty() {
                String::new()
            } else {
                format!(" — {}", c.flags.join(", "))
            }
        );
        if let Some(p) = &c.peer_rcvbuf_set {
            let _ = writeln!(out, "      receiver's buffer pinned: {}", p.describe());
        }
    }
    if let Some(a) = &r.audit {
        let cost = match (a.program_runs, a.program_run_time_ns) {
            (Some(n), Some(ns)) if n > 0 => format!(
                "; its program ran {n} times, {:.0} ns each",
                ns as f64 / n as f64
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "setsockopt audit ({}): {} call(s){}{cost}",
            a.attach,
            a.events.len(),
            if a.lost > 0 {
                format!(" ({} more lost: the ring buffer was full)", a.lost)
            } else {
                String::new()
            }
        );
        for e in a.events.iter().take(50) {
            let _ = writeln!(out, "  {}", e.describe());
        }
    }
    render_findings(&d.findings, &mut out);
    out
}
