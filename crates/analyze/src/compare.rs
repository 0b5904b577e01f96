//! Two distributions side by side (before/after, A/B), explaining percentiles that jumped.
//!
//! A percentile change is *significant* when the two confidence intervals do not overlap. When a
//! percentile moved a lot but the modes stayed where they were, the change is mass moving between
//! modes, and the explanation says so with the shares: that is the honest description of what
//! changed, where the percentile alone suggests a 19x speed-up.

use serde::Serialize;

use crate::modes::{Gap, Mode};
use crate::Analysis;

/// Peaks within this ratio are the same mode in both runs.
const SAME_MODE_RATIO: f64 = 1.25;
/// Percentile ratios beyond this are worth explaining.
const BIG_CHANGE: f64 = 1.5;

/// One percentile, before and after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuantileChange {
    /// `p90`.
    pub label: String,
    /// Before, ns.
    pub before_ns: u64,
    /// After, ns.
    pub after_ns: u64,
    /// `after / before`.
    pub ratio: f64,
    /// Whether the confidence intervals do not overlap.
    pub significant: bool,
    /// Why it moved, when it moved a lot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

/// A mode present in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeChange {
    /// Peak before, ns.
    pub peak_before_ns: u64,
    /// Peak after, ns.
    pub peak_after_ns: u64,
    /// Share before.
    pub share_before: f64,
    /// Share after.
    pub share_after: f64,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Percentiles present in both.
    pub quantiles: Vec<QuantileChange>,
    /// Modes matched across the runs (by peak within 25%).
    pub modes: Vec<ModeChange>,
    /// Whether every mode of each run matched one of the other.
    pub same_modes: bool,
}

fn mode_of(value: u64, gaps: &[Gap]) -> usize {
    gaps.iter().take_while(|g| value > g.boundary_ns).count()
}

fn matches(a: &Mode, b: &Mode) -> bool {
    let r = a.peak_ns.max(1) as f64 / b.peak_ns.max(1) as f64;
    r < SAME_MODE_RATIO && r > 1.0 / SAME_MODE_RATIO
}

/// Compares `after` against `before`.
pub fn compare(before: &Analysis, after: &Analysis) -> Comparison {
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for (i, a) in before.modes.iter().enumerate() {
        if let Some(j) = after.modes.iter().position(|b| matches(a, b)) {
            if !pairs.iter().any(|&(_, pj)| pj == j) {
                pairs.push((i, j));
            }
        }
    }
    let same_modes = pairs.len() == before.modes.len() && pairs.len() == after.modes.len();
    let modes: Vec<ModeChange> = pairs
        .iter()
        .map(|&(i, j)| ModeChange {
            peak_before_ns: before.modes[i].peak_ns,
            peak_after_ns: after.modes[j].peak_ns,
            share_before: before.modes[i].share,
            share_after: after.modes[j].share,
        })
        .collect();
    let fmt = |v: u64| tailhunt_model::format_duration_ns(v as f64);
    let quantiles = before
        .summary
        .quantiles
        .iter()
        .filter_map(|b| {
            let a = after.summary.quantiles.iter().find(|a| a.q == b.q)?;
            let ratio = a.value_ns.max(1) as f64 / b.value_ns.max(1) as f64;
            let significant = match (b.ci_low_ns, b.ci_high_ns, a.ci_low_ns, a.ci_high_ns) {
                (Some(bl), Some(bh), Some(al), Some(ah)) => bh < al || ah < bl,
                _ => false,
            };
            let big = !(1.0 / BIG_CHANGE..=BIG_CHANGE).contains(&ratio);
            let explanation = big.then(|| {
                let (mb, ma) = (mode_of(b.value_ns, &before.gaps), mode_of(a.value_ns, &after.gaps));
                let crossed = same_modes && mb != ma;
                if crossed {
                    let (lo, hi) = (mb.min(ma), mb.max(ma));
                    let below_b: f64 = before.modes[..hi].iter().map(|m| m.share).sum();
                    let below_a: f64 = after.modes[..hi].iter().map(|m| m.share).sum();
                    format!(
                        "{label} moved from {from} to {to} ({factor:.0}x) although no mode moved: the modes up to {edge} held {sb:.1}% of samples before and {sa:.1}% after ({delta:+.1} points), carrying {label} across the gap between {edge} and {next}. The distribution barely changed; {label} sat on a gap.",
                        label = b.label,
                        from = fmt(b.value_ns),
                        to = fmt(a.value_ns),
                        factor = if ratio >= 1.0 { ratio } else { 1.0 / ratio },
                        edge = fmt(before.modes[lo.max(hi - 1)].peak_ns),
                        next = fmt(before.modes[hi].peak_ns),
                        sb = below_b * 100.0,
                        sa = below_a * 100.0,
                        delta = (below_a - below_b) * 100.0,
                    )
                } else if same_modes {
                    format!(
                        "{} moved from {} to {} within the same mode: the mode itself shifted or widened",
                        b.label, fmt(b.value_ns), fmt(a.value_ns)
                    )
                } else {
                    format!(
                        "{} moved from {} to {} and the modes changed ({} before, {} after): the shape of the distribution changed",
                        b.label,
                        fmt(b.value_ns),
                        fmt(a.value_ns),
                        before.modes.len(),
                        after.modes.len()
                    )
                }
            });
            Some(QuantileChange {
                label: b.label.clone(),
                before_ns: b.value_ns,
                after_ns: a.value_ns,
                ratio,
                significant,
                explanation,
            })
        })
        .collect();
    Comparison {
        quantiles,
        modes,
        same_modes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{analyze, AnalyzeOptions, Distribution};
    use tailhunt_synth as synth;

    fn analysis(shift: f64, seed: u64) -> Analysis {
        let v = synth::mixture(100_000, &synth::trimodal_components(shift).unwrap(), seed).unwrap();
        analyze(&Distribution::from_values(v), &AnalyzeOptions::default())
    }

    #[test]
    fn p90_flip_is_explained_by_mass_moving_between_modes() {
        let c = compare(&analysis(0.0, 1), &analysis(0.02, 2));
        assert!(c.same_modes);
        let p90 = c.quantiles.iter().find(|q| q.label == "p90").unwrap();
        assert!(p90.ratio < 0.1 && p90.significant);
        let why = p90.explanation.as_deref().unwrap();
        assert!(
            why.contains("no mode moved") && why.contains("88.0%") && why.contains("90.0%"),
            "{why}"
        );
        let p50 = c.quantiles.iter().find(|q| q.label == "p50").unwrap();
        assert!(p50.explanation.is_none());
    }

    #[test]
    fn identical_runs_show_no_significant_change() {
        let c = compare(&analysis(0.0, 1), &analysis(0.0, 5));
        assert!(
            c.quantiles
                .iter()
                .all(|q| !q.significant || (q.ratio - 1.0).abs() < 0.05),
            "{c:?}"
        );
        assert!(c.quantiles.iter().all(|q| q.explanation.is_none()));
    }
}
