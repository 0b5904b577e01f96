//! Statistics over series: pure functions, no I/O.
//!
//! # Brief overview
//!
//! A [`Distribution`] is built from a series (raw samples, or merged interval histograms). From
//! it:
//!
//! - [`quantiles`]: count, min, mean, max and p50/p90/p99/p99.9 with 95% confidence intervals
//!   from order statistics (distribution-free; exact ranks on raw samples, bucket-bounded on
//!   histograms).
//! - [`modes`]: the modes of the distribution on a log axis, each with its share of the samples,
//!   and the gaps between them.
//! - [`fragile`]: a warning when a reported percentile sits in, or at the edge of, a gap between
//!   modes, so that moving a sliver of mass would move it by the width of the gap (the "p90 jumps
//!   from 12 ms to 0.77 ms when 1% of mass moves" trap).
//! - [`floor`]: minimum latency against an expected floor ("minimum 5.0 ms is 11x the expected
//!   floor").
//! - [`compare`]: two distributions side by side, explaining a percentile that jumped.
//! - [`loghist`]: counts on a log axis for drawing.
//!
//! Over time, from timestamped samples:
//!
//! - [`over_time`]: p50/p90/p99 and mode shares per interval.
//! - [`changepoint`]: change points in several percentiles at once (E-divisive, permutation
//!   test, minimum segment length).
//! - [`period`]: periods from the autocorrelation, minutes to a day.
//! - [`timeline`]: the three together on one series ([`timeline::analyze_over_time`]).
//! - [`ab`]: two variants of a probe compared round by round, with bootstrap intervals on the
//!   differences of their medians and p99s.
//! - [`xcorr`]: lagged cross-correlation with another series.
//!
//! ```
//! use tailhunt_analyze::{analyze, AnalyzeOptions, Distribution};
//!
//! let values: Vec<u64> = (0..10_000).map(|i| 400_000 + (i % 100) * 1_000).collect();
//! let a = analyze(&Distribution::from_values(values), &AnalyzeOptions::default());
//! assert_eq!(a.modes.len(), 1);
//! assert!(a.warnings.is_empty());
//! ```
#![deny(missing_docs)]

pub mod ab;
pub mod breakdown;
pub mod changepoint;
pub mod compare;
mod distribution;
pub mod floor;
pub mod fragile;
pub mod loghist;
pub mod modes;
pub mod over_time;
pub mod period;
pub mod quantiles;
pub mod timeline;
pub mod xcorr;

use serde::Serialize;

pub use distribution::{Distribution, OutcomeCounts, SampleTally};

/// Percentiles reported by default.
pub const DEFAULT_QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// What to compute.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalyzeOptions {
    /// Quantiles to report.
    pub quantiles: Vec<f64>,
    /// Confidence level of the intervals (0.95).
    pub confidence: f64,
    /// Expected latency floor, ns (from `--expect-floor` or a baseline series).
    pub expected_floor_ns: Option<u64>,
    /// Where the expected floor came from, for messages (`--expect-floor 450us`, `run 3f2a..`).
    pub floor_source: Option<String>,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions {
            quantiles: DEFAULT_QUANTILES.to_vec(),
            confidence: 0.95,
            expected_floor_ns: None,
            floor_source: None,
        }
    }
}

/// Everything `tailhunt analyze` says about one distribution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    /// Count, extremes, mean and quantiles with intervals.
    pub summary: quantiles::Summary,
    /// Modes, lowest first.
    pub modes: Vec<modes::Mode>,
    /// Gaps between consecutive modes.
    pub gaps: Vec<modes::Gap>,
    /// Percentiles that a small shift of mass would move across a gap.
    pub warnings: Vec<fragile::FragilePercentile>,
    /// Floor check, when a floor was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<floor::FloorCheck>,
    /// Log-axis histogram for drawing.
    pub histogram: Vec<loghist::LogBin>,
}

/// Runs every analysis on one distribution.
pub fn analyze(dist: &Distribution, opts: &AnalyzeOptions) -> Analysis {
    let summary = quantiles::summarize(dist, &opts.quantiles, opts.confidence);
    let found = modes::find_modes(dist.histogram());
    let warnings = fragile::fragile_percentiles(dist, &summary, &found);
    let floor = opts
        .expected_floor_ns
        .and_then(|f| floor::check_floor(dist, f, opts.floor_source.as_deref()));
    Analysis {
        histogram: loghist::log_bins(dist.histogram(), 40),
        modes: found.modes,
        gaps: found.gaps,
        summary,
        warnings,
        floor,
    }
}

/// `p50`, `p90`, `p99`, `p99.9`, `p99.99`: how people name a quantile.
pub fn percentile_label(q: f64) -> String {
    match tailhunt_histogram::Quantile::from_f64(q) {
        Some(q) => q.to_string(),
        None => format!("p{}", q * 100.0),
    }
}

#[cfg(test)]
mod tests {
    use super::percentile_label;

    #[test]
    fn labels() {
        assert_eq!(percentile_label(0.5), "p50");
        assert_eq!(percentile_label(0.999), "p99.9");
        assert_eq!(percentile_label(0.9999), "p99.99");
        assert_eq!(percentile_label(1.0), "p100");
    }
}
