//! The histogram: counts per bucket plus exact count, min, max and sum.

use crate::quantile::nearest_rank;
use crate::Layout;

/// One non-empty bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Bucket index in the layout.
    pub index: usize,
    /// Lowest value in the bucket.
    pub lower: u64,
    /// Highest value in the bucket (inclusive).
    pub upper: u64,
    /// Number of values recorded in it.
    pub count: u64,
}

/// A log-linear histogram (see [`Layout`]). Min, max, count and sum are kept exactly, so the
/// extreme quantiles and the mean carry no bucket error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    layout: Layout,
    counts: Vec<u64>,
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram with the default layout.
    pub fn new() -> Histogram {
        Histogram::with_layout(Layout::default())
    }

    /// An empty histogram with the given layout.
    pub fn with_layout(layout: Layout) -> Histogram {
        Histogram {
            layout,
            counts: Vec::new(),
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    /// Builds a histogram from raw parts (used by decoders); min/max/sum must be consistent.
    pub(crate) fn from_parts(
        layout: Layout,
        counts: Vec<u64>,
        min: u64,
        max: u64,
        sum: u128,
    ) -> Histogram {
        let count = counts.iter().sum();
        Histogram {
            layout,
            counts,
            count,
            min: if count == 0 { u64::MAX } else { min },
            max,
            sum,
        }
    }

    /// A histogram from counts per bucket index, as a BPF program keeps them, and the exact sum
    /// of the values. Min and max are not known exactly: they are taken as the edges of the
    /// lowest and highest non-empty buckets, so the extreme quantiles carry up to one bucket's
    /// width of error (the others keep half a bucket's).
    pub fn from_bucket_counts(layout: Layout, counts: &[u64], sum: u128) -> Histogram {
        let n = counts.len().min(layout.bucket_count());
        let counts = &counts[..n];
        let first = counts.iter().position(|&c| c > 0);
        let last = counts.iter().rposition(|&c| c > 0);
        match (first, last) {
            (Some(first), Some(last)) => Histogram::from_parts(
                layout,
                counts[..=last].to_vec(),
                layout.lower(first),
                layout.upper(last),
                sum,
            ),
            _ => Histogram::with_layout(layout),
        }
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }

    /// Records `n` copies of a value.
    #[inline]
    pub fn record_n(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        let i = self.layout.index(v);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
        self.count += n;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += u128::from(v) * u128::from(n);
    }

    /// Adds every count of `other`. Histograms of a coarser layout merge exactly into a finer
    /// one (their bucket edges coincide); otherwise each bucket is re-recorded at its
    /// representative value, which adds at most one more bucket's error.
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if self.layout == other.layout {
            if self.counts.len() < other.counts.len() {
                self.counts.resize(other.counts.len(), 0);
            }
            for (a, b) in self.counts.iter_mut().zip(&other.counts) {
                *a += b;
            }
            self.count += other.count;
        } else {
            let (min, max, sum) = (self.min, self.max, self.sum);
            for b in other.buckets() {
                self.record_n(other.layout.representative(b.index), b.count);
            }
            self.min = min;
            self.max = max;
            self.sum = sum;
            self.count = self.counts.iter().sum();
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Smallest value recorded (exact).
    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }

    /// Largest value recorded (exact).
    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// Sum of the values recorded (exact).
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Mean (exact up to float rounding).
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// The value of the `rank`-th smallest sample (1-based), within the layout's error bound:
    /// the bucket's midpoint clamped to the exact min and max.
    pub fn value_at_rank(&self, rank: u64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = rank.clamp(1, self.count);
        if rank == 1 {
            return Some(self.min);
        }
        if rank == self.count {
            return Some(self.max);
        }
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(self.layout.representative(i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// The `q`-quantile (`0 <= q <= 1`) by the nearest-rank definition: the value of the
    /// `ceil(q * n)`-th smallest sample, the rank computed exactly ([`crate::quantile`]).
    /// `None` when empty or `q` is outside `0..=1`.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if !(0.0..=1.0).contains(&q) {
            return None;
        }
        self.value_at_rank(nearest_rank(q, self.count))
    }

    /// Number of values `<= v` (up to the bucket containing `v`, inclusive).
    pub fn count_at_or_below(&self, v: u64) -> u64 {
        let i = self.layout.index(v);
        self.counts.iter().take(i + 1).sum()
    }

    /// Non-empty buckets in ascending order.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| Bucket {
                index: i,
                lower: self.layout.lower(i),
                upper: self.layout.upper(i),
                count: c,
            })
    }

    /// Counts per bucket index, dense from 0 (trailing empty buckets may be absent).
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_counts_from_a_kernel_map_read_back_like_recorded_values() {
        let layout = Layout::new(4).unwrap();
        let mut recorded = Histogram::with_layout(layout);
        let mut counts = vec![0u64; layout.bucket_count()];
        let mut sum = 0u128;
        for v in (1..=5000u64).map(|i| i * 997) {
            recorded.record(v);
            counts[layout.index(v)] += 1;
            sum += u128::from(v);
        }
        let h = Histogram::from_bucket_counts(layout, &counts, sum);
        assert_eq!(h.count(), recorded.count());
        assert_eq!(h.mean(), recorded.mean());
        for q in [0.5, 0.9, 0.99] {
            assert_eq!(h.quantile(q), recorded.quantile(q), "q={q}");
        }
        let (lo, hi) = (h.min().unwrap(), h.max().unwrap());
        assert!(lo <= 997 && 997 - lo <= 997 / 16, "min {lo}");
        assert!(
            hi >= 4_985_000 && hi - 4_985_000 <= 4_985_000 / 16,
            "max {hi}"
        );
        assert!(Histogram::from_bucket_counts(layout, &[0; 8], 0).is_empty());
    }

    #[test]
    fn quantiles_of_small_exact_values_are_exact() {
        let mut h = Histogram::new();
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), Some(50));
        assert_eq!(h.quantile(0.99), Some(99));
        assert_eq!(h.quantile(0.0), Some(1));
        assert_eq!(h.quantile(1.0), Some(100));
        assert_eq!(h.quantile(1.5), None);
        assert_eq!(h.mean(), Some(50.5));
    }

    #[test]
    fn empty_histogram_has_no_quantiles() {
        let h = Histogram::new();
        assert_eq!(h.quantile(0.5), None);
        assert_eq!(h.min(), None);
        assert_eq!(h.mean(), None);
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in (0..50_000u64).map(|i| i * 7919 % 10_000_019) {
            if v % 3 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a, all);
    }

    #[test]
    fn coarse_histogram_merges_into_fine_one_keeping_exact_stats() {
        let mut coarse = Histogram::with_layout(Layout::new(4).unwrap());
        let mut fine = Histogram::new();
        for v in [1_000u64, 50_000, 123_456_789] {
            coarse.record(v);
        }
        fine.merge(&coarse);
        assert_eq!(fine.count(), 3);
        assert_eq!(fine.min(), Some(1_000));
        assert_eq!(fine.max(), Some(123_456_789));
        let p50 = fine.quantile(0.5).unwrap() as f64;
        assert!(
            (p50 - 50_000.0).abs() / 50_000.0 <= Layout::new(4).unwrap().relative_bucket_width()
        );
    }
}
