//! One TCP connection followed packet by packet.
//!
//! In: the connection's packets in capture order, each with the side (0 or 1 of the
//! [`FlowKey`]) that sent it. Out: [`FlowEvents`] as they happen, and at the end a
//! [`TcpSummary`](tailhunt_model::evidence::capture::TcpSummary) built from the state kept here.
//!
//! Roles: the side that sent a SYN without ACK is the client; without a handshake in the
//! capture, the side with the higher port.

use tailhunt_model::evidence::capture::{CloseKind, NagleStall};

use crate::bins::SparseBins;
use crate::decode::{flags, Decoded, Tcp};
use crate::flowkey::FlowKey;

use super::close::CloseTrack;
use super::events::{Exchange, FlowEvents, Leg, RttMethod, RttSample};
use super::half::{Half, SegmentKind};
use super::points::WindowPoints;
use super::rtt::{ByteWeighted, Echo, EchoFilter, RttStats, Source};
use super::seq::{after, distance, later, Unwrapped};
use super::states::StateTimes;
use super::view::SenderView;

/// Minimum retransmission timeout of Linux (`TCP_RTO_MIN`, 200 ms): a resend after a silence
/// this long (less 10% for timer slack) without duplicate ACKs was a timeout.
const RTO_MIN_NS: i64 = 180_000_000;
/// Shortest ACK delay taken as a delayed-ACK timer rather than a slow path (Linux's minimum
/// delayed ACK is 40 ms, `TCP_DELACK_MIN`; quick-ACK mode and small RTTs shorten it, hence 20).
const DELAYED_ACK_MIN_NS: i64 = 20_000_000;
/// Longest: Windows' default delayed-ACK timer is 200 ms; allow its slack.
const DELAYED_ACK_MAX_NS: i64 = 500_000_000;
/// How long a connection must be quiet after its first FIN or RST before its live state is
/// freed, unless it ended cleanly: a late retransmission or reset still belongs to it.
pub const QUIET_AFTER_CLOSE_NS: i64 = 1_000_000_000;
/// The same after a clean end ([`TcpFlow::ended_cleanly`]). Long enough for every packet of
/// the connection's last bins (and a burst within reach of them, [`crate::retired`]) to have
/// been read even from a capture whose per-CPU buffers interleave out of order (by a few
/// milliseconds, see [`crate::bins::packed::HORIZON_NS`]; with wide bins it is longer,
/// [`TcpFlow::can_compact`]); short enough that a host opening 10,000 connections a second
/// holds about 300 of them closed (with the sweep's 10 ms), not 1,100 as with 100 ms: 3 MiB of
/// the peak of bench/pcap.sh's 100,000-connection capture. A packet arriving later still is
/// counted as `after-close` ([`crate::analysis::Analyzer`]).
pub const QUIET_AFTER_CLEAN_CLOSE_NS: i64 = 20_000_000;

/// Closed flows smaller than this drop their window points when compacted: the window series
/// are stored for the largest flows only.
const COMPACT_KEEP_WINDOW_BYTES: u64 = 1 << 20;

/// The request/response turn in progress.
#[derive(Debug, Default, Clone, Copy)]
struct Turn {
    current: Option<Exchange>,
}

/// What an ACK left for the rest of the segment: the first echo of a peer's TSval that it did
/// not use as a sample (a data segment may).
#[derive(Debug, Default, Clone, Copy)]
struct AckSeen {
    echo: Option<Echo>,
}

/// A Nagle candidate: a small segment whose ACK came late and as a pure ACK.
#[derive(Debug, Clone, Copy)]
struct Held {
    small_ns: i64,
    small_len: u32,
    ack_ns: i64,
}

/// A TCP connection's state.
#[derive(Debug)]
pub struct TcpFlow {
    /// Its key.
    pub key: FlowKey,
    /// Index in the analysis' flow list.
    pub index: usize,
    /// Client side (0 or 1) once known from the SYN.
    pub syn_client: Option<usize>,
    /// First SYN seen.
    pub syn_ns: Option<i64>,
    /// SYN-ACK seen.
    pub synack_ns: Option<i64>,
    /// The client's first ACK after the SYN-ACK.
    pub handshake_ack_ns: Option<i64>,
    /// The two directions.
    pub halves: [Half; 2],
    /// RTT per leg, indexed by the side whose data was acknowledged (`rtt[d]`: capture point
    /// -> receiver of `d`'s data -> capture point).
    pub rtt: [RttStats; 2],
    /// Per sending side `s`: its leg (capture point -> `s` -> capture point) from the echoes
    /// of the peer's TSvals on its data.
    pub echo: [EchoFilter; 2],
    /// Per sending side: the round trip of its data weighted by the bytes acknowledged.
    pub weighted: [ByteWeighted; 2],
    /// Wire bytes per bin, per sending side.
    pub bins: [SparseBins; 2],
    /// Time by sender state, per sending side.
    pub states: [StateTimes; 2],
    /// Window scale shift inferred for a side (no SYN seen), as a lower bound.
    pub inferred_wscale: [u8; 2],
    /// First and last packet.
    pub first_ns: i64,
    /// Last packet.
    pub last_ns: i64,
    /// Exchanges completed.
    pub exchanges: u64,
    /// Nagle stalls found.
    pub stalls: u64,
    /// The connection was opened again on the same ports after it closed.
    pub reused: bool,
    /// How it ended: the first FIN or RST and what led up to it.
    pub close: CloseTrack,
    /// The sender's time-sequence picture per sending side, at most one point per bin.
    pub window_points: [WindowPoints; 2],
    /// Per sending side: the receiver's ACKs as they reached the sender.
    pub(super) views: [SenderView; 2],
    /// Its live-connection state was freed ([`TcpFlow::compact`]).
    compacted: bool,
    turn: Turn,
    held: [Option<Held>; 2],
    pub(super) bin_ns: i64,
}

impl TcpFlow {
    /// A new flow whose first packet is at `ts`.
    pub fn new(key: FlowKey, index: usize, ts: i64, bin_ns: i64) -> TcpFlow {
        TcpFlow {
            key,
            index,
            syn_client: None,
            syn_ns: None,
            synack_ns: None,
            handshake_ack_ns: None,
            halves: Default::default(),
            rtt: Default::default(),
            echo: Default::default(),
            weighted: Default::default(),
            bins: Default::default(),
            states: Default::default(),
            inferred_wscale: [0; 2],
            first_ns: ts,
            last_ns: ts,
            exchanges: 0,
            stalls: 0,
            reused: false,
            close: CloseTrack::default(),
            window_points: Default::default(),
            views: Default::default(),
            compacted: false,
            turn: Turn::default(),
            held: [None; 2],
            bin_ns,
        }
    }

    /// Gives the flow id `index` (a sharded pass numbers flows once they are all known): the
    /// exchange in progress carries it too.
    pub fn renumber(&mut self, index: usize) {
        self.index = index;
        if let Some(x) = &mut self.turn.current {
            x.flow = index;
        }
    }

    /// The client side: from the SYN, else the side with the higher port.
    pub fn client(&self) -> usize {
        self.syn_client
            .unwrap_or(if self.key.a.port() > self.key.b.port() {
                0
            } else {
                1
            })
    }

    /// True when a new SYN on this key starts a new connection (port reuse).
    pub fn is_reuse(&self, side: usize, tcp: &Tcp<'_>) -> bool {
        let closed = self.close.first.is_some();
        let other_isn = self.halves[side].isn.is_some_and(|isn| isn != tcp.seq);
        tcp.flags & flags::SYN != 0 && tcp.flags & flags::ACK == 0 && (closed || other_isn)
    }

    /// Window-scale shift applied to `side`'s advertised windows.
    pub fn wscale(&self, side: usize) -> u8 {
        match (self.halves[0].isn, self.halves[1].isn) {
            (Some(_), Some(_)) => {
                match (self.halves[0].wscale_offered, self.halves[1].wscale_offered) {
                    (Some(_), Some(_)) => self.halves[side].wscale_offered.unwrap_or(0).min(14),
                    _ => 0,
                }
            }
            _ => self.inferred_wscale[side],
        }
    }

    /// The scale was inferred rather than read from both SYNs.
    pub fn wscale_inferred(&self) -> bool {
        self.halves[0].isn.is_none() || self.halves[1].isn.is_none()
    }

    /// Window `side` advertises, bytes (scaled).
    pub fn window(&self, side: usize) -> Option<u32> {
        let h = &self.halves[side];
        h.has_window
            .then(|| (h.window_raw as u32) << self.wscale(side))
    }

    /// Full-sized segment of `side`: the largest payload it sent (at least 536 bytes, RFC 9293
    /// default), else the MSS its peer offered, else 1460. The offered MSS overstates segments
    /// that carry TCP options (timestamps take 12 bytes of it).
    pub fn mss(&self, side: usize) -> u32 {
        let seen = self.halves[side].max_payload;
        if seen >= 536 {
            return seen;
        }
        self.halves[1 - side].mss.map_or(1460, u32::from)
    }

    /// Processes one packet `p` (whose TCP header is `tcp`) sent by `side`; `bin` is the
    /// index of its bin (`p.ts_ns` divided by the flow's bin width, rounded down).
    pub fn on_packet(
        &mut self,
        p: &Decoded<'_>,
        bin: i64,
        side: usize,
        tcp: &Tcp<'_>,
        ev: &mut FlowEvents,
    ) {
        debug_assert_eq!(bin, p.ts_ns.div_euclid(self.bin_ns));
        let (ts, wire_len, ip_len, ip_id) = (p.ts_ns, p.wire_len, p.ip_len, p.ip_id);
        self.account_time(ts);
        self.last_ns = self.last_ns.max(ts);
        self.bins[side].add(bin, wire_len as u64, ts);
        let h = &mut self.halves[side];
        h.packets += 1;
        h.ip_bytes += ip_len as u64;
        if tcp.flags & flags::SYN != 0 {
            self.on_syn(ts, side, tcp, ev);
        } else if self.handshake_ack_ns.is_none()
            && self.synack_ns.is_some()
            && Some(side) == self.syn_client
            && tcp.flags & flags::ACK != 0
        {
            self.handshake_ack_ns = Some(ts);
            if let Some(sa) = self.synack_ns {
                self.add_rtt(ev, ts, 1 - side, ts - sa, Source::Handshake);
            }
        }
        let acked = if tcp.flags & flags::ACK != 0 {
            self.on_ack(ts, side, tcp, ev)
        } else {
            AckSeen::default()
        };
        if tcp.payload_len > 0 && tcp.flags & flags::SYN == 0 {
            let kind = self.on_data(ts, side, tcp, ip_id, ev);
            if let (Some(e), SegmentKind::New) = (acked.echo, kind) {
                self.on_data_echo(ts, side, e, ev);
            }
        }
        self.on_close_flags(ts, side, tcp);
        self.note_window_point(ts, bin);
    }

    fn on_syn(&mut self, ts: i64, side: usize, tcp: &Tcp<'_>, ev: &mut FlowEvents) {
        let h = &mut self.halves[side];
        if h.isn.is_none() {
            h.isn = Some(tcp.seq);
            h.wscale_offered = tcp.options.wscale;
            h.mss = tcp.options.mss;
            h.has_seq = true;
            h.next_seq = tcp.seq.wrapping_add(1);
            // Data seen before its SYN (a reordered capture) keeps its origin.
            h.seq_line
                .get_or_insert(Unwrapped::new(tcp.seq, h.next_seq));
        }
        if tcp.flags & flags::ACK == 0 {
            if self.syn_client.is_none() {
                self.syn_client = Some(side);
                self.syn_ns = Some(ts);
            }
        } else if self.synack_ns.is_none() {
            self.synack_ns = Some(ts);
            if let Some(syn) = self.syn_ns {
                self.add_rtt(ev, ts, 1 - side, ts - syn, Source::Handshake);
            }
        }
    }

    /// A sample of the leg capture point -> `1 - acked_side` -> capture point.
    fn add_rtt(&mut self, ev: &mut FlowEvents, ts: i64, acked_side: usize, rtt: i64, s: Source) {
        if rtt < 0 {
            return;
        }
        self.rtt[acked_side].add(rtt, s);
        let m = match s {
            Source::Handshake => RttMethod::Handshake,
            Source::Seq => RttMethod::Seq,
            Source::AckEcho | Source::DataEcho => RttMethod::Timestamp,
        };
        let leg = if acked_side == self.client() {
            Leg::Server
        } else {
            Leg::Client
        };
        ev.rtt.push(RttSample {
            flow: self.index,
            ts_ns: ts,
            rtt_ns: rtt,
            leg,
            method: m,
        });
    }

    /// An ACK from `side` about the data of `1 - side`.
    fn on_ack(&mut self, ts: i64, side: usize, tcp: &Tcp<'_>, ev: &mut FlowEvents) -> AckSeen {
        let d = 1 - side;
        let ack = tcp.ack;
        let pure = tcp.payload_len == 0 && tcp.flags & (flags::SYN | flags::FIN | flags::RST) == 0;
        // The window this side advertises for the peer's data.
        let w = &mut self.halves[side];
        let raw = tcp.window;
        if tcp.flags & flags::RST == 0 {
            if raw == 0 && (!w.has_window || w.window_raw != 0) {
                w.zero_windows += 1;
                w.zero_since = Some(ts);
            } else if raw != 0 {
                if let Some(since) = w.zero_since.take() {
                    w.zero_window_ns += ts - since;
                }
            }
            w.window_raw = raw;
            w.has_window = true;
        }
        if tcp.flags & flags::RST == 0 {
            let window = (raw as u32) << self.wscale(side);
            self.views[d].on_ack(ts, ack, window);
        }
        let h = &mut self.halves[d];
        let new_ack = !h.has_ack || after(ack, h.acked);
        let newly_acked = if h.has_ack { distance(ack, h.acked) } else { 0 };
        let mut sample = None;
        if new_ack {
            sample = h.on_new_ack(ts, ack);
            if tcp.options.sack_count == 0 {
                h.sacked = 0;
            }
        } else if ack == h.acked && pure && h.inflight() > 0 {
            h.dupacks += 1;
        }
        if tcp.options.sack_count > 0 {
            let acked = h.acked;
            h.sacked = tcp.options.sack[..tcp.options.sack_count as usize]
                .iter()
                .filter(|(l, _)| after(*l, acked))
                .map(|&(l, r)| distance(r, l))
                .sum();
        }
        // Timestamps: this side's TSval is remembered; the first echo of the peer's TSval is
        // a sample of this side's leg when the ACK covers new data (a later echo, or one on a
        // duplicate ACK, would measure a wait, not the path), else it may still be one on the
        // data this segment carries (see `on_timestamps`).
        let mut echo = None;
        if let Some((tsval, tsecr)) = tcp.options.timestamps {
            let data = tcp.payload_len > 0;
            self.halves[side].tsvals.note(tsval, ts, pure, data);
            echo = self.halves[d].tsvals.echo(tsecr, ts);
            if new_ack && sample.is_none() {
                if let Some(e) = echo.take() {
                    self.add_rtt(ev, ts, d, e.rtt_ns, Source::AckEcho);
                }
            }
            if new_ack {
                echo = None;
            }
        }
        if let Some(rtt) = sample {
            self.add_rtt(ev, ts, d, rtt, Source::Seq);
        }
        if newly_acked > 0 {
            if let Some((receiver_leg, sender_leg)) = self.legs_now(d) {
                self.weighted[d].add(newly_acked, receiver_leg, sender_leg);
            }
        }
        self.infer_wscale(side);
        // Nagle: a late, pure ACK that leaves nothing in flight after a sub-MSS segment.
        let h = &self.halves[d];
        if new_ack && pure && h.inflight() == 0 {
            if let Some((small_ns, _, len, _)) = h.last_segment {
                let delay = ts - small_ns;
                let path = self.rtt[d].min_ns.max(0);
                if len < self.mss(d)
                    && (DELAYED_ACK_MIN_NS..=DELAYED_ACK_MAX_NS).contains(&delay)
                    && delay >= 4 * path
                {
                    self.held[d] = Some(Held {
                        small_ns,
                        small_len: len,
                        ack_ns: ts,
                    });
                }
            }
        }
        AckSeen { echo }
    }

    /// Without the SYNs the window scale is unknown: take the smallest shift under which the
    /// advertised window covers the bytes the sender had outstanding (a lower bound).
    fn infer_wscale(&mut self, receiver: usize) {
        if !self.wscale_inferred() {
            return;
        }
        let h = &self.halves[1 - receiver];
        let raw = self.halves[receiver].window_raw as u32;
        let outstanding = distance(h.next_seq, h.acked);
        let mut shift = self.inferred_wscale[receiver];
        while raw > 0 && shift < 14 && (raw << shift) < outstanding {
            shift += 1;
        }
        self.inferred_wscale[receiver] = shift;
    }

    /// A segment with payload from `side`; says whether it was new data.
    fn on_data(
        &mut self,
        ts: i64,
        side: usize,
        tcp: &Tcp<'_>,
        ip_id: u16,
        ev: &mut FlowEvents,
    ) -> SegmentKind {
        let previous_send = self.halves[side].last_send_ns;
        let kind = self.halves[side].on_data(ts, tcp.seq, tcp.payload_len, ip_id);
        if kind == SegmentKind::Duplicate {
            return kind;
        }
        let new_bytes = if kind == SegmentKind::New {
            tcp.payload_len as u64
        } else {
            0
        };
        self.close.on_data(side, ts, new_bytes);
        if kind == SegmentKind::Resent {
            let end = tcp.seq.wrapping_add(tcp.payload_len);
            let srtt = self.rtt[side].srtt_ns;
            let h = &mut self.halves[side];
            let silence = previous_send.map_or(0, |p| ts - p);
            let r = &mut h.retrans;
            if h.has_ack && !after(end, h.acked) {
                r.spurious += 1;
            } else if h.dupacks >= 2 || h.sacked > 0 {
                r.fast += 1;
            } else if silence >= RTO_MIN_NS.min(3 * srtt.max(1)).max(RTO_MIN_NS / 4) {
                r.rto += 1;
            } else {
                r.other += 1;
            }
            r.bytes += tcp.payload_len as u64;
            h.last_retrans_ns = Some(ts);
        }
        if let Some(held) = self.held[side].take() {
            let back = self.rtt[1 - side].min_ns.max(0) + 2_000_000;
            if kind == SegmentKind::New && ts - held.ack_ns <= back {
                self.stalls += 1;
                ev.stalls.push(NagleStall {
                    flow: self.index,
                    sender_is_client: side == self.client(),
                    small_ns: held.small_ns,
                    small_len: held.small_len,
                    ack_ns: held.ack_ns,
                    release_ns: ts,
                    ack_delay_ns: held.ack_ns - held.small_ns,
                });
            }
        }
        if kind == SegmentKind::New {
            self.on_turn(ts, side, tcp.payload_len, ev);
        }
        kind
    }

    /// New data from `side` echoed a TSval of its peer for the first time: when only pure
    /// ACKs carried that value, the echo measures `side`'s leg, queue included (see
    /// [`super::rtt`]).
    fn on_data_echo(&mut self, ts: i64, side: usize, e: Echo, ev: &mut FlowEvents) {
        if e.acks_only {
            let rtt = self.echo[side].add(e);
            self.add_rtt(ev, ts, 1 - side, rtt, Source::DataEcho);
        }
    }

    fn on_turn(&mut self, ts: i64, side: usize, len: u32, ev: &mut FlowEvents) {
        let client = self.client();
        let server_port = self.key.endpoint(1 - client).port();
        let leg = (self.rtt[client].count > 0).then_some(self.rtt[client].min_ns);
        if side == client {
            match &mut self.turn.current {
                Some(x) if x.response_start_ns.is_none() => {
                    x.request_end_ns = ts;
                    x.request_bytes += len as u64;
                }
                _ => {
                    if let Some(done) = self.turn.current.take() {
                        self.exchanges += 1;
                        ev.exchanges.push(done);
                    }
                    self.turn.current = Some(Exchange {
                        flow: self.index,
                        server_port,
                        request_start_ns: ts,
                        request_end_ns: ts,
                        response_start_ns: None,
                        response_end_ns: None,
                        request_bytes: len as u64,
                        response_bytes: 0,
                        server_leg_rtt_ns: leg,
                    });
                }
            }
        } else if let Some(x) = &mut self.turn.current {
            x.response_start_ns.get_or_insert(ts);
            x.response_end_ns = Some(ts);
            x.response_bytes += len as u64;
            x.server_leg_rtt_ns = leg;
        }
    }

    fn on_close_flags(&mut self, ts: i64, side: usize, tcp: &Tcp<'_>) {
        let last_data = [self.halves[0].last_data_ns, self.halves[1].last_data_ns];
        let h = &mut self.halves[side];
        if tcp.flags & flags::FIN != 0 && h.fin_ns.is_none() {
            h.fin_ns = Some(ts);
            // A FIN takes one sequence number.
            let fin_end = tcp.seq.wrapping_add(tcp.payload_len).wrapping_add(1);
            h.next_seq = later(fin_end, h.next_seq);
            self.close.on_close(side, CloseKind::Fin, ts, last_data);
        }
        if tcp.flags & flags::RST != 0 {
            h.rsts += 1;
            self.close.on_close(side, CloseKind::Rst, ts, last_data);
        }
    }

    /// Frees what only a live connection needs (segments awaiting ACKs, TSvals, the ACK
    /// replay, small flows' window points) once it has closed and been quiet for a while:
    /// memory then follows the open connections, not every connection the capture held.
    /// Later stray packets are still counted; they just give no RTT samples.
    pub fn compact(&mut self) {
        for h in &mut self.halves {
            h.outstanding = Default::default();
            h.tsvals = Default::default();
        }
        self.views = Default::default();
        let bytes = self.halves[0].payload_bytes + self.halves[1].payload_bytes;
        if bytes < COMPACT_KEEP_WINDOW_BYTES {
            self.window_points = Default::default();
        } else {
            self.window_points
                .iter_mut()
                .for_each(WindowPoints::shrink_to_fit);
        }
        self.bins.iter_mut().for_each(SparseBins::shrink);
        self.compacted = true;
    }

    /// Whether [`TcpFlow::compact`] may run at `now`: closed, and quiet for
    /// [`QUIET_AFTER_CLEAN_CLOSE_NS`] after a clean end ([`TcpFlow::ended_cleanly`]), or for
    /// [`QUIET_AFTER_CLOSE_NS`] after any other first FIN or RST; at least five bins either
    /// way.
    pub fn can_compact(&self, now: i64) -> bool {
        if self.compacted || self.close.first.is_none() {
            return false;
        }
        let quiet = if self.ended_cleanly() {
            QUIET_AFTER_CLEAN_CLOSE_NS
        } else {
            QUIET_AFTER_CLOSE_NS
        };
        // With wide bins, longer: every bin a burst could claim it by must be complete.
        let reach = (crate::retired::BURST_REACH_BINS + 2) * self.bin_ns;
        now - self.last_ns > quiet.max(reach)
    }

    /// Nothing more is due on the connection: a reset, or both sides' FINs sent and
    /// acknowledged (all their data with them). Only a lost last ACK (the peer then sends
    /// its FIN again, a retransmission timeout later) or a stray segment can still come.
    pub fn ended_cleanly(&self) -> bool {
        self.halves.iter().any(|h| h.rsts > 0)
            || self
                .halves
                .iter()
                .all(|h| h.fin_ns.is_some() && h.has_ack && h.acked == h.next_seq)
    }

    /// Ends the flow (end of capture, or a new connection on the same ports): the exchange in
    /// progress is reported, with or without its response.
    pub fn finish(&mut self, ev: &mut FlowEvents) {
        if let Some(x) = self.turn.current.take() {
            if x.response_start_ns.is_some() {
                self.exchanges += 1;
            }
            ev.exchanges.push(x);
        }
        for h in &mut self.halves {
            if let Some(since) = h.zero_since.take() {
                h.zero_window_ns += self.last_ns - since;
            }
        }
    }
}
