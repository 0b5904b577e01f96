//! `microburst`: slow requests coincide with milliseconds at link rate.
//!
//! The story: small cached requests had a p99 30x their median while one-second bandwidth
//! graphs showed the server's link 5-40% busy. Per-millisecond bins showed scatter/gather
//! responses from several back ends arriving at once and filling the link for a few
//! milliseconds; small requests that crossed it then waited in the queue behind them.
//!
//! In: the capture's burst episodes (bins at >= 80% of the link rate, or of the channel's own
//! peak when the rate is unknown) and the request latencies the capture paired. Fires when at
//! least 3 requests are slow (>= 5x the median and >= 1 ms above it), at least half of the slow
//! ones overlap a burst, and that share is at least twice the share of all requests that
//! overlap one (so a link busy all the time does not count). Reports the flows behind the bursts
//! and what a one-second average shows of them.

use std::collections::BTreeMap;

use tailhunt_histogram::quantile::of_sorted;
use tailhunt_model::evidence::capture::{Burst, Dir};
use tailhunt_model::{format_duration_ns, Evidence, Finding, Outcome, Sample, Verdict};

/// Name of the detector.
pub const DETECTOR: &str = "microburst";
const SLOW_RATIO: i64 = 5;
const SLOW_MIN_EXTRA_NS: i64 = 1_000_000;
const MIN_SLOW: usize = 3;

/// Request latencies of one server port.
pub struct Requests<'a> {
    /// Series display name.
    pub series: String,
    /// The samples (epoch-ns times).
    pub samples: &'a [Sample],
}

/// Runs the detector: each channel's bursts against each request series; the channel whose
/// bursts explain the most slow requests is reported.
pub fn microburst(bursts: &[Burst], requests: &[Requests<'_>], bin_ns: i64) -> Option<Finding> {
    let mut channels: BTreeMap<(Dir, &str), Vec<Burst>> = BTreeMap::new();
    for b in bursts {
        channels
            .entry((b.dir, b.host.as_str()))
            .or_default()
            .push(b.clone());
    }
    channels
        .values()
        .filter_map(|bs| channel_microburst(bs, requests, bin_ns))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, f)| f)
}

/// One channel's bursts: `(share of slow requests in them, finding)`.
fn channel_microburst(
    bursts: &[Burst],
    requests: &[Requests<'_>],
    bin_ns: i64,
) -> Option<(f64, Finding)> {
    if bursts.is_empty() {
        return None;
    }
    let mut spans: Vec<(i64, i64)> = bursts
        .iter()
        .map(|b| (b.start_ns - bin_ns, b.end_ns + bin_ns))
        .collect();
    spans.sort_unstable();
    let overlaps = |s: &Sample| {
        let i = spans.partition_point(|&(_, end)| end < s.intended_ns);
        spans[i..]
            .iter()
            .take_while(|&&(start, _)| start <= s.end_ns)
            .any(|&(start, end)| start <= s.end_ns && end >= s.intended_ns)
    };
    let mut best: Option<(f64, Finding)> = None;
    for r in requests {
        let ok: Vec<&Sample> = r
            .samples
            .iter()
            .filter(|s| s.outcome == Outcome::Ok)
            .collect();
        if ok.len() < 20 {
            continue;
        }
        let mut lat: Vec<i64> = ok.iter().map(|s| s.latency_ns()).collect();
        lat.sort_unstable();
        let Some(median) = of_sorted(&lat, 0.5) else {
            continue;
        };
        let slow_at = (median * SLOW_RATIO).max(median + SLOW_MIN_EXTRA_NS);
        let slow: Vec<&&Sample> = ok.iter().filter(|s| s.latency_ns() >= slow_at).collect();
        if slow.len() < MIN_SLOW {
            continue;
        }
        let slow_in = slow.iter().filter(|s| overlaps(s)).count();
        let all_in = ok.iter().filter(|s| overlaps(s)).count();
        let slow_share = slow_in as f64 / slow.len() as f64;
        let base_share = all_in as f64 / ok.len() as f64;
        if slow_share < 0.5 || slow_share < 2.0 * base_share {
            continue;
        }
        let finding = build(
            bursts,
            r,
            median,
            slow_at,
            slow.len(),
            slow_share,
            base_share,
            of_sorted(&lat, 0.99).unwrap_or(median),
        );
        if best.as_ref().is_none_or(|(s, _)| slow_share > *s) {
            best = Some((slow_share, finding));
        }
    }
    best
}

#[allow(clippy::too_many_arguments)]
fn build(
    bursts: &[Burst],
    r: &Requests<'_>,
    median: i64,
    slow_at: i64,
    slow: usize,
    slow_share: f64,
    base_share: f64,
    p99: i64,
) -> Finding {
    let mut by_flow: BTreeMap<&str, u64> = BTreeMap::new();
    for b in bursts {
        for f in &b.flows {
            *by_flow.entry(f.flow.as_str()).or_default() += f.bytes;
        }
    }
    let mut flows: Vec<(&str, u64)> = by_flow.into_iter().collect();
    flows.sort_by_key(|f| std::cmp::Reverse(f.1));
    let total: u64 = flows.iter().map(|f| f.1).sum::<u64>().max(1);
    let names: Vec<String> = flows
        .iter()
        .take(4)
        .map(|(n, b)| format!("{n} ({:.0}%)", *b as f64 * 100.0 / total as f64))
        .collect();
    let peak = bursts
        .iter()
        .filter_map(|b| b.peak_utilisation)
        .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.max(u))));
    let second = bursts
        .iter()
        .filter_map(|b| b.second_utilisation)
        .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.max(u))));
    let longest = bursts
        .iter()
        .map(|b| b.end_ns - b.start_ns)
        .max()
        .unwrap_or(0);
    let hidden = match (peak, second) {
        (Some(p), Some(s)) => format!(
            " Bins reach {:.0}% of the link rate while the busiest one-second average is {:.0}%: a 1 s graph hides the bursts.",
            p * 100.0,
            s * 100.0
        ),
        _ => String::new(),
    };
    let mut values = BTreeMap::new();
    values.insert("bursts".into(), bursts.len() as f64);
    values.insert("longest_burst_ns".into(), longest as f64);
    values.insert("slow_requests".into(), slow as f64);
    values.insert("slow_share_in_bursts".into(), slow_share);
    values.insert("all_share_in_bursts".into(), base_share);
    values.insert("median_ns".into(), median as f64);
    values.insert("slow_threshold_ns".into(), slow_at as f64);
    values.insert("p99_ns".into(), p99 as f64);
    if let Some(p) = peak {
        values.insert("peak_utilisation".into(), p);
    }
    if let Some(s) = second {
        values.insert("max_second_utilisation".into(), s);
    }
    let mut evidence = vec![Evidence {
        series: r.series.clone(),
        range_ns: None,
        values,
        note: format!(
            "{:.0}% of the {slow} slow requests (>= {}) overlap a burst, against {:.0}% of all requests.{hidden}",
            slow_share * 100.0,
            format_duration_ns(slow_at as f64),
            base_share * 100.0
        ),
    }];
    for b in bursts.iter().take(5) {
        let mut v = BTreeMap::new();
        v.insert("bytes".into(), b.bytes as f64);
        v.insert("peak_bin_bytes".into(), b.peak_bin_bytes as f64);
        if let Some(u) = b.peak_utilisation {
            v.insert("peak_utilisation".into(), u);
        }
        evidence.push(Evidence {
            series: format!("bytes{{dir={},host={}}}", b.dir.name(), b.host),
            range_ns: Some((b.start_ns, b.end_ns)),
            values: v,
            note: format!(
                "burst {} {} for {}, made by {}",
                b.dir.name(),
                b.host,
                format_duration_ns((b.end_ns - b.start_ns) as f64),
                b.flows
                    .iter()
                    .take(3)
                    .map(|f| f.flow.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    Finding {
        detector: DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence: (0.5 + 0.5 * (slow_share - base_share)).clamp(0.5, 0.95),
        summary: format!(
            "microbursts {} {}: {} burst(s) up to {} long fill the link, and {:.0}% of slow requests ({}: p99 {} vs median {}) coincide with them; behind the bursts: {}",
            bursts[0].dir.name(),
            bursts[0].host,
            bursts.len(),
            format_duration_ns(longest as f64),
            slow_share * 100.0,
            r.series,
            format_duration_ns(p99 as f64),
            format_duration_ns(median as f64),
            names.join(", ")
        ),
        evidence,
        fix: Some("move the bursty bulk traffic off the latency-sensitive path: a separate interface or a priority queue (e.g. an htb/prio class for small requests), or pace the scatter/gather responses; do not add hedged requests, which make bursts worse".into()),
    }
}
