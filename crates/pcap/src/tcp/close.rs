//! How a connection ended: the first FIN or RST, what the closer had been waiting for, and
//! what the peer did afterwards.
//!
//! In: every payload segment and every FIN/RST of one connection, in capture order. Out: a
//! [`CloseSummary`]: who closed first and how, the gaps since each side's last data (a round
//! number of seconds is an application timeout's signature), the peer's answer since the
//! closer last sent (bytes, when the first came, whether it was still arriving), and after the
//! close the peer's data, its resets and its own close. A client that gave up on a server that
//! had not answered and one that gave up on a response still arriving are told apart here, so
//! the detector never has to read the note.
//!
//! State: a few counters per side; nothing grows with the packets.

use tailhunt_model::evidence::capture::{Abandoned, CloseKind, CloseSummary, Role};
use tailhunt_model::units::Bytes;
use tailhunt_model::DurationNs;

use super::half::Half;

/// Round numbers of seconds that application timeouts are usually set to.
const ROUND_SECONDS: [f64; 16] = [
    1.0, 2.0, 3.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 900.0,
];

/// What one side has had back since it last sent data.
#[derive(Debug, Default, Clone, Copy)]
struct Answer {
    /// New payload bytes from the peer since this side's last data.
    bytes: u64,
    /// The first of the peer's segments since then.
    first_ns: Option<i64>,
    /// This side's last data.
    since_ns: Option<i64>,
}

/// The close of one connection, followed packet by packet.
#[derive(Debug, Default)]
pub struct CloseTrack {
    /// `(side, kind, ts)` of the first FIN or RST.
    pub first: Option<(usize, CloseKind, i64)>,
    /// Each side's last payload before the first FIN or RST.
    pub data_at_close: [Option<i64>; 2],
    /// Per side, until the close: the peer's answer to its last data.
    answers: [Answer; 2],
    /// Per side, after the close: new payload bytes and when its first data came.
    after: [(u64, Option<i64>); 2],
    /// Per side, after the first close: its own first FIN or RST.
    later_close: [Option<(CloseKind, i64)>; 2],
}

impl CloseTrack {
    /// A payload segment from `side` at `ts` carrying `new_bytes` bytes never sent before (0
    /// for a retransmission).
    pub fn on_data(&mut self, side: usize, ts: i64, new_bytes: u64) {
        if self.first.is_some() {
            let a = &mut self.after[side];
            a.0 += new_bytes;
            a.1.get_or_insert(ts);
            return;
        }
        self.answers[side] = Answer {
            since_ns: Some(ts),
            ..Answer::default()
        };
        let peer = &mut self.answers[1 - side];
        peer.bytes += new_bytes;
        peer.first_ns.get_or_insert(ts);
    }

    /// A FIN or RST from `side` at `ts`; `last_data` is each side's last payload so far.
    pub fn on_close(&mut self, side: usize, kind: CloseKind, ts: i64, last_data: [Option<i64>; 2]) {
        match self.first {
            None => {
                self.first = Some((side, kind, ts));
                self.data_at_close = last_data;
            }
            Some((closer, _, _)) if closer != side => {
                self.later_close[side].get_or_insert((kind, ts));
            }
            Some(_) => {}
        }
    }

    /// The summary, given which side is the client and both halves' counters.
    pub fn summary(&self, client: usize, halves: &[Half; 2]) -> Option<CloseSummary> {
        let (side, how, at) = self.first?;
        let peer = 1 - side;
        let by = if side == client {
            Role::Client
        } else {
            Role::Server
        };
        let since = |t: Option<i64>| t.filter(|&t| t <= at).map(|t| at - t);
        let after_request = since(self.data_at_close[client]);
        let after_response = since(self.data_at_close[1 - client]);
        let answer = self.answers[side];
        let (bytes_after, first_after) = self.after[peer];
        let closer_rsts = halves[side].rsts;
        let resets_after = match how {
            CloseKind::Rst => closer_rsts.saturating_sub(1),
            CloseKind::Fin => closer_rsts,
        };
        let mut close = CloseSummary {
            by,
            how,
            at_ns: at,
            after_last_request_ns: after_request,
            after_last_response_ns: after_response,
            round_gap_s: None,
            peer_sent_after_close: halves[peer].last_data_ns.is_some_and(|t| t > at),
            resets_after_close: resets_after,
            answer_bytes: answer.since_ns.map(|_| answer.bytes),
            first_answer_after_ns: answer
                .since_ns
                .zip(answer.first_ns)
                .map(|(since, first)| first - since),
            peer_bytes_after_close: Some(bytes_after),
            peer_data_after_close_ns: first_after.map(|t| t - at),
            peer_close: self.later_close[peer].map(|(k, _)| k),
            peer_close_after_ns: self.later_close[peer].map(|(_, t)| t - at),
            abandoned: None,
            note: String::new(),
        };
        close.round_gap_s = close.wait_ns().and_then(round_seconds);
        close.abandoned = close.abandoned();
        close.note = note(&close);
        Some(close)
    }
}

/// The close for people: who, how, after what, what they had been waiting for, and what the
/// peer did after.
///
/// Written into one buffer: every closed connection of a capture gets one, and building it
/// from a string per part (with durations printed as floats) took about 10% of the CPU of a
/// 100,000-connection capture; written in place, that capture took 7% less CPU.
fn note(c: &CloseSummary) -> String {
    use std::fmt::Write;
    // What the closer had sent, what it was waiting for, and how no answer at all reads: a
    // server that closes after its response with nothing more from the client is what
    // `Connection: close` does, not data the server lacked.
    let (own, answer, none) = match c.by {
        Role::Client => ("its request", "response", "with no response byte yet"),
        Role::Server => (
            "its last response",
            "client's data",
            "with no new request begun",
        ),
    };
    let verb = match c.how {
        CloseKind::Fin => "closed",
        CloseKind::Rst => "reset the connection",
    };
    let mut note = String::with_capacity(160);
    let Some(wait) = c.wait_ns() else {
        let _ = write!(note, "{} {verb} before sending any data", c.by);
        return note;
    };
    let _ = write!(
        note,
        "{} {verb} {} after {own}",
        c.by,
        DurationNs(wait as f64)
    );
    if c.round_gap_s.is_some() {
        note.push_str(" (application timeout?)");
    }
    // What the closer had received of the answer, and when its first byte came.
    let got = |note: &mut String| {
        if let Some(b) = c.answer_bytes {
            let _ = write!(note, "{} of it in, ", Bytes(b));
        }
    };
    let first = |note: &mut String| {
        if let Some(f) = c.first_answer_after_ns {
            let _ = write!(note, "the first {} after {own}, ", DurationNs(f as f64));
        }
    };
    let quiet = |note: &mut String| {
        if let Some(q) = c.peer_quiet_ns() {
            let _ = write!(note, "{}", DurationNs(q as f64));
        }
    };
    match c.abandoned() {
        Some(Abandoned::NoAnswer) => {
            note.push(' ');
            note.push_str(none);
        }
        Some(Abandoned::StillArriving) => {
            let _ = write!(note, " while the {answer} was still arriving (");
            got(&mut note);
            first(&mut note);
            note.push_str("the last ");
            quiet(&mut note);
            note.push_str(" before the close)");
        }
        Some(Abandoned::Stalled) => {
            let _ = write!(note, " while the {answer} had stalled (");
            got(&mut note);
            note.push_str("nothing for ");
            quiet(&mut note);
            note.push_str(" before the close, more after it)");
        }
        Some(Abandoned::Ended) => {
            let _ = write!(note, ", the {answer} having ended ");
            quiet(&mut note);
            note.push_str(" before");
        }
        None => {}
    }
    note.push('.');
    let peer = c.by.peer();
    if let Some(t) = c.peer_data_after_close_ns {
        let bytes = c.peer_bytes_after_close.unwrap_or(0);
        let _ = write!(
            note,
            " The {peer} sent {} more, the first {} after the close",
            Bytes(bytes),
            DurationNs(t as f64)
        );
        if c.resets_after_close > 0 {
            let _ = write!(
                note,
                "; the {} answered with {} RST(s)",
                c.by, c.resets_after_close
            );
        }
        note.push('.');
    } else if c.resets_after_close > 0 {
        let _ = write!(
            note,
            " The {} answered data still reaching it with {} RST(s).",
            c.by, c.resets_after_close
        );
    }
    if let (Some(k), Some(t)) = (c.peer_close, c.peer_close_after_ns) {
        let _ = write!(
            note,
            " The {peer} {} {} after it.",
            match k {
                CloseKind::Fin => "closed",
                CloseKind::Rst => "reset",
            },
            DurationNs(t as f64)
        );
    }
    note
}

/// The round number of seconds `gap_ns` is, if it is one: at most 1.5% (or 10 ms) short of
/// it, at most 5% (or 50 ms) past it. A timer never fires early, but it fires late by the
/// time its process waits for a CPU (16 ms on a 1 s timeout on this project's loaded 2-CPU
/// test machine) and by the timer's own slack; the short side only absorbs where the capture
/// point puts the request and the close.
pub fn round_seconds(gap_ns: i64) -> Option<f64> {
    let g = gap_ns as f64 / 1e9;
    ROUND_SECONDS.iter().copied().find(|&r| {
        let (early, late) = ((0.015 * r).max(0.010), (0.05 * r).max(0.050));
        g >= r - early && g <= r + late
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;
    const MS: i64 = 1_000_000;

    #[test]
    fn round_gaps() {
        assert_eq!(round_seconds(30 * S), Some(30.0));
        assert_eq!(round_seconds(2_012 * MS), Some(2.0));
        assert_eq!(round_seconds(29 * S), None);
        assert_eq!(round_seconds(1_500 * MS), None);
        // Late by a loaded host's scheduling delay: still the timeout; early by as much: not.
        assert_eq!(round_seconds(1_016 * MS), Some(1.0));
        assert_eq!(round_seconds(2_090 * MS), Some(2.0));
        assert_eq!(round_seconds(2_120 * MS), None);
        assert_eq!(round_seconds(1_950 * MS), None);
        assert_eq!(round_seconds(31_400 * MS), Some(30.0));
        assert_eq!(round_seconds(29_400 * MS), None);
    }

    /// One packet of a replay: payload (new bytes) or a FIN/RST, from a side.
    enum Seg {
        Data(u64),
        Close(CloseKind),
    }

    /// Replays `(side, ts, new bytes)` data and `(side, kind, ts)` closes in time order (data
    /// first at equal times); side 0 is the client.
    fn replay(data: &[(usize, i64, u64)], closes: &[(usize, CloseKind, i64)]) -> CloseSummary {
        let mut t = CloseTrack::default();
        let mut halves: [Half; 2] = Default::default();
        let mut segs: Vec<(i64, usize, Seg)> = data
            .iter()
            .map(|&(side, ts, b)| (ts, side, Seg::Data(b)))
            .chain(
                closes
                    .iter()
                    .map(|&(side, k, ts)| (ts, side, Seg::Close(k))),
            )
            .collect();
        segs.sort_by_key(|(ts, _, seg)| (*ts, matches!(seg, Seg::Close(_))));
        for (ts, side, seg) in segs {
            match seg {
                Seg::Data(b) => {
                    halves[side].last_data_ns = Some(ts);
                    t.on_data(side, ts, b);
                }
                Seg::Close(k) => {
                    if k == CloseKind::Rst {
                        halves[side].rsts += 1;
                    }
                    let last = [halves[0].last_data_ns, halves[1].last_data_ns];
                    t.on_close(side, k, ts, last);
                }
            }
        }
        t.summary(0, &halves).unwrap()
    }

    /// A client that aborts (SO_LINGER 0) 2 s after a request the server never answered:
    /// one RST and nothing else. The flow table and the finding must both see a timeout.
    #[test]
    fn an_abort_before_any_response_is_a_timeout_with_no_answer() {
        let c = replay(&[(0, 0, 12)], &[(0, CloseKind::Rst, 2 * S)]);
        assert_eq!((c.by, c.how), (Role::Client, CloseKind::Rst));
        assert_eq!(c.round_gap_s, Some(2.0));
        assert_eq!(c.abandoned, Some(Abandoned::NoAnswer));
        assert_eq!(c.answer_bytes, Some(0));
        assert_eq!(c.first_answer_after_ns, None);
        assert_eq!(c.peer_bytes_after_close, Some(0));
        assert!(!c.peer_sent_after_close);
        assert!(c.note.contains("with no response byte yet"), "{}", c.note);
    }

    /// `Connection: close`: the server closes right after its response and the client follows.
    #[test]
    fn a_server_closing_after_its_response_lacks_no_data() {
        let c = replay(
            &[(0, 0, 40), (1, MS, 200)],
            &[
                (1, CloseKind::Fin, MS + 12_000),
                (0, CloseKind::Fin, MS + 30_000),
            ],
        );
        assert_eq!((c.by, c.how), (Role::Server, CloseKind::Fin));
        assert_eq!(c.abandoned, Some(Abandoned::NoAnswer));
        assert!(
            c.note.starts_with(
                "server closed 12.0us after its last response with no new request begun"
            ),
            "{}",
            c.note
        );
    }

    /// The server thinks 3 s, the client closes (FIN) at 1 s; the late answer meets a RST.
    #[test]
    fn a_late_answer_after_the_close_is_reported_as_such() {
        let c = replay(
            &[(0, 0, 12), (1, 3 * S, 100)],
            &[
                (0, CloseKind::Fin, S),
                (0, CloseKind::Rst, 3 * S + MS),
                (1, CloseKind::Fin, 3 * S),
            ],
        );
        assert_eq!(c.abandoned, Some(Abandoned::NoAnswer));
        assert_eq!(c.answer_bytes, Some(0));
        assert_eq!(c.peer_bytes_after_close, Some(100));
        assert_eq!(c.peer_data_after_close_ns, Some(2 * S));
        assert_eq!(c.resets_after_close, 1);
        assert_eq!(
            (c.peer_close, c.peer_close_after_ns),
            (Some(CloseKind::Fin), Some(2 * S))
        );
        assert!(c.note.contains("The server sent 100 B more, the first 2.00s after the close; the client answered with 1 RST(s)."), "{}", c.note);
    }

    /// A download read until the client's 3 s timeout and closed with data unread (RST): the
    /// response kept coming to the end.
    #[test]
    fn a_reset_while_the_response_arrives_is_still_arriving() {
        let mut data = vec![(0, 0, 12)];
        data.extend((0..300).map(|i| (1, 5 * MS + i * 10 * MS, 1448)));
        let c = replay(&data, &[(0, CloseKind::Rst, 3 * S)]);
        assert_eq!(c.abandoned, Some(Abandoned::StillArriving));
        assert_eq!(c.answer_bytes, Some(300 * 1448));
        assert_eq!(c.first_answer_after_ns, Some(5 * MS));
        assert!(
            c.note.contains("while the response was still arriving"),
            "{}",
            c.note
        );
    }

    /// A response that ended long before a round-second close is an idle connection's end;
    /// a stalled one that resumed after the close is not.
    #[test]
    fn ended_and_stalled_answers() {
        let idle = replay(
            &[(0, 0, 12), (1, 10 * MS, 500)],
            &[(0, CloseKind::Fin, 2 * S)],
        );
        assert_eq!(idle.round_gap_s, Some(2.0));
        assert_eq!(idle.abandoned, Some(Abandoned::Ended));
        let stalled = replay(
            &[(0, 0, 12), (1, 10 * MS, 500), (1, 2 * S + 300 * MS, 500)],
            &[(0, CloseKind::Fin, 2 * S)],
        );
        assert_eq!(stalled.abandoned, Some(Abandoned::Stalled));
    }

    /// A client that reads its whole answer and closes at once, the server closing in turn,
    /// left nothing undone: the last byte came just before the close, yet the answer ended.
    #[test]
    fn a_close_right_after_a_complete_answer_is_no_abandon() {
        let done = replay(
            &[(0, 0, 12), (1, MS, 1448), (1, 800 * MS, 1448)],
            &[
                (0, CloseKind::Fin, 800 * MS + 70_000),
                (1, CloseKind::Fin, 800 * MS + 120_000),
            ],
        );
        assert_eq!(done.abandoned, Some(Abandoned::Ended));
        assert!(
            done.note.contains("the response having ended"),
            "{}",
            done.note
        );
    }

    /// Captured upstream of a deep queue: the server's last data left 1.2 s before the
    /// client's FIN, and the client answered what was still queued toward it with resets.
    #[test]
    fn resets_for_data_queued_beyond_the_capture_mean_it_was_still_arriving() {
        let mut data = vec![(0, 0, 12)];
        data.extend((0..100).map(|i| (1, MS + i * 8 * MS, 1448)));
        let c = replay(
            &data,
            &[
                (0, CloseKind::Fin, 2 * S),
                (0, CloseKind::Rst, 2 * S + 5 * MS),
                (0, CloseKind::Rst, 2 * S + 6 * MS),
            ],
        );
        assert_eq!(c.resets_after_close, 2);
        assert!(!c.peer_sent_after_close);
        assert_eq!(c.abandoned, Some(Abandoned::StillArriving));
        assert!(
            c.note
                .contains("answered data still reaching it with 2 RST(s)"),
            "{}",
            c.note
        );
    }
}
