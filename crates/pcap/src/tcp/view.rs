//! What the sender knew: the receiver's ACK and window as they reached the sender.
//!
//! A capture point is somewhere on the path. Next to the sender, the latest ACK in the capture
//! is what the sender has seen. Next to the receiver, the sender sees each ACK only one round
//! trip (capture point -> sender -> capture point) later, so "bytes in flight" computed from
//! the latest ACK reads near zero while the sender's window is in fact full. The view therefore
//! replays the receiver's ACKs delayed by that leg's RTT: at time `t` the sender is taken to
//! know the last ACK and window the capture saw before `t - leg`. With the capture at the
//! sender the leg is ~0 and this is the plain computation.
//!
//! Memory: the ACKs of at most one leg's RTT are kept, capped at [`MAX_ACKS`] (older ones are
//! dropped first: the view then lags less than it should, never more).

use std::collections::VecDeque;

use super::seq::distance;

/// ACKs remembered per direction.
pub const MAX_ACKS: usize = 8192;

/// One ACK from the receiver: when the capture saw it, its cumulative ACK and window (bytes).
#[derive(Debug, Clone, Copy)]
struct Ack {
    ts_ns: i64,
    ack: u32,
    window: u32,
}

/// The sender's view of the receiver, for one direction.
#[derive(Debug, Default)]
pub struct SenderView {
    acks: VecDeque<Ack>,
    known: Option<Ack>,
}

impl SenderView {
    /// The receiver sent `ack` with `window` bytes at `ts`.
    pub fn on_ack(&mut self, ts_ns: i64, ack: u32, window: u32) {
        if self.acks.len() == MAX_ACKS {
            self.known = self.acks.pop_front();
        }
        self.acks.push_back(Ack { ts_ns, ack, window });
    }

    /// Advances to `now`, given the capture-to-sender round trip `leg_ns`.
    pub fn advance(&mut self, now: i64, leg_ns: i64) {
        let cut = now - leg_ns;
        while let Some(a) = self.acks.front() {
            if a.ts_ns > cut {
                break;
            }
            self.known = self.acks.pop_front();
        }
    }

    /// When the oldest ACK not yet known reaches the sender, given the leg `leg_ns`.
    pub fn next_known_at(&self, leg_ns: i64) -> Option<i64> {
        self.acks.front().map(|a| a.ts_ns + leg_ns)
    }

    /// The cumulative ACK the sender has seen last; `None` before any ACK reached it.
    pub fn ack(&self) -> Option<u32> {
        self.known.map(|a| a.ack)
    }

    /// Bytes the sender has outstanding when its highest sequence sent is `next_seq`, and the
    /// window it may fill (from the last ACK it has seen); `None` before any ACK reached it.
    pub fn outstanding(&self, next_seq: u32) -> Option<(u32, u32)> {
        self.known.map(|a| (distance(next_seq, a.ack), a.window))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At the receiver, with an 80 ms leg: data arriving 80 ms after an ACK fills the window
    /// that ACK opened, although the receiver has already acknowledged most of it.
    #[test]
    fn the_sender_sees_acks_one_leg_late() {
        let mut v = SenderView::default();
        v.on_ack(0, 1000, 65536);
        v.on_ack(40_000_000, 30_000, 65536);
        v.advance(80_000_000, 80_000_000);
        assert_eq!(v.outstanding(1000 + 65536), Some((65536, 65536)));
        v.advance(120_000_000, 80_000_000);
        assert_eq!(v.outstanding(1000 + 65536), Some((36536, 65536)));
        let mut fresh = SenderView::default();
        fresh.on_ack(5, 1, 10);
        assert_eq!(fresh.outstanding(5), None, "nothing reached the sender yet");
        fresh.advance(5, 0);
        assert_eq!(fresh.outstanding(5), Some((4, 10)));
    }
}
