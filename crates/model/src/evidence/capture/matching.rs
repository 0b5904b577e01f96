//! `--match`: the flows of one capture paired with another's, per hop.

use serde::{Deserialize, Serialize};

use super::FlowName;

/// Summary of a one-way delay distribution, nanoseconds (clock offset removed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayStats {
    /// Smallest.
    pub min_ns: i64,
    /// Median.
    pub p50_ns: i64,
    /// 90th percentile.
    pub p90_ns: i64,
    /// 99th percentile.
    pub p99_ns: i64,
    /// Largest.
    pub max_ns: i64,
    /// Mean.
    pub mean_ns: i64,
}

/// One direction of one flow between the two capture points.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopStats {
    /// The endpoint sending in this direction, as capture A names it.
    pub sender: String,
    /// Packets seen at the first capture point of this direction, while both captures ran.
    pub sent: u64,
    /// Of those, seen at the second point too.
    pub matched: u64,
    /// Seen at the first point and not at the second: lost (or filtered) on the way.
    pub lost: u64,
    /// Seen at the second point and never at the first: made between the two points (a
    /// middlebox, or a capture that dropped it).
    pub appeared: u64,
    /// One-way delay of matched packets; absent when none matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<DelayStats>,
}

/// Which capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The first capture (`tailhunt pcap A`).
    A,
    /// The second capture (`--match B`).
    B,
}

/// A FIN or RST and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloseOrigin {
    /// `fin` or `rst`.
    pub kind: String,
    /// The endpoint it claims to come from, as capture A names it.
    pub sender: String,
    /// When capture A saw it (A's clock), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen_in_a_ns: Option<i64>,
    /// When capture B saw it (B's clock), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen_in_b_ns: Option<i64>,
    /// The capture that saw it first: the one nearer where it was sent.
    pub first_seen: Side,
    /// Seen only downstream: sent by something between the two capture points (a middlebox
    /// such as a NAT, firewall or load balancer), not by the endpoint it names.
    pub from_middlebox: bool,
}

/// A flow of A and its flow in B.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowPair {
    /// As capture A sees it.
    pub a: FlowName,
    /// As capture B sees it.
    pub b: FlowName,
    /// Addresses or ports differ between the two: translated on the way.
    pub nat: bool,
    /// Packets that matched.
    pub matched_packets: u64,
    /// The direction that passes A first.
    pub a_to_b: HopStats,
    /// The direction that passes B first.
    pub b_to_a: HopStats,
    /// FINs and RSTs, in A's order then B-only ones.
    pub closes: Vec<CloseOrigin>,
}

/// The result of `match_captures`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchReport {
    /// Paired flows, most matched packets first.
    pub flows: Vec<FlowPair>,
    /// B's clock minus A's clock, estimated as `(min_ab - min_ba) / 2`; absent when no
    /// packet matched in one of the directions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_offset_ns: Option<i64>,
    /// How the offset was estimated, in words.
    pub clock_offset_method: String,
    /// TCP packets read from A / B.
    pub packets_a: u64,
    /// TCP packets read from B (indexed).
    pub packets_b: u64,
    /// Packets of A that matched one of B.
    pub matched_packets: u64,
    /// TCP flows of A with no partner in B.
    pub unmatched_flows_a: u64,
    /// TCP flows of B with no partner in A.
    pub unmatched_flows_b: u64,
    /// Limits hit and inputs cut short; empty when everything was read and matched.
    pub notes: Vec<String>,
}
