//! The detector on hand-built closes: each test is one way a client gives up.

use serde_json::json;
use tailhunt_model::evidence::capture::{FlowSummary, TcpSummary};

use super::*;

const S: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;

/// A connection whose server sent `rwnd_share` of its busy time window-limited, ending in
/// `close` (JSON as stored).
fn flow(close: serde_json::Value, rwnd_share: f64) -> FlowSummary {
    let side = json!({
        "packets": 10, "ip_bytes": 1000, "payload_bytes": 500, "wscale": 7,
        "last_window": 65536, "max_inflight": 0,
        "retransmissions": {"rto": 0, "fast": 0, "spurious": 0, "other": 0, "bytes": 0},
        "unseen_bytes": 0, "acked_unseen": 0, "duplicate_frames": 0, "zero_windows": 0,
        "zero_window_ns": 0, "states": null, "first_data_ns": null, "last_data_ns": null,
        "resets": 0
    });
    let tcp: TcpSummary = serde_json::from_value(json!({
        "handshake": null, "rtt_server_leg": null, "rtt_client_leg": null,
        "wscale_from_syn": true, "client": side, "server": side, "main_sender": "server",
        "throughput_bps": null, "rwnd_limited_share": rwnd_share, "mean_window": null,
        "path_rtt_ns": null, "window_bound_bps": null, "exchanges": 1, "nagle_stalls": 0,
        "close": close, "ports_reused": false
    }))
    .unwrap();
    serde_json::from_value(json!({
        "id": 3, "proto": "tcp", "client": "198.18.40.2:5000", "server": "198.18.41.2:7500",
        "first_ns": 0, "last_ns": 10 * S,
        "client_to_server": {"packets": 1, "ip_bytes": 1, "payload_bytes": 1},
        "server_to_client": {"packets": 1, "ip_bytes": 1, "payload_bytes": 1},
        "tcp": tcp
    }))
    .unwrap()
}

/// A close by the client `wait` after its request, its last response data `quiet` before.
fn client_close(how: &str, wait: i64, quiet: Option<i64>) -> serde_json::Value {
    json!({
        "by": "client", "how": how, "at_ns": 100 * S, "after_last_request_ns": wait,
        "after_last_response_ns": quiet, "round_gap_s": 2.0, "peer_sent_after_close": false,
        "resets_after_close": 0, "note": "n"
    })
}

fn one(close: serde_json::Value, share: f64) -> Option<Finding> {
    let mut v = application_timeout(&[flow(close, share)]);
    assert!(v.len() <= 1);
    v.pop()
}

/// The RST half of issue 13: a client aborting (SO_LINGER 0) 2 s after a request the server
/// never answered leaves one RST and nothing else; the flow table called it a timeout and
/// the finding stayed silent.
#[test]
fn an_abort_before_any_response_names_a_slow_server() {
    let mut c = client_close("rst", 2 * S, None);
    c["answer_bytes"] = json!(0);
    c["peer_bytes_after_close"] = json!(0);
    let f = one(c, 0.0).expect("a timeout closed with RST is a timeout");
    assert!(
        f.summary.contains("with no response byte from the server"),
        "{}",
        f.summary
    );
    assert!(f.summary.contains("closing with a reset"), "{}", f.summary);
    assert!(!f.summary.contains("still arriving"), "{}", f.summary);
    let fix = f.fix.unwrap();
    assert!(!fix.contains("receive-window-limited"), "{fix}");
    assert!(fix.contains("server took longer"), "{fix}");
    assert!(f.confidence >= 0.5);
}

/// Issue 13's wrong explanation: the server answered 2 s after the client's FIN (3 s after
/// the request) and met a reset; not one response byte before the close.
#[test]
fn a_server_answering_after_the_timeout_is_no_slow_transfer() {
    let mut c = client_close("fin", S, None);
    c["round_gap_s"] = json!(1.0);
    c["peer_sent_after_close"] = json!(true);
    c["resets_after_close"] = json!(1);
    c["answer_bytes"] = json!(0);
    c["peer_bytes_after_close"] = json!(100);
    c["peer_data_after_close_ns"] = json!(2 * S);
    let f = one(c, 0.0).unwrap();
    assert!(!f.summary.contains("still arriving"), "{}", f.summary);
    assert!(
        f.summary
            .contains("it answered 3.00s after the request, 2.00s after the client gave up"),
        "{}",
        f.summary
    );
    assert_eq!(f.confidence, 0.85);
    assert!(!f.fix.unwrap().contains("receive-window-limited"));
}

/// A download abandoned with data unread, seen at the server: the response arrived until the
/// reset, no data after it. Window-limited sending points to that detector, other sending not.
#[test]
fn a_response_still_arriving_is_a_slow_transfer() {
    let mut c = client_close("rst", 2 * S, Some(3 * MS));
    c["answer_bytes"] = json!(2_000_000);
    c["first_answer_after_ns"] = json!(2 * MS);
    let f = one(c.clone(), 0.9).unwrap();
    assert!(f.summary.contains("while the response was still arriving (1.91 MiB in by the close, the first byte 2.00ms after the request)"), "{}", f.summary);
    assert!(
        f.summary.contains("receive-window-limited 90%"),
        "{}",
        f.summary
    );
    assert!(f.fix.unwrap().contains("see receive-window-limited"));
    let f = one(c, 0.1).unwrap();
    assert!(!f.summary.contains("window"), "{}", f.summary);
    assert!(!f.fix.unwrap().contains("receive-window-limited"));
}

/// A response that began 1.5 s into a 2 s wait and was still arriving: mostly the server.
#[test]
fn a_late_start_blames_the_wait_before_the_first_byte() {
    let mut c = client_close("fin", 2 * S, Some(MS));
    c["answer_bytes"] = json!(30_000);
    c["first_answer_after_ns"] = json!(1_500 * MS);
    let f = one(c, 0.0).unwrap();
    assert!(
        f.summary
            .contains("most of the wait went before the first byte"),
        "{}",
        f.summary
    );
    assert!(f.fix.unwrap().contains("before answering"));
}

/// A stall: the response stopped 1.5 s before a 2 s close and resumed after it.
#[test]
fn a_stalled_response_is_named_a_stall() {
    let mut c = client_close("fin", 2 * S, Some(1_500 * MS));
    c["peer_sent_after_close"] = json!(true);
    let f = one(c, 0.0).unwrap();
    assert!(
        f.summary
            .contains("had stalled: nothing for 1.50s before the close"),
        "{}",
        f.summary
    );
    assert!(!f.summary.contains("still arriving"));
}

/// Idle connections closed on a round number: a client after its answer ended, a server
/// dropping a client that sent nothing more. No wait, no finding.
#[test]
fn idle_closes_are_no_timeouts() {
    assert_eq!(one(client_close("fin", 2 * S, Some(1_990 * MS)), 0.0), None);
    assert_eq!(one(client_close("rst", 2 * S, Some(1_990 * MS)), 0.0), None);
    let server = json!({
        "by": "server", "how": "fin", "at_ns": 100 * S, "after_last_request_ns": 65 * S,
        "after_last_response_ns": 60 * S, "round_gap_s": 60.0, "peer_sent_after_close": false,
        "resets_after_close": 0, "note": "n"
    });
    assert_eq!(one(server, 0.0), None);
    // Not a round number: not a timeout, whatever it left.
    let mut odd = client_close("rst", 2_345 * MS, None);
    odd["round_gap_s"] = json!(null);
    assert_eq!(one(odd, 0.0), None);
}

/// Documents stored before the answer fields existed read as they are and are classified
/// from the two gaps.
#[test]
fn old_closes_are_classified_from_their_gaps() {
    let old = client_close("rst", 2 * S, None);
    let c: CloseSummary = serde_json::from_value(old.clone()).unwrap();
    assert_eq!((c.by, c.how), (Role::Client, CloseKind::Rst));
    assert_eq!(c.answer_bytes, None);
    assert_eq!(c.abandoned(), Some(Abandoned::NoAnswer));
    let f = one(old, 0.0).unwrap();
    assert!(f.summary.contains("no response byte"), "{}", f.summary);
    let arriving: CloseSummary =
        serde_json::from_value(client_close("fin", 2 * S, Some(10 * MS))).unwrap();
    assert_eq!(arriving.abandoned(), Some(Abandoned::StillArriving));
}

fn transfer(
    received: u64,
    first: Option<u64>,
    quiet: Option<u64>,
    bound: Option<f64>,
) -> TimeoutEvidence {
    TimeoutEvidence {
        flow: "198.18.40.2:5000 -> 198.18.41.2:7500".into(),
        client: "pid 7 (tailhunt)".into(),
        timeout_ns: 3 * S as u64,
        elapsed_ns: 3 * S as u64 + 1_000_000,
        bytes_wanted: 4_500_000,
        bytes_received: received,
        first_byte_ns: first,
        quiet_before_close_ns: quiet,
        window_bound_bps: bound,
        range_ns: Some((0, 3 * S)),
    }
}

/// TCP_INFO side: nothing received is a slow server (the old detector said nothing at all,
/// or blamed the transfer).
#[test]
fn a_transfer_that_never_started_is_a_slow_server() {
    let f = transfer_timeout(&transfer(0, None, None, Some(100e6))).unwrap();
    assert!(
        f.summary.contains("before the server had sent one byte"),
        "{}",
        f.summary
    );
    assert!(!f.fix.unwrap().contains("receive-window-limited"));
}

/// Data still arriving at 3.6 Mbit/s: the window bound decides whether the window is named.
/// With a window/RTT far above the achieved rate (the receiver's own RTT makes it so), the
/// old detector stayed silent; the timeout happened all the same.
#[test]
fn a_slow_transfer_names_the_window_only_when_it_limits() {
    let far = transfer_timeout(&transfer(
        1_350_000,
        Some(2_000_000),
        Some(1_000_000),
        Some(100e6),
    ))
    .unwrap();
    assert!(
        far.summary.contains("still arriving at 3.6 Mbit/s"),
        "{}",
        far.summary
    );
    assert!(!far.summary.contains("window"), "{}", far.summary);
    assert!(!far.fix.unwrap().contains("receive-window-limited"));
    let near = transfer_timeout(&transfer(
        1_350_000,
        Some(2_000_000),
        Some(1_000_000),
        Some(4e6),
    ))
    .unwrap();
    assert!(near.fix.unwrap().contains("see receive-window-limited"));
    let stalled =
        transfer_timeout(&transfer(1_350_000, Some(2_000_000), Some(S as u64), None)).unwrap();
    assert!(
        stalled.summary.contains("the transfer stalled"),
        "{}",
        stalled.summary
    );
    // In time, or complete: nothing.
    let mut done = transfer(4_500_000, Some(1), Some(1), None);
    assert_eq!(transfer_timeout(&done), None);
    done.bytes_received = 10;
    done.elapsed_ns = S as u64;
    assert_eq!(transfer_timeout(&done), None);
}
