//! `receive-window-limited`: a transfer held to rwnd/RTT (the client that gave up on it is
//! [`crate::timeout`]'s).
//!
//! The story (root cause #4): after a kernel upgrade a client that pinned SO_RCVBUF=64k got a
//! smaller receive window; a 10 MB cross-region read took 39 s instead of 22 s, the client's
//! 30 s request timeout fired, it sent FIN and answered the server's remaining data with RSTs.
//!
//! Evidence comes in one shape, [`WindowEvidence`], from whichever source saw the connection: a
//! capture (bytes in flight against the advertised window) or socket sampling (TCP_INFO's
//! `rwnd_limited` time). `receive-window-limited` fires when at least half of the sender's
//! busy time was limited by the receiver's window and the throughput is within 35% of
//! window/RTT — or, from a capture, when the throughput is so close to window/RTT that the bytes
//! in flight must have sat at the window (see `FULL_WINDOW`).

use std::collections::BTreeMap;

use tailhunt_model::evidence::capture::{FlowSummary, SenderRtt};
use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};

/// Name of the window detector.
pub const WINDOW_DETECTOR: &str = "receive-window-limited";
/// Where window evidence comes from: each source measures the window-limited share its own way,
/// so each has its own threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// A capture: the receiver's ACKs replayed at the sender; share of the sender's busy time.
    Capture,
    /// The sender's TCP_INFO (`tcpi_rwnd_limited` over busy time).
    TcpInfo,
    /// The receiver's TCP_INFO: share of the intervals data arrived in that brought the
    /// advertised window per RTT.
    TcpInfoReceiver,
}

impl WindowSource {
    /// Name in evidence (`window (tcp_info)`).
    pub fn name(self) -> &'static str {
        match self {
            WindowSource::Capture => "capture",
            WindowSource::TcpInfo => "tcp_info",
            WindowSource::TcpInfoReceiver => "tcp_info_receiver",
        }
    }

    /// The window-limited share that makes a transfer window-limited. The kernel's own clock
    /// (`tcpi_rwnd_limited`) stops whenever a write loop ends for another reason — pacing
    /// (BBR), TCP small queues — so a transfer held at window/RTT shows about 40% of its busy
    /// time with BBR on this kernel, where a capture's replay of the window counts those gaps
    /// as window-limited. TCP_INFO from the sender therefore needs a lower share; the
    /// throughput must still sit at window/RTT either way.
    pub fn min_share(self) -> f64 {
        match self {
            WindowSource::TcpInfo => 0.25,
            WindowSource::Capture | WindowSource::TcpInfoReceiver => 0.5,
        }
    }
}
const BOUND_TOLERANCE: f64 = 0.35;
/// Throughput is the mean of bytes in flight over the round trip, and bytes in flight never
/// exceed the window: a rate at 80% of window/RTT (the byte-weighted round trip and mean
/// window) means the flight averaged 80% of the window, whatever the replay of the window
/// counted. A capture behind a queue shared with other traffic (at the receiver, the queue
/// upstream) needs this: the sender's packets leave the queue spread out by the other
/// traffic, each one queued a little longer than the one before, while the replay shifts
/// the receiver's ACKs by one round trip for all of them, so it sees room in the window
/// the sender had in fact used (a 64 KiB download at 0.84 of window/RTT counted 48% of its
/// time window-limited at the receiver, 76% at the sender). The share must still be a
/// quarter, two indicators agreeing.
const FULL_WINDOW: f64 = 0.8;
/// Transfers smaller than this say little about windows.
const MIN_BYTES: u64 = 256 * 1024;
// A capture report that keeps only some flows keeps those this detector may weigh.
const _: () = assert!(MIN_BYTES >= FlowSummary::WINDOW_MIN_BYTES);

/// What any source knows about one connection's window.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowEvidence {
    /// The connection, `client -> server`.
    pub flow: String,
    /// Which source saw it.
    pub source: WindowSource,
    /// Payload bytes the main sender sent.
    pub bytes: u64,
    /// Share of its busy time limited by the receive window.
    pub rwnd_limited_share: f64,
    /// Achieved rate, bits/s.
    pub throughput_bps: f64,
    /// Mean advertised window, bytes.
    pub window_bytes: f64,
    /// The round trip the sender lived with, ns.
    pub rtt_ns: i64,
    /// How `rtt_ns` was measured, in words (cited in the finding).
    pub rtt_from: Option<String>,
    /// The round trip's legs from the capture point, `(to the receiver and back, to the
    /// sender and back)`, ns, when a capture measured them.
    pub rtt_legs_ns: Option<(i64, i64)>,
    /// Time range of the transfer.
    pub range_ns: Option<(i64, i64)>,
    /// The window scale had to be inferred (no SYN in the capture).
    pub scale_inferred: bool,
    /// The receiving process, when known: `pid 1699 (java)`.
    pub receiver: Option<String>,
    /// How its receive buffer was pinned, when known: `SO_RCVBUF=65536 (set by pid 1699
    /// (java); the kernel doubled it to 131072)`.
    pub pinned: Option<String>,
    /// The kernel context to cite (version and window sysctls).
    pub kernel: Option<String>,
    /// window/RTT if autotuning could grow the buffer to its limit (tcp_rmem's maximum), bits/s.
    pub autotune_bound_bps: Option<f64>,
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
            source: WindowSource::Capture,
            bytes: side.payload_bytes,
            rwnd_limited_share: t.rwnd_limited_share,
            throughput_bps: t.throughput_bps?,
            window_bytes: t.mean_window?,
            rtt_ns: t.path_rtt_ns?,
            rtt_from: t.sender_rtt.as_ref().map(capture_rtt_from),
            rtt_legs_ns: t
                .sender_rtt
                .as_ref()
                .map(|r| (r.receiver_leg_ns, r.sender_leg_ns)),
            range_ns: side.first_data_ns.zip(side.last_data_ns),
            scale_inferred: !t.wscale_from_syn,
            receiver: None,
            pinned: None,
            kernel: None,
            autotune_bound_bps: None,
        })
    }

    /// window / RTT, bits/s.
    pub fn bound_bps(&self) -> f64 {
        self.window_bytes * 8.0 / (self.rtt_ns.max(1) as f64 / 1e9)
    }
}

/// How a capture put the sender's round trip together, in words.
fn capture_rtt_from(r: &SenderRtt) -> String {
    let d = |ns: i64| format_duration_ns(ns as f64);
    let sender = match r.sender_leg_from.as_str() {
        "timestamps" => format!(
            "{} from {} echoes of the receiver's TCP timestamps on the sender's data (each within {})",
            d(r.sender_leg_ns),
            r.echo_samples,
            d(r.echo_error_max_ns)
        ),
        "acks" => format!(
            "{} from the sender's ACKs (no timestamp echoes: a queue between the sender and the capture point may be missing)",
            d(r.sender_leg_ns)
        ),
        "handshake" => format!(
            "{} from the handshake alone (no timestamp echoes: a queue that filled later is missing)",
            d(r.sender_leg_ns)
        ),
        _ => "unknown".to_string(),
    };
    format!(
        "the round trip as the sender lives it, weighted by the bytes acknowledged: capture point -> receiver -> capture point {} + capture point -> sender -> capture point {sender}",
        d(r.receiver_leg_ns)
    )
}

/// `receive-window-limited` over the evidence of every connection.
pub fn receive_window_limited(evidence: &[WindowEvidence]) -> Vec<Finding> {
    evidence
        .iter()
        .filter(|e| e.bytes >= MIN_BYTES && window_limited(e))
        .map(window_finding)
        .collect()
}

/// Whether `e` shows a transfer held by the window (see the module's text).
fn window_limited(e: &WindowEvidence) -> bool {
    let fill = e.throughput_bps / e.bound_bps();
    if (fill - 1.0).abs() > BOUND_TOLERANCE {
        return false;
    }
    e.rwnd_limited_share >= e.source.min_share()
        || (e.source == WindowSource::Capture
            && fill >= FULL_WINDOW
            && e.rwnd_limited_share >= 0.25)
}

fn window_finding(e: &WindowEvidence) -> Finding {
    let mut values = BTreeMap::new();
    values.insert("rwnd_limited_share".into(), e.rwnd_limited_share);
    values.insert("throughput_bps".into(), e.throughput_bps);
    values.insert("window_bytes".into(), e.window_bytes);
    values.insert("rtt_ns".into(), e.rtt_ns as f64);
    if let Some((receiver, sender)) = e.rtt_legs_ns {
        values.insert("receiver_leg_ns".into(), receiver as f64);
        values.insert("sender_leg_ns".into(), sender as f64);
    }
    values.insert("window_bound_bps".into(), e.bound_bps());
    values.insert("bytes".into(), e.bytes as f64);
    if let Some(a) = e.autotune_bound_bps {
        values.insert("autotune_bound_bps".into(), a);
    }
    let fill = e.throughput_bps / e.bound_bps();
    values.insert("window_fill".into(), fill);
    let held = if e.rwnd_limited_share >= e.source.min_share() {
        format!(
            "limits the transfer {:.0}% of its busy time",
            e.rwnd_limited_share * 100.0
        )
    } else {
        format!(
            "was {:.0}% full on average (its replay counted {:.0}% of the busy time window-limited: a queue before the capture point spreads the sender's packets out)",
            fill.min(1.0) * 100.0,
            e.rwnd_limited_share * 100.0
        )
    };
    let mut summary = format!(
        "{}: the receiver's window ({:.0} KiB) {held}; it gets {:.1} Mbit/s, window/RTT ({}) allows {:.1} Mbit/s",
        e.flow,
        e.window_bytes / 1024.0,
        e.throughput_bps / 1e6,
        format_duration_ns(e.rtt_ns as f64),
        e.bound_bps() / 1e6
    );
    if let Some(p) = &e.pinned {
        summary.push_str(&format!("; the receive buffer is pinned: {p}"));
    } else if let Some(r) = &e.receiver {
        summary.push_str(&format!("; receiver: {r}"));
    }
    let mut note = format!(
        "bytes in flight sit at the advertised window{}",
        if e.scale_inferred {
            " (window scale inferred: the SYN is not in the capture)"
        } else {
            ""
        }
    );
    if e.source == WindowSource::TcpInfoReceiver {
        note = "seen from the receiver: the share is of the intervals data arrived in, and in those it arrived at the advertised window per RTT".into();
    }
    if let Some(r) = &e.rtt_from {
        note.push_str(&format!("; RTT: {r}"));
    }
    if let Some(k) = &e.kernel {
        note.push_str(&format!("; {k}"));
    }
    let autotune = e
        .autotune_bound_bps
        .map(|a| format!("; with autotuning the window may grow until window/RTT reaches {:.0} Mbit/s, so the path's own rate becomes the limit", a / 1e6))
        .unwrap_or_default();
    let fix = match &e.pinned {
        Some(p) => format!("remove the application's receive-buffer setting ({p}) or set it to -1 where the client library allows (e.g. Kafka's receive.buffer.bytes=-1), so the kernel autotunes the buffer{autotune}"),
        None => format!("let the kernel autotune the receive buffer: remove the application's SO_RCVBUF setting (or set it to -1 where the client library allows, e.g. Kafka's receive.buffer.bytes=-1), or raise it to at least the bandwidth-delay product{autotune}"),
    };
    Finding {
        detector: WINDOW_DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence: if e.scale_inferred { 0.6 } else { 0.9 },
        summary,
        evidence: vec![Evidence {
            series: format!("window ({})", e.source.name()),
            range_ns: e.range_ns,
            values,
            note,
        }],
        fix: Some(fix),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture at the receiver: the finding cites the round trip it used, leg by leg and
    /// where the sender's leg came from, so its bound can be checked against the packets.
    #[test]
    fn the_finding_says_how_the_round_trip_was_measured() {
        let rtt = SenderRtt {
            receiver_leg_ns: 11_000,
            sender_leg_ns: 97_200_000,
            sender_leg_from: "timestamps".into(),
            echo_samples: 204,
            echo_error_max_ns: 970_000,
        };
        let e = WindowEvidence {
            flow: "tcp 198.18.33.2:47478 -> 198.18.34.2:7400".into(),
            source: WindowSource::Capture,
            bytes: 2_000_000,
            rwnd_limited_share: 0.64,
            throughput_bps: 5.6e6,
            window_bytes: 82_000.0,
            rtt_ns: 97_211_000,
            rtt_from: Some(capture_rtt_from(&rtt)),
            rtt_legs_ns: Some((rtt.receiver_leg_ns, rtt.sender_leg_ns)),
            range_ns: None,
            scale_inferred: false,
            receiver: None,
            pinned: None,
            kernel: None,
            autotune_bound_bps: None,
        };
        let f = receive_window_limited(&[e]);
        assert_eq!(f.len(), 1);
        let ev = &f[0].evidence[0];
        assert!(
            ev.note.contains("capture point -> sender -> capture point 97.2ms from 204 echoes of the receiver's TCP timestamps"),
            "{}",
            ev.note
        );
        assert_eq!(ev.values["sender_leg_ns"], 97_200_000.0);
        assert!(
            f[0].summary.contains("window/RTT (97.2ms)"),
            "{}",
            f[0].summary
        );
        let handshake = SenderRtt {
            sender_leg_from: "handshake".into(),
            echo_samples: 0,
            ..rtt
        };
        assert!(capture_rtt_from(&handshake).contains("a queue that filled later is missing"));
    }

    /// Behind a shared queue the replay undercounts the window-limited time; a rate at 80% of
    /// window/RTT still names the window, one further below does not, nor does a share under
    /// a quarter, nor TCP_INFO (its share is the kernel's own clock).
    #[test]
    fn a_rate_at_the_window_names_it_when_the_replay_undercounts() {
        let e = |share: f64, mbit: f64, source| WindowEvidence {
            flow: "tcp 198.18.33.2:51260 -> 198.18.34.2:7400".into(),
            source,
            bytes: 2_000_000,
            rwnd_limited_share: share,
            throughput_bps: mbit * 1e6,
            window_bytes: 82_000.0,
            rtt_ns: 86_900_000,
            rtt_from: None,
            rtt_legs_ns: None,
            range_ns: None,
            scale_inferred: false,
            receiver: None,
            pinned: None,
            kernel: None,
            autotune_bound_bps: None,
        };
        let f = receive_window_limited(&[e(0.48, 6.37, WindowSource::Capture)]);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].summary.contains("84% full on average"),
            "{}",
            f[0].summary
        );
        assert!(receive_window_limited(&[e(0.48, 5.5, WindowSource::Capture)]).is_empty());
        assert!(receive_window_limited(&[e(0.2, 6.37, WindowSource::Capture)]).is_empty());
        assert!(receive_window_limited(&[e(0.2, 6.37, WindowSource::TcpInfoReceiver)]).is_empty());
    }
}
