//! `step-change`: the per-interval percentiles moved to a new level at one moment and stayed.
//!
//! The story: a latency benchmark service kept every sample for months; one date showed a step
//! that no single histogram over the whole period could show (it only widened it). A step
//! names a moment, and a moment can be matched to a deploy, a configuration change, a route
//! change or a host move.
//!
//! In: a series' [`TimeAnalysis`] (its change points come from E-divisive over p50/p90/p99 at
//! once with a permutation test, so a step of the tail alone counts). Out: one finding per
//! series listing every change point where some percentile moved by at least
//! [`MIN_RATIO`] (either way).

use std::collections::BTreeMap;

use tailhunt_analyze::percentile_label;
use tailhunt_analyze::timeline::{Shift, TimeAnalysis};
use tailhunt_model::{Evidence, Finding, Verdict};

use super::{format_offset, ns, ProbeSeries};

/// Name of the detector.
pub const DETECTOR: &str = "step-change";
/// Smallest change of a percentile's level (after/before, or before/after) worth a finding.
pub const MIN_RATIO: f64 = 1.2;

/// The percentile that moved most at a shift: its index and the ratio after/before.
fn largest(shift: &Shift) -> (usize, f64) {
    (0..shift.before_ns.len())
        .map(|k| (k, shift.ratio(k)))
        .max_by(|a, b| a.1.ln().abs().total_cmp(&b.1.ln().abs()))
        .unwrap_or((0, 1.0))
}

fn describe(a: &TimeAnalysis, shift: &Shift, origin_ns: i64) -> String {
    let qs = &a.over_time.quantiles;
    let (k, ratio) = largest(shift);
    let others: Vec<String> = (0..qs.len())
        .filter(|&j| j != k)
        .map(|j| {
            format!(
                "{} {} -> {}",
                percentile_label(qs[j]),
                ns(shift.before_ns[j] as f64),
                ns(shift.after_ns[j] as f64)
            )
        })
        .collect();
    format!(
        "{} {} from {} to {} ({:.2}x) at {} into the run ({}; change point p <= {:.3})",
        percentile_label(qs[k]),
        if ratio >= 1.0 {
            "stepped up"
        } else {
            "stepped down"
        },
        ns(shift.before_ns[k] as f64),
        ns(shift.after_ns[k] as f64),
        ratio,
        format_offset(shift.at_ns - origin_ns),
        others.join(", "),
        shift.p_value,
    )
}

/// A finding for the series' steps, if any is large enough; `origin_ns` is the run's start.
pub fn step_change(series: &ProbeSeries, a: &TimeAnalysis, origin_ns: i64) -> Option<Finding> {
    let steps: Vec<&Shift> = a
        .shifts
        .iter()
        .filter(|s| largest(s).1.ln().abs() >= MIN_RATIO.ln())
        .collect();
    let first = steps.first()?;
    let width = a.over_time.interval_ns;
    let evidence = steps
        .iter()
        .map(|s| {
            let mut values = BTreeMap::from([
                ("at_ns".to_string(), s.at_ns as f64),
                ("p_value".to_string(), s.p_value),
                ("interval_ns".to_string(), width as f64),
            ]);
            for (k, q) in a.over_time.quantiles.iter().enumerate() {
                let l = percentile_label(*q);
                values.insert(format!("{l}_before_ns"), s.before_ns[k] as f64);
                values.insert(format!("{l}_after_ns"), s.after_ns[k] as f64);
            }
            Evidence {
                series: series.display_name.clone(),
                range_ns: Some((s.at_ns - width, s.at_ns + width)),
                values,
                note: describe(a, s, origin_ns),
            }
        })
        .collect();
    let (_, ratio) = largest(first);
    let more = if steps.len() > 1 {
        format!(" (and {} more change points)", steps.len() - 1)
    } else {
        String::new()
    };
    Some(Finding {
        detector: DETECTOR.to_string(),
        verdict: Verdict::Detected,
        confidence: (0.6 + 0.3 * (ratio.ln().abs() / 2f64.ln()).min(1.0)).min(0.9),
        summary: format!("{}: {}{more}", series.who(), describe(a, first, origin_ns)),
        evidence,
        fix: Some(
            "find what changed at that moment (a deploy, a configuration or route change, a host \
             move) and compare the two sides with `tailhunt analyze --compare`"
                .into(),
        ),
    })
}
