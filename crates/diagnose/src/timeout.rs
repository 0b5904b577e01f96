//! `application-timeout`: the side that gave up a round number of seconds after its request,
//! and what it gave up on.
//!
//! The story (root cause #4): a 10 MB cross-region read held to rwnd/RTT took 39 s; the
//! client's 30 s request timeout fired, it sent FIN and answered the server's remaining data
//! with RSTs. Its twin with a different fix: a server that takes longer to answer than the
//! client waits, where not one response byte crosses before the close. Clients close either
//! way with FIN, or with RST (an abort with SO_LINGER 0, or a close with data unread).
//!
//! In: a capture's flows, each with its [`CloseSummary`] (who closed, how, the gaps, the
//! peer's answer before the close and what it did after); or a transfer test's
//! [`TimeoutEvidence`] (TCP_INFO side, the timeout known). Out: one finding per timed-out
//! connection, saying which of the two the packets show — the server had not answered (its
//! latency is the cause), the response was still arriving (the transfer is too slow), or it
//! had stalled part-way — never a transfer explanation for a server that sent nothing.

use std::collections::BTreeMap;

use tailhunt_model::evidence::capture::{
    Abandoned, CloseKind, CloseSummary, FlowSummary, Role, TcpSummary,
};
use tailhunt_model::units::Bytes;
use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};

/// Name of the timeout detector.
pub const TIMEOUT_DETECTOR: &str = "application-timeout";

/// Share of the sender's busy time limited by the receive window above which the explanation
/// points to `receive-window-limited` (that detector's own bar).
const WINDOW_LIMITED_SHARE: f64 = 0.5;

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
    /// From the request to the first byte, ns (unknown in older records).
    pub first_byte_ns: Option<u64>,
    /// From the last byte to the close, ns (unknown in older records).
    pub quiet_before_close_ns: Option<u64>,
    /// window/RTT at the current window, bits/s.
    pub window_bound_bps: Option<f64>,
    /// Request to close.
    pub range_ns: Option<(i64, i64)>,
}

/// `application-timeout` for a transfer whose client timeout is known: it fires when the
/// client closed at its timeout with data missing, and says whether the server had sent
/// nothing, the data was still arriving (at what rate, and whether that is window/RTT), or it
/// had stopped arriving before the close.
pub fn transfer_timeout(e: &TimeoutEvidence) -> Option<Finding> {
    // The close must be the timeout's (within 5% or 50 ms of it), with bytes still missing.
    let slack = (e.timeout_ns / 20).max(50_000_000);
    if e.bytes_received >= e.bytes_wanted || e.elapsed_ns + slack < e.timeout_ns {
        return None;
    }
    let timeout = format_duration_ns(e.timeout_ns as f64);
    let elapsed = e.elapsed_ns.max(1);
    let mut values = BTreeMap::new();
    values.insert("timeout_ns".into(), e.timeout_ns as f64);
    values.insert("timeout_s".into(), e.timeout_ns as f64 / 1e9);
    values.insert("elapsed_ns".into(), e.elapsed_ns as f64);
    values.insert("bytes_wanted".into(), e.bytes_wanted as f64);
    values.insert("bytes_received".into(), e.bytes_received as f64);
    let head = format!(
        "{}: the client ({}) gave up at its {timeout} timeout",
        e.flow, e.client
    );
    let (summary, fix, confidence) = if e.bytes_received == 0 {
        (
            format!("{head} before the server had sent one byte: the server is slower than the timeout, the transfer never started"),
            server_fix(&timeout),
            0.8,
        )
    } else {
        let achieved = e.bytes_received as f64 * 8.0 / (elapsed as f64 / 1e9);
        let needed_ns = e.bytes_wanted as f64 * 8.0 / achieved * 1e9;
        values.insert("rate_bps".into(), achieved);
        values.insert("needed_ns".into(), needed_ns);
        if let Some(f) = e.first_byte_ns {
            values.insert("first_byte_ns".into(), f as f64);
        }
        let got = format!(
            "with {:.1} of {:.1} MB received",
            e.bytes_received as f64 / 1e6,
            e.bytes_wanted as f64 / 1e6
        );
        let late_start = e
            .first_byte_ns
            .filter(|&f| f * 2 > elapsed)
            .map(|f| {
                format!(
                    "; the first byte came only {} after the request",
                    format_duration_ns(f as f64)
                )
            })
            .unwrap_or_default();
        match e.quiet_before_close_ns {
            Some(q) if q * 10 > elapsed => (
                format!(
                    "{head} {got}, and nothing had arrived for {} before it: the transfer stalled{late_start}",
                    format_duration_ns(q as f64)
                ),
                format!("the transfer stopped part-way for longer than a tenth of the {timeout} timeout: find what the sender waited on then (a zero window, retransmission timeouts, its own pauses) or raise the timeout"),
                0.7,
            ),
            _ => {
                let (limit, fix) = transfer_limit(achieved, e.window_bound_bps);
                (
                    format!(
                        "{head} {got} and data still arriving at {:.1} Mbit/s{limit}: at that rate the transfer needs {}{late_start}",
                        achieved / 1e6,
                        format_duration_ns(needed_ns)
                    ),
                    format!(
                        "the transfer needs {}, longer than the {timeout} timeout: {fix} or raise the timeout",
                        format_duration_ns(needed_ns)
                    ),
                    0.9,
                )
            }
        }
    };
    if let Some(b) = e.window_bound_bps {
        values.insert("window_bound_bps".into(), b);
    }
    Some(Finding {
        detector: TIMEOUT_DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence,
        summary,
        evidence: vec![Evidence {
            series: "tcp_bytes_received (tcp_info)".into(),
            range_ns: e.range_ns,
            values,
            note: format!(
                "the client closed {} after its request, at its configured timeout, with {} of {} received",
                format_duration_ns(e.elapsed_ns as f64),
                Bytes(e.bytes_received),
                Bytes(e.bytes_wanted)
            ),
        }],
        fix: Some(fix),
    })
}

/// What limits a transfer still arriving when the timeout fired: the window, if the achieved
/// rate is within 35% of window/RTT (the window detector's own bar). Otherwise nothing is
/// claimed: a timed-out client has only its own round trip, which misses the queueing its
/// sender waits through, so a bound far above the achieved rate rules nothing out.
fn transfer_limit(achieved_bps: f64, window_bound_bps: Option<f64>) -> (String, &'static str) {
    match window_bound_bps.filter(|b| *b > 0.0) {
        Some(b) if achieved_bps >= 0.65 * b => (
            format!(", close to window/RTT ({:.1} Mbit/s)", b / 1e6),
            "the receive window holds it back (see receive-window-limited)",
        ),
        _ => (String::new(), "make the transfer faster"),
    }
}

/// The fix when the server had not answered within the timeout.
fn server_fix(timeout: &str) -> String {
    format!("the server took longer than the client's {timeout} timeout to answer: find what it waits on (its own processing, its run queue, a call it makes) or raise the timeout; a faster transfer would not help")
}

/// `application-timeout` over a capture's flows.
pub fn application_timeout(flows: &[FlowSummary]) -> Vec<Finding> {
    flows.iter().filter_map(capture_timeout).collect()
}

/// One flow's close, when it is a timeout that left something undone.
fn capture_timeout(f: &FlowSummary) -> Option<Finding> {
    let t = f.tcp.as_ref()?;
    let close = t.close.as_ref()?;
    let gap_s = close.round_gap_s?;
    let wait = close.wait_ns()?;
    let what = close.abandoned()?;
    // A server dropping a client that sent nothing since the last response, and any close
    // after the answer ended, are idle connections closed: nobody waited on anything.
    let (summary, fix, confidence) = match (close.by, what) {
        (_, Abandoned::Ended) | (Role::Server, Abandoned::NoAnswer) => return None,
        (Role::Client, Abandoned::NoAnswer) => no_answer(close, wait, gap_s),
        (_, Abandoned::StillArriving) => still_arriving(close, t, wait, gap_s),
        (_, Abandoned::Stalled) => stalled(close, wait, gap_s),
    };
    let mut values = BTreeMap::new();
    values.insert("gap_ns".into(), wait as f64);
    values.insert("timeout_s".into(), gap_s);
    values.insert("resets_after_close".into(), close.resets_after_close as f64);
    let optional = [
        ("answer_bytes", close.answer_bytes.map(|b| b as f64)),
        (
            "first_answer_after_ns",
            close.first_answer_after_ns.map(|n| n as f64),
        ),
        (
            "peer_quiet_before_close_ns",
            close
                .peer_quiet_ns()
                .filter(|&q| q < wait)
                .map(|n| n as f64),
        ),
        (
            "peer_bytes_after_close",
            close.peer_bytes_after_close.map(|b| b as f64),
        ),
        (
            "peer_data_after_close_ns",
            close.peer_data_after_close_ns.map(|n| n as f64),
        ),
    ];
    for (k, v) in optional {
        if let Some(v) = v {
            values.insert(k.into(), v);
        }
    }
    Some(Finding {
        detector: TIMEOUT_DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence,
        summary: format!("{}: {summary}", f.name),
        evidence: vec![Evidence {
            series: format!("flow {}", f.id),
            range_ns: Some((close.at_ns - wait, close.at_ns)),
            values,
            note: close.note.clone(),
        }],
        fix: Some(fix),
    })
}

/// "the client gave up 3.00s after its request (a 3 s timeout?)", with how it closed.
fn gave_up(close: &CloseSummary, wait: i64, gap_s: f64) -> String {
    let own = match close.by {
        Role::Client => "its request",
        Role::Server => "its last response",
    };
    let how = match close.how {
        CloseKind::Fin => "",
        CloseKind::Rst => ", closing with a reset,",
    };
    format!(
        "the {}{how} gave up {} after {own} (a {gap_s:.0} s timeout?)",
        close.by,
        format_duration_ns(wait as f64)
    )
}

/// The client closed before one response byte: the server is slower than the timeout.
fn no_answer(close: &CloseSummary, wait: i64, gap_s: f64) -> (String, String, f64) {
    let mut s = format!(
        "{} with no response byte from the server: the server is slower than the timeout",
        gave_up(close, wait, gap_s)
    );
    // The strongest sign: the answer came after all, later than the client waited.
    let confidence = match (close.peer_data_after_close_ns, close.peer_close_after_ns) {
        (Some(after), _) => {
            s.push_str(&format!(
                "; it answered {} after the request, {} after the client gave up",
                format_duration_ns((wait + after) as f64),
                format_duration_ns(after as f64)
            ));
            0.85
        }
        (None, Some(after)) => {
            s.push_str(&format!(
                "; it closed {} after the client without answering",
                format_duration_ns(after as f64)
            ));
            0.7
        }
        (None, None) => {
            s.push_str("; it sent nothing more before the capture ended");
            0.7
        }
    };
    let timeout = format!("{gap_s:.0} s");
    (s, server_fix(&timeout), confidence)
}

/// The answer kept arriving until the close: the transfer is slower than the timeout.
fn still_arriving(
    close: &CloseSummary,
    t: &TcpSummary,
    wait: i64,
    gap_s: f64,
) -> (String, String, f64) {
    let answer = match close.by {
        Role::Client => "response",
        Role::Server => "client's data",
    };
    let mut s = format!(
        "{} while the {answer} was still arriving",
        gave_up(close, wait, gap_s)
    );
    if let Some(b) = close.answer_bytes {
        s.push_str(&format!(" ({} in by the close", Bytes(b)));
        if let Some(first) = close.first_answer_after_ns {
            s.push_str(&format!(
                ", the first byte {} after the request",
                format_duration_ns(first as f64)
            ));
        }
        s.push(')');
    }
    let late_start = close.first_answer_after_ns.is_some_and(|f| f * 2 > wait);
    let window =
        t.rwnd_limited_share >= WINDOW_LIMITED_SHARE && (t.main_sender == close.by.peer().name());
    let timeout = format!("{gap_s:.0} s");
    let fix = if late_start {
        s.push_str("; most of the wait went before the first byte");
        format!("the {} spent most of the {timeout} timeout before answering and the rest was not enough for the transfer: shorten both (its processing first) or raise the timeout", close.by.peer())
    } else if window {
        s.push_str(&format!(
            "; its sender was receive-window-limited {:.0}% of its busy time",
            t.rwnd_limited_share * 100.0
        ));
        format!("the transfer needs longer than the {timeout} timeout and the receive window holds it back: see receive-window-limited, or raise the timeout")
    } else {
        format!("the transfer needs longer than the {timeout} timeout: make it faster (a smaller {answer}, a faster path) or raise the timeout")
    };
    if close.peer_sent_after_close {
        s.push_str(&format!(
            "; the {} kept sending after the close",
            close.by.peer()
        ));
    }
    let confidence = if close.peer_sent_after_close {
        0.85
    } else {
        0.7
    };
    (s, fix, confidence)
}

/// The answer began, stopped well before the close and resumed after it.
fn stalled(close: &CloseSummary, wait: i64, gap_s: f64) -> (String, String, f64) {
    let quiet = close.peer_quiet_ns().unwrap_or(0);
    let got = close
        .answer_bytes
        .map_or(String::new(), |b| format!(" after {}", Bytes(b)));
    let s = format!(
        "{} while the {}'s answer had stalled: nothing for {} before the close{got}, more after it",
        gave_up(close, wait, gap_s),
        close.by.peer(),
        format_duration_ns(quiet as f64)
    );
    let fix = format!("the answer stopped part-way for {}: find what the {} waited on then (a zero window, retransmission timeouts, its own pauses) or raise the {gap_s:.0} s timeout", format_duration_ns(quiet as f64), close.by.peer());
    (s, fix, 0.6)
}

#[cfg(test)]
mod tests;
