//! What a step's finished requests add up to, counted as they arrive.
//!
//! In: every [`Finished`] request of a step, in intended-time order. Out: a [`Tally`] whose counts add up — `sent = ok + errors + timeouts`,
//! `scheduled = sent + unsent`, warm-up requests apart — with the send lag of each sent request
//! and the time of the last response; and [`longest_silence`], the longest stretch in which no
//! response came while a request was outstanding (a paused or dead server, not a busy client).

use tailhunt_model::{Outcome, Sample};

use crate::breakdown::Breakdown;
use crate::engine::Finished;

/// A step's counts. Requests never sent (they waited in the client until their timeout, or
/// their send failed) are counted apart from what the server was sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Measured requests written to a socket: `ok + errors + timeouts`.
    pub sent: u64,
    /// Measured requests never written.
    pub unsent: u64,
    /// Sent requests answered ok.
    pub ok: u64,
    /// Sent requests that failed (an error reply, a broken or refused connection).
    pub errors: u64,
    /// Sent requests not answered within `--timeout`.
    pub timeouts: u64,
    /// Warm-up requests, whatever became of them (kept as their own series).
    pub warmup: u64,
}

impl Counts {
    /// Requests scheduled in the measured window: `sent + unsent`.
    pub fn scheduled(&self) -> u64 {
        self.sent + self.unsent
    }
}

/// Counts, send lags and the last response of a step, as its requests finish.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// The counts.
    pub counts: Counts,
    /// Send lag (the client's own lateness: intended to actual send) of each sent measured
    /// request, ns.
    pub lags: Vec<i64>,
    /// Service time (actual send to its end) of each sent measured request, ns, in the same
    /// order as `lags`.
    pub services: Vec<i64>,
    /// When the last ok response of the measured window arrived.
    pub last_ok_end_ns: Option<i64>,
    /// With `--breakdown`: ok measured replies that carried no server timestamps, so their
    /// time could not be split (their breakdown is all zeros).
    pub untimed: u64,
}

impl Tally {
    /// Counts one finished request.
    pub fn add(&mut self, f: &Finished) {
        let c = &mut self.counts;
        if !f.measured {
            c.warmup += 1;
            return;
        }
        if !f.sent {
            c.unsent += 1;
            return;
        }
        c.sent += 1;
        self.lags.push(f.sample.send_lag_ns());
        self.services.push(f.sample.end_ns - f.sample.start_ns);
        match f.sample.outcome {
            Outcome::Ok => {
                c.ok += 1;
                self.untimed += u64::from(f.breakdown == Some(Breakdown::default()));
                let end = f.sample.end_ns;
                self.last_ok_end_ns = Some(self.last_ok_end_ns.map_or(end, |t| t.max(end)));
            }
            Outcome::Error => c.errors += 1,
            Outcome::Timeout => c.timeouts += 1,
        }
    }
}

/// A stretch with no response while at least one request was outstanding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Silence {
    /// When it began, ns.
    pub from_ns: i64,
    /// How long it lasted, ns.
    pub len_ns: i64,
}

/// The longest silence of at least `min_ns` in `measured` (from `window_start_ns` on), if any:
/// time between two responses during which some request was outstanding. A request is
/// outstanding from its actual send to its end, whatever its outcome; only ok replies count
/// as responses (the end of the last request closes the last stretch).
pub fn longest_silence(measured: &[Sample], window_start_ns: i64, min_ns: i64) -> Option<Silence> {
    let mut edges: Vec<i64> = measured
        .iter()
        .filter(|s| s.outcome == Outcome::Ok)
        .map(|s| s.end_ns)
        .chain(std::iter::once(window_start_ns))
        .chain(measured.iter().map(|s| s.end_ns).max())
        .collect();
    edges.sort_unstable();
    edges.dedup();
    // Time with a request outstanding: the union of [send, end] over all requests.
    let mut spans: Vec<(i64, i64)> = measured
        .iter()
        .map(|s| (s.start_ns.max(window_start_ns), s.end_ns))
        .filter(|(a, b)| a < b)
        .collect();
    spans.sort_unstable();
    let mut busy: Vec<(i64, i64)> = Vec::new();
    for (a, b) in spans {
        match busy.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => busy.push((a, b)),
        }
    }
    let mut best: Option<Silence> = None;
    let mut j = 0;
    for w in edges.windows(2) {
        let (a, b) = (w[0], w[1]);
        while j < busy.len() && busy[j].1 <= a {
            j += 1;
        }
        let mut k = j;
        while k < busy.len() && busy[k].0 < b {
            let (from, to) = (a.max(busy[k].0), b.min(busy[k].1));
            if to - from >= min_ns && best.is_none_or(|s| to - from > s.len_ns) {
                best = Some(Silence {
                    from_ns: from,
                    len_ns: to - from,
                });
            }
            k += 1;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// Requests every 10 ms answered in 1 ms, except those sent in [1000, 1400) ms, answered
    /// only at 1400 ms (a paused server).
    fn paused() -> Vec<Sample> {
        (0..200)
            .map(|i| {
                let t = i * 10 * MS;
                let end = if (1000 * MS..1400 * MS).contains(&t) {
                    1400 * MS
                } else {
                    t + MS
                };
                Sample::new(t, t, end, Outcome::Ok)
            })
            .collect()
    }

    #[test]
    fn a_pause_with_requests_outstanding_is_a_silence_an_idle_gap_is_not() {
        let s = longest_silence(&paused(), 0, 100 * MS).unwrap();
        assert_eq!(
            s,
            Silence {
                from_ns: 1000 * MS,
                len_ns: 400 * MS
            }
        );
        // A 1/s client answered in 1 ms: long gaps, nothing outstanding in them.
        let idle: Vec<Sample> = (0..10)
            .map(|i| {
                Sample::new(
                    i * 1000 * MS,
                    i * 1000 * MS,
                    i * 1000 * MS + MS,
                    Outcome::Ok,
                )
            })
            .collect();
        assert_eq!(longest_silence(&idle, 0, 100 * MS), None);
        // A request that timed out is outstanding until its end, and no ok reply came at all.
        let dead = vec![Sample::new(0, 0, 500 * MS, Outcome::Timeout)];
        assert_eq!(
            longest_silence(&dead, 0, 100 * MS),
            Some(Silence {
                from_ns: 0,
                len_ns: 500 * MS
            })
        );
    }

    #[test]
    fn counts_add_up_with_warm_up_and_never_sent_apart() {
        let mut t = Tally::default();
        let f = |outcome, sent, measured| Finished {
            sample: Sample::new(0, 5, 12, outcome),
            sent,
            measured,
            breakdown: None,
        };
        t.add(&f(Outcome::Ok, true, false));
        t.add(&f(Outcome::Ok, true, true));
        t.add(&f(Outcome::Error, true, true));
        t.add(&f(Outcome::Timeout, true, true));
        t.add(&f(Outcome::Timeout, false, true));
        let c = t.counts;
        assert_eq!((c.sent, c.ok, c.errors, c.timeouts), (3, 1, 1, 1));
        assert_eq!((c.unsent, c.warmup, c.scheduled()), (1, 1, 4));
        assert_eq!(t.lags, [5, 5, 5]);
        assert_eq!(t.services, [7, 7, 7]);
    }
}
