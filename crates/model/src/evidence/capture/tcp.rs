//! A TCP connection's summary: handshake legs, RTTs, each side's sending and what limited it,
//! and how it closed.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The handshake's two legs as seen from the capture point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Handshake {
    /// When the SYN was seen (epoch ns).
    pub syn_ns: i64,
    /// SYN -> SYN-ACK: capture point -> server -> capture point, ns.
    pub server_leg_ns: Option<i64>,
    /// SYN-ACK -> ACK: capture point -> client -> capture point, ns.
    pub client_leg_ns: Option<i64>,
}

/// RTT samples of one leg.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RttSummary {
    /// Samples.
    pub count: u64,
    /// Smallest, ns.
    pub min_ns: i64,
    /// Mean, ns.
    pub mean_ns: i64,
    /// Largest, ns.
    pub max_ns: i64,
}

/// One side's sending.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SideSummary {
    /// Packets.
    pub packets: u64,
    /// IP bytes.
    pub ip_bytes: u64,
    /// New payload bytes.
    pub payload_bytes: u64,
    /// Window-scale shift applied to this side's advertised windows.
    pub wscale: u8,
    /// Last window this side advertised, bytes (scaled).
    pub last_window: Option<u32>,
    /// Largest bytes in flight of this side's data.
    pub max_inflight: u32,
    /// Retransmissions of this side's data.
    pub retransmissions: Retransmissions,
    /// Bytes the capture never saw although the sender moved past them (capture drops).
    pub unseen_bytes: u64,
    /// ACKs from the peer for data the capture never saw.
    pub acked_unseen: u64,
    /// Frames captured twice.
    pub duplicate_frames: u64,
    /// Zero windows this side advertised.
    pub zero_windows: u64,
    /// Time it advertised a zero window, ns.
    pub zero_window_ns: i64,
    /// Fractions of this side's sending time by state (when it sent data).
    pub states: Option<StateFractions>,
    /// First and last payload (epoch ns).
    pub first_data_ns: Option<i64>,
    /// Last payload.
    pub last_data_ns: Option<i64>,
    /// RSTs sent.
    pub resets: u64,
}

/// One end of a connection: the side that opened it (sent the SYN) or the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The side that opened the connection.
    Client,
    /// The side that accepted it.
    Server,
}

impl Role {
    /// `client` or `server`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }

    /// The other end.
    pub fn peer(self) -> Role {
        match self {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a side ended its sending: an orderly FIN or a reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CloseKind {
    /// FIN: the application closed (or shut down writing) with nothing left unread.
    Fin,
    /// RST: an abort (SO_LINGER 0), a close with data unread, or an answer to data for a
    /// socket that no longer exists.
    Rst,
}

impl CloseKind {
    /// `fin` or `rst`.
    pub fn name(self) -> &'static str {
        match self {
            CloseKind::Fin => "fin",
            CloseKind::Rst => "rst",
        }
    }
}

impl fmt::Display for CloseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the side that closed first had been waiting for since it last sent data, read from
/// the packets: the peer's answer (the response, for a client) and how far it had come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Abandoned {
    /// Not one byte from the peer since the closer last sent: the peer had not answered yet
    /// (a server slower than the client's timeout).
    NoAnswer,
    /// The answer was still arriving (a transfer slower than the timeout): its last byte
    /// before the close came within the last tenth of the wait and the peer did not simply
    /// close in turn, or the closer answered later data with resets although the peer sent
    /// nothing after the close where the capture was taken (the data was in flight beyond it).
    StillArriving,
    /// The answer had begun, then nothing came for more than the last tenth of the wait, and
    /// more came after the close: it stalled part-way.
    Stalled,
    /// The answer had ended: it stopped well before the close and nothing more came (an idle
    /// connection closed), or the peer closed in turn with nothing more to send (the closer
    /// closed because the answer was complete).
    Ended,
}

impl Abandoned {
    /// `no-answer`, `still-arriving`, `stalled` or `ended`.
    pub fn name(self) -> &'static str {
        match self {
            Abandoned::NoAnswer => "no-answer",
            Abandoned::StillArriving => "still-arriving",
            Abandoned::Stalled => "stalled",
            Abandoned::Ended => "ended",
        }
    }
}

/// How the connection ended.
///
/// The first FIN or RST, who sent it, and how it met the peer: the times since each side's
/// last data, what the peer had sent since the closer last did (its answer), and what the peer
/// did after the close. Fields from `answer_bytes` on are absent in documents written before
/// they were measured; [`CloseSummary::abandoned`] reads those documents too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloseSummary {
    /// Who closed first.
    pub by: Role,
    /// How.
    pub how: CloseKind,
    /// When (epoch ns).
    pub at_ns: i64,
    /// Time since the client's last request data, ns.
    pub after_last_request_ns: Option<i64>,
    /// Time since the server's last response data, ns.
    pub after_last_response_ns: Option<i64>,
    /// The gap since the closer's last data is a round number of seconds (at most 1.5% or
    /// 10 ms short of it, 5% or 50 ms past it: timers fire late, never early): the signature
    /// of an application timeout.
    pub round_gap_s: Option<f64>,
    /// The peer kept sending data after the close.
    pub peer_sent_after_close: bool,
    /// RSTs the closer sent after closing (answers to data it no longer wanted).
    pub resets_after_close: u64,
    /// New payload bytes the peer sent between the closer's last data and the close: the part
    /// of its answer that was on its way.
    #[serde(default)]
    pub answer_bytes: Option<u64>,
    /// When the first of them came, ns after the closer's last data.
    #[serde(default)]
    pub first_answer_after_ns: Option<i64>,
    /// New payload bytes the peer sent after the close.
    #[serde(default)]
    pub peer_bytes_after_close: Option<u64>,
    /// When the peer's first data after the close came, ns after the close (a server that
    /// answered after the client had given up shows here).
    #[serde(default)]
    pub peer_data_after_close_ns: Option<i64>,
    /// The peer's own FIN or RST after the close.
    #[serde(default)]
    pub peer_close: Option<CloseKind>,
    /// When, ns after the close.
    #[serde(default)]
    pub peer_close_after_ns: Option<i64>,
    /// What the closer had been waiting for ([`CloseSummary::abandoned`] when written).
    #[serde(default)]
    pub abandoned: Option<Abandoned>,
    /// For people: "client closed 30.0s after its request (application timeout?) while the
    /// response was still arriving ...".
    pub note: String,
}

impl CloseSummary {
    /// The closer's wait: time from its last data to the close, ns (`None` when it had sent
    /// none).
    pub fn wait_ns(&self) -> Option<i64> {
        match self.by {
            Role::Client => self.after_last_request_ns,
            Role::Server => self.after_last_response_ns,
        }
    }

    /// Time from the peer's last data to the close, ns (`None` when it had sent none).
    pub fn peer_quiet_ns(&self) -> Option<i64> {
        match self.by {
            Role::Client => self.after_last_response_ns,
            Role::Server => self.after_last_request_ns,
        }
    }

    /// What the closer had been waiting for, from the two gaps and what followed the close
    /// (`None` when the closer had sent no data: its wait has no start in the capture).
    ///
    /// The peer answered if its last data came after the closer's; the answer was still
    /// arriving if that last byte came within the last tenth of the wait (a transfer paced by
    /// its path delivers far more often than that; a finished one stays quiet) unless the peer
    /// then closed too with nothing more to send, or if data kept reaching the closer after
    /// the close (its resets) while the peer sent nothing more here.
    pub fn abandoned(&self) -> Option<Abandoned> {
        let wait = self.wait_ns()?;
        let quiet = match self.peer_quiet_ns() {
            Some(q) if q < wait => q,
            _ => return Some(Abandoned::NoAnswer),
        };
        let more_after = self.peer_sent_after_close;
        let finished =
            self.peer_close == Some(CloseKind::Fin) && !more_after && self.resets_after_close == 0;
        let in_flight = self.resets_after_close > 0 && !more_after;
        Some(
            if (quiet.saturating_mul(10) <= wait && !finished) || in_flight {
                Abandoned::StillArriving
            } else if more_after {
                Abandoned::Stalled
            } else {
                Abandoned::Ended
            },
        )
    }
}

/// A TCP connection's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpSummary {
    /// Handshake, when captured.
    pub handshake: Option<Handshake>,
    /// RTT capture point -> server -> capture point.
    pub rtt_server_leg: Option<RttSummary>,
    /// RTT capture point -> client -> capture point.
    pub rtt_client_leg: Option<RttSummary>,
    /// Window scale read from both SYNs (false: inferred as a lower bound, SYN not captured).
    pub wscale_from_syn: bool,
    /// The client's sending.
    pub client: SideSummary,
    /// The server's sending.
    pub server: SideSummary,
    /// `client` or `server`: who sent more payload.
    pub main_sender: String,
    /// Main sender's payload rate over its busy (non-idle) time, bits/s.
    pub throughput_bps: Option<f64>,
    /// Share of the main sender's busy time limited by the receive window.
    pub rwnd_limited_share: f64,
    /// Mean window the receiver advertised while data flowed, bytes.
    pub mean_window: Option<f64>,
    /// Round trip the main sender lives with (both legs, weighted by the bytes acknowledged;
    /// see [`SenderRtt`]), ns.
    pub path_rtt_ns: Option<i64>,
    /// How `path_rtt_ns` was put together (absent in reports written before it was kept).
    #[serde(default)]
    pub sender_rtt: Option<SenderRtt>,
    /// `mean_window / path_rtt`: the rate a window-limited transfer gets, bits/s.
    pub window_bound_bps: Option<f64>,
    /// Requests answered (data turns).
    pub exchanges: u64,
    /// Small segments held until a late pure ACK (Nagle + delayed ACK).
    pub nagle_stalls: u64,
    /// How it ended (absent: still open at the end of the capture).
    pub close: Option<CloseSummary>,
    /// A later connection reused these ports while this one was still held (until 100 ms
    /// after a clean end, a second after any other close; see tailhunt-pcap's
    /// `QUIET_AFTER_CLEAN_CLOSE_NS`).
    pub ports_reused: bool,
}

/// The round trip the main sender lives with, leg by leg. A window-limited sender moves one
/// window per round trip, so each leg is weighted by the bytes acknowledged while it held:
/// `window / (receiver_leg_ns + sender_leg_ns)` is the rate such a transfer gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SenderRtt {
    /// Capture point -> receiver -> capture point (a data segment and its ACK), ns.
    pub receiver_leg_ns: i64,
    /// Capture point -> sender -> capture point, ns: ~0 in a capture at the sender; in one
    /// at the receiver it holds the path and any queue upstream of the capture point.
    pub sender_leg_ns: i64,
    /// Where the sender's leg came from: `timestamps` (the receiver's TSvals echoed on the
    /// sender's data, queues included), `acks` (the sender's ACKs of the receiver's data),
    /// `handshake` (the SYN exchange only: a queue that filled later is not in it) or `none`.
    pub sender_leg_from: String,
    /// Echoes of the receiver's TSvals on the sender's data taken as samples.
    pub echo_samples: u64,
    /// How much one echo sample may overstate the sender's leg, ns: the longest time one
    /// TSval value was repeated on the receiver's ACKs before the echo (under one tick of its
    /// TS clock, 1 ms on Linux), since the echo is matched to the first ACK carrying it.
    pub echo_error_max_ns: i64,
}

/// Retransmissions by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retransmissions {
    /// After a retransmission timeout: a silence of at least the minimum RTO (200 ms on Linux,
    /// `TCP_RTO_MIN`) or 3 smoothed RTTs, with no duplicate ACKs.
    pub rto: u64,
    /// After duplicate ACKs or SACK (fast retransmit / recovery).
    pub fast: u64,
    /// Of data the receiver had already acknowledged: the sender need not have sent it.
    pub spurious: u64,
    /// Neither (tail-loss probes, early retransmits).
    pub other: u64,
    /// Bytes resent.
    pub bytes: u64,
}

impl Retransmissions {
    /// All retransmitted segments.
    pub fn total(&self) -> u64 {
        self.rto + self.fast + self.spurious + self.other
    }
}

/// Fractions of a sender's time per state (sum 1 when any time was accounted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StateFractions {
    /// Receive-window-limited.
    pub receive_window_limited: f64,
    /// Zero window.
    pub zero_window: f64,
    /// Congestion- or loss-limited.
    pub congestion_or_loss_limited: f64,
    /// Application-limited.
    pub application_limited: f64,
    /// Idle.
    pub idle: f64,
}
