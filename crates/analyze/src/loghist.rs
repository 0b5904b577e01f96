//! Counts on a log axis, for drawing a histogram people can read at every scale.

use serde::Serialize;
use tailhunt_histogram::Histogram;

/// One bar.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogBin {
    /// Lower edge, ns (inclusive).
    pub lower_ns: u64,
    /// Upper edge, ns (exclusive).
    pub upper_ns: u64,
    /// Values in the bin.
    pub count: u64,
}

/// Bins per decade tried in order, so edges land on round-ish numbers.
const STEPS: [u32; 6] = [40, 20, 10, 5, 2, 1];

/// Splits the range of `h` into at most `max_bins` log-spaced bins (a whole number of bins per
/// decade) and counts each histogram bucket in the bin of its midpoint.
pub fn log_bins(h: &Histogram, max_bins: usize) -> Vec<LogBin> {
    let (Some(min), Some(max)) = (h.min(), h.max()) else {
        return Vec::new();
    };
    let lo = (min.max(1) as f64).log10();
    let hi = (max.max(1) as f64).log10();
    let per_decade = STEPS
        .iter()
        .copied()
        .find(|&s| (((hi * s as f64).floor() - (lo * s as f64).floor()) as usize) < max_bins.max(1))
        .unwrap_or(1) as f64;
    let first = (lo * per_decade).floor() as i64;
    let last = (hi * per_decade).floor() as i64;
    let edge = |i: i64| 10f64.powf(i as f64 / per_decade).round() as u64;
    let mut bins: Vec<LogBin> = (first..=last)
        .map(|i| LogBin {
            lower_ns: edge(i),
            upper_ns: edge(i + 1),
            count: 0,
        })
        .collect();
    for b in h.buckets() {
        let v = h.layout().representative(b.index).clamp(min, max).max(1);
        let i = (((v as f64).log10() * per_decade).floor() as i64 - first)
            .clamp(0, bins.len() as i64 - 1);
        bins[i as usize].count += b.count;
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_bins_are_bounded() {
        let mut h = Histogram::new();
        for v in [400_000u64, 450_000, 10_000_000, 20_000_000] {
            h.record_n(v, 10);
        }
        let bins = log_bins(&h, 40);
        assert!(bins.len() <= 40);
        assert_eq!(bins.iter().map(|b| b.count).sum::<u64>(), 40);
        assert!(bins.windows(2).all(|w| w[0].upper_ns == w[1].lower_ns));
        assert!(log_bins(&Histogram::new(), 40).is_empty());
    }
}
