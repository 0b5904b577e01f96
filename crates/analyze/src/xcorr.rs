//! Lagged cross-correlation of two series on the same time grid.
//!
//! In: two evenly spaced series (per-interval values, `None` where an interval is empty) and a
//! largest lag. Out: the Pearson correlation at each lag from `-max_lag` to `max_lag`, and the
//! lag where it is strongest. A positive lag means the second series follows the first: a
//! burst series whose peaks precede the latency peaks by two intervals correlates best at
//! lag 2 (`latency[t]` with `bursts[t - 2]`). Written here: a Pearson sum over a few hundred
//! points needs no crate.

use serde::Serialize;

/// Correlation at one lag.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LagCorrelation {
    /// Lag in intervals: how far `b` trails `a`.
    pub lag: i64,
    /// Pearson correlation over the pairs present at that lag.
    pub r: f64,
    /// Pairs it was computed from.
    pub pairs: usize,
}

/// Pearson correlation of `a[i]` with `b[i + lag]`.
pub fn correlation_at(a: &[Option<f64>], b: &[Option<f64>], lag: i64) -> LagCorrelation {
    let pairs: Vec<(f64, f64)> = (0..a.len() as i64)
        .filter_map(|i| {
            let j = i + lag;
            if j < 0 || j >= b.len() as i64 {
                return None;
            }
            Some((a[i as usize]?, b[j as usize]?))
        })
        .collect();
    let n = pairs.len() as f64;
    let r = if pairs.len() < 3 {
        0.0
    } else {
        let (ma, mb) = (
            pairs.iter().map(|p| p.0).sum::<f64>() / n,
            pairs.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let cov: f64 = pairs.iter().map(|p| (p.0 - ma) * (p.1 - mb)).sum();
        let va: f64 = pairs.iter().map(|p| (p.0 - ma).powi(2)).sum();
        let vb: f64 = pairs.iter().map(|p| (p.1 - mb).powi(2)).sum();
        if va > 0.0 && vb > 0.0 {
            cov / (va * vb).sqrt()
        } else {
            0.0
        }
    };
    LagCorrelation {
        lag,
        r,
        pairs: pairs.len(),
    }
}

/// Correlations at every lag in `-max_lag..=max_lag`.
pub fn cross_correlation(
    a: &[Option<f64>],
    b: &[Option<f64>],
    max_lag: i64,
) -> Vec<LagCorrelation> {
    (-max_lag..=max_lag)
        .map(|lag| correlation_at(a, b, lag))
        .collect()
}

/// The lag of strongest (largest absolute) correlation.
pub fn best_lag(a: &[Option<f64>], b: &[Option<f64>], max_lag: i64) -> Option<LagCorrelation> {
    cross_correlation(a, b, max_lag)
        .into_iter()
        .filter(|c| c.pairs >= 3)
        .max_by(|x, y| x.r.abs().total_cmp(&y.r.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delayed_copy_correlates_best_at_its_delay() {
        let a: Vec<Option<f64>> = (0..100).map(|i| Some(((i * 37) % 11) as f64)).collect();
        let mut b = vec![Some(0.0); 3];
        b.extend(a.iter().take(97).copied());
        let best = best_lag(&a, &b, 10).unwrap();
        assert_eq!(best.lag, 3);
        assert!((best.r - 1.0).abs() < 1e-9);
        assert!(correlation_at(&a, &b, 0).r.abs() < 0.5);
    }

    #[test]
    fn constant_or_empty_series_do_not_correlate() {
        let a = vec![Some(1.0); 10];
        assert_eq!(correlation_at(&a, &a, 0).r, 0.0);
        assert!(best_lag(&[], &[], 3).is_none());
    }
}
