//! Round trips: each leg as the capture point sees it, and the one the sender lives with.
//!
//! In: RTT samples per leg (handshake, a segment and its ACK, a TSval and its echo) and the
//! TSvals each side sent. Out: per-leg statistics ([`RttStats`]), the first echo of each TSval
//! ([`Tsvals::echo`]) and the smoothed leg behind the sender's data echoes ([`EchoFilter`]).
//!
//! A round trip of one side's data is two legs: capture point -> receiver -> capture point
//! (a data segment and the ACK covering it) and capture point -> sender -> capture point. At
//! the sender the second leg is ~0; at the receiver it holds everything upstream of the
//! capture point, a queue included. The seq/ACK method measures it only when the receiver
//! sends data of its own (a request), which in a download happens once, before any queue
//! filled. TCP timestamps measure it all along: the receiver's ACK carries a TSval, and the
//! first data segment the sender sends after that ACK reached it echoes the value in TSecr
//! (RFC 7323 section 4.3: TS.Recent takes the TSval of the newest in-order segment, and an
//! ACK is one). The time from the ACK to that data segment at the capture point is the leg,
//! upstream queue included.
//!
//! Clock granularity: a TS clock ticks every millisecond (Linux; 1-10 ms elsewhere), so the
//! ACKs of one tick share a TSval. The echo is matched to the *first* ACK that carried the
//! value: that ACK updated the sender's TS.Recent, and a sender held by the window sends as
//! soon as an ACK opens it, so the first echo answers the first carrier. When a later carrier
//! of the same value released the data instead, the sample overstates the leg by at most the
//! time between the first and the last carrier seen before the echo (less than one tick); that
//! spread is kept with each sample as its error bound. Echoes that measure something else are
//! not samples: a TSval also carried by a data segment (the sender may be answering that data,
//! after its own think time), a value echoed before (a later echo of it measured a wait), a
//! resent segment, and an echo after an application pause — every echo is an upper bound of
//! the leg (a sender may answer late, never early), so the smallest of the last three is what
//! counts: one late answer never enters, a queue that stays does after three.

use std::collections::VecDeque;

use super::seq::after;

/// TSvals remembered per side: at one tick per millisecond, a one-second leg.
const MAX_TSVALS: usize = 1024;
/// Echo samples the filter takes its minimum over.
const ECHO_WINDOW: usize = 3;

/// How an RTT sample was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// SYN -> SYN-ACK, SYN-ACK -> ACK.
    Handshake,
    /// A segment and the first ACK covering it.
    Seq,
    /// A TSval echoed on an ACK of new data.
    AckEcho,
    /// The peer's TSval echoed on this side's data.
    DataEcho,
}

/// Statistics of one leg's samples.
#[derive(Debug, Default, Clone, Copy)]
pub struct RttStats {
    /// Samples.
    pub count: u64,
    /// Smallest, ns.
    pub min_ns: i64,
    /// Largest, ns.
    pub max_ns: i64,
    /// Sum, ns.
    pub sum_ns: i64,
    /// Smoothed (RFC 6298 alpha 1/8, as a sender smooths its own), ns.
    pub srtt_ns: i64,
    /// Samples by [`Source`].
    pub by_source: [u64; 4],
}

impl RttStats {
    /// Adds one sample.
    pub fn add(&mut self, rtt: i64, source: Source) {
        if self.count == 0 {
            self.min_ns = rtt;
            self.max_ns = rtt;
            self.srtt_ns = rtt;
        } else {
            self.min_ns = self.min_ns.min(rtt);
            self.max_ns = self.max_ns.max(rtt);
            self.srtt_ns += (rtt - self.srtt_ns) / 8;
        }
        self.count += 1;
        self.sum_ns += rtt;
        self.by_source[source as usize] += 1;
    }

    /// The smoothed value, once there is a sample.
    pub fn smoothed(&self) -> Option<i64> {
        (self.count > 0).then_some(self.srtt_ns.max(0))
    }

    /// The smallest sample, once there is one.
    pub fn least(&self) -> Option<i64> {
        (self.count > 0).then_some(self.min_ns.max(0))
    }

    /// The best source among the samples: `timestamps` (echoes on data), `acks` or
    /// `handshake`.
    pub fn main_source(&self) -> &'static str {
        let [hs, seq, ack_echo, echo] = self.by_source;
        if echo > 0 {
            "timestamps"
        } else if seq + ack_echo > 0 {
            "acks"
        } else if hs > 0 {
            "handshake"
        } else {
            "none"
        }
    }
}

/// One TSval a side sent, as the capture saw it.
#[derive(Debug, Clone, Copy)]
struct Sent {
    tsval: u32,
    /// The first segment carrying it.
    first_ns: i64,
    /// The latest one.
    last_ns: i64,
    /// The first carrier was a pure ACK (no payload, SYN, FIN or RST).
    first_pure: bool,
    /// Some carrier had payload.
    data_carried: bool,
}

/// The first echo of a TSval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo {
    /// From the first carrier to the echo, ns.
    pub rtt_ns: i64,
    /// From the first to the last carrier seen before the echo: how much `rtt_ns` may
    /// overstate the leg when a later carrier released the answer, ns.
    pub spread_ns: i64,
    /// Only pure ACKs carried the value: an echo on data answers an ACK, not data.
    pub acks_only: bool,
}

/// The TSvals one side sent that its peer has not echoed yet, oldest first.
#[derive(Debug, Default)]
pub struct Tsvals {
    sent: VecDeque<Sent>,
}

impl Tsvals {
    /// A segment carrying `tsval` at `ts`; `pure`: it is a pure ACK, `data`: it has payload.
    pub fn note(&mut self, tsval: u32, ts: i64, pure: bool, data: bool) {
        if let Some(last) = self.sent.back_mut() {
            if last.tsval == tsval {
                last.last_ns = ts;
                last.data_carried |= data;
                return;
            }
            if !after(tsval, last.tsval) {
                // Reordered or from a clock that went back: keep the order the echoes need.
                return;
            }
        }
        if self.sent.len() == MAX_TSVALS {
            self.sent.pop_front();
        }
        self.sent.push_back(Sent {
            tsval,
            first_ns: ts,
            last_ns: ts,
            first_pure: pure,
            data_carried: data,
        });
    }

    /// The peer echoed `tsecr` at `ts`. The first echo of a remembered value gives an
    /// [`Echo`]; older values are forgotten (the peer has moved past them), and a value echoed
    /// before, or never seen, gives `None`.
    pub fn echo(&mut self, tsecr: u32, ts: i64) -> Option<Echo> {
        while let Some(s) = self.sent.front() {
            if after(s.tsval, tsecr) {
                return None;
            }
            let s = self.sent.pop_front()?;
            if s.tsval == tsecr {
                return (ts >= s.first_ns).then(|| Echo {
                    rtt_ns: ts - s.first_ns,
                    spread_ns: s.last_ns.min(ts) - s.first_ns,
                    acks_only: s.first_pure && !s.data_carried,
                });
            }
        }
        None
    }

    /// Forgets everything (a closed connection).
    pub fn clear(&mut self) {
        self.sent = VecDeque::new();
    }
}

/// The sender's leg from echoes of the receiver's TSvals on its data: each echo is an upper
/// bound of the leg, so the smallest of the last three is the sample and the leg
/// now. It is not smoothed further: what a window-limited sender's rate follows is the round
/// trips it actually waited through, and a queue that fills between two rounds changes the
/// next one at once (the echoes of one round's ACKs come a tick apart, so three take a few
/// milliseconds).
///
/// This, not the sender's ACKs of the receiver's data, is the leg of the sender's round trip:
/// ACK in, data out. An ACK of the receiver's data may wait for the sender's delayed-ACK timer
/// (a request acknowledged with its response), which is no part of how fast the sender's own
/// data moves; that is why, without echoes, the smallest of those samples stands in.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoFilter {
    recent: [i64; ECHO_WINDOW],
    seen: usize,
    /// Samples taken.
    pub samples: u64,
    /// The largest spread of a sample (its error bound), ns.
    pub spread_max_ns: i64,
    /// The leg now (the last sample), once there is one, ns.
    pub leg_ns: Option<i64>,
}

impl EchoFilter {
    /// An echo on the sender's data; returns the sample it gives.
    pub fn add(&mut self, e: Echo) -> i64 {
        self.recent[self.seen % ECHO_WINDOW] = e.rtt_ns;
        self.seen += 1;
        self.samples += 1;
        self.spread_max_ns = self.spread_max_ns.max(e.spread_ns);
        let n = self.seen.min(ECHO_WINDOW);
        let sample = self.recent[..n].iter().copied().min().unwrap_or(e.rtt_ns);
        self.leg_ns = Some(sample);
        sample
    }
}

/// A mean of the round trip weighted by the bytes each ACK acknowledged: a window-limited
/// sender moves one window per round trip, so this is the mean round trip per window moved,
/// what its rate follows (`window / mean`), however the round trip changed meanwhile.
#[derive(Debug, Default, Clone, Copy)]
pub struct ByteWeighted {
    receiver_leg: f64,
    sender_leg: f64,
    bytes: u64,
}

impl ByteWeighted {
    /// `bytes` newly acknowledged while the legs were `receiver_leg_ns` and `sender_leg_ns`.
    pub fn add(&mut self, bytes: u32, receiver_leg_ns: i64, sender_leg_ns: i64) {
        let b = f64::from(bytes);
        self.receiver_leg += b * receiver_leg_ns as f64;
        self.sender_leg += b * sender_leg_ns as f64;
        self.bytes += u64::from(bytes);
    }

    /// `(receiver leg, sender leg)` means, ns; `None` before any byte was acknowledged.
    pub fn means(&self) -> Option<(i64, i64)> {
        (self.bytes > 0).then(|| {
            let n = self.bytes as f64;
            (
                (self.receiver_leg / n).round() as i64,
                (self.sender_leg / n).round() as i64,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// Three ACKs share TSval 7 within one tick; the echo is matched to the first of them and
    /// carries the spread to the last as its error bound; a second echo of 7 is no sample.
    #[test]
    fn an_echo_matches_the_first_carrier_and_bounds_its_error() {
        let mut t = Tsvals::default();
        t.note(6, 0, true, false);
        t.note(7, MS, true, false);
        t.note(7, MS + 300_000, true, false);
        t.note(7, MS + 900_000, true, false);
        t.note(8, 2 * MS, true, false);
        let e = t.echo(7, 81 * MS).unwrap();
        assert_eq!(e.rtt_ns, 80 * MS);
        assert_eq!(e.spread_ns, 900_000);
        assert!(e.acks_only);
        assert_eq!(t.echo(7, 82 * MS), None, "echoed before");
        assert_eq!(
            t.echo(6, 82 * MS),
            None,
            "forgotten once the peer moved past it"
        );
        assert_eq!(t.echo(8, 83 * MS).map(|e| e.rtt_ns), Some(81 * MS));
    }

    /// A value that also rode on data (a request) is not an ACK's: its echo may include the
    /// peer's think time.
    #[test]
    fn a_value_carried_by_data_is_marked() {
        let mut t = Tsvals::default();
        t.note(5, 0, true, false);
        t.note(5, 10, false, true);
        assert!(!t.echo(5, 20).unwrap().acks_only);
        let mut t = Tsvals::default();
        t.note(5, 0, false, true);
        assert!(!t.echo(5, 20).unwrap().acks_only);
    }

    #[test]
    fn tsvals_wrap_and_stay_bounded() {
        let mut t = Tsvals::default();
        t.note(u32::MAX, 0, true, false);
        t.note(2, 1, true, false);
        t.note(1, 2, true, false); // behind the last one: ignored
        assert_eq!(t.echo(2, 5).map(|e| e.rtt_ns), Some(4));
        for i in 0..(MAX_TSVALS as u32 + 10) {
            t.note(100 + i, i64::from(i), true, false);
        }
        assert_eq!(t.sent.len(), MAX_TSVALS);
        assert_eq!(t.echo(100, 5_000), None, "the oldest were dropped");
    }

    /// One late echo (a sender that paused) does not enter; a leg that stays longer does
    /// after three echoes.
    #[test]
    fn the_filter_drops_one_late_echo_and_follows_a_lasting_change() {
        let mut f = EchoFilter::default();
        let e = |rtt_ns| Echo {
            rtt_ns,
            spread_ns: 0,
            acks_only: true,
        };
        assert_eq!(f.add(e(10 * MS)), 10 * MS);
        assert_eq!(f.add(e(11 * MS)), 10 * MS);
        assert_eq!(f.add(e(5_000 * MS)), 10 * MS, "a pause is not the path");
        assert_eq!(f.add(e(12 * MS)), 11 * MS);
        for _ in 0..2 {
            f.add(e(90 * MS));
        }
        assert_eq!(f.add(e(90 * MS)), 90 * MS, "a queue that stays is");
        assert_eq!(f.samples, 7);
        assert_eq!(f.leg_ns, Some(90 * MS));
    }

    #[test]
    fn the_weighted_mean_follows_the_bytes() {
        let mut w = ByteWeighted::default();
        assert_eq!(w.means(), None);
        // 1 MB at 1 ms, 100 kB at 100 ms: the bytes decide, not the number of ACKs.
        w.add(1_000_000, MS, 0);
        w.add(100_000, MS, 99 * MS);
        let (r, s) = w.means().unwrap();
        assert_eq!(r, MS);
        assert_eq!(s, 9 * MS);
    }
}
