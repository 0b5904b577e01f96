//! Capture evidence: what one pass over packet captures measured, in the shape the detectors
//! and the report read.
//!
//! In: `tailhunt-pcap` fills a [`CaptureReport`] as it streams the packets (bandwidth per bin
//! and the burst episodes per channel, every flow's summary with its TCP details, the Nagle
//! stalls) and an [`InputReport`] per file. Out: the `capture` document of a `pcap` or
//! `capture` run (with the flows a detector may name; every flow is a row of the run's `flows`
//! list, see [`CaptureReport::flows`]), which the
//! `microburst`, `link-saturated`, `nagle-stall`, `receive-window-limited` and
//! `application-timeout` detectors and the report read back. [`MatchReport`] is the `--match` pairing of two captures.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::Document;

mod inputs;
mod matching;
mod tcp;

pub use inputs::{
    link_types_not_analysed, InputReport, InputStatus, LinkTypeFrames, LinkTypeSummary,
};
pub use matching::{CloseOrigin, DelayStats, FlowPair, HopStats, MatchReport, Side};
pub use tcp::{
    Abandoned, CloseKind, CloseSummary, Handshake, Retransmissions, Role, RttSummary, SenderRtt,
    SideSummary, StateFractions, TcpSummary,
};

/// Transport protocol of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// `client -> server`, or `a <-> b` when the roles are unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowName {
    /// Protocol.
    pub proto: Proto,
    /// The side that opened the connection (sent the SYN), or the one with the higher port.
    pub client: String,
    /// The other side.
    pub server: String,
}

impl Proto {
    /// `tcp` or `udp`.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

impl fmt::Display for FlowName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} -> {}",
            self.proto.name(),
            self.client,
            self.server
        )
    }
}

/// Direction of a channel relative to its host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Bytes addressed to the host.
    To,
    /// Bytes sent by the host.
    From,
}

impl Dir {
    /// `to` or `from`.
    pub fn name(self) -> &'static str {
        match self {
            Dir::To => "to",
            Dir::From => "from",
        }
    }
}

/// Per-channel summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelSummary {
    /// `to` or `from`.
    pub dir: Dir,
    /// The host.
    pub host: String,
    /// Wire bytes.
    pub bytes: u64,
    /// Packets.
    pub packets: u64,
    /// The fullest bin's bytes.
    pub peak_bin_bytes: u64,
    /// When it started (epoch ns).
    pub peak_t_ns: i64,
    /// The fullest bin as a share of the link rate (when known).
    pub peak_utilisation: Option<f64>,
    /// Time spent at or above the burst threshold, ns.
    pub time_above_ns: i64,
    /// The busiest one-second window's average utilisation (when the link rate is known): what
    /// a 1 s bandwidth graph would show.
    pub max_second_utilisation: Option<f64>,
    /// `link-rate`, or `none` when no link rate was given (no bursts then).
    pub threshold_basis: String,
}

/// A flow direction that made a burst: one of its *sources*.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstFlow {
    /// Flow name (`tcp client -> server`).
    pub flow: String,
    /// The endpoint (`ip:port`) that sent these bytes: which direction of the flow made the
    /// burst (empty in documents stored before it was recorded).
    #[serde(default)]
    pub sender: String,
    /// Its bytes in this channel during the burst.
    pub bytes: u64,
    /// Share of the burst's bytes.
    pub share: f64,
}

impl BurstFlow {
    /// Share of a burst's bytes a flow direction must carry to be named among its sources:
    /// small requests and ACKs that crossed the link meanwhile carry well under it (they are
    /// the bursts' victims, not their makers).
    pub const MIN_SOURCE_SHARE: f64 = 0.01;
}

/// One burst episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Burst {
    /// `to` or `from`.
    pub dir: Dir,
    /// The host.
    pub host: String,
    /// First packet of the first bin at the threshold (epoch ns).
    pub start_ns: i64,
    /// Last packet of the last such bin (epoch ns).
    pub end_ns: i64,
    /// Fullest bin, bytes.
    pub peak_bin_bytes: u64,
    /// Fullest bin as a share of the link rate (when known).
    pub peak_utilisation: Option<f64>,
    /// Bytes in the episode.
    pub bytes: u64,
    /// Average utilisation of the one-second window holding the burst's start (when the link
    /// rate is known): how the burst looks on a 1 s graph.
    pub second_utilisation: Option<f64>,
    /// Its sources, largest first (at most [`Burst::MAX_SOURCES`]): the flow directions that
    /// together carry 90% of its bytes, and any other carrying 5% or more, none under 1%.
    /// (Documents stored before this rule list up to 8 flows of any share.)
    pub flows: Vec<BurstFlow>,
    /// Bytes of the flow directions that are not among its sources (requests, ACKs and
    /// other traffic that crossed the link during it).
    #[serde(default)]
    pub other_bytes: u64,
    /// How many such flow directions.
    #[serde(default)]
    pub other_flows: u64,
}

impl Burst {
    /// Sources listed per burst at most.
    pub const MAX_SOURCES: usize = 16;

    /// The sources carrying a share of its bytes worth naming (older documents listed every
    /// flow with any byte in the burst).
    pub fn sources(&self) -> impl Iterator<Item = &BurstFlow> {
        self.flows
            .iter()
            .filter(|f| f.share >= BurstFlow::MIN_SOURCE_SHARE)
    }

    /// How long the link was busy with the burst's bytes, ns: at least its own span, and at
    /// least the time the link needs to carry its bytes (a capture upstream of the queue sees
    /// the bytes arrive faster than the link drains them).
    pub fn busy_until_ns(&self, link_rate_bps: Option<u64>) -> i64 {
        let drain = link_rate_bps
            .filter(|&r| r > 0)
            .map_or(0, |r| (self.bytes as f64 * 8e9 / r as f64) as i64);
        self.end_ns.max(self.start_ns + drain)
    }
}

/// A small segment held back until a late ACK (Nagle's algorithm meeting a delayed ACK).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NagleStall {
    /// Flow index.
    pub flow: usize,
    /// The sending side's endpoint is the flow's client.
    pub sender_is_client: bool,
    /// The sub-MSS segment left unacknowledged (epoch ns).
    pub small_ns: i64,
    /// Its payload bytes.
    pub small_len: u32,
    /// The pure ACK that finally covered it.
    pub ack_ns: i64,
    /// The held data, sent as soon as that ACK arrived.
    pub release_ns: i64,
    /// `ack_ns - small_ns`: how long the receiver delayed its ACK.
    pub ack_delay_ns: i64,
}

/// Packets and bytes one way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    /// Packets.
    pub packets: u64,
    /// IP bytes.
    pub ip_bytes: u64,
    /// Payload bytes (new data for TCP).
    pub payload_bytes: u64,
}

/// One flow in the report.
///
/// Its JSON (`pcap --json`, the `capture` document) has the [`FlowName`]'s fields at the top
/// level and no `tcp` for a UDP flow. Serialized for a format that is not human-readable (the
/// run's stored `flows` rows, [`super::RowEncoding::Postcard`]) it is its fields in order,
/// since postcard has no names to flatten or skip by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// The derive writes the JSON shape as `FlowSummary::serialize` / `deserialize`; the trait
// impls below choose between it and the positional one.
#[serde(remote = "Self")]
pub struct FlowSummary {
    /// Index (flows are numbered in order of first packet).
    pub id: usize,
    /// Protocol, client and server.
    #[serde(flatten)]
    pub name: FlowName,
    /// First packet (epoch ns).
    pub first_ns: i64,
    /// Last packet.
    pub last_ns: i64,
    /// Client to server.
    pub client_to_server: Traffic,
    /// Server to client.
    pub server_to_client: Traffic,
    /// TCP details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpSummary>,
}

/// A [`FlowSummary`]'s fields in order: its shape in a format that is not human-readable.
type FlowFields = (
    usize,
    FlowName,
    i64,
    i64,
    Traffic,
    Traffic,
    Option<TcpSummary>,
);

impl Serialize for FlowSummary {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return FlowSummary::serialize(self, s);
        }
        (
            self.id,
            &self.name,
            self.first_ns,
            self.last_ns,
            self.client_to_server,
            self.server_to_client,
            &self.tcp,
        )
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for FlowSummary {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            return FlowSummary::deserialize(d);
        }
        let (id, name, first_ns, last_ns, client_to_server, server_to_client, tcp) =
            FlowFields::deserialize(d)?;
        Ok(FlowSummary {
            id,
            name,
            first_ns,
            last_ns,
            client_to_server,
            server_to_client,
            tcp,
        })
    }
}

impl FlowSummary {
    /// Payload bytes both ways: what "the largest flows" are ranked by.
    pub fn payload_bytes(&self) -> u64 {
        self.client_to_server.payload_bytes + self.server_to_client.payload_bytes
    }

    /// Bytes a TCP flow must carry before the window detector weighs it (its sender's payload;
    /// a shorter transfer says nothing about the window that limits it).
    pub const WINDOW_MIN_BYTES: u64 = 256 * 1024;

    /// Whether a capture detector may name this flow: a TCP flow with a Nagle stall, one that
    /// closed after a gap of a round number of seconds (a timeout), or one large enough for the
    /// window detector. A report that keeps only some flows keeps these (see
    /// [`CaptureReport::flows`]); each detector's own bar is higher.
    pub fn is_evidence(&self) -> bool {
        let Some(t) = &self.tcp else { return false };
        t.nagle_stalls > 0
            || t.close.as_ref().is_some_and(|c| c.round_gap_s.is_some())
            || t.client.payload_bytes.max(t.server.payload_bytes) >= Self::WINDOW_MIN_BYTES
    }
}

/// A capture's flows are stored one per row as they are finished (the `flows` list of a
/// `pcap` or `capture` run), so that memory holds only the connections still open.
impl super::Row for FlowSummary {
    const NAME: &'static str = "flows";
    const VERSION: u32 = 1;

    fn key(&self) -> i64 {
        self.id as i64
    }
}

/// The whole capture's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureReport {
    /// Frames read.
    pub packets: u64,
    /// Wire bytes (frame lengths).
    pub wire_bytes: u64,
    /// First and last timestamp (epoch ns).
    pub first_ns: i64,
    /// Last timestamp.
    pub last_ns: i64,
    /// Frames whose timestamp went backwards.
    pub out_of_order: u64,
    /// Frames not analysed, by reason (`not-ip`, `truncated`, ...).
    pub skipped: BTreeMap<String, u64>,
    /// Bin width, ns.
    pub bin_ns: i64,
    /// Link rate, when given.
    pub link_rate_bps: Option<u64>,
    /// Channels (to/from each host), busiest first.
    pub channels: Vec<ChannelSummary>,
    /// Burst episodes, in time order.
    pub bursts: Vec<Burst>,
    /// Flows, in order of first packet. A report whose flows were stored as rows (`pcap` and
    /// `capture` runs; `flows_total` says how many there were) keeps only some here: the first
    /// [`CaptureReport::FIRST_FLOWS`], the largest TCP flows, and every flow a detector may
    /// name ([`FlowSummary::is_evidence`]); the rest are in the run's `flows` list
    /// (`Store::rows`). Older stored copies kept the first 5,000.
    pub flows: Vec<FlowSummary>,
    /// Flows in the capture, however many `flows` holds (0 in documents stored before this
    /// field: then `flows` is all of them).
    #[serde(default)]
    pub flows_total: u64,
    /// TCP flows in the capture.
    #[serde(default)]
    pub tcp_flows_total: u64,
    /// Nagle stalls (at most 1000 kept; each flow counts all of its own).
    pub stalls: Vec<NagleStall>,
}

impl CaptureReport {
    /// Flows a report that keeps only some keeps from the start of the capture.
    pub const FIRST_FLOWS: usize = 1000;
    /// The largest TCP flows a report that keeps only some keeps (at least).
    pub const LARGEST_FLOWS: usize = 32;

    /// Whether `flows` holds only some of the capture's flows (the others are in the run's
    /// `flows` list).
    pub fn flows_cut(&self) -> bool {
        self.flow_count() > self.flows.len() as u64
    }

    /// Flows in the capture (more than `flows` holds when this is a stored, capped copy).
    pub fn flow_count(&self) -> u64 {
        self.flows_total.max(self.flows.len() as u64)
    }

    /// TCP flows in the capture.
    pub fn tcp_flow_count(&self) -> u64 {
        let held = self.flows.iter().filter(|f| f.tcp.is_some()).count() as u64;
        self.tcp_flows_total.max(held)
    }
}

impl Document for CaptureReport {
    const NAME: &'static str = "capture";
    const VERSION: u32 = 1;

    /// Runs written before the documents table kept the report in their params: as one JSON
    /// string, or (older still) as an object.
    fn from_params(params: &serde_json::Value) -> Option<Result<Self, String>> {
        let v = params.get("capture")?;
        let parsed = match v.as_str() {
            Some(text) => serde_json::from_str(text),
            None => serde_json::from_value(v.clone()),
        };
        Some(parsed.map_err(|e| e.to_string()))
    }
}

#[cfg(test)]
mod tests;
