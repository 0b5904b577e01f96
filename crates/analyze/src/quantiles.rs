//! Quantiles with distribution-free confidence intervals.
//!
//! The `q`-quantile is the nearest-rank one: the `ceil(q n)`-th smallest value. Its confidence
//! interval comes from order statistics: the number of samples below the true quantile is
//! Binomial(n, q), so the ranks `n q -/+ z sqrt(n q (1 - q))` (normal approximation) bracket it
//! with the chosen confidence, whatever the distribution. When a bound's rank falls outside
//! `1..=n` there are too few samples for it and the bound is reported as missing (`None`), not
//! invented. On histogram-only data the values at those ranks also carry the bucket bound.

use serde::Serialize;
use tailhunt_histogram::nearest_rank;

use crate::{percentile_label, Distribution, OutcomeCounts};

/// One quantile with its interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuantileEstimate {
    /// The quantile, 0..=1.
    pub q: f64,
    /// `p99` etc.
    pub label: String,
    /// Its value, ns.
    pub value_ns: u64,
    /// Lower confidence bound, ns; `None` when there are too few samples below.
    pub ci_low_ns: Option<u64>,
    /// Upper confidence bound, ns; `None` when there are too few samples above.
    pub ci_high_ns: Option<u64>,
}

/// Count, extremes, mean and quantiles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Values analysed.
    pub count: u64,
    /// Outcomes of the samples they came from.
    pub outcomes: OutcomeCounts,
    /// Smallest value, ns (exact).
    pub min_ns: Option<u64>,
    /// Mean, ns.
    pub mean_ns: Option<f64>,
    /// Largest value, ns (exact).
    pub max_ns: Option<u64>,
    /// Whether quantiles are exact (raw samples) or bucket-bounded (histograms).
    pub exact: bool,
    /// Relative error bound of the quantile values (0 when exact).
    pub relative_error_bound: f64,
    /// Confidence level of the intervals.
    pub confidence: f64,
    /// The quantiles.
    pub quantiles: Vec<QuantileEstimate>,
}

/// Summarises a distribution.
pub fn summarize(dist: &Distribution, qs: &[f64], confidence: f64) -> Summary {
    let h = dist.histogram();
    let n = dist.count();
    let z = normal_quantile(0.5 + confidence / 2.0);
    let quantiles = if n == 0 {
        Vec::new()
    } else {
        qs.iter()
            .filter(|q| (0.0..=1.0).contains(*q))
            .filter_map(|&q| {
                let (lo, hi) = ci_ranks(q, n, z);
                Some(QuantileEstimate {
                    q,
                    label: percentile_label(q),
                    value_ns: dist.value_at_rank(nearest_rank(q, n))?,
                    ci_low_ns: lo.and_then(|r| dist.value_at_rank(r)),
                    ci_high_ns: hi.and_then(|r| dist.value_at_rank(r)),
                })
            })
            .collect()
    };
    Summary {
        count: n,
        outcomes: dist.outcomes(),
        min_ns: h.min(),
        mean_ns: h.mean(),
        max_ns: h.max(),
        exact: dist.sorted().is_some(),
        relative_error_bound: dist.error_bound(),
        confidence,
        quantiles,
    }
}

/// Ranks bracketing the `q`-quantile with the confidence whose normal quantile is `z`.
pub fn ci_ranks(q: f64, n: u64, z: f64) -> (Option<u64>, Option<u64>) {
    let nf = n as f64;
    let centre = nf * q;
    let half = z * (nf * q * (1.0 - q)).sqrt();
    let lo = (centre - half).floor();
    let hi = (centre + half).ceil() + 1.0;
    let lo = (lo >= 1.0 && q > 0.0).then_some(lo as u64);
    let hi = (hi <= nf && q < 1.0).then_some(hi as u64);
    (lo, hi)
}

/// Inverse of the standard normal CDF, for `0 < p < 1` (values outside are clamped just inside).
pub fn normal_quantile(p: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    Normal::standard().inverse_cdf(p.clamp(1e-12, 1.0 - 1e-12))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_histogram::Histogram;

    #[test]
    fn z_for_95_percent() {
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-6);
        assert!((normal_quantile(0.5)).abs() < 1e-9);
    }

    #[test]
    fn exact_quantiles_and_intervals_bracket_them() {
        let d = Distribution::from_values((1..=10_000).collect());
        let s = summarize(&d, &[0.5, 0.99], 0.95);
        assert!(s.exact);
        let p50 = &s.quantiles[0];
        assert_eq!(p50.value_ns, 5_000);
        let (lo, hi) = (p50.ci_low_ns.unwrap(), p50.ci_high_ns.unwrap());
        assert!(lo < 5_000 && hi > 5_000);
        // +-1.96 sqrt(2500) = +-98 ranks.
        assert!((4_890..=4_910).contains(&lo), "{lo}");
        assert!((5_090..=5_110).contains(&hi), "{hi}");
    }

    #[test]
    fn intervals_are_missing_when_samples_are_too_few() {
        let d = Distribution::from_values((1..=100).collect());
        let s = summarize(&d, &[0.999], 0.95);
        assert_eq!(s.quantiles[0].ci_high_ns, None);
        assert_eq!(s.quantiles[0].value_ns, 100);
    }

    #[test]
    fn intervals_cover_the_truth_about_95_percent_of_the_time() {
        // Uniform 0..1e6: the true median is 5e5. Draw 400 sets of 500 with a simple LCG.
        let mut state = 42u64;
        let mut covered = 0;
        for _ in 0..400 {
            let v: Vec<u64> = (0..500)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (state >> 33) % 1_000_000
                })
                .collect();
            let s = summarize(&Distribution::from_values(v), &[0.5], 0.95);
            let q = &s.quantiles[0];
            if q.ci_low_ns.unwrap() <= 500_000 && 500_000 <= q.ci_high_ns.unwrap() {
                covered += 1;
            }
        }
        assert!((370..=396).contains(&covered), "covered {covered}/400");
    }

    #[test]
    fn histogram_only_summary_states_its_bound() {
        let mut h = Histogram::new();
        (1..=1000u64).for_each(|v| h.record(v * 1000));
        let s = summarize(&Distribution::from_histogram(h), &[0.9], 0.95);
        assert!(!s.exact);
        assert!(s.relative_error_bound > 0.0 && s.relative_error_bound < 0.01);
        let v = s.quantiles[0].value_ns as f64;
        assert!((v - 900_000.0).abs() / 900_000.0 <= s.relative_error_bound);
    }
}
