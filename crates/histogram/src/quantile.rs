//! The one rule for percentiles: nearest rank, in integer arithmetic.
//!
//! In: a quantile, either as text (`99.9`, `p99.9`, `99.9%`, `0.999`) or as an `f64`, and a
//! number of values `n`. Out: the 1-based rank of the value that is the quantile, the
//! `ceil(q·n)`-th smallest (at least 1, at most `n`), or that value itself from a sorted slice.
//!
//! A quantile is held as an exact fraction, [`Quantile`]: parts per 10^12. The rank is
//! `ceil(parts·n / 10^12)` in 128-bit integers, so 99.9% of 3000 values is rank 2997 exactly.
//! In floating point it is not: `99.9 / 100 * 3000` is 2997.0000000000005, whose ceiling picks
//! rank 2998, and two commands that spell the same percentile differently (`0.999`, `99.9/100`)
//! then print two different p99.9 values for one run. Every command takes its ranks from here.
//!
//! ```
//! use tailhunt_histogram::quantile::{of_sorted, Quantile};
//!
//! let p999: Quantile = "99.9".parse().unwrap();
//! assert_eq!(p999.rank(3000), 2997);
//! assert_eq!(Quantile::from_f64(99.9 / 100.0).unwrap(), p999);
//! let values: Vec<u64> = (1..=3000).collect();
//! assert_eq!(of_sorted(&values, 0.999), Some(2997));
//! ```

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// Parts a whole is divided into: quantiles are exact to 10^-12 (percentiles to 10 decimals).
pub const PARTS: u64 = 1_000_000_000_000;

/// Decimal digits of [`PARTS`].
const PARTS_DIGITS: usize = 12;

/// A quantile, `0 ..= 1`, as an exact number of parts per [`PARTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantile {
    parts: u64,
}

/// Why text is not a quantile.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantileError {
    /// Not a plain decimal number.
    #[error("'{0}' is not a number (write a percentile such as 99.9 or a quantile such as 0.999)")]
    NotANumber(String),
    /// Above 100% or below 0.
    #[error("'{0}' is out of range (use 0..1 or 0..100, e.g. 99.9)")]
    OutOfRange(String),
    /// More decimals than the exact fraction holds.
    #[error("'{0}' has more decimals than tailhunt keeps (at most 10 for a percentile, 12 for a quantile)")]
    TooPrecise(String),
}

impl Quantile {
    /// The median.
    pub const MEDIAN: Quantile = Quantile { parts: PARTS / 2 };
    /// The largest value.
    pub const MAX: Quantile = Quantile { parts: PARTS };

    /// `parts` per [`PARTS`]; `None` above the whole.
    pub fn from_parts(parts: u64) -> Option<Quantile> {
        (parts <= PARTS).then_some(Quantile { parts })
    }

    /// The quantile nearest to `q` on the 10^-12 grid; `None` for NaN or outside `0 ..= 1`.
    ///
    /// Every quantile written with up to 12 decimals comes back exact, however its `f64` was
    /// computed (`0.999` and `99.9 / 100` differ in their last bit but are both 999/1000 here):
    /// `q · 10^12` is below 2^53, where the rounding error of one multiplication is far smaller
    /// than the half part that rounding to the grid forgives.
    pub fn from_f64(q: f64) -> Option<Quantile> {
        if !(0.0..=1.0).contains(&q) {
            return None;
        }
        Some(Quantile {
            parts: (q * PARTS as f64).round() as u64,
        })
    }

    /// Parts per [`PARTS`].
    pub fn parts(self) -> u64 {
        self.parts
    }

    /// As an `f64` (for display and for code that takes quantiles as numbers; converting back
    /// with [`Quantile::from_f64`] gives the same quantile).
    pub fn as_f64(self) -> f64 {
        self.parts as f64 / PARTS as f64
    }

    /// The 1-based nearest rank among `n` values: `ceil(q·n)`, at least 1 and at most `n`
    /// (1 when `n` is 0).
    pub fn rank(self, n: u64) -> u64 {
        let scaled = u128::from(self.parts) * u128::from(n);
        let rank = scaled.div_ceil(u128::from(PARTS));
        // rank <= n, so it fits in u64.
        (rank as u64).clamp(1, n.max(1))
    }
}

impl FromStr for Quantile {
    type Err = QuantileError;

    /// Reads a percentile or a quantile: `99.9`, `p99.9` and `99.9%` are percents, as is any
    /// number above 1; a number from 0 to 1 (`0.999`, `1`) is a quantile. The decimal is read
    /// exactly, never through a float.
    fn from_str(text: &str) -> Result<Quantile, QuantileError> {
        let t = text.trim();
        let (body, marked_percent) = match (t.strip_prefix(['p', 'P']), t.strip_suffix('%')) {
            (Some(rest), _) => (rest, true),
            (None, Some(rest)) => (rest.trim_end(), true),
            (None, None) => (t, false),
        };
        let bad = || QuantileError::NotANumber(text.trim().to_string());
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
            return Err(bad());
        }
        let frac = frac.trim_end_matches('0');
        let int = int.trim_start_matches('0');
        if int.len() > 3 {
            return Err(QuantileError::OutOfRange(text.trim().to_string()));
        }
        let int_value: u64 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        let percent = marked_percent || int_value > 1 || (int_value == 1 && !frac.is_empty());
        // A percent is a hundredth: two fewer decimals fit.
        let room = if percent {
            PARTS_DIGITS - 2
        } else {
            PARTS_DIGITS
        };
        if frac.len() > room {
            return Err(QuantileError::TooPrecise(text.trim().to_string()));
        }
        let frac_value: u64 = if frac.is_empty() {
            0
        } else {
            frac.parse().map_err(|_| bad())?
        };
        let unit = if percent { PARTS / 100 } else { PARTS };
        let frac_unit = unit / 10u64.pow(frac.len() as u32);
        let parts = int_value * unit + frac_value * frac_unit;
        Quantile::from_parts(parts)
            .ok_or_else(|| QuantileError::OutOfRange(text.trim().to_string()))
    }
}

impl fmt::Display for Quantile {
    /// As a percentile label: `p50`, `p99.9`, `p100`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = PARTS / 100;
        let (int, frac) = (self.parts / unit, self.parts % unit);
        if frac == 0 {
            return write!(f, "p{int}");
        }
        let frac = format!("{frac:0width$}", width = PARTS_DIGITS - 2);
        write!(f, "p{int}.{}", frac.trim_end_matches('0'))
    }
}

/// `ceil(q·n)`, at least 1 and at most `n`: the 1-based rank of the nearest-rank `q`-quantile,
/// with `q` taken onto the exact grid first ([`Quantile::from_f64`]; `q` outside `0 ..= 1` is
/// clamped).
pub fn nearest_rank(q: f64, n: u64) -> u64 {
    let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
    Quantile::from_f64(q).unwrap_or(Quantile::MAX).rank(n)
}

/// The nearest-rank `q`-quantile of values sorted in ascending order; `None` when empty.
pub fn of_sorted<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = nearest_rank(q, sorted.len() as u64);
    sorted
        .get(usize::try_from(rank).ok()?.checked_sub(1)?)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(text: &str) -> Quantile {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn p999_of_3000_is_rank_2997_however_it_is_spelled() {
        // The float way gets this wrong: the rank must not move by how q was computed.
        assert_eq!(((99.9f64 / 100.0) * 3000.0).ceil(), 2998.0);
        for spelled in ["99.9", "p99.9", "99.9%", "0.999", "99.90", "099.9"] {
            assert_eq!(q(spelled).rank(3000), 2997, "{spelled}");
        }
        assert_eq!(nearest_rank(99.9 / 100.0, 3000), 2997);
        assert_eq!(nearest_rank(0.999, 3000), 2997);
        assert_eq!(Quantile::from_f64(99.9 / 100.0), Some(q("99.9")));
    }

    #[test]
    fn ranks_are_ceilings_clamped_to_the_values() {
        assert_eq!(q("50").rank(10), 5);
        assert_eq!(q("50").rank(11), 6);
        assert_eq!(q("90").rank(10), 9);
        assert_eq!(q("99").rank(100), 99);
        assert_eq!(q("99").rank(101), 100);
        assert_eq!(q("0").rank(10), 1);
        assert_eq!(q("1").rank(10), 10);
        assert_eq!(q("100").rank(10), 10);
        assert_eq!(q("50").rank(0), 1);
        assert_eq!(Quantile::MAX.rank(u64::MAX), u64::MAX);
        assert_eq!(of_sorted::<u64>(&[], 0.5), None);
        assert_eq!(of_sorted(&[7, 8, 9], 0.5), Some(8));
        assert_eq!(of_sorted(&[7, 8, 9], 1.0), Some(9));
        assert_eq!(of_sorted(&[7, 8, 9], 0.0), Some(7));
    }

    #[test]
    fn text_reads_percent_above_one_and_quantile_up_to_one() {
        assert_eq!(q("0.5"), Quantile::MEDIAN);
        assert_eq!(q("50"), Quantile::MEDIAN);
        assert_eq!(q(".5"), Quantile::MEDIAN);
        assert_eq!(q("1"), Quantile::MAX);
        assert_eq!(q("p1").parts(), PARTS / 100);
        assert_eq!(q("1%").parts(), PARTS / 100);
        assert_eq!(q("1.5").parts(), PARTS * 15 / 1000);
        assert_eq!(q("99.99999999").parts(), PARTS - 100);
        assert_eq!(q("0.999999999999").parts(), PARTS - 1);
    }

    #[test]
    fn bad_text_says_why() {
        for (text, want) in [
            ("abc", "is not a number"),
            ("", "is not a number"),
            ("1,5", "is not a number"),
            ("-1", "is not a number"),
            ("1e2", "is not a number"),
            ("100.1", "out of range"),
            ("1000", "out of range"),
            ("99.99999999999", "more decimals"),
            ("0.9999999999999", "more decimals"),
        ] {
            let e = text.parse::<Quantile>().unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn labels() {
        assert_eq!(q("50").to_string(), "p50");
        assert_eq!(q("0.999").to_string(), "p99.9");
        assert_eq!(q("99.99").to_string(), "p99.99");
        assert_eq!(Quantile::MAX.to_string(), "p100");
        assert_eq!(q("0").to_string(), "p0");
    }

    proptest! {
        /// The integer rank equals the exact rational ceiling, which f64 cannot promise.
        #[test]
        fn rank_is_the_exact_ceiling(permille in 0u64..=100_000, n in 0u64..10_000_000) {
            let quantile = Quantile::from_parts(permille * (PARTS / 100_000)).unwrap();
            let exact = (u128::from(permille) * u128::from(n)).div_ceil(100_000) as u64;
            prop_assert_eq!(quantile.rank(n), exact.clamp(1, n.max(1)));
            prop_assert_eq!(Quantile::from_f64(quantile.as_f64()), Some(quantile));
        }
    }
}
