//! Periodicity of a series of per-interval values, from its autocorrelation.
//!
//! In: evenly spaced values (log10 of one percentile per interval; missing intervals as
//! `None`) and the lag range to search, in intervals. Out: the strongest [`Period`], or `None`.
//!
//! A period `L` shows as a peak of the autocorrelation `r` at lag `L` with a trough at `L/2`
//! (the series is high where it was low half a period before). The score is
//! `r(L) - r(L/2)`: a step or a slow trend keeps `r` high at every lag and scores near zero,
//! and an even multiple `2L` of a period `L` scores low because `r(L)` is high too; odd
//! multiples score like the period itself, so the shortest lag scoring near the best wins. A period is reported when
//! `r(L)` is at least [`MIN_R`] and [`noise_floor`] (four standard errors of a white-noise
//! autocorrelation), and the score at least [`MIN_SCORE`]; its length is refined and its amplitude
//! measured by a least-squares fit of two harmonics ([`seasonal_fit`]).
//!
//! Written here rather than with `realfft` or `augurs`' season detection: the series are a few
//! hundred intervals at most (a day at 5-minute intervals is 288), where the direct sum costs
//! under a millisecond, and the trough test above needs the autocorrelation at exact lags,
//! which a periodogram's frequency grid does not give for periods that are not divisors of
//! the length.

use serde::Serialize;

/// Smallest autocorrelation at the period.
pub const MIN_R: f64 = 0.3;
/// Smallest `r(L) - r(L/2)`.
pub const MIN_SCORE: f64 = 0.5;
/// A shorter lag scoring at least this share of the best score is preferred to it.
const HARMONIC_SHARE: f64 = 0.8;
/// Fewest whole periods the series must span.
pub const MIN_CYCLES: f64 = 2.5;

/// An oscillation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Period {
    /// The period, in intervals (refined between lags).
    pub lag: f64,
    /// Autocorrelation at the period.
    pub r: f64,
    /// `r(L) - r(L/2)`.
    pub score: f64,
    /// Highest minus lowest value of the fitted period, in the values' unit.
    pub amplitude: f64,
}

/// Four standard errors of the autocorrelation of `n` values of white noise.
pub fn noise_floor(n: usize) -> f64 {
    4.0 / (n.max(1) as f64).sqrt()
}

/// The autocorrelation of `values` at `lag`, over the pairs where both are present.
pub fn autocorrelation(values: &[Option<f64>], lag: usize) -> f64 {
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    if present.len() < 3 || lag >= values.len() {
        return 0.0;
    }
    let mean = present.iter().sum::<f64>() / present.len() as f64;
    let var = present.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / present.len() as f64;
    if var <= 0.0 {
        return 0.0;
    }
    let (mut sum, mut pairs) = (0.0, 0usize);
    for i in 0..values.len() - lag {
        if let (Some(a), Some(b)) = (values[i], values[i + lag]) {
            sum += (a - mean) * (b - mean);
            pairs += 1;
        }
    }
    if pairs == 0 {
        0.0
    } else {
        sum / pairs as f64 / var
    }
}

/// Tukey's fences: how many interquartile ranges beyond the quartiles a value may lie before
/// it is clipped for the autocorrelation.
const FENCE_IQRS: f64 = 1.5;

/// `values` with those beyond Tukey's fences (the quartiles widened by [`FENCE_IQRS`]
/// interquartile ranges) pulled in to the fence. A one-interval stall of the host (a p99 three
/// decades up) would otherwise carry most of the variance and hide a period of a few tenths of
/// a decade; a sine or a square wave lies within its quartiles' span, so clipping leaves it
/// whole. (Not the median absolute deviation: for a square wave, half the values sit at the
/// median's level and its MAD is the noise, which would clip the wave itself.)
fn clip_outliers(values: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut present: Vec<f64> = values.iter().flatten().copied().collect();
    if present.len() < 4 {
        return values.to_vec();
    }
    present.sort_by(f64::total_cmp);
    let q = |f: f64| present[((present.len() - 1) as f64 * f).round() as usize];
    let (q1, q3) = (q(0.25), q(0.75));
    let (low, high) = (q1 - FENCE_IQRS * (q3 - q1), q3 + FENCE_IQRS * (q3 - q1));
    values
        .iter()
        .map(|v| v.map(|x| x.clamp(low, high)))
        .collect()
}

/// The strongest period between `min_lag` and `max_lag` intervals (inclusive).
pub fn find_period(values: &[Option<f64>], min_lag: usize, max_lag: usize) -> Option<Period> {
    let n = values.len();
    let max_lag = max_lag.min((n as f64 / MIN_CYCLES) as usize);
    let min_lag = min_lag.max(4);
    if max_lag < min_lag {
        return None;
    }
    let clipped = clip_outliers(values);
    let r: Vec<f64> = (0..=max_lag + 1)
        .map(|l| autocorrelation(&clipped, l))
        .collect();
    let half = |l: f64| {
        let (a, f) = ((l / 2.0).floor() as usize, l / 2.0 - (l / 2.0).floor());
        r[a] * (1.0 - f) + r[(a + 1).min(max_lag)] * f
    };
    let peaks: Vec<(usize, f64)> = (min_lag..=max_lag)
        .filter(|&l| r[l] >= r[l - 1] && r[l] >= r[l + 1])
        .map(|l| (l, r[l] - half(l as f64)))
        .collect();
    let top = peaks.iter().map(|p| p.1).fold(f64::MIN, f64::max);
    // Multiples of a period score as high as the period itself: the shortest lag that scores
    // close to the best is the fundamental.
    let (l, score) = peaks.into_iter().find(|p| p.1 >= HARMONIC_SHARE * top)?;
    if r[l] < MIN_R.max(noise_floor(n)) || score < MIN_SCORE {
        return None;
    }
    // A parabola through the three lags around the peak places it between lags.
    let (a, b, c) = (r[l - 1], r[l], r[l + 1]);
    let denom = a - 2.0 * b + c;
    let shift = if denom < 0.0 {
        (0.5 * (a - c) / denom).clamp(-0.5, 0.5)
    } else {
        0.0
    };
    let lag = refine(values, l as f64 + shift);
    Some(Period {
        lag,
        r: r[l],
        score,
        amplitude: amplitude(values, lag),
    })
}

/// Harmonics of the period fitted when removing or measuring it.
const HARMONICS: usize = 2;

/// The least-squares fit of a mean plus `HARMONICS` sine/cosine pairs of period `lag` to the
/// present values: the fitted value at every index. A handful of coefficients cannot follow
/// noise the way per-phase means over few cycles do, so the fit is what gets removed.
pub fn seasonal_fit(values: &[Option<f64>], lag: f64) -> Vec<f64> {
    let basis = |i: usize| -> Vec<f64> {
        let w = 2.0 * std::f64::consts::PI * i as f64 / lag;
        let mut b = vec![1.0];
        for h in 1..=HARMONICS {
            b.push((w * h as f64).sin());
            b.push((w * h as f64).cos());
        }
        b
    };
    let k = 1 + 2 * HARMONICS;
    let mut ata = vec![vec![0.0; k]; k];
    let mut atb = vec![0.0; k];
    for (i, v) in values.iter().enumerate() {
        if let Some(v) = v {
            let b = basis(i);
            for r in 0..k {
                atb[r] += b[r] * v;
                for c in 0..k {
                    ata[r][c] += b[r] * b[c];
                }
            }
        }
    }
    let coef = solve(ata, atb).unwrap_or_else(|| vec![0.0; k]);
    (0..values.len())
        .map(|i| basis(i).iter().zip(&coef).map(|(b, c)| b * c).sum())
        .collect()
}

/// Gaussian elimination with partial pivoting; `None` when singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let pivot_row = a[col].clone();
        for row in col + 1..n {
            let f = a[row][col] / pivot_row[col];
            for (x, p) in a[row].iter_mut().zip(&pivot_row).skip(col) {
                *x -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|c| a[row][c] * x[c]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}

/// The values with the fitted period removed (their mean kept).
pub fn deseasonalize(values: &[Option<f64>], lag: f64) -> Vec<Option<f64>> {
    let fit = seasonal_fit(values, lag);
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    let mean = present.iter().sum::<f64>() / present.len().max(1) as f64;
    values
        .iter()
        .zip(&fit)
        .map(|(v, f)| v.map(|v| v - f + mean))
        .collect()
}

/// Variance of the fitted period over the present values.
fn explained(values: &[Option<f64>], lag: f64) -> f64 {
    let fit = seasonal_fit(values, lag);
    let f: Vec<f64> = values
        .iter()
        .zip(&fit)
        .filter_map(|(v, f)| v.map(|_| *f))
        .collect();
    let mean = f.iter().sum::<f64>() / f.len().max(1) as f64;
    f.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / f.len().max(1) as f64
}

/// The lag within one interval of `lag` whose fitted period explains the most variance (the
/// autocorrelation's peak is only as precise as its lags, and a fit at a slightly wrong period
/// drifts out of phase over the cycles).
fn refine(values: &[Option<f64>], lag: f64) -> f64 {
    (-50..=50)
        .map(|k| lag + k as f64 * 0.02)
        .filter(|&l| l >= 2.0)
        .map(|l| (l, explained(values, l)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(lag, |(l, _)| l)
}

fn amplitude(values: &[Option<f64>], lag: f64) -> f64 {
    let fit = seasonal_fit(values, lag);
    let hi = fit.iter().copied().fold(f64::MIN, f64::max);
    let lo = fit.iter().copied().fold(f64::MAX, f64::min);
    hi - lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    fn series(
        n: usize,
        period: f64,
        amp: f64,
        step_at: Option<usize>,
        seed: u64,
    ) -> Vec<Option<f64>> {
        let mut rng = StdRng::seed_from_u64(seed);
        let d = Normal::new(0.0, 1.0).unwrap();
        (0..n)
            .map(|i| {
                let wave = amp * (2.0 * std::f64::consts::PI * i as f64 / period).sin();
                let step = if step_at.is_some_and(|s| i >= s) {
                    5.0
                } else {
                    0.0
                };
                Some(wave + step + d.sample(&mut rng))
            })
            .collect()
    }

    /// A tail that is up for the first half of every minute, read at 2 s intervals for three
    /// minutes (log10 of p99: 7.3 ms up, 2.4 ms down), with a one-second stall of the host
    /// that put two intervals three decades higher: the stall must not hide the period.
    #[test]
    fn a_square_wave_survives_a_two_interval_stall() {
        let mut rng = StdRng::seed_from_u64(7);
        let d = Normal::new(0.0, 0.02).unwrap();
        let mut v: Vec<Option<f64>> = (0..90)
            .map(|i| {
                let level = if (i % 30) < 15 { 6.86 } else { 6.38 };
                Some(level + d.sample(&mut rng))
            })
            .collect();
        v[46] = Some(8.97);
        v[47] = Some(8.88);
        let p = find_period(&v, 30, 100).expect("the minute's period");
        assert!((p.lag - 30.0).abs() < 1.5, "{p:?}");
    }

    /// The same wave as the lab's `cold-path` scenario measured it (log10 of p99 per 2 s, 15%
    /// of replies 5 ms late in the first half of every minute over a 2 ms round trip): host
    /// noise in the down phases, a one-second stall at 1m32s.
    #[test]
    fn the_lab_s_measured_tail_wave_has_its_period() {
        let v: Vec<Option<f64>> = [
            6.91, 6.87, 6.88, 6.87, 6.88, 6.87, 6.87, 6.86, 6.88, 6.94, 6.89, 6.87, 6.87, 6.91,
            6.86, 6.43, 6.46, 7.02, 6.58, 7.0, 6.54, 6.49, 6.49, 6.43, 6.46, 7.21, 6.44, 6.44,
            6.51, 6.39, 6.87, 6.86, 6.87, 6.87, 6.87, 6.87, 6.98, 6.89, 6.88, 6.87, 6.9, 6.87,
            6.87, 6.86, 6.87, 6.6, 8.97, 8.62, 6.38, 6.55, 6.49, 6.42, 6.38, 6.49, 6.4, 6.42, 6.44,
            6.47, 7.0, 7.0, 6.9, 6.87, 6.87, 7.0, 6.87, 6.87, 6.87, 6.87, 6.86, 6.87, 6.87, 6.94,
            7.0, 6.89, 6.93, 7.22, 6.98, 6.65, 6.65, 6.47, 6.41, 6.47, 6.75, 6.8, 6.8, 6.9, 6.96,
            6.75, 6.66, 6.49,
        ]
        .into_iter()
        .map(Some)
        .collect();
        // The search starts a tenth below the minute (timeline::PERIOD_SLACK): 27 intervals.
        let p = find_period(&v, 27, 100).expect("the minute's period");
        assert!((p.lag - 30.0).abs() < 3.0, "{p:?}");
    }

    #[test]
    fn an_oscillation_is_found_at_its_period() {
        let p = find_period(&series(200, 17.0, 2.0, None, 1), 4, 100).unwrap();
        assert!((p.lag - 17.0).abs() < 1.0, "{p:?}");
        assert!(p.amplitude > 2.0, "{p:?}");
    }

    #[test]
    fn a_step_or_noise_is_not_a_period() {
        for seed in 0..10 {
            assert_eq!(
                find_period(&series(200, 17.0, 0.0, Some(90), seed), 4, 80),
                None
            );
            assert_eq!(
                find_period(&series(200, 17.0, 0.0, None, seed), 4, 80),
                None
            );
        }
    }

    #[test]
    fn missing_intervals_are_skipped_and_removal_flattens() {
        let mut v = series(200, 25.0, 3.0, None, 2);
        v[10] = None;
        v[11] = None;
        let p = find_period(&v, 4, 80).unwrap();
        assert!((p.lag - 25.0).abs() < 1.0, "{p:?}");
        let flat = deseasonalize(&v, p.lag);
        assert_eq!(find_period(&flat, 4, 80), None);
        assert_eq!(flat[10], None);
    }
}
