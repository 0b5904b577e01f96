//! `periodic-tail`: the tail (p99, or p90) rises and falls on a period.
//!
//! The story: one service's tail oscillated on a period of minutes while its median stayed
//! flat, and the whole distribution of another followed a daily cycle. A period names a
//! cause's rhythm: a cron job, a garbage collector, a cache refresh, a log rotation, a backup
//! (tail only); the day's traffic (whole distribution, daily).
//!
//! In: a series' [`TimeAnalysis`] (periods from the autocorrelation of each percentile, minutes
//! to a day). Out: a finding when p99 (p90 when p99 is not read) has a period whose peak is at least
//! [`MIN_AMPLITUDE`] times its trough; it says whether the median oscillates too.

use std::collections::BTreeMap;

use tailhunt_analyze::timeline::{Oscillation, TimeAnalysis};
use tailhunt_model::{Evidence, Finding, Verdict};

use super::{format_offset, ProbeSeries};

/// Name of the detector.
pub const DETECTOR: &str = "periodic-tail";
/// Smallest peak-over-trough ratio of the per-phase level.
pub const MIN_AMPLITUDE: f64 = 1.15;

/// A finding for the series' tail period, if it has one.
pub fn periodic_tail(series: &ProbeSeries, a: &TimeAnalysis) -> Option<Finding> {
    let qs = &a.over_time.quantiles;
    let tail_index = |q: f64| qs.iter().position(|&x| (x - q).abs() < 1e-9);
    // p99 decides; p90 only when p99 is not read. A p90 that sits near a gap flips between
    // modes by chance, which can pass for a period when p99 shows none.
    let k = tail_index(0.99).or_else(|| tail_index(0.9))?;
    let tail: &Oscillation = a
        .period_of(k)
        .filter(|p| p.amplitude_ratio >= MIN_AMPLITUDE)?;
    let median = tail_index(0.5)
        .and_then(|k| a.period_of(k))
        .filter(|p| p.amplitude_ratio >= MIN_AMPLITUDE);
    let period = format_offset(tail.period_ns);
    let daily = (tail.period_ns as f64 / 86_400e9 - 1.0).abs() < 0.1;
    let (what, why) = match median {
        None => (
            format!(
                "{} oscillates with a period of {period} ({:.2}x peak to trough) while p50 stays flat",
                tail.label, tail.amplitude_ratio
            ),
            "something periodic slows a few requests: look for a job on that period (cron, \
             garbage collection, a cache refresh, log rotation, a backup) and move or spread it",
        ),
        Some(m) => (
            format!(
                "the whole distribution oscillates with a period of {period}{}: {} {:.2}x and p50 \
                 {:.2}x peak to trough",
                if daily { " (a daily cycle)" } else { "" },
                tail.label,
                tail.amplitude_ratio,
                m.amplitude_ratio
            ),
            "the load or the host follows that rhythm: compare runs at the same phase of the \
             cycle, and size for the peak",
        ),
    };
    let mut values = BTreeMap::from([
        ("period_ns".to_string(), tail.period_ns as f64),
        ("autocorrelation".to_string(), tail.r),
        (
            format!("{}_amplitude_ratio", tail.label),
            tail.amplitude_ratio,
        ),
        ("interval_ns".to_string(), a.over_time.interval_ns as f64),
        (
            "tail_only".to_string(),
            if median.is_none() { 1.0 } else { 0.0 },
        ),
    ]);
    if let Some(m) = median {
        values.insert("p50_amplitude_ratio".into(), m.amplitude_ratio);
        values.insert("p50_period_ns".into(), m.period_ns as f64);
    }
    let range = (
        a.over_time.intervals.first().map_or(0, |i| i.start_ns),
        a.over_time.intervals.last().map_or(0, |i| i.end_ns),
    );
    Some(Finding {
        detector: DETECTOR.to_string(),
        verdict: Verdict::Detected,
        confidence: (0.5 + 0.4 * tail.r).min(0.9),
        summary: format!("{}: {what}", series.who()),
        evidence: vec![Evidence {
            series: series.display_name.clone(),
            range_ns: Some(range),
            values,
            note: what.clone(),
        }],
        fix: Some(why.into()),
    })
}
