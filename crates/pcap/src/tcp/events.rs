//! What a TCP flow reports as it goes: RTT samples, request/response exchanges and Nagle
//! stalls. The analysis drains these into series after every packet.

use serde::{Deserialize, Serialize};
use tailhunt_model::evidence::capture::NagleStall;

/// Which leg an RTT sample measures, seen from the capture point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Leg {
    /// Capture point -> server -> capture point (ACKs of the client's data).
    Server,
    /// Capture point -> client -> capture point (ACKs of the server's data).
    Client,
}

/// How an RTT sample was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RttMethod {
    /// A segment and the first ACK covering it (Karn-filtered).
    Seq,
    /// A TSval and its echo in TSecr (RFC 7323).
    Timestamp,
    /// SYN -> SYN-ACK or SYN-ACK -> ACK.
    Handshake,
}

/// One RTT sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RttSample {
    /// Flow index in the analysis.
    pub flow: usize,
    /// When the answering packet was seen (epoch ns).
    pub ts_ns: i64,
    /// The round trip, ns.
    pub rtt_ns: i64,
    /// The leg.
    pub leg: Leg,
    /// How it was measured.
    pub method: RttMethod,
}

/// One request and its response, from the data turns of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// Flow index.
    pub flow: usize,
    /// Server port.
    pub server_port: u16,
    /// First request byte seen (epoch ns).
    pub request_start_ns: i64,
    /// Last request segment seen before the response.
    pub request_end_ns: i64,
    /// First response segment, when there was one.
    pub response_start_ns: Option<i64>,
    /// Last response segment before the next request (or the close).
    pub response_end_ns: Option<i64>,
    /// Request payload bytes.
    pub request_bytes: u64,
    /// Response payload bytes.
    pub response_bytes: u64,
    /// The round trip capture point -> server -> capture point used to split the time (the
    /// smallest seen on the server leg), ns.
    pub server_leg_rtt_ns: Option<i64>,
}

impl Exchange {
    /// Time from the first request byte to the last response byte, ns.
    pub fn latency_ns(&self) -> Option<i64> {
        self.response_end_ns.map(|e| e - self.request_start_ns)
    }

    /// The server's share: from the last request segment to the first response segment, less
    /// the network round trip between the capture point and the server.
    pub fn server_ns(&self) -> Option<i64> {
        let start = self.response_start_ns?;
        Some((start - self.request_end_ns - self.server_leg_rtt_ns.unwrap_or(0)).max(0))
    }
}

/// Events of one packet.
#[derive(Debug, Default)]
pub struct FlowEvents {
    /// RTT samples.
    pub rtt: Vec<RttSample>,
    /// Completed exchanges.
    pub exchanges: Vec<Exchange>,
    /// Nagle stalls.
    pub stalls: Vec<NagleStall>,
}

impl FlowEvents {
    /// Nothing pending.
    pub fn is_empty(&self) -> bool {
        self.rtt.is_empty() && self.exchanges.is_empty() && self.stalls.is_empty()
    }
}
