//! Percentiles that a sliver of mass would move across a gap.
//!
//! The story: a service's latency had modes near 0.45 ms, 10 ms and 20 ms holding 88%, 8% and 4%
//! of requests. Its p90 read 12 ms; after a change moved about 1% of requests into the fast mode,
//! p90 read 0.77 ms. Nothing got 15x faster: 88% of the mass sat below a gap, and the 90th
//! percentile sat just above it. A percentile is *fragile* when the share of samples at or below
//! a gap lies within a quarter of the percentile's tail (`0.25 (1 - q)`) of `q`, or when the
//! percentile's value lies inside the gap itself. The warning says how much mass would have to
//! move and where the percentile would land.

use serde::Serialize;

use crate::modes::Modes;
use crate::quantiles::Summary;
use crate::Distribution;

/// Fraction of a percentile's tail within which a gap makes it fragile.
const TAIL_FRACTION: f64 = 0.25;
/// Gaps between modes closer than this ratio are not worth a warning.
const MIN_GAP_RATIO: f64 = 1.5;

/// A percentile on a knife edge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FragilePercentile {
    /// `p90`.
    pub label: String,
    /// The quantile.
    pub q: f64,
    /// Its value, ns.
    pub value_ns: u64,
    /// Index of the gap (into `Analysis::gaps`).
    pub gap: usize,
    /// Share of samples at or below the gap.
    pub share_below_gap: f64,
    /// Share of all samples that would have to cross the gap to move the percentile.
    pub mass_to_flip: f64,
    /// Where the percentile would land after that move, ns.
    pub flipped_value_ns: u64,
    /// Whether the value itself lies inside the gap (no mode near it).
    pub in_gap: bool,
    /// One-paragraph explanation for people.
    pub message: String,
}

/// Finds the fragile percentiles among those in `summary`.
pub fn fragile_percentiles(
    dist: &Distribution,
    summary: &Summary,
    modes: &Modes,
) -> Vec<FragilePercentile> {
    let n = dist.count();
    let mut out = Vec::new();
    for est in &summary.quantiles {
        for (gi, gap) in modes.gaps.iter().enumerate() {
            if gap.ratio < MIN_GAP_RATIO {
                continue;
            }
            let c = gap.share_below;
            let distance = (est.q - c).abs();
            let in_gap = est.value_ns > gap.lower_ns && est.value_ns < gap.upper_ns;
            if !(in_gap || distance <= TAIL_FRACTION * (1.0 - est.q)) {
                continue;
            }
            let below_rank = (c * n as f64).round() as u64;
            let (flipped, direction) = if est.q > c {
                (dist.value_at_rank(below_rank.max(1)), "down")
            } else {
                (dist.value_at_rank(below_rank + 1), "up")
            };
            let Some(flipped) = flipped else { continue };
            let lower = &modes.modes[gap.below];
            let upper = &modes.modes[gap.below + 1];
            let mass = distance + 1.0 / n as f64;
            let factor = est.value_ns.max(1) as f64 / flipped.max(1) as f64;
            let factor = if factor >= 1.0 { factor } else { 1.0 / factor };
            let moved = ((mass * n as f64).round() as u64).max(1);
            let how_much = if mass * 100.0 >= 0.1 {
                format!("{:.1}% of them", mass * 100.0)
            } else {
                format!("{moved} sample{}", if moved == 1 { "" } else { "s" })
            };
            let message = format!(
                "{label} = {value} sits {where_} the gap between the mode at {lo} ({lo_share:.1}% of samples) and the mode at {hi} ({hi_share:.1}%): {below:.1}% of samples are at or below the gap, so moving {how_much} {direction} across it would move {label} to {flipped} ({factor:.0}x). Report the mode shares, not {label}, when comparing runs.",
                label = est.label,
                value = fmt(est.value_ns),
                where_ = if in_gap { "inside" } else { "at the edge of" },
                lo = fmt(lower.peak_ns),
                lo_share = lower.share * 100.0,
                hi = fmt(upper.peak_ns),
                hi_share = upper.share * 100.0,
                below = c * 100.0,
                flipped = fmt(flipped),
            );
            out.push(FragilePercentile {
                label: est.label.clone(),
                q: est.q,
                value_ns: est.value_ns,
                gap: gi,
                share_below_gap: c,
                mass_to_flip: mass,
                flipped_value_ns: flipped,
                in_gap,
                message,
            });
            break;
        }
    }
    out
}

fn fmt(ns: u64) -> String {
    tailhunt_model::format_duration_ns(ns as f64)
}

#[cfg(test)]
mod tests {
    use crate::{analyze, AnalyzeOptions, Distribution};
    use tailhunt_synth as synth;

    fn analysis(shift: f64, seed: u64) -> crate::Analysis {
        let v = synth::mixture(100_000, &synth::trimodal_components(shift).unwrap(), seed).unwrap();
        analyze(&Distribution::from_values(v), &AnalyzeOptions::default())
    }

    #[test]
    fn p90_of_the_trimodal_set_is_fragile() {
        let a = analysis(0.0, 1);
        let w: Vec<_> = a.warnings.iter().map(|w| w.label.as_str()).collect();
        assert_eq!(w, ["p90"], "{:?}", a.warnings);
        let w = &a.warnings[0];
        assert!(
            w.value_ns > 5_000_000,
            "p90 is in the 10 ms mode: {}",
            w.value_ns
        );
        assert!(
            w.flipped_value_ns < 1_000_000,
            "would flip to the fast mode"
        );
        assert!((w.mass_to_flip - 0.02).abs() < 0.002);
        assert!(w.message.contains("88.0%"), "{}", w.message);
    }

    #[test]
    fn moving_two_percent_flips_p90_and_still_warns() {
        let a = analysis(0.02, 2);
        let p90 = a
            .summary
            .quantiles
            .iter()
            .find(|q| q.label == "p90")
            .unwrap();
        assert!(
            p90.value_ns < 1_000_000,
            "p90 flipped to the fast mode: {}",
            p90.value_ns
        );
        let w = a
            .warnings
            .iter()
            .find(|w| w.label == "p90")
            .expect("p90 warning");
        assert!(w.flipped_value_ns > 5_000_000);
        assert!(w.message.contains("90.0%"), "{}", w.message);
    }

    #[test]
    fn unimodal_data_gets_no_warning() {
        let v = synth::lognormal(100_000, 1e6, 0.5, 3).unwrap();
        let a = analyze(&Distribution::from_values(v), &AnalyzeOptions::default());
        assert!(a.warnings.is_empty());
    }

    #[test]
    fn well_placed_percentiles_of_a_bimodal_set_are_not_fragile() {
        // 50/50 split: p50 is right at the gap (fragile) but p90/p99 sit deep in the upper mode.
        let comps = [
            synth::Component {
                median_ns: 1e6,
                sigma: 0.05,
                weight: 0.5,
            },
            synth::Component {
                median_ns: 8e6,
                sigma: 0.05,
                weight: 0.5,
            },
        ];
        let v = synth::mixture(50_000, &comps, 4).unwrap();
        let a = analyze(&Distribution::from_values(v), &AnalyzeOptions::default());
        let labels: Vec<_> = a.warnings.iter().map(|w| w.label.as_str()).collect();
        assert_eq!(labels, ["p50"]);
    }
}
