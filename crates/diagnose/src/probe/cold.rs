//! `cold-path`: one variant of a probe costs more than its sibling, round by round.
//!
//! The story: pings by DNS name had 10-20 ms spikes that pings by IP did not; the first request
//! on a new connection cost more than the second. A prober that runs both variants of one
//! probe in the same round measures the cost of the cold path as a paired difference, with a
//! confidence interval that says whether it is real ("DNS lookup adds 0.31 ms [0.19, 0.43]
//! (95% CI, 60 rounds)").
//!
//! In: the variants of each probe, their samples keyed by round (`(intended_ns - origin) /
//! interval_ns`, the probe run's contract); errors are left out, timeouts count at the timeout.
//! Out: a finding per cold/warm pair whose difference of medians has a 95% bootstrap interval
//! above zero and is at least [`MIN_COST_NS`] and [`MIN_COST_SHARE`] of the warm median.
//! Known pairs: `by-name`/`by-ip` (a DNS lookup), `first`/`second` (the first request on a
//! connection), `fresh`/`reused` (a new connection).

use std::collections::BTreeMap;

use tailhunt_analyze::ab::{compare_paired, PairedComparison};
use tailhunt_model::{Evidence, Finding, Outcome, Verdict};

use super::{ns, ProbeSeries};

/// Name of the detector.
pub const DETECTOR: &str = "cold-path";
/// Smallest cost worth a finding, ns.
pub const MIN_COST_NS: f64 = 20_000.0;
/// ... and as a share of the warm variant's median.
pub const MIN_COST_SHARE: f64 = 0.05;
/// Confidence level of the intervals.
pub const CONFIDENCE: f64 = 0.95;
/// Seed of the bootstrap (the same rounds always give the same interval).
pub const SEED: u64 = 0x5eed;

/// The cold and warm variant names, what the cold one pays for, and the fix.
pub const PAIRS: [(&str, &str, &str, &str); 3] = [
    (
        "by-name",
        "by-ip",
        "a DNS lookup",
        "resolve once and reuse the address (a local caching resolver, longer TTLs, or \
         addresses in the client's configuration)",
    ),
    (
        "first",
        "second",
        "the first request on a connection",
        "warm connections before they serve traffic (a cheap first request), and keep them open",
    ),
    (
        "fresh",
        "reused",
        "a fresh connection",
        "reuse connections: a pool with keep-alive instead of a connection per request",
    ),
];

/// Samples by round (errors left out).
pub fn by_round(s: &ProbeSeries, origin_ns: i64, interval_ns: i64) -> BTreeMap<i64, u64> {
    s.samples
        .iter()
        .filter(|x| x.outcome != Outcome::Error)
        .map(|x| {
            (
                (x.intended_ns - origin_ns).div_euclid(interval_ns.max(1)),
                x.latency_ns().max(0) as u64,
            )
        })
        .collect()
}

/// The cold variant's warm sibling in `series` (same probe and kind), with what the cold one
/// pays for and the fix, when `cold` is the cold side of a known pair.
pub fn sibling<'a>(
    cold: &ProbeSeries,
    series: &'a [ProbeSeries],
) -> Option<(&'a ProbeSeries, &'static str, &'static str)> {
    let (_, warm_name, what, fix) = PAIRS.iter().find(|p| p.0 == cold.label("variant"))?;
    let warm = series.iter().find(|w| {
        w.label("probe") == cold.label("probe")
            && w.label("kind") == cold.label("kind")
            && w.label("variant") == *warm_name
    })?;
    Some((warm, what, fix))
}

/// `cold` against `warm`, paired by round: the comparison the finding cites (and the report
/// draws); `None` under the bootstrap's fewest rounds.
pub fn compare(
    cold: &ProbeSeries,
    warm: &ProbeSeries,
    origin_ns: i64,
    interval_ns: i64,
) -> Option<PairedComparison> {
    compare_paired(
        &by_round(cold, origin_ns, interval_ns),
        &by_round(warm, origin_ns, interval_ns),
        CONFIDENCE,
        SEED,
    )
}

fn interval(d: &tailhunt_analyze::ab::Difference) -> String {
    format!("{} [{}, {}]", ns(d.ns), ns(d.low_ns), ns(d.high_ns))
}

fn finding(
    cold: &ProbeSeries,
    warm: &ProbeSeries,
    what: &str,
    fix: &str,
    c: &PairedComparison,
) -> Finding {
    let probe = cold.label("probe");
    let kind = cold.label("kind");
    let sentence = format!(
        "{what} adds {} ({:.0}% CI, {} rounds); p99 {} {}",
        interval(&c.median_diff),
        c.confidence * 100.0,
        c.rounds,
        if c.p99_diff.ns >= 0.0 { "+" } else { "" },
        interval(&c.p99_diff),
    );
    let values = BTreeMap::from([
        ("rounds".to_string(), c.rounds as f64),
        ("median_cold_ns".to_string(), c.median_a_ns as f64),
        ("median_warm_ns".to_string(), c.median_b_ns as f64),
        ("median_diff_ns".to_string(), c.median_diff.ns),
        ("median_diff_low_ns".to_string(), c.median_diff.low_ns),
        ("median_diff_high_ns".to_string(), c.median_diff.high_ns),
        ("p99_cold_ns".to_string(), c.p99_a_ns as f64),
        ("p99_warm_ns".to_string(), c.p99_b_ns as f64),
        ("p99_diff_ns".to_string(), c.p99_diff.ns),
        ("p99_diff_low_ns".to_string(), c.p99_diff.low_ns),
        ("p99_diff_high_ns".to_string(), c.p99_diff.high_ns),
    ]);
    Finding {
        detector: DETECTOR.to_string(),
        verdict: Verdict::Detected,
        confidence: if c.median_diff.low_ns > 0.5 * c.median_diff.ns {
            0.9
        } else {
            0.75
        },
        summary: format!(
            "{probe} ({kind}): {sentence}: {} vs {}",
            cold.label("variant"),
            warm.label("variant")
        ),
        evidence: vec![
            Evidence {
                series: cold.display_name.clone(),
                range_ns: None,
                values,
                note: sentence.clone(),
            },
            Evidence {
                series: warm.display_name.clone(),
                range_ns: None,
                values: BTreeMap::from([("median_ns".to_string(), c.median_b_ns as f64)]),
                note: format!(
                    "the warm path, paired with {} by round",
                    cold.label("variant")
                ),
            },
        ],
        fix: Some(fix.into()),
    }
}

/// Findings for the cold variants that cost more than their warm siblings.
pub fn cold_path(series: &[ProbeSeries], origin_ns: i64, interval_ns: i64) -> Vec<Finding> {
    let mut out = Vec::new();
    for cold in series {
        let Some((warm, what, fix)) = sibling(cold, series) else {
            continue;
        };
        let Some(c) = compare(cold, warm, origin_ns, interval_ns) else {
            continue;
        };
        let big = c.median_diff.ns >= MIN_COST_NS.max(MIN_COST_SHARE * c.median_b_ns as f64);
        if c.median_diff.low_ns > 0.0 && big {
            out.push(finding(cold, warm, what, fix, &c));
        }
    }
    out
}
