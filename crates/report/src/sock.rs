//! Documents and text for the socket commands: `tailhunt transfer` and `tailhunt sockets`.
//!
//! In: the sources' reports (`tailhunt_sock`), the run id and the findings. Out: documents
//! that serialise to the `--json` output (`schema/transfer.schema.json`,
//! `schema/sockets.schema.json`) and their text rendering.

use std::fmt::Write;

use serde::Serialize;
use tailhunt_model::evidence::sock::{
    ConnectionCounts, SocketsReport, SockoptEvent, TransferReport,
};
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
        for line in audit_lines(&a.events).iter().take(AUDIT_LINES) {
            let _ = writeln!(out, "  {line}");
        }
    }
    render_findings(&d.findings, &mut out);
    out
}

/// Lines of the audit the terminal shows at most (the JSON keeps every call).
const AUDIT_LINES: usize = 50;

/// Options that size a socket's buffers or clamp its window: what limits a transfer (the
/// receive-window cause), listed before the others.
const BUFFER_OPTIONS: [&str; 5] = [
    "SO_RCVBUF",
    "SO_RCVBUFFORCE",
    "SO_SNDBUF",
    "SO_SNDBUFFORCE",
    "TCP_WINDOW_CLAMP",
];

/// The audit's calls for a reader: the calls of one process setting one option to one value
/// make one line with their count and peers (a server sets TCP_NODELAY on every connection it
/// accepts: one line per call buried the one SO_RCVBUF that mattered), buffer options first,
/// otherwise in the order of their first call.
fn audit_lines(events: &[SockoptEvent]) -> Vec<String> {
    let mut groups: Vec<(&SockoptEvent, Vec<&str>, usize)> = Vec::new();
    for e in events {
        let same = |g: &&mut (&SockoptEvent, Vec<&str>, usize)| {
            (g.0.pid, &g.0.comm, &g.0.option, g.0.value) == (e.pid, &e.comm, &e.option, e.value)
        };
        match groups.iter_mut().find(same) {
            Some(g) => {
                g.2 += 1;
                if let Some(p) = e.peer.as_deref() {
                    if !g.1.contains(&p) {
                        g.1.push(p);
                    }
                }
            }
            None => groups.push((e, e.peer.as_deref().into_iter().collect(), 1)),
        }
    }
    // Stable: within each kind the order of first calls is kept.
    groups.sort_by_key(|g| !BUFFER_OPTIONS.contains(&g.0.option.as_str()));
    groups
        .into_iter()
        .map(|(first, peers, calls)| {
            if calls == 1 {
                return first.describe();
            }
            let value = first.value.map_or_else(|| "?".into(), |v| v.to_string());
            let to = match peers.as_slice() {
                [] => String::new(),
                [one] => format!(" to {one}"),
                [a, b] => format!(" to {a} and {b}"),
                [a, b, rest @ ..] => format!(" to {a}, {b} and {} more", rest.len()),
            };
            format!(
                "pid {} ({}) set {}={value} {calls} times, on sockets{to}",
                first.pid, first.comm, first.option
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(pid: u32, option: &str, value: i64, peer: Option<&str>) -> SockoptEvent {
        SockoptEvent {
            pid,
            comm: format!("app{pid}"),
            option: option.into(),
            value: Some(value),
            peer: peer.map(Into::into),
            t_ns: 0,
            tid: pid,
            fd: 0,
            inode: 0,
        }
    }

    /// Forty TCP_NODELAY calls of a server are one line; the one SO_RCVBUF call, made after
    /// them, comes first; a different value is its own line.
    #[test]
    fn audit_groups_repeated_calls_and_lists_buffer_options_first() {
        let mut events: Vec<SockoptEvent> = (0..40)
            .map(|i| {
                call(
                    7,
                    "TCP_NODELAY",
                    1,
                    Some(&format!("10.0.0.2:{}", 40_000 + i)),
                )
            })
            .collect();
        events.push(call(9, "SO_RCVBUF", 65_536, Some("10.0.0.3:9092")));
        events.push(call(7, "TCP_NODELAY", 0, None));
        events.push(call(7, "TCP_NODELAY", 1, Some("10.0.0.2:40000")));
        assert_eq!(
            audit_lines(&events),
            vec![
                "pid 9 (app9) set SO_RCVBUF=65536 on the socket to 10.0.0.3:9092".to_string(),
                "pid 7 (app7) set TCP_NODELAY=1 41 times, on sockets to 10.0.0.2:40000, \
                 10.0.0.2:40001 and 38 more"
                    .to_string(),
                "pid 7 (app7) set TCP_NODELAY=0 on fd 0".to_string(),
            ]
        );
    }
}
