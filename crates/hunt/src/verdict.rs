//! Every detector over every run of a hunt, and one ranked list.
//!
//! In: the store and the runs the hunt stored, each with its source. Out: the findings of
//! `tailhunt_diagnose::diagnose_run` on each run (stored with the run, as `tailhunt diagnose`
//! would), ranked: detected causes first, then warnings, inconclusive and ruled-out
//! verdicts; within each, highest confidence first.

use serde::Serialize;
use tailhunt_model::{Finding, Verdict};
use tailhunt_store::Store;

use crate::{HuntError, Source};

/// "Medium" confidence: the lab's bar for a finding a healthy target must not get.
pub const MEDIUM: f64 = 0.5;

/// A finding with where it came from.
#[derive(Debug, Clone, Serialize)]
pub struct Ranked {
    /// 1 for the top finding.
    pub rank: usize,
    /// The source whose run it was found in.
    pub source: Source,
    /// That run.
    pub run_id: String,
    /// The finding.
    #[serde(flatten)]
    pub finding: Finding,
}

fn verdict_order(v: Verdict) -> u8 {
    match v {
        Verdict::Detected => 0,
        Verdict::Warning => 1,
        Verdict::Inconclusive => 2,
        Verdict::RuledOut => 3,
    }
}

/// Diagnoses each run, stores its findings, and ranks them all.
pub fn diagnose_all(
    store: &mut Store,
    runs: &[(Source, String)],
) -> Result<Vec<Ranked>, HuntError> {
    let mut all = Vec::new();
    for (source, run_id) in runs {
        let d = tailhunt_diagnose::diagnose_and_store(store, run_id)?;
        all.extend(d.findings.into_iter().map(|finding| Ranked {
            rank: 0,
            source: *source,
            run_id: run_id.clone(),
            finding,
        }));
    }
    Ok(rank(all))
}

/// Sorts by verdict, then confidence (highest first), and numbers the result.
pub fn rank(mut all: Vec<Ranked>) -> Vec<Ranked> {
    all.sort_by(|a, b| {
        verdict_order(a.finding.verdict)
            .cmp(&verdict_order(b.finding.verdict))
            .then(b.finding.confidence.total_cmp(&a.finding.confidence))
    });
    for (i, r) in all.iter_mut().enumerate() {
        r.rank = i + 1;
    }
    all
}

/// The detected causes at or above medium confidence: what the hunt names.
pub fn named(findings: &[Ranked]) -> impl Iterator<Item = &Ranked> {
    findings
        .iter()
        .filter(|r| r.finding.verdict == Verdict::Detected && r.finding.confidence >= MEDIUM)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(detector: &str, verdict: Verdict, confidence: f64) -> Ranked {
        Ranked {
            rank: 0,
            source: Source::Sweep,
            run_id: "r".into(),
            finding: Finding {
                detector: detector.into(),
                verdict,
                confidence,
                summary: String::new(),
                evidence: Vec::new(),
                fix: None,
            },
        }
    }

    #[test]
    fn detected_causes_come_first_by_confidence() {
        let r = rank(vec![
            f("w", Verdict::Warning, 0.9),
            f("low", Verdict::Detected, 0.4),
            f("high", Verdict::Detected, 0.8),
            f("out", Verdict::RuledOut, 1.0),
        ]);
        let order: Vec<&str> = r.iter().map(|r| r.finding.detector.as_str()).collect();
        assert_eq!(order, ["high", "low", "w", "out"]);
        assert_eq!(r[0].rank, 1);
        let names: Vec<_> = named(&r).map(|r| r.finding.detector.as_str()).collect();
        assert_eq!(names, ["high"]);
    }
}
