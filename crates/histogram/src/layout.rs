//! The bucket layout, shared with the kernel side.

/// Default number of sub-bucket bits: 128 buckets per power of two.
pub const SUB_BITS: u32 = 7;

/// A log-linear bucket layout with `2^sub_bits` buckets per power of two.
///
/// Values below `2^sub_bits` get a bucket each (exact). Above, a value `v` whose highest set bit
/// is `h` has exponent `e = h - sub_bits` and mantissa `m = v >> e` in `[2^sub_bits,
/// 2^(sub_bits+1))`; its bucket is `e * 2^sub_bits + m`. Bucket `i` covers
/// `[m << e, (m + 1) << e)`, so its width relative to its lower edge is `1/m <= 2^-sub_bits`.
///
/// A coarser layout (fewer `sub_bits`, e.g. 4 for a small BPF map: 6.25% wide buckets) maps onto
/// a finer one exactly, because every coarse bucket boundary is also a fine one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    sub_bits: u32,
}

impl Default for Layout {
    fn default() -> Self {
        Layout { sub_bits: SUB_BITS }
    }
}

impl Layout {
    /// A layout with `sub_bits` in `1..=12`; `None` outside.
    pub const fn new(sub_bits: u32) -> Option<Layout> {
        if sub_bits >= 1 && sub_bits <= 12 {
            Some(Layout { sub_bits })
        } else {
            None
        }
    }

    /// Sub-bucket bits.
    pub const fn sub_bits(&self) -> u32 {
        self.sub_bits
    }

    /// Bucket index of `v`.
    ///
    /// The same computation in BPF C, with shifts and compares only (no division, no loops the
    /// verifier must bound; `log2_u64` is the usual binary search for the highest set bit):
    ///
    /// ```c
    /// static __always_inline u32 log2_u64(u64 v) {
    ///     u32 r = 0, s;
    ///     s = (v > 0xFFFFFFFF) << 5; v >>= s; r |= s;
    ///     s = (v > 0xFFFF) << 4;     v >>= s; r |= s;
    ///     s = (v > 0xFF) << 3;       v >>= s; r |= s;
    ///     s = (v > 0xF) << 2;        v >>= s; r |= s;
    ///     s = (v > 0x3) << 1;        v >>= s; r |= s;
    ///     return r | (v >> 1);
    /// }
    /// static __always_inline u32 bucket_index(u64 v) {
    ///     if (v < (1ULL << SUB_BITS))
    ///         return v;
    ///     u32 e = log2_u64(v) - SUB_BITS;
    ///     return (e << SUB_BITS) + (u32)(v >> e);
    /// }
    /// ```
    #[inline]
    pub const fn index(&self, v: u64) -> usize {
        let s = self.sub_bits;
        if v < (1u64 << s) {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() - s;
        ((e as usize) << s) + (v >> e) as usize
    }

    /// Number of buckets needed to cover every `u64`.
    pub const fn bucket_count(&self) -> usize {
        (65 - self.sub_bits as usize) << self.sub_bits
    }

    /// Lowest value in bucket `i`.
    #[inline]
    pub const fn lower(&self, i: usize) -> u64 {
        let s = self.sub_bits;
        if i < (1usize << s) {
            return i as u64;
        }
        let e = (i >> s) - 1;
        let m = i - (e << s);
        (m as u64) << e
    }

    /// Number of values in bucket `i`.
    #[inline]
    pub const fn width(&self, i: usize) -> u64 {
        let s = self.sub_bits;
        if i < (2usize << s) {
            return 1;
        }
        1u64 << ((i >> s) - 1)
    }

    /// Highest value in bucket `i` (inclusive).
    #[inline]
    pub const fn upper(&self, i: usize) -> u64 {
        self.lower(i) + (self.width(i) - 1)
    }

    /// The value reported for bucket `i`: its midpoint, which halves the worst-case error.
    #[inline]
    pub const fn representative(&self, i: usize) -> u64 {
        self.lower(i) + (self.width(i) - 1) / 2
    }

    /// Worst-case relative error of a value reported through this layout:
    /// half a bucket over the bucket's lower edge, `2^-(sub_bits+1)` (0.39% for 7 bits).
    pub fn relative_error_bound(&self) -> f64 {
        1.0 / f64::from(1u32 << (self.sub_bits + 1))
    }

    /// Relative width of the widest bucket, `2^-sub_bits` (0.78% for 7 bits).
    pub fn relative_bucket_width(&self) -> f64 {
        1.0 / f64::from(1u32 << self.sub_bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_continuous_and_monotonic_across_octaves() {
        let l = Layout::default();
        let mut prev = 0;
        for v in 0..(1u64 << 16) {
            let i = l.index(v);
            assert!(i == prev || i == prev + 1, "v={v} i={i} prev={prev}");
            assert!(l.lower(i) <= v && v <= l.upper(i), "v={v} bucket {i}");
            prev = i;
        }
        assert_eq!(l.index(u64::MAX), l.bucket_count() - 1);
        assert_eq!(l.upper(l.bucket_count() - 1), u64::MAX);
    }

    #[test]
    fn every_bucket_is_within_the_relative_bound() {
        for bits in [4, 7, 10] {
            let l = Layout::new(bits).unwrap();
            for i in 0..l.bucket_count() {
                let (lo, rep, hi) = (l.lower(i), l.representative(i), l.upper(i));
                assert_eq!(l.index(lo), i);
                assert_eq!(l.index(hi), i);
                if lo > 0 {
                    let worst = (rep - lo).max(hi - rep) as f64 / lo as f64;
                    assert!(worst <= l.relative_error_bound(), "bits {bits} bucket {i}");
                }
            }
        }
    }

    #[test]
    fn coarse_boundaries_are_fine_boundaries() {
        let (coarse, fine) = (Layout::new(4).unwrap(), Layout::default());
        for i in 0..coarse.bucket_count() {
            let lo = coarse.lower(i);
            assert_eq!(fine.lower(fine.index(lo)), lo);
        }
    }

    #[test]
    fn rejects_silly_layouts() {
        assert!(Layout::new(0).is_none());
        assert!(Layout::new(13).is_none());
    }
}
