//! `receive-window-limited` and `application-timeout`: a transfer held to rwnd/RTT, and the
//! client that gave up on it.
//!
//! The story (root cause #4): after a kernel upgrade a client that pinned SO_RCVBUF=64k got a
//! smaller receive window; a 10 MB cross-region read took 39 s instead of 22 s, the client's
//! 30 s request timeout fired, it sent FIN and answered the server's remaining data with RSTs.
//!
//! Evidence comes in one shape, [`WindowEvidence`], from whichever source saw the connection: a
//! capture (bytes in flight against the advertised window) or socket sampling (TCP_INFO's
//! `rwnd_limited` time). `receive-window-limited` fires when at least half of the sender's
//! busy time was limited by the receiver's window and the throughput is within 35% of
//! window/RTT. `application-timeout` fires when the side that closed did so a round number of
//! seconds after its request while the response was still arriving.

use std::collections::BTreeMap;

use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};
use tailhunt_pcap::analysis::FlowSummary;

/// Name of the window detector.
pub const WINDOW_DETECTOR: &str = "receive-window-limited";
/// Name of the timeout detector.
pub const TIMEOUT_DETECTOR: &str = "application-timeout";
const MIN_RWND_SHARE: f64 = 0.5;
const BOUND_TOLERANCE: f64 = 0.35;
/// Transfers smaller than this say little about windows.
const MIN_BYTES: u64 = 256 * 1024;

/// What any source knows about one connection's window.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowEvidence {
    /// The connection, `client -> server`.
    pub flow: String,
    /// `capture` or `tcp_info`.
    pub source: String,
    /// Payload bytes the main sender sent.
    pub bytes: u64,
    /// Share of its busy time limited by the receive window.
    pub rwnd_limited_share: f64,
    /// Achieved rate, bits/s.
    pub throughput_bps: f64,
    /// Mean advertised window, bytes.
    pub window_bytes: f64,
    /// Mean RTT, ns.
    pub rtt_ns: i64,
    /// Time range of the transfer.
    pub range_ns: Option<(i64, i64)>,
    /// The window scale had to be inferred (no SYN in the capture).
    pub scale_inferred: bool,
}

impl WindowEvidence {
    /// From a capture's flow summary (main sender's view).
    pub fn from_flow(f: &FlowSummary) -> Option<WindowEvidence> {
        let t = f.tcp.as_ref()?;
        let side = if t.main_sender == "server" {
            &t.server
        } else {
            &t.client
        };
        Some(WindowEvidence {
            flow: f.name.to_string(),
            source: "capture".into(),
            bytes: side.payload_bytes,
            rwnd_limited_share: t.rwnd_limited_share,
            throughput_bps: t.throughput_bps?,
            window_bytes: t.mean_window?,
            rtt_ns: t.path_rtt_ns?,
            range_ns: side.first_data_ns.zip(side.last_data_ns),
            scale_inferred: !t.wscale_from_syn,
        })
    }

    /// window / RTT, bits/s.
    pub fn bound_bps(&self) -> f64 {
        self.window_bytes * 8.0 / (self.rtt_ns.max(1) as f64 / 1e9)
    }
}

/// `receive-window-limited` over the evidence of every connection.
pub fn receive_window_limited(evidence: &[WindowEvidence]) -> Vec<Finding> {
    evidence
        .iter()
        .filter(|e| e.bytes >= MIN_BYTES && e.rwnd_limited_share >= MIN_RWND_SHARE)
        .filter(|e| (e.throughput_bps / e.bound_bps() - 1.0).abs() <= BOUND_TOLERANCE)
        .map(|e| {
            let mut values = BTreeMap::new();
            values.insert("rwnd_limited_share".into(), e.rwnd_limited_share);
            values.insert("throughput_bps".into(), e.throughput_bps);
            values.insert("window_bytes".into(), e.window_bytes);
            values.insert("rtt_ns".into(), e.rtt_ns as f64);
            values.insert("window_bound_bps".into(), e.bound_bps());
            values.insert("bytes".into(), e.bytes as f64);
            Finding {
                detector: WINDOW_DETECTOR.into(),
                verdict: Verdict::Detected,
                confidence: if e.scale_inferred { 0.6 } else { 0.9 },
                summary: format!(
                    "{}: the receiver's window ({:.0} KiB) limits the transfer {:.0}% of its busy time; it gets {:.1} Mbit/s, window/RTT ({}) allows {:.1} Mbit/s",
                    e.flow,
                    e.window_bytes / 1024.0,
                    e.rwnd_limited_share * 100.0,
                    e.throughput_bps / 1e6,
                    format_duration_ns(e.rtt_ns as f64),
                    e.bound_bps() / 1e6
                ),
                evidence: vec![Evidence {
                    series: format!("window ({})", e.source),
                    range_ns: e.range_ns,
                    values,
                    note: format!(
                        "bytes in flight sit at the advertised window{}",
                        if e.scale_inferred { " (window scale inferred: the SYN is not in the capture)" } else { "" }
                    ),
                }],
                fix: Some("let the kernel autotune the receive buffer: remove the application's SO_RCVBUF setting (or set it to -1 where the client library allows, e.g. Kafka's receive.buffer.bytes=-1), or raise it to at least the bandwidth-delay product".into()),
            }
        })
        .collect()
}

/// `application-timeout` over a capture's flows.
pub fn application_timeout(flows: &[FlowSummary]) -> Vec<Finding> {
    flows
        .iter()
        .filter_map(|f| {
            let close = f.tcp.as_ref()?.close.as_ref()?;
            let gap_s = close.round_gap_s?;
            let own_gap = if close.by == "client" { close.after_last_request_ns } else { close.after_last_response_ns }?;
            let streaming = close.peer_sent_after_close
                || close.resets_after_close > 0
                || close.after_last_response_ns.is_some_and(|r| r * 10 < own_gap && close.by == "client");
            if !streaming {
                return None;
            }
            let mut values = BTreeMap::new();
            values.insert("gap_ns".into(), own_gap as f64);
            values.insert("timeout_s".into(), gap_s);
            values.insert("resets_after_close".into(), close.resets_after_close as f64);
            Some(Finding {
                detector: TIMEOUT_DETECTOR.into(),
                verdict: Verdict::Detected,
                confidence: if close.peer_sent_after_close { 0.85 } else { 0.7 },
                summary: format!(
                    "{}: the {} gave up {} after its request (a {gap_s:.0} s timeout?) while the response was still arriving",
                    f.name,
                    close.by,
                    format_duration_ns(own_gap as f64)
                ),
                evidence: vec![Evidence {
                    series: format!("flow {}", f.id),
                    range_ns: Some((close.at_ns - own_gap, close.at_ns)),
                    values,
                    note: close.note.clone(),
                }],
                fix: Some(format!(
                    "the transfer needs longer than the {gap_s:.0} s timeout: fix what slows it (see receive-window-limited) or raise the timeout"
                )),
            })
        })
        .collect()
}
