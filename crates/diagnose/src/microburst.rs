//! `microburst`: slow requests coincide with milliseconds at link rate.
//!
//! The story: small cached requests had a p99 30x their median while one-second bandwidth
//! graphs showed the server's link 5-40% busy. Per-millisecond bins showed scatter/gather
//! responses from several back ends arriving at once and filling the link for a few
//! milliseconds; small requests that crossed it then waited in the queue behind them.
//!
//! In: the capture's bursts per channel that a one-second average hides (see
//! [`crate::channels`]; a link busy for seconds is `link-saturated`'s), each busy for at least
//! the time the link needs to carry its bytes, and every request series: the capture's own
//! exchanges, another run's client-side latencies, and the queueing delay of the packets that
//! made no burst. A request is slow at 5x its series' median service time and 1 ms above it.
//!
//! Per series, channels (the 16 with the most burst bytes) are taken greedily: the one whose bursts hold the most slow requests
//! first, then the next among the slow requests the chosen ones do not hold, and so on; a
//! channel is taken when its bursts hold at least 3 slow requests, at least twice the share of
//! all requests they hold, and more than chance would put there (binomial tail under 0.001),
//! and at least 5% of the requests they hold are slow.
//! The chosen channels must hold at least half of the series' slow requests together. The
//! capture's exchanges with a port whose flows made the bursts are not held against them (a
//! bulk fetch is slow because it is bulk). Out: one finding per channel some series chose,
//! naming every source of its bursts that held slow requests (flow direction and share of the
//! bytes) and how little the 1 s average shows; a channel whose sources another chosen
//! channel names as well (the same queue seen as traffic to one host and from another) is
//! left out.

use std::collections::BTreeMap;

use tailhunt_model::evidence::capture::{Burst, CaptureReport};
use tailhunt_model::Finding;

use crate::channels::{
    binomial_tail, channels, distinct, eligible, merged, overlaps, sources, span, Channel,
    Prepared, Requests, Source,
};

/// Name of the detector.
pub const DETECTOR: &str = "microburst";
const MIN_SLOW: usize = 3;
/// A channel is taken when its share of slow requests is this much above chance.
const MAX_TAIL: f64 = 0.001;
/// Share of the requests a channel's bursts hold that must be slow.
const MIN_SLOW_AMONG_HELD: f64 = 0.05;
/// Channels with bursts held against the requests, the busiest (by burst bytes) first.
const MAX_CHANNELS: usize = 16;

/// What one channel's bursts hold of one series.
#[derive(Debug, Clone, Copy)]
struct Held {
    series: usize,
    /// Slow requests in the universe (those no earlier channel held).
    slow: usize,
    /// Of which in this channel's bursts.
    slow_in: usize,
    /// Share of all requests of the universe in them.
    base: f64,
    tail: f64,
    /// Its bursts hold slow requests only where an earlier channel's do too (the two came at
    /// the same times): that channel, and the capture cannot tell which held them.
    with: Option<usize>,
}

impl Held {
    fn share(&self) -> f64 {
        self.slow_in as f64 / self.slow.max(1) as f64
    }
}

/// A channel with microbursts, ready to hold requests against.
struct Candidate<'a> {
    channel: Channel<'a>,
    spans: Vec<(i64, i64)>,
    sources: Vec<Source>,
}

/// Runs the detector over every channel and every request series.
pub fn microburst(report: &CaptureReport, requests: &[Requests<'_>]) -> Vec<Finding> {
    let mut with_bursts: Vec<Channel<'_>> = channels(report)
        .into_iter()
        .filter(|c| !c.micro.is_empty())
        .collect();
    // Each channel costs a pass over every sample of every series: the busiest only.
    with_bursts.sort_by_key(|c| std::cmp::Reverse(c.micro.iter().map(|b| b.bytes).sum::<u64>()));
    with_bursts.truncate(MAX_CHANNELS);
    let cands: Vec<Candidate<'_>> = with_bursts
        .into_iter()
        .map(|channel| Candidate {
            spans: merged(channel.micro.iter().map(|b| span(b, report)).collect()),
            sources: sources(channel.micro.iter().copied()),
            channel,
        })
        .collect();
    let prepared: Vec<Prepared<'_>> = requests.iter().filter_map(Prepared::new).collect();
    let mut chosen: BTreeMap<usize, Vec<Held>> = BTreeMap::new();
    for (si, p) in prepared.iter().enumerate() {
        for (ci, held) in choose(si, p, &cands) {
            chosen.entry(ci).or_default().push(held);
        }
    }
    let found: Vec<finding::Chosen<'_>> = chosen
        .into_iter()
        .filter_map(|(ci, mut helds)| {
            // The strongest evidence first: a channel chosen on its own before one coinciding.
            helds.sort_by(|a, b| {
                (a.with.is_some(), a.tail)
                    .partial_cmp(&(b.with.is_some(), b.tail))
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(b.slow_in.cmp(&a.slow_in))
            });
            let best = *helds.first()?;
            let held = holding(&cands[ci].channel.micro, &prepared[best.series], report);
            Some(finding::Chosen {
                cand: &cands[ci],
                with: best.with.map(|w| &cands[w].channel),
                series: helds.iter().map(|h| (&prepared[h.series], *h)).collect(),
                sources: sources(held),
            })
        })
        .collect();
    // The same queue seen twice (to the receiver, from each sender): one finding.
    let lists: Vec<&[Source]> = found.iter().map(|f| f.sources.as_slice()).collect();
    let keep = distinct(&lists);
    found
        .iter()
        .zip(keep)
        .filter(|(f, k)| *k && !f.sources.is_empty())
        .map(|(f, _)| f.build(report))
        .collect()
}

/// The bursts that hold a slow sample of `p`: each slow sample looked up among the bursts'
/// spans (in time order, as a capture lists them).
fn holding<'b>(bursts: &[&'b Burst], p: &Prepared<'_>, report: &CaptureReport) -> Vec<&'b Burst> {
    let mut spans: Vec<((i64, i64), usize)> = bursts
        .iter()
        .enumerate()
        .map(|(i, b)| (span(b, report), i))
        .collect();
    spans.sort_unstable();
    // The latest end so far, so that a long span early on is not skipped.
    let mut reach = Vec::with_capacity(spans.len());
    let mut far = i64::MIN;
    for ((_, end), _) in &spans {
        far = far.max(*end);
        reach.push(far);
    }
    let mut hit = vec![false; bursts.len()];
    for i in (0..p.len()).filter(|&i| p.slow(i)) {
        let (start, end, _) = p.sample(i);
        let from = reach.partition_point(|&r| r < start);
        for &((s, e), k) in &spans[from..] {
            if s > end {
                break;
            }
            if e >= start {
                hit[k] = true;
            }
        }
    }
    bursts
        .iter()
        .zip(hit)
        .filter_map(|(b, h)| h.then_some(*b))
        .collect()
}

/// The channels series `p` chooses, greedily (see the module docs).
fn choose(si: usize, p: &Prepared<'_>, cands: &[Candidate<'_>]) -> Vec<(usize, Held)> {
    let inside: Vec<Option<Vec<bool>>> = cands
        .iter()
        .map(|c| {
            eligible(p.requests, &c.sources).then(|| {
                p.samples()
                    .map(|(s, e, _)| overlaps(&c.spans, s, e))
                    .collect()
            })
        })
        .collect();
    let total_slow = (0..p.len()).filter(|&i| p.slow(i)).count();
    if total_slow < MIN_SLOW {
        return Vec::new();
    }
    let mut held_before = vec![false; p.len()];
    let mut out: Vec<(usize, Held)> = Vec::new();
    loop {
        let best = inside
            .iter()
            .enumerate()
            .filter(|(ci, _)| !out.iter().any(|(o, _)| o == ci))
            .filter_map(|(ci, inside)| {
                let inside = inside.as_ref()?;
                let held = held(si, p, inside, &held_before)?;
                Some((ci, held))
            })
            .max_by_key(|(ci, h)| (h.slow_in, std::cmp::Reverse(*ci)));
        let Some((ci, held)) = best else { break };
        if let Some(inside) = &inside[ci] {
            for (h, &i) in held_before.iter_mut().zip(inside) {
                *h |= i;
            }
        }
        out.push((ci, held));
    }
    let explained = (0..p.len())
        .filter(|&i| p.slow(i) && held_before[i])
        .count();
    if explained * 2 < total_slow {
        return Vec::new();
    }
    // A channel whose bursts came at the same times as a chosen one's has no slow requests of
    // its own left to test: held against all of them instead, it is named as coinciding.
    let chosen: Vec<usize> = out.iter().map(|(c, _)| *c).collect();
    let inside_of = |c: usize| inside[c].as_deref();
    for (ci, inside) in inside.iter().enumerate() {
        let Some(inside) = inside.as_ref().filter(|_| !chosen.contains(&ci)) else {
            continue;
        };
        let left = (0..p.len())
            .filter(|&i| p.slow(i) && inside[i] && !held_before[i])
            .count();
        if left >= MIN_SLOW {
            continue;
        }
        let none = vec![false; p.len()];
        let Some(mut h) = held(si, p, inside, &none) else {
            continue;
        };
        // The chosen channel holding most of its slow requests.
        h.with = chosen.iter().copied().max_by_key(|&c| {
            let theirs = inside_of(c);
            (0..p.len())
                .filter(|&i| p.slow(i) && inside[i] && theirs.is_some_and(|t| t[i]))
                .count()
        });
        out.push((ci, h));
    }
    out
}

/// What a channel's bursts hold of the samples no earlier channel held, when it is enough.
fn held(si: usize, p: &Prepared<'_>, inside: &[bool], before: &[bool]) -> Option<Held> {
    let (mut all, mut all_in, mut slow, mut slow_in) = (0usize, 0usize, 0usize, 0usize);
    for i in (0..p.len()).filter(|&i| !before[i]) {
        all += 1;
        all_in += usize::from(inside[i]);
        if p.slow(i) {
            slow += 1;
            slow_in += usize::from(inside[i]);
        }
    }
    let base = all_in as f64 / all.max(1) as f64;
    let share = slow_in as f64 / slow.max(1) as f64;
    // Bursts that hold a thousand requests of which three were slow are not what slows them.
    let slow_among_held = slow_in as f64 / all_in.max(1) as f64;
    if slow_in < MIN_SLOW || share < 2.0 * base || slow_among_held < MIN_SLOW_AMONG_HELD {
        return None;
    }
    let tail = binomial_tail(slow_in, slow, base);
    (tail <= MAX_TAIL).then_some(Held {
        series: si,
        slow,
        slow_in,
        base,
        tail,
        with: None,
    })
}

mod finding;
#[cfg(test)]
mod tests;
