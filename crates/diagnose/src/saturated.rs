//! `link-saturated`: the link was simply full, for seconds, and requests that crossed it then
//! were slower than the others.
//!
//! The story: a bulk transfer kept a link at its rate for most of a run; the requests sharing
//! it queued behind the transfer the whole time, so their *median* moved with it and the p99
//! sat at 5-50x the quiet median. Microbursts explain nothing there (the requests are slow
//! inside and outside any one burst alike) and a one-second graph shows the link full.
//!
//! In: the capture's bursts per channel inside a second that averages half the link rate or
//! more (see [`crate::channels`]), and every request series (the capture's own exchanges,
//! another run's client-side latencies, the queueing delay of packets that made no burst).
//! Fires for a channel when some series has at least 20 requests while the link was busy and
//! 20 while it was not, and the busy ones' median service time is at least twice the others'
//! and 0.5 ms above it; or, for the queue delays (a series that also holds packets which never
//! crossed the full link, so its median says little), when at least 10 packets and 5% of those
//! measured while it was full waited 2 ms or more, a share at least 4 times that of the other
//! packets, beyond chance (binomial tail under 0.001). Out: one finding per such channel: how long the link was full,
//! the series' medians and p99s inside and outside, and every flow direction that filled it
//! with its share of the bytes; the same link seen as traffic to one host and from another is
//! one finding.

use std::collections::BTreeMap;

use tailhunt_histogram::quantile::of_sorted;
use tailhunt_model::evidence::capture::CaptureReport;
use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};

use crate::channels::{
    binomial_tail, channel_name, channels, describe_sources, distinct, eligible, merged, overlaps,
    sources, span, Channel, Prepared, RequestKind, Requests, Source, MIN_SAMPLES,
};

/// Name of the detector.
pub const DETECTOR: &str = "link-saturated";
const MIN_RATIO: f64 = 2.0;
const MIN_EXTRA_NS: i64 = 500_000;
/// Queue delays: delayed packets during the saturation, at least, and how many times the
/// share of delayed ones outside it.
const MIN_DELAYED: usize = 10;
/// ... and at least this share of all the packets measured during it (a queue that made one
/// packet in a hundred wait 2 ms is not what slowed anyone).
const MIN_DELAYED_SHARE: f64 = 0.05;
const MIN_DELAYED_RATIO: f64 = 4.0;
const MAX_TAIL: f64 = 0.001;

/// One series split by the busy spans.
struct Split {
    series: usize,
    inside: Vec<i64>,
    outside: Vec<i64>,
    slow_at: i64,
    queue_delay: bool,
}

impl Split {
    fn medians(&self) -> (i64, i64) {
        (
            of_sorted(&self.inside, 0.5).unwrap_or(0),
            of_sorted(&self.outside, 0.5).unwrap_or(0),
        )
    }

    /// Slow samples inside and outside.
    fn slow(&self) -> (usize, usize) {
        let count = |v: &[i64]| v.iter().filter(|&&l| l >= self.slow_at).count();
        (count(&self.inside), count(&self.outside))
    }

    /// The median moved: twice as slow and half a millisecond more while the link was full.
    fn median_moved(&self) -> bool {
        let (i, o) = self.medians();
        i as f64 >= MIN_RATIO * o as f64 && i - o >= MIN_EXTRA_NS
    }

    /// For queue delays, whose series mixes the packets that crossed the full link with
    /// those that never could (the other direction, other paths): far more of them waited
    /// while it was full than otherwise, beyond chance.
    fn delayed_more(&self) -> bool {
        if !self.queue_delay {
            return false;
        }
        let (si, so) = self.slow();
        let (ni, no) = (self.inside.len(), self.outside.len());
        let rate_in = si as f64 / ni.max(1) as f64;
        let rate_out = so as f64 / no.max(1) as f64;
        let p = ni as f64 / (ni + no).max(1) as f64;
        si >= MIN_DELAYED
            && rate_in >= MIN_DELAYED_SHARE
            && rate_in >= MIN_DELAYED_RATIO * rate_out
            && binomial_tail(si, si + so, p) <= MAX_TAIL
    }

    /// How much slower while the link was full (the larger of the medians' ratio and the
    /// slow shares' ratio, where each holds).
    fn strength(&self) -> f64 {
        let (i, o) = self.medians();
        let medians = if self.median_moved() {
            i as f64 / o.max(1) as f64
        } else {
            0.0
        };
        let (si, so) = self.slow();
        let delayed = if self.delayed_more() {
            (si as f64 / self.inside.len().max(1) as f64)
                / (so.max(1) as f64 / self.outside.len().max(1) as f64)
        } else {
            0.0
        };
        medians.max(delayed)
    }
}

/// Runs the detector over every channel and every request series.
pub fn link_saturated(report: &CaptureReport, requests: &[Requests<'_>]) -> Vec<Finding> {
    let prepared: Vec<Prepared<'_>> = requests.iter().filter_map(Prepared::new).collect();
    let mut out: Vec<(Vec<Source>, Finding)> = Vec::new();
    for c in channels(report) {
        let srcs = sources(c.saturated.iter().copied());
        if srcs.is_empty() {
            continue;
        }
        let spans = merged(c.saturated.iter().map(|b| span(b, report)).collect());
        let best = prepared
            .iter()
            .enumerate()
            .filter(|(_, p)| eligible(p.requests, &srcs))
            .filter_map(|(si, p)| split(si, p, &spans))
            .max_by(|a, b| a.strength().total_cmp(&b.strength()));
        if let Some(split) = best {
            let finding = build(&c, &spans, &srcs, &split, &prepared[split.series], report);
            out.push((srcs, finding));
        }
    }
    // The same full link seen as traffic to the receiver and from the sender: one finding.
    let lists: Vec<&[Source]> = out.iter().map(|(s, _)| s.as_slice()).collect();
    let keep = distinct(&lists);
    out.into_iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|((_, f), _)| f)
        .collect()
}

/// Series `p` split by the busy spans, when it shows the link's effect.
fn split(si: usize, p: &Prepared<'_>, spans: &[(i64, i64)]) -> Option<Split> {
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for (s, e, lat) in p.samples() {
        if overlaps(spans, s, e) {
            inside.push(lat);
        } else {
            outside.push(lat);
        }
    }
    inside.sort_unstable();
    outside.sort_unstable();
    let split = Split {
        series: si,
        inside,
        outside,
        slow_at: p.slow_at,
        queue_delay: p.requests.kind == RequestKind::QueueDelay,
    };
    let enough = split.inside.len() >= MIN_SAMPLES && split.outside.len() >= MIN_SAMPLES;
    (enough && (split.median_moved() || split.delayed_more())).then_some(split)
}

fn build(
    c: &Channel<'_>,
    spans: &[(i64, i64)],
    srcs: &[Source],
    split: &Split,
    p: &Prepared<'_>,
    report: &CaptureReport,
) -> Finding {
    let span_ns = (report.last_ns - report.first_ns).max(1);
    let busy: i64 = spans.iter().map(|(a, b)| b - a).sum();
    let (mi, mo) = split.medians();
    // The busiest one-second average the capture measured on the channel (a burst's own is
    // that of the second it starts in, which a long one may barely touch).
    let second = report
        .channels
        .iter()
        .find(|s| s.dir == c.dir && s.host == c.host)
        .and_then(|s| s.max_second_utilisation)
        .into_iter()
        .chain(c.saturated.iter().filter_map(|b| b.second_utilisation))
        .fold(0.0f64, f64::max);
    let (si, so) = split.slow();
    let share = |n: usize, of: usize| n as f64 * 100.0 / of.max(1) as f64;
    let meanwhile = if split.median_moved() {
        let what = match p.requests.kind {
            RequestKind::QueueDelay => "packets of other flows waited",
            _ => "requests took",
        };
        format!(
            "{what} a median {} against {} otherwise",
            format_duration_ns(mi as f64),
            format_duration_ns(mo as f64)
        )
    } else {
        format!(
            "{:.1}% of the packets of other flows waited {} or more upstream against {:.1}% otherwise",
            share(si, split.inside.len()),
            format_duration_ns(split.slow_at as f64),
            share(so, split.outside.len())
        )
    };
    let mut values = BTreeMap::new();
    values.insert("busy_ns".into(), busy as f64);
    values.insert("busy_share".into(), busy as f64 / span_ns as f64);
    values.insert("max_second_utilisation".into(), second);
    values.insert("sources".into(), srcs.len() as f64);
    Finding {
        detector: DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence: (0.5 + 0.45 * (1.0 - 1.0 / split.strength())).clamp(0.5, 0.95),
        summary: format!(
            "link saturated {}: at the link rate for {} of the {} capture ({:.0}%; busiest second {:.0}%), and meanwhile {meanwhile} ({}); filling it: {}",
            channel_name(c.dir, c.host),
            format_duration_ns(busy as f64),
            format_duration_ns(span_ns as f64),
            busy as f64 * 100.0 / span_ns as f64,
            second * 100.0,
            p.requests.series,
            describe_sources(srcs)
        ),
        evidence: vec![
            split.evidence(p),
            Evidence {
                series: format!("bytes{{dir={},host={}}}", c.dir.name(), c.host),
                range_ns: spans.first().zip(spans.last()).map(|(a, b)| (a.0, b.1)),
                values,
                note: format!(
                    "{} episode(s) at the link rate, filled by {}",
                    c.saturated.len(),
                    describe_sources(srcs)
                ),
            },
        ],
        fix: Some("the link is full, not bursty: give the latency-sensitive traffic its own queue or priority (an htb/prio class), rate-limit or pace the bulk transfer below the link rate, or add capacity".into()),
    }
}

impl Split {
    /// The series' figures inside and outside the busy spans.
    fn evidence(&self, p: &Prepared<'_>) -> Evidence {
        let (mi, mo) = self.medians();
        let p99 = |v: &[i64]| of_sorted(v, 0.99).unwrap_or(0);
        let (si, so) = self.slow();
        let mut values = BTreeMap::new();
        values.insert("median_busy_ns".into(), mi as f64);
        values.insert("median_quiet_ns".into(), mo as f64);
        values.insert("p99_busy_ns".into(), p99(&self.inside) as f64);
        values.insert("p99_quiet_ns".into(), p99(&self.outside) as f64);
        values.insert("requests_busy".into(), self.inside.len() as f64);
        values.insert("requests_quiet".into(), self.outside.len() as f64);
        values.insert("slow_busy".into(), si as f64);
        values.insert("slow_quiet".into(), so as f64);
        values.insert("slow_threshold_ns".into(), self.slow_at as f64);
        Evidence {
            series: p.requests.series.clone(),
            range_ns: None,
            values,
            note: format!(
                "{} while the link was full: median {} (p99 {}); the other {}: median {} (p99 {})",
                self.inside.len(),
                format_duration_ns(mi as f64),
                format_duration_ns(p99(&self.inside) as f64),
                self.outside.len(),
                format_duration_ns(mo as f64),
                format_duration_ns(p99(&self.outside) as f64),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
