//! `nagle-stall`: small segments held in the capture until a late ACK.
//!
//! The packet-level view of root cause #2: a sender without TCP_NODELAY writes a request in two
//! pieces; Nagle's algorithm (RFC 896) holds the second until the first is acknowledged, and
//! the receiver, waiting for the whole request, acknowledges only when its delayed-ACK timer
//! fires (Linux `TCP_DELACK_MIN` 40 ms, Windows 200 ms). In the capture: a sub-MSS segment, a
//! pure ACK 20-500 ms later (far longer than the path's RTT), and the held data right after it.
//!
//! Fires when a connection shows at least 3 such stalls; names the flows, the typical ACK delay
//! and which timer it matches.

use std::collections::BTreeMap;

use tailhunt_model::evidence::capture::{FlowSummary, NagleStall};
use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};

/// Name of the detector.
pub const DETECTOR: &str = "nagle-stall";
const MIN_STALLS: u64 = 3;

/// Runs the detector over a capture's flows and the stalls it kept.
pub fn nagle_stall(flows: &[FlowSummary], stalls: &[NagleStall]) -> Option<Finding> {
    let stalled: Vec<&FlowSummary> = flows
        .iter()
        .filter(|f| f.tcp.as_ref().is_some_and(|t| t.nagle_stalls >= MIN_STALLS))
        .collect();
    if stalled.is_empty() {
        return None;
    }
    let total: u64 = stalled
        .iter()
        .filter_map(|f| f.tcp.as_ref())
        .map(|t| t.nagle_stalls)
        .sum();
    let exchanges: u64 = stalled
        .iter()
        .filter_map(|f| f.tcp.as_ref())
        .map(|t| t.exchanges)
        .sum();
    let mut delays: Vec<i64> = stalls.iter().map(|s| s.ack_delay_ns).collect();
    delays.sort_unstable();
    let median = delays.get(delays.len() / 2).copied().unwrap_or(0);
    let timer = if (30_000_000..=60_000_000).contains(&median) {
        "the Linux delayed-ACK timer (40 ms)"
    } else if (150_000_000..=260_000_000).contains(&median) {
        "the Windows delayed-ACK timer (200 ms)"
    } else {
        "a delayed-ACK timer"
    };
    let senders: Vec<&str> = stalls
        .iter()
        .map(|s| {
            if s.sender_is_client {
                "client"
            } else {
                "server"
            }
        })
        .collect();
    let client_share =
        senders.iter().filter(|s| **s == "client").count() as f64 / senders.len().max(1) as f64;
    let who = if client_share >= 0.5 {
        "client"
    } else {
        "server"
    };
    let mut values = BTreeMap::new();
    values.insert("stalls".into(), total as f64);
    values.insert("exchanges".into(), exchanges as f64);
    values.insert("median_ack_delay_ns".into(), median as f64);
    values.insert("flows".into(), stalled.len() as f64);
    let mut evidence = vec![Evidence {
        series: "latency".into(),
        range_ns: None,
        values,
        note: format!(
            "{total} small segments were followed by a pure ACK a median {} later ({timer}) and only then by the rest of the data, on {} connection(s) with {exchanges} exchanges",
            format_duration_ns(median as f64),
            stalled.len()
        ),
    }];
    for s in stalls.iter().take(5) {
        let mut v = BTreeMap::new();
        v.insert("small_len_bytes".into(), s.small_len as f64);
        v.insert("ack_delay_ns".into(), s.ack_delay_ns as f64);
        // By id: a report may keep only some flows (every stalled one among them).
        let name = flows
            .binary_search_by_key(&s.flow, |f| f.id)
            .map(|i| flows[i].name.to_string())
            .unwrap_or_default();
        evidence.push(Evidence {
            series: format!("flow {}", s.flow),
            range_ns: Some((s.small_ns, s.release_ns)),
            values: v,
            note: format!(
                "{name}: {} bytes sent, ACKed {} later, next data {} after the ACK",
                s.small_len,
                format_duration_ns(s.ack_delay_ns as f64),
                format_duration_ns((s.release_ns - s.ack_ns) as f64)
            ),
        });
    }
    Some(Finding {
        detector: DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence: if (30_000_000..=260_000_000).contains(&median) { 0.9 } else { 0.7 },
        summary: format!(
            "Nagle stalls: {total} times the {who} held data behind a small unacknowledged segment until a delayed ACK {} later ({timer})",
            format_duration_ns(median as f64)
        ),
        evidence,
        fix: Some(format!(
            "set TCP_NODELAY on the {who}'s sockets and write each request in one call (writev, or buffer then write) instead of write-write-read"
        )),
    })
}
