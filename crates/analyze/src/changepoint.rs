//! Change points in several percentiles at once: E-divisive with a permutation test.
//!
//! In: one row per interval of time, each row the values of several percentiles (the caller
//! passes log10 of p50/p90/p99, so a step is a ratio). Out: [`ChangePoint`]s, each with its
//! position, the p-value of its permutation test and the level of every column before and after.
//!
//! The method is E-divisive (Matteson and James, "A nonparametric approach for multiple change
//! point analysis of multivariate data", JASA 2014, with exponent 1): the split of a segment
//! that maximises the energy distance between the rows before and after it, found by binary
//! segmentation. A split is kept only when its permutation p-value (the share of
//! [`PERMUTATIONS`] random reorderings of the segment reaching the same statistic, counting
//! the split itself) is at most [`SIGNIFICANCE`]: none of them may reach it (so a stated
//! false-alarm rate holds per test without assuming any distribution), and when both parts hold
//! at least
//! `min_segment` rows. Columns are first scaled by their noise (the median absolute difference
//! of consecutive rows, which a step does not inflate), so that p50 and p99 weigh alike.
//!
//! Written here rather than taken from `augurs`: its change-point module offers Bayesian online
//! detection and autoregressive models on one series; neither gives several percentiles at
//! once with a permutation significance, which is what the story needs (a tail step the median
//! does not show).

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

/// Random reorderings per test.
pub const PERMUTATIONS: usize = 199;
/// Largest p-value of a kept split.
pub const SIGNIFICANCE: f64 = 0.005;
/// Most change points reported.
pub const MAX_CHANGES: usize = 6;

/// One change point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangePoint {
    /// Index of the first row after the change.
    pub index: usize,
    /// p-value of its permutation test.
    pub p_value: f64,
    /// Median of each column in the segment before it (as passed in).
    pub before: Vec<f64>,
    /// Median of each column in the segment after it.
    pub after: Vec<f64>,
}

/// Finds change points in `rows` (all rows the same width); segments hold at least
/// `min_segment` rows. A column's noise is taken as at least `min_noise` (in its own unit), so
/// that a column that barely moves (quantized or repeated values) does not turn differences
/// too small to matter into significant ones. `seed` makes the permutations reproducible.
pub fn change_points(
    rows: &[Vec<f64>],
    min_segment: usize,
    min_noise: f64,
    seed: u64,
) -> Vec<ChangePoint> {
    let n = rows.len();
    let min_segment = min_segment.max(2);
    if n < 2 * min_segment || rows.iter().any(|r| r.len() != rows[0].len()) {
        return Vec::new();
    }
    let scaled = scale_columns(rows, min_noise);
    let dist = distances(&scaled);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cuts: Vec<usize> = vec![0, n];
    let mut p_values: Vec<(usize, f64)> = Vec::new();
    while cuts.len() - 2 < MAX_CHANGES {
        // The best split over all current segments.
        let best = cuts
            .windows(2)
            .filter_map(|w| {
                let order: Vec<usize> = (w[0]..w[1]).collect();
                best_split(&dist, &order, min_segment).map(|(at, stat)| (w[0], w[1], at, stat))
            })
            .max_by(|a, b| a.3.total_cmp(&b.3));
        let Some((lo, hi, at, stat)) = best else {
            break;
        };
        let mut order: Vec<usize> = (lo..hi).collect();
        let mut reached = 0usize;
        for _ in 0..PERMUTATIONS {
            order.shuffle(&mut rng);
            if best_split(&dist, &order, min_segment).is_some_and(|(_, s)| s >= stat) {
                reached += 1;
            }
        }
        let p_value = (reached + 1) as f64 / (PERMUTATIONS + 1) as f64;
        if p_value > SIGNIFICANCE {
            break;
        }
        cuts.push(lo + at);
        cuts.sort_unstable();
        p_values.push((lo + at, p_value));
    }
    (1..cuts.len() - 1)
        .map(|i| {
            let (lo, c, hi) = (cuts[i - 1], cuts[i], cuts[i + 1]);
            ChangePoint {
                index: c,
                p_value: p_values
                    .iter()
                    .find(|(at, _)| *at == c)
                    .map_or(SIGNIFICANCE, |(_, p)| *p),
                before: column_medians(&rows[lo..c]),
                after: column_medians(&rows[c..hi]),
            }
        })
        .collect()
}

fn column_medians(rows: &[Vec<f64>]) -> Vec<f64> {
    (0..rows.first().map_or(0, Vec::len))
        .map(|k| {
            let mut c: Vec<f64> = rows.iter().map(|r| r[k]).collect();
            median(&mut c)
        })
        .collect()
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Each column divided by its noise: the median absolute difference of consecutive rows over
/// sqrt(2) (0.6745 makes it a standard deviation for normal noise).
fn scale_columns(rows: &[Vec<f64>], min_noise: f64) -> Vec<Vec<f64>> {
    let width = rows[0].len();
    let scales: Vec<f64> = (0..width)
        .map(|k| {
            let mut d: Vec<f64> = rows.windows(2).map(|w| (w[1][k] - w[0][k]).abs()).collect();
            let s = (median(&mut d) / std::f64::consts::SQRT_2 / 0.6745).max(min_noise);
            if s.is_finite() && s > 1e-12 {
                s
            } else {
                1.0
            }
        })
        .collect();
    rows.iter()
        .map(|r| r.iter().zip(&scales).map(|(v, s)| v / s).collect())
        .collect()
}

fn distances(rows: &[Vec<f64>]) -> Vec<Vec<f64>> {
    rows.iter()
        .map(|a| {
            rows.iter()
                .map(|b| {
                    a.iter()
                        .zip(b)
                        .map(|(x, y)| (x - y) * (x - y))
                        .sum::<f64>()
                        .sqrt()
                })
                .collect()
        })
        .collect()
}

/// The split of the rows `order` (indices into `dist`) maximising the scaled energy distance
/// between the two sides: position (rows before it) and statistic.
fn best_split(dist: &[Vec<f64>], order: &[usize], min_segment: usize) -> Option<(usize, f64)> {
    let n = order.len();
    if n < 2 * min_segment {
        return None;
    }
    // Start with everything on the right, then move rows left one at a time.
    let mut within_left = 0.0;
    let mut within_right: f64 = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| dist[order[i]][order[j]])
        .sum();
    let mut between = 0.0;
    let mut best: Option<(usize, f64)> = None;
    for t in 0..n - 1 {
        let row = &dist[order[t]];
        let to_left: f64 = order[..t].iter().map(|&i| row[i]).sum();
        let to_right: f64 = order[t + 1..].iter().map(|&j| row[j]).sum();
        within_left += to_left;
        within_right -= to_right;
        between += to_right - to_left;
        let (l, r) = ((t + 1) as f64, (n - t - 1) as f64);
        if t + 1 < min_segment || n - t - 1 < min_segment {
            continue;
        }
        let pairs = |k: f64| k * (k - 1.0) / 2.0;
        let e = 2.0 * between / (l * r)
            - within_left / pairs(l).max(1.0)
            - within_right / pairs(r).max(1.0);
        let stat = l * r / n as f64 * e;
        if best.is_none_or(|(_, s)| stat > s) {
            best = Some((t + 1, stat));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_distr::{Distribution, Normal};

    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let d = Normal::new(0.0, 1.0).unwrap();
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    #[test]
    fn a_step_in_one_column_is_found_where_it_is() {
        let (a, b) = (noise(120, 1), noise(120, 2));
        let rows: Vec<Vec<f64>> = (0..120)
            .map(|i| vec![a[i], b[i] + if i >= 70 { 3.0 } else { 0.0 }])
            .collect();
        let c = change_points(&rows, 5, 0.0, 9);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!((68..=72).contains(&c[0].index), "{c:?}");
        assert!(c[0].after[1] - c[0].before[1] > 2.0, "{c:?}");
        assert!((c[0].after[0] - c[0].before[0]).abs() < 1.0, "{c:?}");
    }

    #[test]
    fn two_steps_are_two_change_points() {
        let a = noise(150, 3);
        let rows: Vec<Vec<f64>> = (0..150)
            .map(|i| vec![a[i] + if (50..100).contains(&i) { 4.0 } else { 0.0 }])
            .collect();
        let mut at: Vec<usize> = change_points(&rows, 5, 0.0, 1)
            .iter()
            .map(|c| c.index)
            .collect();
        at.sort_unstable();
        assert_eq!(at.len(), 2, "{at:?}");
        assert!(
            at[0].abs_diff(50) <= 2 && at[1].abs_diff(100) <= 2,
            "{at:?}"
        );
    }

    #[test]
    fn noise_alone_has_no_change_point() {
        let mut false_alarms = 0;
        for seed in 0..20 {
            let (a, b) = (noise(100, seed), noise(100, seed + 100));
            let rows: Vec<Vec<f64>> = (0..100).map(|i| vec![a[i], b[i]]).collect();
            false_alarms += usize::from(!change_points(&rows, 5, 0.0, seed).is_empty());
        }
        assert!(false_alarms <= 1, "{false_alarms} of 20");
    }

    #[test]
    fn too_short_or_ragged_input_has_none() {
        assert!(change_points(&[vec![1.0], vec![2.0]], 5, 0.0, 1).is_empty());
        assert!(change_points(&[vec![1.0], vec![2.0, 3.0]], 1, 0.0, 1).is_empty());
    }
}
