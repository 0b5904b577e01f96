//! `fragile-percentile`: the analysis' gap warnings as findings, so `diagnose` and reports
//! carry them next to the root causes (a percentile on a gap is a measurement trap, cause #5).

use std::collections::BTreeMap;

use tailhunt_analyze::Analysis;
use tailhunt_model::{Evidence, Finding, Verdict};

/// Name of the detector.
pub const DETECTOR: &str = "fragile-percentile";

/// One finding per series whose analysis has fragile percentiles.
pub fn fragile_percentiles(series: &str, a: &Analysis) -> Option<Finding> {
    let first = a.warnings.first()?;
    let evidence = a
        .warnings
        .iter()
        .map(|w| Evidence {
            series: series.to_string(),
            range_ns: None,
            values: BTreeMap::from([
                (format!("{}_ns", w.label), w.value_ns as f64),
                ("share_below_gap".to_string(), w.share_below_gap),
                ("mass_to_flip".to_string(), w.mass_to_flip),
                ("flipped_value_ns".to_string(), w.flipped_value_ns as f64),
            ]),
            note: w.message.clone(),
        })
        .collect();
    Some(Finding {
        detector: DETECTOR.to_string(),
        verdict: Verdict::Warning,
        confidence: 0.9,
        summary: format!("{series}: {}", first.message),
        evidence,
        fix: Some("compare runs by the share of samples in each mode (tailhunt analyze --compare), not by this percentile".into()),
    })
}
