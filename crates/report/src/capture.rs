//! `tailhunt pcap` and `tailhunt capture`: the capture document and its terminal rendering.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;
use tailhunt_analyze::{Distribution, SampleTally};
use tailhunt_model::evidence::capture::{
    CaptureReport, FlowSummary, InputReport, InputStatus, LinkTypeSummary, MatchReport,
};
use tailhunt_model::{format_duration_ns, Finding, RunStatus, SeriesKind};
use tailhunt_store::{SeriesInfo, Store, StoreError};

use crate::terminal::{render_findings, render_time, table, thousands};

/// Request latency of one server port.
#[derive(Debug, Clone, Serialize)]
pub struct PortLatency {
    /// Series (`latency{server_port=80}`).
    pub series: String,
    /// Server port.
    pub server_port: u16,
    /// Exchanges answered.
    pub answered: u64,
    /// Requests without a response before the connection ended.
    pub unanswered: u64,
    /// p50, ns.
    pub p50_ns: Option<u64>,
    /// p99, ns.
    pub p99_ns: Option<u64>,
    /// Largest, ns.
    pub max_ns: Option<u64>,
    /// p50 of the server's own time, ns.
    pub server_p50_ns: Option<u64>,
    /// p99 of the server's own time, ns.
    pub server_p99_ns: Option<u64>,
}

/// Request latency per server port of a stored capture run, from its `latency{server_port}`
/// and `server_time{server_port}` series, most answered first.
pub fn port_latencies(store: &Store, run_id: &str) -> Result<Vec<PortLatency>, StoreError> {
    let mut latency = Vec::new();
    let mut server = BTreeMap::new();
    for info in store.series(run_id)? {
        let Some(port) = info
            .labels
            .get("server_port")
            .and_then(|p| p.parse::<u16>().ok())
        else {
            continue;
        };
        match info.name.as_str() {
            "latency" => latency.push((
                info.display_name.clone(),
                port,
                info.count,
                distribution(store, &info)?,
            )),
            "server_time" => {
                server.insert(port, distribution(store, &info)?);
            }
            _ => {}
        }
    }
    let mut ports: Vec<PortLatency> = latency
        .iter()
        .map(|(name, port, count, d)| {
            let s = server.get(port);
            PortLatency {
                series: name.clone(),
                server_port: *port,
                answered: d.count(),
                unanswered: count.saturating_sub(d.count()),
                p50_ns: d.quantile(0.5),
                p99_ns: d.quantile(0.99),
                max_ns: d.quantile(1.0),
                server_p50_ns: s.and_then(|s| s.quantile(0.5)),
                server_p99_ns: s.and_then(|s| s.quantile(0.99)),
            }
        })
        .collect();
    ports.sort_by_key(|p| std::cmp::Reverse(p.answered));
    Ok(ports)
}

/// The answered requests' distribution of a stored series; a sample series read a block at a
/// time (a capture of 100,000 exchanges held 4 MB of samples per series to keep 0.8 MB of
/// latencies).
fn distribution(store: &Store, info: &SeriesInfo) -> Result<Distribution, StoreError> {
    if info.kind != SeriesKind::Samples {
        return Ok(Distribution::from_series(&store.load_series(info)?, true));
    }
    let mut tally = SampleTally::new(true);
    store.each_sample_block(info.id, &mut |s| tally.add(s))?;
    Ok(tally.finish())
}

/// The capture document.
#[derive(Debug, Clone, Serialize)]
pub struct CaptureDoc {
    /// Run id.
    pub run_id: String,
    /// `complete`, or `partial` when the input stopped early.
    pub status: RunStatus,
    /// Inputs (files, or `live:IFACE`).
    pub inputs: Vec<String>,
    /// Why the pass stopped before the inputs' end, when it did (Ctrl-C).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// What became of each input: read, empty (skipped), cut, unread, not reached.
    pub files: Vec<InputReport>,
    /// Link types the decoder does not read, over all inputs: frames and files.
    pub link_types_not_analysed: Vec<LinkTypeSummary>,
    /// The analysis.
    pub report: CaptureReport,
    /// Request latency per server port.
    pub ports: Vec<PortLatency>,
    /// Detector findings.
    pub findings: Vec<Finding>,
    /// Detectors that ran.
    pub detectors: Vec<String>,
    /// Rows shown per table in text output.
    #[serde(skip)]
    pub top: usize,
    /// `--match OTHER`: this capture's flows paired with the other capture's, per hop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matching: Option<MatchReport>,
}

fn opt_ns(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| format_duration_ns(v as f64))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0}%", v * 100.0))
}

fn mbit(bytes: u64, bin_ns: i64) -> String {
    format!("{:.1}", bytes as f64 * 8.0 / (bin_ns as f64 / 1e9) / 1e6)
}

/// Renders a capture document.
pub fn render_capture(d: &CaptureDoc) -> String {
    let r = &d.report;
    let mut out = String::new();
    let span = (r.last_ns - r.first_ns).max(0);
    let _ = writeln!(
        out,
        "run {} ({}): {} packets, {} bytes over {} from {}; {} flows{}",
        d.run_id,
        d.status.name(),
        thousands(r.packets),
        thousands(r.wire_bytes),
        format_duration_ns(span as f64),
        render_time(r.first_ns),
        thousands(r.flow_count()),
        if r.out_of_order > 0 {
            format!(", {} out-of-order timestamps", r.out_of_order)
        } else {
            String::new()
        }
    );
    if let Some(s) = &d.stopped {
        let _ = writeln!(
            out,
            "stopped early: {s} (what was read is analysed and kept)"
        );
    }
    render_inputs(d, &mut out);
    let bin = format_duration_ns(r.bin_ns as f64);
    let _ = writeln!(
        out,
        "\nbandwidth per {bin} bin{}:",
        r.link_rate_bps.map_or(
            " (no --link-rate: utilisation unknown)".into(),
            |l| format!(", link {:.0} Mbit/s", l as f64 / 1e6)
        )
    );
    let rows: Vec<Vec<String>> = r
        .channels
        .iter()
        .take(d.top)
        .map(|c| {
            vec![
                format!("{} {}", c.dir.name(), c.host),
                thousands(c.bytes),
                mbit(c.peak_bin_bytes, r.bin_ns),
                pct(c.peak_utilisation),
                pct(c.max_second_utilisation),
                format_duration_ns(c.time_above_ns as f64),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "channel",
            "bytes",
            "peak Mbit/s",
            "peak",
            "busiest 1s",
            "time in bursts",
        ],
        &rows,
        "lrrrrr",
    ));
    if !r.bursts.is_empty() {
        let _ = writeln!(out, "\n{} burst episode(s):", r.bursts.len());
        let rows: Vec<Vec<String>> = r
            .bursts
            .iter()
            .take(d.top)
            .map(|b| {
                vec![
                    render_time(b.start_ns)
                        + &format!("+{:03}ms", (b.start_ns % 1_000_000_000) / 1_000_000),
                    format!("{} {}", b.dir.name(), b.host),
                    format_duration_ns((b.end_ns - b.start_ns) as f64),
                    pct(b.peak_utilisation),
                    pct(b.second_utilisation),
                    burst_sources(b),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "start",
                "channel",
                "length",
                "peak",
                "its 1s avg",
                "sources (sender)",
            ],
            &rows,
            "llrrrl",
        ));
    }
    if !d.ports.is_empty() {
        out.push_str("\nrequest latency (data turns, first request byte -> last response byte):\n");
        let rows: Vec<Vec<String>> = d
            .ports
            .iter()
            .map(|p| {
                vec![
                    p.server_port.to_string(),
                    thousands(p.answered),
                    thousands(p.unanswered),
                    opt_ns(p.p50_ns),
                    opt_ns(p.p99_ns),
                    opt_ns(p.max_ns),
                    opt_ns(p.server_p50_ns),
                    opt_ns(p.server_p99_ns),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "port",
                "answered",
                "unanswered",
                "p50",
                "p99",
                "max",
                "server p50",
                "server p99",
            ],
            &rows,
            "rrrrrrrr",
        ));
    }
    render_flows(r, &d.run_id, d.top, &mut out);
    if let Some(m) = &d.matching {
        render_matching(m, d.top, &mut out);
    }
    let _ = writeln!(out, "\ndetectors: {}", d.detectors.join(", "));
    if d.findings.is_empty() {
        out.push_str("no findings: none of these detectors sees its cause in this capture\n");
    }
    render_findings(&d.findings, &mut out);
    out
}

/// Inputs that were not read whole (and how many were, when there are several), then the
/// frames not analysed: by reason, and by link type.
fn render_inputs(d: &CaptureDoc, out: &mut String) {
    render_files(d, out);
    // Frames of unknown link types are named by link type below, not as a bare count.
    let parts: Vec<String> = d
        .report
        .skipped
        .iter()
        .filter(|(k, _)| k.as_str() != "unknown-link" || d.link_types_not_analysed.is_empty())
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    if !parts.is_empty() {
        let _ = writeln!(out, "not analysed: {}", parts.join(", "));
    }
    for l in &d.link_types_not_analysed {
        let _ = writeln!(
            out,
            "{} (tailhunt reads Ethernet, Linux cooked v1/v2, raw IP and BSD loopback)",
            l.describe()
        );
    }
}

fn render_files(d: &CaptureDoc, out: &mut String) {
    let whole = d
        .files
        .iter()
        .filter(|f| f.status == InputStatus::Read)
        .count();
    if d.files.len() > 1 {
        let _ = writeln!(
            out,
            "{} files read in order as one capture: {whole} read whole",
            d.files.len()
        );
    }
    for f in d.files.iter().filter(|f| f.status != InputStatus::Read) {
        let why = f.why.as_deref().unwrap_or("");
        let line = match f.status {
            InputStatus::Empty => {
                format!("skipped: {why}, as a rotated set's newest file often is")
            }
            InputStatus::Cut => why.to_string(),
            InputStatus::Unread => format!("not read: {why}"),
            InputStatus::Stopped => {
                format!("'{}': stopped after {} frames", f.name, thousands(f.frames))
            }
            InputStatus::NotReached => format!("'{}': not read (stopped before its turn)", f.name),
            InputStatus::Read => continue,
        };
        let _ = writeln!(out, "{line}");
    }
}

fn render_flows(r: &CaptureReport, run_id: &str, top: usize, out: &mut String) {
    let mut tcp: Vec<&FlowSummary> = r.flows.iter().filter(|f| f.tcp.is_some()).collect();
    if tcp.is_empty() {
        return;
    }
    tcp.sort_by_key(|f| {
        std::cmp::Reverse(f.client_to_server.payload_bytes + f.server_to_client.payload_bytes)
    });
    let all = r.tcp_flow_count();
    let _ = writeln!(
        out,
        "\nTCP flows (largest {} of {}{}):",
        top.min(tcp.len()),
        thousands(all),
        if r.flows_cut() {
            format!("; every flow: tailhunt export {run_id} --flows")
        } else {
            String::new()
        }
    );
    let rows: Vec<Vec<String>> = tcp
        .iter()
        .take(top)
        .filter_map(|f| {
            let t = f.tcp.as_ref()?;
            let hs = t.handshake.map_or("-".into(), |h| {
                format!(
                    "{}/{}",
                    opt_ns(h.server_leg_ns.map(|v| v as u64)),
                    opt_ns(h.client_leg_ns.map(|v| v as u64))
                )
            });
            let main = if t.main_sender == "server" {
                &t.server
            } else {
                &t.client
            };
            let states = main.states.map_or("-".into(), |s| {
                format!(
                    "rwnd {:.0}% zero {:.0}% cong {:.0}% app {:.0}% idle {:.0}%",
                    s.receive_window_limited * 100.0,
                    s.zero_window * 100.0,
                    s.congestion_or_loss_limited * 100.0,
                    s.application_limited * 100.0,
                    s.idle * 100.0
                )
            });
            let rt = t.client.retransmissions.total() + t.server.retransmissions.total();
            Some(vec![
                f.id.to_string(),
                format!("{} -> {}", f.name.client, f.name.server),
                thousands(f.client_to_server.payload_bytes),
                thousands(f.server_to_client.payload_bytes),
                hs,
                t.throughput_bps
                    .map_or("-".into(), |b| format!("{:.1}", b / 1e6)),
                rt.to_string(),
                states,
                t.close.as_ref().map_or("open".into(), |c| c.note.clone()),
            ])
        })
        .collect();
    out.push_str(&table(
        &[
            "id",
            "client -> server",
            "bytes up",
            "bytes down",
            "handshake srv/cli",
            "Mbit/s",
            "retx",
            "main sender's time",
            "end",
        ],
        &rows,
        "rlrrrrrll",
    ));
}

/// `--match`: one row per flow pair and hop direction, then where closes came from.
fn render_matching(m: &MatchReport, top: usize, out: &mut String) {
    let off = m
        .clock_offset_ns
        .map_or("unknown".into(), |o| format!("{:.3} ms", o as f64 / 1e6));
    let _ = writeln!(
        out,
        "\nmatched with the other capture: {} of {} packets, {} flow pairs ({} flows only here, {} only there); clock offset {off} (other minus this; {})",
        thousands(m.matched_packets),
        thousands(m.packets_a),
        m.flows.len(),
        m.unmatched_flows_a,
        m.unmatched_flows_b,
        m.clock_offset_method
    );
    let ns = |v: Option<i64>| v.map_or("-".into(), |v| format_duration_ns(v as f64));
    let mut rows = Vec::new();
    for f in m.flows.iter().take(top) {
        let nat = if f.nat {
            format!(" (there {} -> {})", f.b.client, f.b.server)
        } else {
            String::new()
        };
        for (dir, h) in [("here->there", &f.a_to_b), ("there->here", &f.b_to_a)] {
            let d = h.delay.as_ref();
            rows.push(vec![
                format!("{} -> {}{nat}", f.a.client, f.a.server),
                format!("{dir} from {}", h.sender),
                thousands(h.matched),
                thousands(h.lost),
                thousands(h.appeared),
                ns(d.map(|d| d.p50_ns)),
                ns(d.map(|d| d.p99_ns)),
                ns(d.map(|d| d.max_ns)),
            ]);
        }
    }
    out.push_str(&table(
        &[
            "flow here",
            "hop",
            "matched",
            "lost",
            "appeared",
            "delay p50",
            "p99",
            "max",
        ],
        &rows,
        "llrrrrrr",
    ));
    for f in m.flows.iter().take(top) {
        for c in f.closes.iter().filter(|c| c.from_middlebox) {
            let _ = writeln!(
                out,
                "{} claiming to be from {} ({} -> {}) was seen only downstream: sent by a middlebox between the captures",
                c.kind.to_uppercase(), c.sender, f.a.client, f.a.server
            );
        }
    }
    for n in &m.notes {
        let _ = writeln!(out, "note: {n}");
    }
}

/// A burst's sources for its table row: the three largest with their share and sending
/// endpoint, then how many more and the other traffic that crossed the link meanwhile.
fn burst_sources(b: &tailhunt_model::evidence::capture::Burst) -> String {
    let sources: Vec<_> = b.sources().collect();
    let mut parts: Vec<String> = sources
        .iter()
        .take(3)
        .map(|f| {
            if f.sender.is_empty() {
                format!("{} {:.0}%", f.flow, f.share * 100.0)
            } else {
                format!("{} {:.0}% ({})", f.flow, f.share * 100.0, f.sender)
            }
        })
        .collect();
    if sources.len() > 3 {
        parts.push(format!("{} more", sources.len() - 3));
    }
    if b.other_flows > 0 {
        parts.push(format!(
            "others {:.0}% in {} flow direction(s)",
            b.other_bytes as f64 * 100.0 / b.bytes.max(1) as f64,
            b.other_flows
        ));
    }
    parts.join("; ")
}
