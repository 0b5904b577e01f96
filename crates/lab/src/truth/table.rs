//! The matrix's figures: per detector precision and recall, healthy twins, and every miss.
//!
//! In: the [`CaseScore`]s of a matrix (and the cases that could not run). Out: a [`Summary`],
//! the detectors below a target ([`Summary::below`]), and the Markdown that
//! `bench/results/detectors-*.md` hold ([`markdown`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::score::{CaseScore, Counts, DETECTORS};

/// The figures of a matrix.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Per detector, over every case and view.
    pub per_detector: BTreeMap<String, Counts>,
    /// Twin (case, view) pairs with a finding at or above medium confidence.
    pub twin_views_failed: usize,
    /// Twin (case, view) pairs.
    pub twin_views: usize,
    /// "client is saturated" warnings the client's CPU time bears out / contradicts.
    pub client_warnings: (usize, usize),
    /// Cases scored.
    pub cases: usize,
    /// Cases that could not run: (case, error).
    pub failed: Vec<(String, String)>,
}

/// Adds up the scores.
pub fn summarize(scores: &[CaseScore], failed: &[(String, String)]) -> Summary {
    let mut s = Summary {
        cases: scores.len(),
        failed: failed.to_vec(),
        ..Summary::default()
    };
    for d in DETECTORS {
        s.per_detector.insert(d.to_string(), Counts::default());
    }
    for c in scores {
        for (d, n) in &c.counts {
            s.per_detector.entry(d.clone()).or_default().add(*n);
        }
        if c.twin {
            let failed: std::collections::BTreeSet<&str> = c
                .twin_failures
                .iter()
                .filter_map(|f| f.split(": ").next())
                .collect();
            s.twin_views += c.views.len();
            s.twin_views_failed += failed.len();
        }
        for w in &c.client_warnings {
            match w.judged.as_str() {
                "consistent" => s.client_warnings.0 += 1,
                "wrong-side" => s.client_warnings.1 += 1,
                _ => {}
            }
        }
    }
    s
}

impl Summary {
    /// What misses `target` (precision and recall of every detector that was planted or
    /// fired, no twin failure, every case run), in words; empty when all is well.
    pub fn below(&self, target: f64) -> Vec<String> {
        let mut out = Vec::new();
        for (d, c) in &self.per_detector {
            if let Some(p) = c.precision().filter(|p| *p < target) {
                out.push(format!("{d}: precision {p:.2} < {target}"));
            }
            if let Some(r) = c.recall().filter(|r| *r < target) {
                out.push(format!("{d}: recall {r:.2} < {target}"));
            }
        }
        if self.twin_views_failed > 0 {
            out.push(format!(
                "{} healthy-twin view(s) with a finding at or above medium confidence",
                self.twin_views_failed
            ));
        }
        for (case, e) in &self.failed {
            out.push(format!("{case} did not run: {e}"));
        }
        out
    }
}

fn ratio(x: Option<f64>) -> String {
    x.map_or_else(|| "—".into(), |v| format!("{v:.2}"))
}

/// The per-detector table (Markdown, also readable as text).
pub fn detector_table(s: &Summary) -> String {
    let mut t = String::from(
        "| detector | planted | TP | FP | FN | precision | recall |\n|---|--:|--:|--:|--:|--:|--:|\n",
    );
    for (d, c) in &s.per_detector {
        let _ = writeln!(
            t,
            "| {d} | {} | {} | {} | {} | {} | {} |",
            c.tp + c.fn_,
            c.tp,
            c.fp,
            c.fn_,
            ratio(c.precision()),
            ratio(c.recall())
        );
    }
    let _ = writeln!(
        t,
        "\nHealthy twins: {} of {} twin views with a finding at or above medium confidence.",
        s.twin_views_failed, s.twin_views
    );
    let (ok, wrong) = s.client_warnings;
    let _ = writeln!(
        t,
        "`tailhunt load` \"client is saturated\" warnings: {ok} with the client using at least half a CPU, {wrong} with it using less (the wrong side blamed)."
    );
    t
}

/// Every miss, false positive, contradiction and twin failure, case by case.
pub fn misses(scores: &[CaseScore]) -> String {
    let mut t = String::new();
    for c in scores {
        let mut lines = Vec::new();
        for o in &c.outcomes {
            if !o.missed.is_empty() {
                let mut said: Vec<String> = Vec::new();
                for n in &o.named {
                    if !said.contains(&n.summary) {
                        said.push(n.summary.clone());
                    }
                }
                let said = if said.is_empty() {
                    "silent".to_string()
                } else {
                    said.join(" | ")
                };
                lines.push(format!(
                    "- {} / {}: missed {}; it said: {said}",
                    o.view,
                    o.detector,
                    o.missed.join(", ")
                ));
            }
            for n in o.named.iter().filter(|n| n.judged.starts_with("fp")) {
                lines.push(format!(
                    "- {} / {}: {} {} ({:.0}%): {}",
                    o.view,
                    o.detector,
                    n.judged.replacen("fp", "false positive", 1),
                    n.unit,
                    n.confidence * 100.0,
                    n.summary
                ));
            }
            for x in &o.contradictions {
                lines.push(format!("- {} / {}: contradicted: {x}", o.view, o.detector));
            }
        }
        for f in &c.twin_failures {
            lines.push(format!("- twin failure: {f}"));
        }
        for w in c
            .client_warnings
            .iter()
            .filter(|w| w.judged == "wrong-side")
        {
            lines.push(format!(
                "- {}: load warning with the client at {:.0}% of a CPU: {}",
                w.view,
                w.client_cpu_share.unwrap_or(0.0) * 100.0,
                w.warning
            ));
        }
        for u in &c.unplanted {
            lines.push(format!("- set up without effect, not scored: {u}"));
        }
        if !lines.is_empty() {
            if let Some(ctx) = &c.context {
                lines.push(format!("- ({ctx})"));
            }
            let _ = writeln!(
                t,
                "**{}**{}\n",
                c.case,
                if c.twin { " (healthy twin)" } else { "" }
            );
            for l in lines {
                let _ = writeln!(t, "{l}");
            }
            t.push('\n');
        }
    }
    t
}

/// The results as Markdown sections (`## Per detector`, `## Misses ...`), for a document
/// whose heading and machine description the caller writes.
pub fn markdown(s: &Summary, scores: &[CaseScore]) -> String {
    let mut t = String::from("## Per detector\n\n");
    let _ = writeln!(t, "{} case(s) scored.\n", s.cases);
    t.push_str(&detector_table(s));
    if !s.failed.is_empty() {
        t.push_str("\nCases that did not run:\n\n");
        for (c, e) in &s.failed {
            let _ = writeln!(t, "- {c}: {e}");
        }
    }
    t.push_str("\n## Misses, false positives and contradictions\n\n");
    let m = misses(scores);
    t.push_str(if m.is_empty() { "None.\n" } else { &m });
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(det: &str, c: Counts, twin: bool, failures: Vec<String>) -> CaseScore {
        CaseScore {
            case: "c".into(),
            twin,
            views: vec!["cache".into()],
            counts: BTreeMap::from([(det.to_string(), c)]),
            outcomes: Vec::new(),
            twin_failures: failures,
            client_warnings: Vec::new(),
            unplanted: Vec::new(),
            context: None,
        }
    }

    #[test]
    fn a_detector_below_target_and_a_twin_failure_are_reported() {
        let good = Counts {
            tp: 9,
            fp: 0,
            fn_: 1,
        };
        let bad = Counts {
            tp: 1,
            fp: 1,
            fn_: 3,
        };
        let scores = vec![
            score("nagle-stall", good, false, vec![]),
            score("microburst", bad, false, vec![]),
            score(
                "microburst",
                Counts::default(),
                true,
                vec!["cache: microburst (60%): x".into()],
            ),
        ];
        let s = summarize(&scores, &[]);
        assert_eq!(s.per_detector["nagle-stall"].recall(), Some(0.9));
        let below = s.below(0.9);
        assert!(
            below
                .iter()
                .any(|b| b.starts_with("microburst: precision 0.50")),
            "{below:?}"
        );
        assert!(
            below
                .iter()
                .any(|b| b.starts_with("microburst: recall 0.25")),
            "{below:?}"
        );
        assert!(
            !below.iter().any(|b| b.starts_with("nagle-stall")),
            "{below:?}"
        );
        assert!(
            below.iter().any(|b| b.contains("healthy-twin")),
            "{below:?}"
        );
        assert!(detector_table(&s).contains("| microburst | 4 | 1 | 1 | 3 | 0.50 | 0.25 |"));
    }
}
