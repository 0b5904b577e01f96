//! The documented error bound holds against exact quantiles of the raw data.
//!
//! Quantiles use the nearest-rank definition on both sides: the exact answer is the
//! `ceil(q * n)`-th smallest sample of the sorted array.

use proptest::prelude::*;
use tailhunt_histogram::Histogram;
use tailhunt_synth as synth;

const QUANTILES: [f64; 12] = [
    0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0,
];

/// Largest relative error over `QUANTILES`, asserting each is within the layout's bound.
fn check(values: &mut [u64]) -> f64 {
    let mut h = Histogram::new();
    for &v in values.iter() {
        h.record(v);
    }
    values.sort_unstable();
    let bound = h.layout().relative_error_bound();
    let mut worst: f64 = 0.0;
    for q in QUANTILES {
        let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
        let exact = values[rank - 1] as f64;
        let got = h.quantile(q).unwrap() as f64;
        let err = (got - exact).abs() / exact;
        assert!(
            err <= bound,
            "q={q}: histogram {got} vs exact {exact}: error {err:.5} > bound {bound:.5}"
        );
        worst = worst.max(err);
    }
    worst
}

const TEN_MILLION: usize = 10_000_000;

#[test]
fn ten_million_lognormal_samples_within_bound() {
    let mut v = synth::lognormal(TEN_MILLION, 500e3, 1.2, 1).unwrap();
    check(&mut v);
}

#[test]
fn ten_million_pareto_samples_within_bound() {
    // Shape 0.3 from 1 ns: the tail reaches the 1 h clamp, so 1 ns .. 1 h is all covered.
    let mut v = synth::pareto(TEN_MILLION, 1.0, 0.3, 2).unwrap();
    assert_eq!(*v.iter().min().unwrap(), 1);
    assert_eq!(*v.iter().max().unwrap(), 3_600_000_000_000);
    check(&mut v);
}

#[test]
fn ten_million_multimodal_samples_within_bound() {
    let mut v = synth::mixture(TEN_MILLION, &synth::trimodal_components(0.0).unwrap(), 3).unwrap();
    check(&mut v);
}

#[test]
fn merged_histograms_keep_the_bound() {
    let mut v = synth::mixture(1_000_000, &synth::trimodal_components(0.01).unwrap(), 4).unwrap();
    let mut merged = Histogram::new();
    for chunk in v.chunks(1000) {
        let mut h = Histogram::new();
        chunk.iter().for_each(|&x| h.record(x));
        merged.merge(&h);
    }
    v.sort_unstable();
    for q in QUANTILES {
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        let exact = v[rank - 1] as f64;
        let err = (merged.quantile(q).unwrap() as f64 - exact).abs() / exact;
        assert!(err <= merged.layout().relative_error_bound(), "q={q}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random shapes and scales across 1 ns .. 1 h.
    #[test]
    fn random_distributions_within_bound(
        kind in 0u8..3,
        scale_exp in 0.0f64..12.0,
        spread in 0.05f64..3.0,
        seed in any::<u64>(),
    ) {
        let scale = 10f64.powf(scale_exp);
        let mut v = match kind {
            0 => synth::lognormal(100_000, scale, spread, seed).unwrap(),
            1 => synth::pareto(100_000, scale, 0.2 + spread, seed).unwrap(),
            _ => synth::mixture(100_000, &[
                synth::Component { median_ns: scale, sigma: spread / 10.0, weight: 0.9 },
                synth::Component { median_ns: scale * 30.0, sigma: spread / 10.0, weight: 0.1 },
            ], seed).unwrap(),
        };
        check(&mut v);
    }
}
