//! From stored runs to a verdict: `tailhunt diagnose` on every run a scenario measured before
//! its fix, the root-cause findings ranked, and the verdict against what was planted.
//!
//! In: the runs (ids from the commands' own JSON), the planted causes, the fix's figure and
//! check, and any sign of host noise. Out: a [`super::ScenarioResult`].

use serde::Serialize;
use serde_json::Value;

use super::{Figure, RunRef, ScenarioResult};
use crate::truth::score::{DETECTORS, MEDIUM};
use crate::truth::tool::Ctx;
use crate::truth::TruthError;

/// A root-cause finding as the table shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingRef {
    /// The detector.
    pub detector: String,
    /// Its confidence, 0..1.
    pub confidence: f64,
    /// Its one-line summary.
    pub summary: String,
    /// The run it was found in.
    pub run: String,
}

/// A scenario's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Verdict {
    /// The planted cause was the top finding, nothing unplanted at or above medium confidence,
    /// and the fix improved the figure as stated.
    Pass,
    /// Something of that did not hold.
    Fail {
        /// What.
        why: String,
    },
    /// The host was too noisy to tell.
    Inconclusive {
        /// The figures that say so.
        why: String,
    },
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Pass => write!(f, "pass"),
            Verdict::Fail { why } => write!(f, "fail ({why})"),
            Verdict::Inconclusive { why } => write!(f, "inconclusive (host too noisy: {why})"),
        }
    }
}

/// The runs a scenario stored, and the findings about other tenants of the host.
#[derive(Debug, Default)]
pub(crate) struct Evidence {
    pub(crate) runs: Vec<RunRef>,
    /// Per run: the cgroup its findings must be about (a run-queue trace sees the whole host).
    scopes: Vec<Option<String>>,
    /// Findings about cgroups outside the scenario's own, in words.
    foreign: Vec<String>,
}

impl Evidence {
    /// Notes the run a command's JSON document names (`run_id`).
    pub(crate) fn add(&mut self, doc: &Value, command: &str, phase: &str) {
        self.add_scoped(doc, command, phase, None);
    }

    /// Notes a run whose findings count only when they are about a cgroup under `scope` (the
    /// scenario's own): `tailhunt runq` traces the whole host, and a finding about another
    /// tenant's cgroup (a test hog next door) is the host's business, not the scenario's.
    pub(crate) fn add_scoped(
        &mut self,
        doc: &Value,
        command: &str,
        phase: &str,
        scope: Option<String>,
    ) {
        if let Some(id) = doc["run_id"].as_str() {
            self.runs.push(RunRef {
                id: id.to_string(),
                command: command.to_string(),
                phase: phase.to_string(),
            });
            self.scopes.push(scope);
        }
    }

    /// `tailhunt diagnose` on every run measured before the fix (or as a healthy baseline):
    /// the root-cause findings that are detected, most confident first.
    pub(crate) fn findings(&mut self, ctx: &Ctx) -> Result<Vec<FindingRef>, TruthError> {
        let mut out = self.diagnose(ctx, |phase| phase != "after")?;
        out.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
        Ok(out)
    }

    /// The root-cause findings of the runs after the fix: what is left when it did not work.
    pub(crate) fn findings_after(&mut self, ctx: &Ctx) -> Result<Vec<FindingRef>, TruthError> {
        self.diagnose(ctx, |phase| phase == "after")
    }

    fn diagnose(
        &mut self,
        ctx: &Ctx,
        phase: impl Fn(&str) -> bool,
    ) -> Result<Vec<FindingRef>, TruthError> {
        let mut out = Vec::new();
        for (r, scope) in self.runs.iter().zip(&self.scopes) {
            if !phase(&r.phase) {
                continue;
            }
            let doc = ctx.analyse(&["diagnose", &r.id])?;
            for f in root_causes(&doc, &r.id) {
                match scope {
                    Some(s) if !about(&f, s) => {
                        let note = format!(
                            "about another tenant, not counted: {} ({:.2}): {}",
                            f.detector, f.confidence, f.summary
                        );
                        if !self.foreign.contains(&note) {
                            self.foreign.push(note);
                        }
                    }
                    _ => out.push(f),
                }
            }
        }
        Ok(out)
    }
}

/// Whether a run-queue finding is about a cgroup under `scope`: its summary starts with the
/// victim's path.
fn about(f: &FindingRef, scope: &str) -> bool {
    f.summary.starts_with(scope)
}

/// The detectors of probe runs (root cause #5): counted as root causes beside the truth
/// harness's [`DETECTORS`].
pub const PROBE_DETECTORS: [&str; 4] =
    ["cold-path", "latency-floor", "step-change", "periodic-tail"];

/// The detected root-cause findings of a `diagnose` document.
fn root_causes(doc: &Value, run: &str) -> Vec<FindingRef> {
    let list = doc["findings"].as_array().cloned().unwrap_or_default();
    list.iter()
        .filter(|f| f["verdict"] == "detected")
        .filter_map(|f| {
            let detector = f["detector"].as_str()?;
            let known = DETECTORS.contains(&detector) || PROBE_DETECTORS.contains(&detector);
            known.then(|| FindingRef {
                detector: detector.to_string(),
                confidence: f["confidence"].as_f64().unwrap_or(0.0),
                summary: f["summary"].as_str().unwrap_or("").to_string(),
                run: run.to_string(),
            })
        })
        .collect()
}

/// The verdict: noise first (never a silent pass), then the findings against what was
/// planted, then the fix's figure.
pub(crate) fn judge(
    name: &str,
    planted: &[&str],
    findings: Vec<FindingRef>,
    figure: Option<(Figure, Result<(), String>)>,
    noise: Option<String>,
    ev: Evidence,
    mut notes: Vec<String>,
) -> ScenarioResult {
    notes.extend(ev.foreign);
    let runs = ev.runs;
    let mut findings = findings;
    // One finding per detector (its most confident), most confident first.
    let mut seen = Vec::new();
    findings.retain(|f| {
        let new = !seen.contains(&f.detector);
        seen.push(f.detector.clone());
        new
    });
    let top = findings.first().cloned();
    let others: Vec<FindingRef> = findings.iter().skip(1).cloned().collect();
    let (figure, fix) = match figure {
        Some((f, c)) => (Some(f), c),
        None => (None, Ok(())),
    };
    let verdict = match noise {
        Some(why) => Verdict::Inconclusive { why },
        None => match findings_verdict(planted, &findings).and(fix) {
            Ok(()) => Verdict::Pass,
            Err(why) => Verdict::Fail { why },
        },
    };
    ScenarioResult {
        scenario: name.to_string(),
        attempt: 1,
        planted: planted.iter().map(|s| s.to_string()).collect(),
        top,
        others,
        figure,
        verdict,
        runs,
        notes,
    }
}

/// The top finding must be a planted cause, every planted cause must be found at or above
/// medium confidence, and nothing unplanted may reach medium.
fn findings_verdict(planted: &[&str], findings: &[FindingRef]) -> Result<(), String> {
    let unplanted: Vec<String> = findings
        .iter()
        .filter(|f| f.confidence >= MEDIUM && !planted.contains(&f.detector.as_str()))
        .map(|f| format!("{} ({:.2})", f.detector, f.confidence))
        .collect();
    if !unplanted.is_empty() {
        return Err(format!(
            "unplanted cause at or above medium confidence: {}",
            unplanted.join(", ")
        ));
    }
    if planted.is_empty() {
        return Ok(());
    }
    match findings.first() {
        None => return Err(format!("nothing found; planted {}", planted.join(", "))),
        Some(t) if !planted.contains(&t.detector.as_str()) => {
            return Err(format!(
                "top finding is {}, not a planted cause",
                t.detector
            ))
        }
        Some(_) => {}
    }
    let missed: Vec<&str> = planted
        .iter()
        .copied()
        .filter(|p| {
            !findings
                .iter()
                .any(|f| f.detector == *p && f.confidence >= MEDIUM)
        })
        .collect();
    if !missed.is_empty() {
        return Err(format!(
            "planted but not found at medium confidence: {}",
            missed.join(", ")
        ));
    }
    Ok(())
}

/// Turns a pass into a fail when the `detector` finding does not name each of `needles` in
/// its summary (the process, the buffer, the flows or the neighbour it must name).
pub(crate) fn require_named(r: &mut ScenarioResult, detector: &str, needles: &[String]) {
    if r.verdict != Verdict::Pass {
        return;
    }
    let summary = r
        .top
        .iter()
        .chain(&r.others)
        .find(|f| f.detector == detector)
        .map_or("", |f| f.summary.as_str());
    let missing: Vec<&str> = needles
        .iter()
        .map(String::as_str)
        .filter(|n| !summary.contains(n))
        .collect();
    if !missing.is_empty() {
        r.verdict = Verdict::Fail {
            why: format!("{detector} does not name {}", missing.join(", ")),
        };
    }
}

/// A scenario that could not run to its end.
pub(crate) fn failed(name: &str, planted: &[&str], why: String) -> ScenarioResult {
    ScenarioResult {
        scenario: name.to_string(),
        attempt: 1,
        planted: planted.iter().map(|s| s.to_string()).collect(),
        top: None,
        others: Vec::new(),
        figure: None,
        verdict: Verdict::Fail { why },
        runs: Vec::new(),
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(d: &str, c: f64) -> FindingRef {
        FindingRef {
            detector: d.into(),
            confidence: c,
            summary: String::new(),
            run: "r".into(),
        }
    }

    #[test]
    fn the_planted_cause_must_lead_and_nothing_else_reach_medium() {
        let p = ["nagle-stall"];
        assert!(findings_verdict(&p, &[f("nagle-stall", 0.9)]).is_ok());
        assert!(findings_verdict(&p, &[f("nagle-stall", 0.9), f("microburst", 0.3)]).is_ok());
        let e = findings_verdict(&p, &[f("nagle-stall", 0.9), f("microburst", 0.6)]);
        assert!(e.unwrap_err().contains("microburst (0.60)"));
        let e = findings_verdict(&p, &[f("microburst", 0.4), f("nagle-stall", 0.3)]);
        assert!(e.unwrap_err().contains("top finding is microburst"));
        assert!(findings_verdict(&p, &[])
            .unwrap_err()
            .contains("nothing found"));
        let e = findings_verdict(&p, &[f("nagle-stall", 0.4)]);
        assert!(e.unwrap_err().contains("not found at medium"));
        assert!(findings_verdict(&[], &[f("nagle-stall", 0.4)]).is_ok());
        assert!(findings_verdict(&[], &[f("nagle-stall", 0.5)]).is_err());
    }

    #[test]
    fn a_finding_about_another_tenants_cgroup_is_not_the_scenarios() {
        let mut g = f("noisy-neighbor", 0.9);
        g.summary = "/tailhunt-truth-lab-12/victim: run-queue p99 rose".into();
        assert!(about(&g, "/tailhunt-truth-lab-12/"));
        assert!(!about(&g, "/tailhunt-truth-lab-1/"));
        g.summary = "/tailhunt-test-base-9/victim: run-queue p99 rose".into();
        assert!(!about(&g, "/tailhunt-truth-lab-12/"));
    }

    #[test]
    fn noise_is_never_a_pass() {
        let r = judge(
            "x",
            &["nagle-stall"],
            vec![f("nagle-stall", 0.9)],
            None,
            Some("calm p99 9 ms".into()),
            Evidence::default(),
            vec![],
        );
        assert_eq!(
            r.verdict.to_string(),
            "inconclusive (host too noisy: calm p99 9 ms)"
        );
    }
}
