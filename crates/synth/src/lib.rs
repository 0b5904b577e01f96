//! Seeded synthetic latency distributions with known ground truth.
//!
//! Mixtures allocate samples to components *exactly* (round to the nearest sample, then shuffle)
//! so a generated set's mode shares are the requested ones, not a random draw around them.
//! [`probe`] generates whole probe runs over time with the causes planted in them recorded.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_distr::{Distribution, LogNormal, Pareto};
use thiserror::Error;

pub mod probe;

/// A log-normal component of a mixture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Component {
    /// Median, ns.
    pub median_ns: f64,
    /// Standard deviation of ln(value).
    pub sigma: f64,
    /// Share of the samples, 0..=1 (weights are normalised).
    pub weight: f64,
}

/// Invalid generator parameters.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SynthError {
    /// A parameter out of its range.
    #[error("invalid parameter: {0}")]
    Invalid(String),
}

/// The trimodal set of the "p90 jumps from 12 ms to 0.77 ms" story: modes near 0.45 ms, 10 ms
/// and 20 ms holding 88/8/4% of the samples. `shift` (0..=0.12) moves that share of all samples
/// from the two upper modes (in proportion to their size) to the lowest one.
pub fn trimodal_components(shift: f64) -> Result<Vec<Component>, SynthError> {
    if !(0.0..=0.12).contains(&shift) {
        return Err(SynthError::Invalid(format!(
            "shift {shift} must be within 0..=0.12 (the upper modes hold 12%)"
        )));
    }
    let upper = 0.12;
    Ok(vec![
        Component {
            median_ns: 450e3,
            sigma: 0.08,
            weight: 0.88 + shift,
        },
        Component {
            median_ns: 10e6,
            sigma: 0.06,
            weight: 0.08 * (upper - shift) / upper,
        },
        Component {
            median_ns: 20e6,
            sigma: 0.05,
            weight: 0.04 * (upper - shift) / upper,
        },
    ])
}

/// `n` samples (ns) from a mixture of log-normal components, in random order.
pub fn mixture(n: usize, components: &[Component], seed: u64) -> Result<Vec<u64>, SynthError> {
    let total: f64 = components.iter().map(|c| c.weight).sum();
    let positive = total.is_finite() && total > 0.0;
    if components.is_empty() || !positive || components.iter().any(|c| c.weight < 0.0) {
        return Err(SynthError::Invalid(
            "mixture needs components with non-negative weights summing above 0".into(),
        ));
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    let mut allocated = 0usize;
    let mut cumulative = 0.0;
    for c in components {
        cumulative += c.weight / total;
        let upto = ((cumulative * n as f64).round() as usize).min(n);
        let dist = lognormal_dist(c.median_ns, c.sigma)?;
        for _ in allocated..upto {
            out.push(to_ns(dist.sample(&mut rng)));
        }
        allocated = upto;
    }
    out.shuffle(&mut rng);
    Ok(out)
}

/// `n` log-normal samples (ns) with the given median and ln-sigma.
pub fn lognormal(n: usize, median_ns: f64, sigma: f64, seed: u64) -> Result<Vec<u64>, SynthError> {
    mixture(
        n,
        &[Component {
            median_ns,
            sigma,
            weight: 1.0,
        }],
        seed,
    )
}

/// `n` Pareto samples (ns): minimum `scale_ns`, tail index `shape` (smaller is heavier).
pub fn pareto(n: usize, scale_ns: f64, shape: f64, seed: u64) -> Result<Vec<u64>, SynthError> {
    let dist = Pareto::new(scale_ns, shape).map_err(|e| {
        SynthError::Invalid(format!("pareto(scale {scale_ns}, shape {shape}): {e}"))
    })?;
    let mut rng = StdRng::seed_from_u64(seed);
    Ok((0..n).map(|_| to_ns(dist.sample(&mut rng))).collect())
}

fn lognormal_dist(median_ns: f64, sigma: f64) -> Result<LogNormal<f64>, SynthError> {
    if median_ns.is_nan() || median_ns <= 0.0 || median_ns.is_infinite() {
        return Err(SynthError::Invalid(format!(
            "median {median_ns} ns must be positive"
        )));
    }
    LogNormal::new(median_ns.ln(), sigma).map_err(|e| {
        SynthError::Invalid(format!("lognormal(median {median_ns}, sigma {sigma}): {e}"))
    })
}

/// Clamps a float sample into `1 ns ..= 1 h`, the range tailhunt documents its bound over.
fn to_ns(v: f64) -> u64 {
    v.round().clamp(1.0, 3.6e12) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimodal_shares_are_exact() {
        let v = mixture(100_000, &trimodal_components(0.0).unwrap(), 1).unwrap();
        let low = v.iter().filter(|&&x| x < 2_000_000).count();
        let mid = v
            .iter()
            .filter(|&&x| (2_000_000..15_000_000).contains(&x))
            .count();
        assert_eq!(low, 88_000);
        assert_eq!(mid, 8_000);
    }

    #[test]
    fn shift_moves_mass_down() {
        let v = mixture(100_000, &trimodal_components(0.02).unwrap(), 1).unwrap();
        assert_eq!(v.iter().filter(|&&x| x < 2_000_000).count(), 90_000);
        assert!(trimodal_components(0.2).is_err());
    }

    #[test]
    fn same_seed_same_data() {
        assert_eq!(
            pareto(10, 1e5, 1.5, 7).unwrap(),
            pareto(10, 1e5, 1.5, 7).unwrap()
        );
        assert!(pareto(10, -1.0, 1.5, 7).is_err());
    }
}
