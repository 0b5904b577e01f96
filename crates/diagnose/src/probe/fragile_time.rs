//! `fragile-percentile` over time: a percentile that lands on one side of a gap between modes
//! in some intervals and on the other side in others.
//!
//! The story: three nearly equal variants read p90 = 12 ms, 9 ms and 0.77 ms because about 88%
//! of their samples sat below a gap between modes and the 90th percentile sat on its edge. Over
//! time the same trap shows as a p90 that jumps between the modes from one interval to the next
//! while the share of mass below the gap barely moves.
//!
//! In: a series' [`TimeAnalysis`] (per-interval percentiles, and per-interval shares below the
//! boundaries of the whole series' modes) and the whole series' fragile-percentile warnings.
//! Out: one finding when some percentile sits below a boundary in at least [`MIN_SHARE`] of
//! the readable intervals and above it in as many while the share of samples below that
//! boundary stays the same up to sampling noise (or when the whole series' percentile is
//! fragile and the series has neither a change point nor a period). A share that really
//! moves is a step or a period, not a trap.

use std::collections::BTreeMap;

use tailhunt_analyze::percentile_label;
use tailhunt_analyze::timeline::TimeAnalysis;
use tailhunt_analyze::Analysis;
use tailhunt_model::{Evidence, Finding, Verdict};

use super::{ns, ProbeSeries};

/// Smallest share of intervals on each side of the gap.
pub const MIN_SHARE: f64 = 0.1;
/// Largest chi-square over degrees of freedom of the per-interval shares below a gap (1 is
/// pure sampling noise; with 100 intervals its standard deviation is 0.14).
pub const MAX_DISPERSION: f64 = 1.5;
/// Fewest intervals on each side.
pub const MIN_INTERVALS: usize = 3;

/// A flip of one percentile across one boundary.
struct Flip {
    label: String,
    boundary_ns: u64,
    below: usize,
    above: usize,
    low_ns: u64,
    high_ns: u64,
    share_lo: f64,
    share_hi: f64,
}

/// Whether the share of samples below boundary `g` is the same in every interval up to
/// sampling noise: the chi-square statistic of the intervals' counts below it, over its
/// degrees of freedom, is at most [`MAX_DISPERSION`]. When it moves more, the flips are a real
/// change of the mode shares (a step, a period), which those detectors report.
fn stable_share(a: &TimeAnalysis, readable: &[usize], g: usize) -> bool {
    let ot = &a.over_time;
    let (mut below, mut total) = (0.0, 0.0);
    for &i in readable {
        let n = ot.intervals[i].answered() as f64;
        below += ot.intervals[i].share_below[g] * n;
        total += n;
    }
    let p = below / total.max(1.0);
    if p <= 0.0 || p >= 1.0 || readable.len() < 2 {
        return false;
    }
    let chi2: f64 = readable
        .iter()
        .map(|&i| {
            let n = ot.intervals[i].answered() as f64;
            let k = ot.intervals[i].share_below[g] * n;
            (k - n * p).powi(2) / (n * p * (1.0 - p))
        })
        .sum();
    chi2 / (readable.len() - 1) as f64 <= MAX_DISPERSION
}

fn flips(a: &TimeAnalysis) -> Vec<Flip> {
    let ot = &a.over_time;
    let readable = ot.readable();
    let mut out = Vec::new();
    for (k, q) in ot.quantiles.iter().enumerate() {
        for (g, &b) in ot.boundaries_ns.iter().enumerate() {
            let vals: Vec<(u64, f64)> = readable
                .iter()
                .filter_map(|&i| {
                    Some((
                        ot.intervals[i].values_ns[k]?,
                        ot.intervals[i].share_below[g],
                    ))
                })
                .collect();
            let below: Vec<&(u64, f64)> = vals.iter().filter(|v| v.0 <= b).collect();
            let above: Vec<&(u64, f64)> = vals.iter().filter(|v| v.0 > b).collect();
            let need = MIN_INTERVALS.max((MIN_SHARE * vals.len() as f64).ceil() as usize);
            if below.len() < need || above.len() < need || !stable_share(a, &readable, g) {
                continue;
            }
            let median = |v: &[&(u64, f64)]| {
                let mut x: Vec<u64> = v.iter().map(|p| p.0).collect();
                x.sort_unstable();
                x[x.len() / 2]
            };
            let mut shares: Vec<f64> = vals.iter().map(|v| v.1).collect();
            shares.sort_by(f64::total_cmp);
            let at = |p: f64| shares[((p * (shares.len() - 1) as f64).round()) as usize];
            out.push(Flip {
                label: percentile_label(*q),
                boundary_ns: b,
                below: below.len(),
                above: above.len(),
                low_ns: median(&below),
                high_ns: median(&above),
                share_lo: at(0.1),
                share_hi: at(0.9),
            });
        }
    }
    out
}

/// One finding for the series' fragile percentiles, per interval or over the whole series.
pub fn fragile_over_time(
    series: &ProbeSeries,
    a: Option<&TimeAnalysis>,
    whole: &Analysis,
) -> Option<Finding> {
    let flips = a.map(flips).unwrap_or_default();
    let mut evidence: Vec<Evidence> = flips
        .iter()
        .map(|f| {
            let note = format!(
                "{} flips between {} and {} from interval to interval ({} intervals below the \
                 gap at {}, {} above) while the share of samples below the gap only moves \
                 between {:.1}% and {:.1}%",
                f.label,
                ns(f.low_ns as f64),
                ns(f.high_ns as f64),
                f.below,
                ns(f.boundary_ns as f64),
                f.above,
                f.share_lo * 100.0,
                f.share_hi * 100.0
            );
            Evidence {
                series: series.display_name.clone(),
                range_ns: None,
                values: BTreeMap::from([
                    ("boundary_ns".to_string(), f.boundary_ns as f64),
                    ("intervals_below".to_string(), f.below as f64),
                    ("intervals_above".to_string(), f.above as f64),
                    (format!("{}_low_ns", f.label), f.low_ns as f64),
                    (format!("{}_high_ns", f.label), f.high_ns as f64),
                    ("share_below_p10".to_string(), f.share_lo),
                    ("share_below_p90".to_string(), f.share_hi),
                ]),
                note,
            }
        })
        .collect();
    // A gap in the whole series that comes from a change over time (two levels of a step,
    // the two phases of a period) is reported as that change, not as a trap.
    let changed = a.is_some_and(|a| !a.shifts.is_empty() || !a.periods.is_empty());
    let whole_finding = if changed {
        None
    } else {
        crate::fragile::fragile_percentiles(&series.display_name, whole)
    };
    let summary = match (evidence.first(), &whole_finding) {
        (Some(e), _) => e.note.clone(),
        (None, Some(w)) => w
            .evidence
            .first()
            .map(|e| e.note.clone())
            .unwrap_or_default(),
        (None, None) => return None,
    };
    if let Some(w) = whole_finding {
        evidence.extend(w.evidence);
    }
    Some(Finding {
        detector: crate::fragile::DETECTOR.to_string(),
        verdict: Verdict::Warning,
        confidence: 0.9,
        summary: format!("{}: {summary}", series.who()),
        evidence,
        fix: Some(
            "compare intervals and variants by the share of samples in each mode (tailhunt \
             analyze --compare), not by this percentile"
                .into(),
        ),
    })
}
