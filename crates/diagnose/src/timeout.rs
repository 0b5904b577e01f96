//! `application-timeout`: the side that gave up a round number of seconds after its request.
//!
//! The story (root cause #4): a 10 MB cross-region read held to rwnd/RTT took 39 s; the
//! client's 30 s request timeout fired, it sent FIN and answered the server's remaining data
//! with RSTs. The close is the only trace a capture has of the timeout; a transfer test knows
//! the timeout it was given ([`TimeoutEvidence`]).

use std::collections::BTreeMap;

use tailhunt_model::evidence::capture::FlowSummary;
use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};

/// Name of the timeout detector.
pub const TIMEOUT_DETECTOR: &str = "application-timeout";

/// A transfer that ended at the client's timeout, from any source that knows the timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeoutEvidence {
    /// The connection, `client -> server`.
    pub flow: String,
    /// Who gave up: `pid 1699 (java)`.
    pub client: String,
    /// The client's configured timeout, ns.
    pub timeout_ns: u64,
    /// From the request to the close, ns.
    pub elapsed_ns: u64,
    /// Bytes the client wanted.
    pub bytes_wanted: u64,
    /// Bytes it had when it gave up.
    pub bytes_received: u64,
    /// window/RTT at the current window, bits/s (else the achieved rate is used).
    pub window_bound_bps: Option<f64>,
    /// Request to close.
    pub range_ns: Option<(i64, i64)>,
}

/// `application-timeout` for a transfer whose client timeout is known: it fires when the
/// client closed at its timeout with data missing and the whole transfer would need longer
/// than the timeout at the current window (or the achieved rate).
pub fn transfer_timeout(e: &TimeoutEvidence) -> Option<Finding> {
    // The close must be the timeout's (within 5% or 50 ms of it), with bytes still missing.
    let slack = (e.timeout_ns / 20).max(50_000_000);
    if e.bytes_received >= e.bytes_wanted || e.elapsed_ns + slack < e.timeout_ns {
        return None;
    }
    let achieved = e.bytes_received as f64 * 8.0 / (e.elapsed_ns.max(1) as f64 / 1e9);
    let (rate, basis) = match e.window_bound_bps {
        Some(b) if b > 0.0 => (b, "window/RTT"),
        _ => (achieved, "the achieved rate"),
    };
    if rate <= 0.0 {
        return None;
    }
    let needed_ns = e.bytes_wanted as f64 * 8.0 / rate * 1e9;
    if needed_ns <= e.timeout_ns as f64 {
        return None;
    }
    let timeout = format_duration_ns(e.timeout_ns as f64);
    let needed = format_duration_ns(needed_ns);
    let mut values = BTreeMap::new();
    values.insert("timeout_ns".into(), e.timeout_ns as f64);
    values.insert("timeout_s".into(), e.timeout_ns as f64 / 1e9);
    values.insert("elapsed_ns".into(), e.elapsed_ns as f64);
    values.insert("needed_ns".into(), needed_ns);
    values.insert("bytes_wanted".into(), e.bytes_wanted as f64);
    values.insert("bytes_received".into(), e.bytes_received as f64);
    values.insert("rate_bps".into(), rate);
    Some(Finding {
        detector: TIMEOUT_DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence: 0.9,
        summary: format!(
            "{}: the client ({}) gave up at its {timeout} timeout with {:.1} of {:.1} MB received; at {basis} ({:.1} Mbit/s) the transfer needs {needed}",
            e.flow,
            e.client,
            e.bytes_received as f64 / 1e6,
            e.bytes_wanted as f64 / 1e6,
            rate / 1e6
        ),
        evidence: vec![Evidence {
            series: "tcp_bytes_received (tcp_info)".into(),
            range_ns: e.range_ns,
            values,
            note: format!("the close came {} after the request, at the configured timeout; the server's remaining data met resets", format_duration_ns(e.elapsed_ns as f64)),
        }],
        fix: Some(format!(
            "the transfer needs {needed}, longer than the {timeout} timeout: fix what slows it (see receive-window-limited) or raise the timeout"
        )),
    })
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
