//! Percentiles and mode shares per interval of time.
//!
//! In: timestamped samples (latency from the intended send time, timeouts censored at the
//! timeout and kept), an origin and an interval width. Out: [`OverTime`], one [`IntervalStats`]
//! per interval that holds samples: its count and outcomes, its exact nearest-rank percentiles
//! (p50/p90/p99 by default) and, given the boundaries between the whole series' modes, the
//! share of its samples below each boundary (how mass moves between modes over time).
//!
//! The per-interval percentiles are what the change-point, period and fragile-percentile
//! analyses read: each interval's values are sorted and read exactly (no histogram error).
//! They are read over the answered samples (ok, and timeouts at the timeout): an error is not
//! a latency, and a probe that starts failing fast (a refused connection in 0.1 ms) must not
//! read as a service that got faster, nor as a step; its intervals are counted in `errors`.

use serde::Serialize;
use tailhunt_model::{Outcome, Sample};

/// Samples an interval should hold on average when the width is chosen automatically: enough
/// that its p99 is not simply its maximum.
pub const TARGET_SAMPLES_PER_INTERVAL: u64 = 100;
/// Most intervals an automatic width makes: more would make each one too thin to read.
pub const MAX_AUTO_INTERVALS: u64 = 400;
/// Intervals with fewer samples than this are listed but their percentiles are not read.
pub const MIN_SAMPLES_PER_INTERVAL: u64 = 10;

/// Widths an automatic interval is rounded up to, ns: 1 s .. 1 day.
const NICE_WIDTHS_S: [u64; 17] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14_400, 21_600, 86_400,
];

/// One interval's statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalStats {
    /// Start, ns on the run's clock (inclusive).
    pub start_ns: i64,
    /// End, ns (exclusive).
    pub end_ns: i64,
    /// Samples whose intended time falls in the interval.
    pub count: u64,
    /// Of those, errors.
    pub errors: u64,
    /// Of those, timeouts (kept, censored at the timeout).
    pub timeouts: u64,
    /// The percentiles asked for of the answered samples (errors left out), in the order of
    /// [`OverTime::quantiles`]; `None` when the interval holds fewer than
    /// [`MIN_SAMPLES_PER_INTERVAL`] answered samples.
    pub values_ns: Vec<Option<u64>>,
    /// Share of the interval's answered samples at or below each mode boundary given.
    pub share_below: Vec<f64>,
}

impl IntervalStats {
    /// The samples its percentiles and shares are read over: every one but the errors.
    pub fn answered(&self) -> u64 {
        self.count - self.errors
    }
}

/// Percentiles over time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverTime {
    /// Width of each interval, ns.
    pub interval_ns: i64,
    /// The percentiles read in each interval (0..=1).
    pub quantiles: Vec<f64>,
    /// Mode boundaries the shares are counted against, ns.
    pub boundaries_ns: Vec<u64>,
    /// The intervals that hold samples, in time order.
    pub intervals: Vec<IntervalStats>,
}

impl OverTime {
    /// The series of percentile `k` (index into [`OverTime::quantiles`]) over the intervals
    /// that have it, with each value's interval index.
    pub fn column(&self, k: usize) -> Vec<(usize, u64)> {
        self.intervals
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.values_ns.get(k).copied().flatten().map(|v| (i, v)))
            .collect()
    }

    /// Indices of the intervals whose percentiles were read.
    pub fn readable(&self) -> Vec<usize> {
        (0..self.intervals.len())
            .filter(|&i| self.intervals[i].values_ns.iter().all(Option::is_some))
            .collect()
    }
}

/// A width giving about [`TARGET_SAMPLES_PER_INTERVAL`] samples per interval (at most
/// [`MAX_AUTO_INTERVALS`] intervals), rounded up to a round duration; `None` without samples.
pub fn auto_interval(samples: &[Sample]) -> Option<i64> {
    let lo = samples.iter().map(|s| s.intended_ns).min()?;
    let hi = samples.iter().map(|s| s.intended_ns).max()?;
    let span = (hi - lo).max(1) as f64;
    let n = samples.len() as f64;
    let by_count = span * TARGET_SAMPLES_PER_INTERVAL as f64 / n;
    let by_intervals = span / MAX_AUTO_INTERVALS as f64;
    let want = by_count.max(by_intervals);
    let nice = NICE_WIDTHS_S
        .iter()
        .map(|s| (s * 1_000_000_000) as i64)
        .find(|&w| w as f64 >= want)
        .unwrap_or_else(|| (want / 86_400e9).ceil() as i64 * 86_400_000_000_000);
    Some(nice)
}

/// Splits `samples` into intervals of `interval_ns` from `origin_ns` (by intended time) and
/// reads `quantiles` and the shares below `boundaries_ns` in each.
pub fn over_time(
    samples: &[Sample],
    origin_ns: i64,
    interval_ns: i64,
    quantiles: &[f64],
    boundaries_ns: &[u64],
) -> OverTime {
    let width = interval_ns.max(1);
    let mut buckets: std::collections::BTreeMap<i64, Vec<&Sample>> = Default::default();
    for s in samples {
        buckets
            .entry((s.intended_ns - origin_ns).div_euclid(width))
            .or_default()
            .push(s);
    }
    let intervals = buckets
        .into_iter()
        .map(|(k, group)| {
            let mut values: Vec<u64> = group
                .iter()
                .filter(|s| s.outcome != Outcome::Error)
                .map(|s| s.latency_ns().max(0) as u64)
                .collect();
            values.sort_unstable();
            let n = values.len() as u64;
            let read = n >= MIN_SAMPLES_PER_INTERVAL;
            IntervalStats {
                start_ns: origin_ns + k * width,
                end_ns: origin_ns + (k + 1) * width,
                count: group.len() as u64,
                errors: group.iter().filter(|s| s.outcome == Outcome::Error).count() as u64,
                timeouts: group
                    .iter()
                    .filter(|s| s.outcome == Outcome::Timeout)
                    .count() as u64,
                values_ns: quantiles
                    .iter()
                    .map(|&q| {
                        read.then(|| values[(tailhunt_histogram::nearest_rank(q, n) - 1) as usize])
                    })
                    .collect(),
                share_below: boundaries_ns
                    .iter()
                    .map(|&b| values.partition_point(|&v| v <= b) as f64 / n.max(1) as f64)
                    .collect(),
            }
        })
        .collect();
    OverTime {
        interval_ns: width,
        quantiles: quantiles.to_vec(),
        boundaries_ns: boundaries_ns.to_vec(),
        intervals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_s: i64, lat: i64) -> Sample {
        Sample::from_latency(t_s * 1_000_000_000, lat, Outcome::Ok)
    }

    /// A probe that answered in 2 ms, then had its connections refused in 0.1 ms: the refused
    /// intervals have no percentiles (errors are not latency), so nothing reads as faster.
    #[test]
    fn errors_are_counted_but_not_read_as_latency() {
        let mut s: Vec<Sample> = (0..100).map(|i| at(i % 10, 2_000_000)).collect();
        s.extend(
            (0..100).map(|i| {
                Sample::from_latency((10 + i % 10) * 1_000_000_000, 100_000, Outcome::Error)
            }),
        );
        let o = over_time(&s, 0, 10_000_000_000, &[0.5], &[]);
        assert_eq!(o.intervals[0].values_ns, vec![Some(2_000_000)]);
        assert_eq!(o.intervals[1].values_ns, vec![None]);
        assert_eq!((o.intervals[1].count, o.intervals[1].errors), (100, 100));
    }

    #[test]
    fn percentiles_are_read_per_interval_and_thin_intervals_are_marked() {
        let mut s: Vec<Sample> = (0..100).map(|i| at(i % 10, 1_000 + i)).collect();
        s.extend((0..100).map(|i| at(10 + i % 10, 5_000 + i)));
        s.push(at(25, 7));
        let o = over_time(&s, 0, 10_000_000_000, &[0.5, 0.99], &[2_000]);
        assert_eq!(o.intervals.len(), 3);
        assert_eq!(o.intervals[0].values_ns, vec![Some(1_049), Some(1_098)]);
        assert_eq!(o.intervals[1].values_ns, vec![Some(5_049), Some(5_098)]);
        assert_eq!(o.intervals[2].values_ns, vec![None, None]);
        assert_eq!(o.intervals[0].share_below, vec![1.0]);
        assert_eq!(o.intervals[1].share_below, vec![0.0]);
        assert_eq!(o.readable(), vec![0, 1]);
        assert_eq!(o.column(1), vec![(0, 1_098), (1, 5_098)]);
    }

    #[test]
    fn automatic_width_gives_about_a_hundred_samples_per_interval() {
        // One sample a second for an hour: 100 s is not round, 120 s is.
        let s: Vec<Sample> = (0..3600).map(|i| at(i, 1_000)).collect();
        assert_eq!(auto_interval(&s), Some(120_000_000_000));
        assert_eq!(auto_interval(&[]), None);
    }
}
