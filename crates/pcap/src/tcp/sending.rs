//! What held each sender, over time: the receiver's ACKs as they reached the sender (see
//! [`super::view`]), the round trip the sender lives with (see [`super::rtt`]) and the state
//! its sending was in between packets.
//!
//! In: a [`TcpFlow`]'s state after each packet. Out: the sender's view of its outstanding
//! bytes and window ([`WindowPoint`]s: with its sequence and ACK lines, one per bin), the time
//! per [`SenderState`], and the round trip its data waited through.

use super::flow::TcpFlow;
use super::seq::distance;
use super::states::SenderState;

/// One point of a sender's time-sequence picture: where its data and the receiver's ACKs and
/// window stood, as the sender knew them (see [`super::view`]), after the last packet of a bin.
/// Sequence numbers are offsets from the sender's initial sequence number (from the first one
/// seen when the capture missed the SYN), unwrapped past 2^32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPoint {
    /// The packet after which the point was taken, epoch ns.
    pub ts_ns: i64,
    /// Just past the highest sequence number sent (a retransmission does not move it back).
    pub seq: i64,
    /// The highest cumulative ACK that had reached the sender.
    pub ack: i64,
    /// Bytes in flight: `seq - ack` less the bytes SACKed above `ack`.
    pub inflight: u32,
    /// The receive window last advertised to the sender, bytes (scaled): it may send up to
    /// `ack + window`.
    pub window: u32,
}

impl TcpFlow {
    /// Round trip capture point -> `side` -> capture point now, as `side` sends: from the
    /// echoes of its peer's TSvals on its data when there are any (they follow a queue
    /// upstream of the capture point as it fills and drains), else the smallest sample of the
    /// leg (see [`EchoFilter`](super::rtt::EchoFilter)); 0 while unknown.
    pub fn leg_to(&self, side: usize) -> i64 {
        self.echo[side]
            .leg_ns
            .or_else(|| self.rtt[1 - side].least())
            .unwrap_or(0)
    }

    /// `(receiver leg, sender leg)` of side `d`'s data now; `None` before the receiver's leg
    /// was measured.
    pub(super) fn legs_now(&self, d: usize) -> Option<(i64, i64)> {
        Some((self.rtt[d].smoothed()?, self.leg_to(d)))
    }

    /// `(outstanding, window)` as the sender `d` sees them now.
    pub(super) fn sender_view(&self, d: usize) -> Option<(u32, u32)> {
        let h = &self.halves[d];
        if !h.has_seq || h.first_data_ns.is_none() {
            return None;
        }
        self.views[d].outstanding(h.next_seq)
    }

    /// Adds (or, within the same bin, replaces) each sender's [`WindowPoint`] after the
    /// packet at `ts`, in bin `bin`.
    pub(super) fn note_window_point(&mut self, ts: i64, bin: i64) {
        // The bin's first and last nanosecond, to test the last point without dividing (in
        // 128 bits: a corrupt capture's time may be near either end of i64).
        let first = i128::from(bin) * i128::from(self.bin_ns);
        let last_ns = first + i128::from(self.bin_ns) - 1;
        for d in 0..2 {
            let leg = self.leg_to(d);
            self.views[d].advance(ts, leg);
            // The line moves after every packet, so no step between two values reaches 2^31.
            let next_seq = self.halves[d].next_seq;
            let Some(line) = self.halves[d].seq_line.as_mut() else {
                continue;
            };
            let seq = line.advance(next_seq);
            let line = *line;
            let (Some((outstanding, window)), Some(ack)) =
                (self.sender_view(d), self.views[d].ack())
            else {
                continue;
            };
            let outstanding = outstanding.saturating_sub(self.halves[d].sacked);
            let h = &mut self.halves[d];
            h.max_inflight = h.max_inflight.max(outstanding);
            let pts = &mut self.window_points[d];
            // An ACK is within 2^31 of the data it acknowledges; a reordered (older) ACK does
            // not move the line back.
            let ack = pts
                .last()
                .map_or(i64::MIN, |p| p.ack)
                .max(line.offset_of(ack));
            let point = WindowPoint {
                ts_ns: ts,
                seq,
                ack,
                inflight: outstanding,
                window,
            };
            match pts.last_mut() {
                Some(last) if (first..=last_ns).contains(&i128::from(last.ts_ns)) => *last = point,
                _ => pts.push(point),
            }
        }
    }

    /// Attributes the time since the previous packet to each sending side's state then. An
    /// ACK that reaches the sender inside the gap (one leg after the capture saw it) changes
    /// that state there: after a sender's last train the gap is window-limited only until
    /// the ACKs of the train reach it.
    pub(super) fn account_time(&mut self, ts: i64) {
        if ts <= self.last_ns {
            return;
        }
        for d in 0..2 {
            if self.halves[d].first_data_ns.is_none() {
                continue;
            }
            let leg = self.leg_to(d);
            let mut from = self.last_ns;
            while let Some(known) = self.views[d].next_known_at(leg).filter(|&k| k < ts) {
                if known > from {
                    let state = self.sender_state(d, known - from);
                    self.states[d].add(state, known - from);
                    from = known;
                }
                self.views[d].advance(known, leg);
            }
            let state = self.sender_state(d, ts - from);
            self.states[d].add(state, ts - from);
        }
    }

    /// What limited side `d`'s sending over a gap of `dt` after the last packet.
    pub fn sender_state(&self, d: usize, dt: i64) -> SenderState {
        let h = &self.halves[d];
        let (outstanding, window) = match self.sender_view(d) {
            Some(v) => (v.0, Some(v.1)),
            None => (distance(h.next_seq, h.acked), self.window(1 - d)),
        };
        if window == Some(0) {
            return SenderState::ZeroWindow;
        }
        let inflight = outstanding.saturating_sub(h.sacked);
        let path = self.legs_now(d).map_or(0, |(r, s)| r + s);
        if inflight == 0 {
            return if dt > (10 * path).max(10_000_000) {
                SenderState::Idle
            } else {
                SenderState::ApplicationLimited
            };
        }
        let mss = self.mss(d);
        // Window-limited: no room for two more full segments (or, for windows smaller than
        // four segments, for half the window) — loopback's 64 KiB MSS must not make every
        // byte in flight "fill" a 64 KiB window. Two, because a receiver acknowledges every
        // second segment (RFC 1122 4.2.3.2) and a capture downstream of a bottleneck sees the
        // two segments each ACK released one slot of the bottleneck apart: in between, the
        // sender seems to have room it had in fact already used.
        if let Some(w) = window {
            if w.saturating_sub(outstanding) < (2 * mss).min(w / 2) {
                return SenderState::ReceiveWindowLimited;
            }
        }
        let recovering = h
            .last_retrans_ns
            .is_some_and(|t| self.last_ns - t <= path.max(1_000_000) * 2);
        let full_sized = h.last_segment.is_some_and(|(_, _, len, _)| len >= mss);
        if recovering || full_sized {
            SenderState::CongestionOrLoss
        } else {
            SenderState::ApplicationLimited
        }
    }

    /// The round trip side `d` lives with (sender -> receiver -> sender), as `(receiver
    /// leg, sender leg)`: both legs weighted by the bytes each ACK acknowledged (see
    /// [`ByteWeighted`](super::rtt::ByteWeighted)), or as they are now before any ACK of data.
    pub fn sender_legs_ns(&self, d: usize) -> Option<(i64, i64)> {
        self.weighted[d].means().or_else(|| self.legs_now(d))
    }

    /// The whole round trip of side `d`'s data: [`TcpFlow::sender_legs_ns`] added up.
    pub fn path_rtt_ns(&self, d: usize) -> Option<i64> {
        self.sender_legs_ns(d).map(|(r, s)| r + s)
    }
}
