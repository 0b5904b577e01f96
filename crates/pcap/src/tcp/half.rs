//! One direction of a TCP connection: the data one side sends and what the other side says
//! about it (ACKs, SACKs, window).

use std::collections::VecDeque;

use tailhunt_model::evidence::capture::Retransmissions;

use super::rtt::Tsvals;
use super::seq::{after, at_or_after, distance, later, Unwrapped};

/// Outstanding segments remembered for RTT samples; older ones are dropped (a sample lost,
/// never a wrong one).
const MAX_OUTSTANDING: usize = 512;

/// A data segment not yet acknowledged.
#[derive(Debug, Clone, Copy)]
pub struct Outstanding {
    /// First sequence number of the segment.
    pub seq: u32,
    /// Sequence number just past the segment.
    pub seq_end: u32,
    /// When the capture saw it.
    pub ts_ns: i64,
    /// Sent more than once: its ACK is ambiguous (Karn's rule), no RTT sample.
    pub retransmitted: bool,
}

/// The state of one direction.
#[derive(Debug, Default)]
pub struct Half {
    /// SYN seen: its initial sequence number.
    pub isn: Option<u32>,
    /// Window-scale shift offered in this side's SYN.
    pub wscale_offered: Option<u8>,
    /// MSS offered in this side's SYN.
    pub mss: Option<u16>,
    /// Largest segment payload seen from this side.
    pub max_payload: u32,
    /// Highest sequence number sent + 1 (valid when `has_seq`).
    pub next_seq: u32,
    /// Some sequence number has been seen.
    pub has_seq: bool,
    /// `next_seq` as an offset from the initial sequence number (from the first sequence
    /// number seen when the SYN was not captured), unwrapped; set with `has_seq` and moved
    /// after each packet ([`super::sending`]).
    pub seq_line: Option<Unwrapped>,
    /// Highest cumulative ACK the peer sent for this side's data (valid when `has_ack`).
    pub acked: u32,
    /// Some ACK has been seen.
    pub has_ack: bool,
    /// Bytes the peer has SACKed above `acked` (from its latest SACK blocks).
    pub sacked: u32,
    /// Duplicate ACKs in a row from the peer.
    pub dupacks: u32,
    /// Raw window field this side last advertised (for the peer's data).
    pub window_raw: u16,
    /// This side has advertised some window.
    pub has_window: bool,
    /// Packets sent by this side.
    pub packets: u64,
    /// IP bytes sent by this side.
    pub ip_bytes: u64,
    /// New payload bytes (retransmissions excluded).
    pub payload_bytes: u64,
    /// Retransmissions.
    pub retrans: Retransmissions,
    /// When the last retransmission was seen.
    pub last_retrans_ns: Option<i64>,
    /// Sequence gaps: data the capture never saw although the sender moved past it (capture
    /// drops, or a capture started mid-flight), bytes.
    pub unseen_bytes: u64,
    /// ACKs from the peer for data this capture never saw.
    pub acked_unseen: u64,
    /// The same frame twice in the capture (same sequence, length and IP id within 1 ms).
    pub duplicate_frames: u64,
    /// First and last payload-carrying segment.
    pub first_data_ns: Option<i64>,
    /// Last payload-carrying segment.
    pub last_data_ns: Option<i64>,
    /// The last payload-carrying segment: `(ts, seq, len, ip_id)`.
    pub last_segment: Option<(i64, u32, u32, u16)>,
    /// Last transmission of any data (new or resent).
    pub last_send_ns: Option<i64>,
    /// FIN sent by this side (first time).
    pub fin_ns: Option<i64>,
    /// RSTs sent.
    pub rsts: u64,
    /// Zero windows advertised by this side: count, and when the current one started.
    pub zero_windows: u64,
    /// Start of the zero-window period in progress.
    pub zero_since: Option<i64>,
    /// Time spent advertising a zero window, ns.
    pub zero_window_ns: i64,
    /// Segments awaiting an ACK (for RTT samples).
    pub outstanding: VecDeque<Outstanding>,
    /// TSvals this side sent that the peer has not echoed yet.
    pub tsvals: Tsvals,
    /// Largest bytes in flight as the sender saw them (see [`super::view`]).
    pub max_inflight: u32,
}

/// What happened to a data segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// New data.
    New,
    /// Data sent before (a retransmission).
    Resent,
    /// The same captured frame again.
    Duplicate,
}

impl Half {
    /// Bytes sent and not yet acknowledged (SACKed bytes excluded).
    pub fn inflight(&self) -> u32 {
        if !self.has_seq || !self.has_ack {
            return 0;
        }
        distance(self.next_seq, self.acked).saturating_sub(self.sacked)
    }

    /// A payload-carrying segment `[seq, seq + len)` from this side at `ts`.
    pub fn on_data(&mut self, ts: i64, seq: u32, len: u32, ip_id: u16) -> SegmentKind {
        let end = seq.wrapping_add(len);
        if let Some((t, s, l, id)) = self.last_segment {
            if s == seq && l == len && id == ip_id && ip_id != 0 && ts - t < 1_000_000 {
                self.duplicate_frames += 1;
                return SegmentKind::Duplicate;
            }
        }
        self.last_segment = Some((ts, seq, len, ip_id));
        self.max_payload = self.max_payload.max(len);
        self.first_data_ns.get_or_insert(ts);
        self.last_data_ns = Some(ts);
        self.last_send_ns = Some(ts);
        if !self.has_seq {
            self.has_seq = true;
            self.seq_line = Some(Unwrapped::new(seq, end));
            self.next_seq = end;
            self.payload_bytes += len as u64;
            self.push_outstanding(seq, end, ts);
            return SegmentKind::New;
        }
        if after(end, self.next_seq) {
            if after(seq, self.next_seq) {
                self.unseen_bytes += distance(seq, self.next_seq) as u64;
            }
            let fresh = distance(end, later(self.next_seq, seq));
            self.payload_bytes += fresh as u64;
            let resent_part = len - fresh.min(len);
            if resent_part > 0 {
                self.mark_resent(seq, self.next_seq);
            }
            self.next_seq = end;
            self.push_outstanding(seq, end, ts);
            SegmentKind::New
        } else {
            self.mark_resent(seq, end);
            SegmentKind::Resent
        }
    }

    fn push_outstanding(&mut self, seq: u32, seq_end: u32, ts_ns: i64) {
        if self.outstanding.len() == MAX_OUTSTANDING {
            self.outstanding.pop_front();
        }
        self.outstanding.push_back(Outstanding {
            seq,
            seq_end,
            ts_ns,
            retransmitted: false,
        });
    }

    fn mark_resent(&mut self, seq: u32, end: u32) {
        for o in self.outstanding.iter_mut() {
            if after(o.seq_end, seq) && after(end, o.seq) {
                o.retransmitted = true;
            }
        }
    }

    /// A new cumulative ACK for this side's data at `ts`; returns the RTT sample it gives
    /// (capture point -> receiver -> capture point), Karn-filtered.
    pub fn on_new_ack(&mut self, ts: i64, ack: u32) -> Option<i64> {
        if self.has_seq && after(ack, self.next_seq) {
            self.acked_unseen += 1;
        }
        self.has_ack = true;
        self.acked = ack;
        self.dupacks = 0;
        let mut sample = None;
        while let Some(&o) = self.outstanding.front() {
            if !at_or_after(ack, o.seq_end) {
                break;
            }
            self.outstanding.pop_front();
            if !o.retransmitted && ts >= o.ts_ns {
                sample = Some(ts - o.ts_ns);
            }
        }
        sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_resent_and_duplicate_segments() {
        let mut h = Half::default();
        assert_eq!(h.on_data(0, 1000, 100, 1), SegmentKind::New);
        assert_eq!(h.on_data(10, 1100, 100, 2), SegmentKind::New);
        assert_eq!(h.on_data(20, 1100, 100, 2), SegmentKind::Duplicate);
        assert_eq!(h.on_data(300_000_000, 1000, 100, 3), SegmentKind::Resent);
        assert_eq!(h.payload_bytes, 200);
        // The first segment was resent: its ACK gives no sample (Karn); the second's does.
        assert_eq!(h.on_new_ack(1_000, 1100), None);
        assert_eq!(h.on_new_ack(2_000, 1200), Some(1_990));
        assert_eq!(h.inflight(), 0);
    }

    #[test]
    fn a_sequence_gap_is_unseen_data_not_loss() {
        let mut h = Half::default();
        h.on_data(0, 0, 100, 1);
        h.on_data(1, 300, 100, 2);
        assert_eq!(h.unseen_bytes, 200);
        assert_eq!(h.payload_bytes, 200);
    }
}
