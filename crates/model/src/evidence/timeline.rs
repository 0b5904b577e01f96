//! What the analysis over time finds, in the shapes the detectors cite and the report draws:
//! change points with every percentile's level on both sides ([`Shift`]), periods of one
//! percentile ([`Oscillation`]), and two variants of a probe compared round by round with
//! confidence intervals on the differences ([`PairedComparison`]). Derived from a run's series
//! by `tailhunt-analyze` (`timeline`, `ab`); not stored as documents.

use serde::{Deserialize, Serialize};

/// A change point in time, with every percentile's level before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shift {
    /// Start of the first interval after the change, ns.
    pub at_ns: i64,
    /// Index of that interval in the analysis' intervals.
    pub interval: usize,
    /// p-value of the permutation test.
    pub p_value: f64,
    /// Each percentile's median over the segment before, ns (order of the quantiles).
    pub before_ns: Vec<u64>,
    /// ... and after.
    pub after_ns: Vec<u64>,
    /// Start of the segment before, ns.
    pub segment_start_ns: i64,
    /// End of the segment after, ns.
    pub segment_end_ns: i64,
}

impl Shift {
    /// `after / before` of percentile `k`.
    pub fn ratio(&self, k: usize) -> f64 {
        self.after_ns[k] as f64 / self.before_ns[k].max(1) as f64
    }
}

/// A period of one percentile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Oscillation {
    /// Which percentile (`p99`).
    pub label: String,
    /// Index into the quantiles.
    pub quantile: usize,
    /// The period, ns.
    pub period_ns: i64,
    /// Autocorrelation at the period.
    pub r: f64,
    /// Highest over lowest per-phase level (a ratio: 2.0 is a doubling).
    pub amplitude_ratio: f64,
}

/// A difference with its confidence interval, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// The estimate, A - B.
    pub ns: f64,
    /// Lower end of the interval.
    pub low_ns: f64,
    /// Upper end of the interval.
    pub high_ns: f64,
}

impl Difference {
    /// Whether the interval lies wholly on one side of zero.
    pub fn excludes_zero(&self) -> bool {
        self.low_ns > 0.0 || self.high_ns < 0.0
    }
}

/// Two variants compared by round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedComparison {
    /// Rounds where both variants have a sample.
    pub rounds: usize,
    /// Confidence level of the intervals.
    pub confidence: f64,
    /// Median of A over those rounds, ns.
    pub median_a_ns: u64,
    /// Median of B, ns.
    pub median_b_ns: u64,
    /// p99 of A, ns.
    pub p99_a_ns: u64,
    /// p99 of B, ns.
    pub p99_b_ns: u64,
    /// Median of A minus median of B.
    pub median_diff: Difference,
    /// p99 of A minus p99 of B.
    pub p99_diff: Difference,
}
