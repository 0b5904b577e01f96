//! Paired A/B comparison of two variants of one probe, round by round.
//!
//! In: the latencies of variant A and variant B keyed by round (a probe's variants run in the
//! same round, a few milliseconds apart, so each round is a pair that shares the network's and
//! the server's state at that moment). Out: a [`PairedComparison`]: the rounds both have, the
//! medians and p99s of each, and the differences A - B of the medians and of the p99s with
//! percentile-bootstrap confidence intervals (rounds resampled as pairs, seeded, so the same
//! data always gives the same interval).
//!
//! The bootstrap is written here (a few lines over `rand`): it needs pair resampling and two
//! statistics at once, which the statistics crates that build here do not offer.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
pub use tailhunt_model::evidence::timeline::{Difference, PairedComparison};

/// Bootstrap resamples.
pub const RESAMPLES: usize = 1000;
/// Fewest paired rounds for a comparison.
pub const MIN_ROUNDS: usize = 10;

fn quantile(sorted: &[u64], q: f64) -> u64 {
    sorted[(tailhunt_histogram::nearest_rank(q, sorted.len() as u64) - 1) as usize]
}

fn stats(pairs: &[(u64, u64)]) -> [f64; 4] {
    let mut a: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let mut b: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    a.sort_unstable();
    b.sort_unstable();
    [
        quantile(&a, 0.5) as f64,
        quantile(&b, 0.5) as f64,
        quantile(&a, 0.99) as f64,
        quantile(&b, 0.99) as f64,
    ]
}

/// Compares A with B over the rounds both have; `None` under [`MIN_ROUNDS`] pairs.
pub fn compare_paired(
    a: &BTreeMap<i64, u64>,
    b: &BTreeMap<i64, u64>,
    confidence: f64,
    seed: u64,
) -> Option<PairedComparison> {
    let pairs: Vec<(u64, u64)> = a
        .iter()
        .filter_map(|(round, &x)| b.get(round).map(|&y| (x, y)))
        .collect();
    if pairs.len() < MIN_ROUNDS {
        return None;
    }
    let s = stats(&pairs);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut medians = Vec::with_capacity(RESAMPLES);
    let mut p99s = Vec::with_capacity(RESAMPLES);
    let mut draw = vec![(0, 0); pairs.len()];
    for _ in 0..RESAMPLES {
        for d in draw.iter_mut() {
            *d = pairs[rng.random_range(0..pairs.len())];
        }
        let r = stats(&draw);
        medians.push(r[0] - r[1]);
        p99s.push(r[2] - r[3]);
    }
    let interval = |est: f64, mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let tail = (1.0 - confidence) / 2.0;
        let at = |q: f64| v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)];
        Difference {
            ns: est,
            low_ns: at(tail),
            high_ns: at(1.0 - tail),
        }
    };
    Some(PairedComparison {
        rounds: pairs.len(),
        confidence,
        median_a_ns: s[0] as u64,
        median_b_ns: s[1] as u64,
        p99_a_ns: s[2] as u64,
        p99_b_ns: s[3] as u64,
        median_diff: interval(s[0] - s[1], medians),
        p99_diff: interval(s[2] - s[3], p99s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(f: impl Fn(i64) -> u64) -> BTreeMap<i64, u64> {
        (0..200).map(|r| (r, f(r))).collect()
    }

    #[test]
    fn a_constant_extra_cost_is_measured_with_an_interval_around_it() {
        // Both variants share each round's noise; A pays 300 us more.
        let noise = |r: i64| ((r * 7919) % 1000) as u64 * 1_000;
        let a = rounds(|r| 1_300_000 + noise(r));
        let b = rounds(|r| 1_000_000 + noise(r));
        let c = compare_paired(&a, &b, 0.95, 1).unwrap();
        assert_eq!(c.rounds, 200);
        assert!(c.median_diff.excludes_zero(), "{c:?}");
        assert!((c.median_diff.ns - 300_000.0).abs() < 1.0, "{c:?}");
        assert!(
            c.median_diff.low_ns > 150_000.0 && c.median_diff.high_ns < 450_000.0,
            "{c:?}"
        );
    }

    #[test]
    fn equal_variants_have_an_interval_around_zero() {
        let a = rounds(|r| 1_000_000 + ((r * 7919) % 1000) as u64 * 1_000);
        let b = rounds(|r| 1_000_000 + ((r * 104_729) % 1000) as u64 * 1_000);
        let c = compare_paired(&a, &b, 0.95, 1).unwrap();
        assert!(!c.median_diff.excludes_zero(), "{c:?}");
    }

    #[test]
    fn unpaired_rounds_are_left_out_and_too_few_pairs_give_none() {
        let a: BTreeMap<i64, u64> = (0..20).map(|r| (r, 1)).collect();
        let b: BTreeMap<i64, u64> = (15..40).map(|r| (r, 1)).collect();
        assert!(compare_paired(&a, &b, 0.95, 1).is_none());
        let b: BTreeMap<i64, u64> = (5..40).map(|r| (r, 1)).collect();
        assert_eq!(compare_paired(&a, &b, 0.95, 1).unwrap().rounds, 15);
    }
}
