//! Findings kept across windows, so a finding neither vanishes because the next window is
//! quiet for a moment nor flaps on and off.
//!
//! In: each closed window's findings with the window's start and end. Out: the active
//! findings, each with [`Seen`]: since when it is active, when it was last reported, for how
//! many windows it has been active and for how many it has been missing.
//!
//! The rule: a finding is identified by (detector, subject). It becomes active with the first
//! window that reports it (`since` = that window's start). Each later window that reports it
//! refreshes its text and confidence (`last_seen` = that window's end). It stays active, with
//! its last text and confidence, through windows that do not report it, and is cleared by the
//! `clear_after`-th window in a row without it. A finding that comes back before that keeps its
//! `since`: one condition, one entry, however it flickers.

use serde::Serialize;

use crate::exposition::{FindingState, ScalarMetric};

/// Default number of windows in a row without a finding that clear it.
pub const DEFAULT_CLEAR_AFTER: u32 = 3;

/// How long a finding has been active (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Seen {
    /// Start of the first window of this active spell, ms since the Unix epoch.
    pub since_ms: i64,
    /// End of the last window that reported it, ms since the Unix epoch.
    pub last_seen_ms: i64,
    /// Closed windows since it became active, this one included.
    pub active_windows: u64,
    /// Windows in a row, up to the last closed one, that did not report it (0: the last did).
    pub missing_windows: u64,
}

/// The active findings across windows.
#[derive(Debug, Clone)]
pub struct FindingTracker {
    clear_after: u32,
    active: Vec<FindingState>,
}

fn same(a: &FindingState, b: &FindingState) -> bool {
    a.finding.detector == b.finding.detector && a.subject == b.subject
}

impl FindingTracker {
    /// A tracker that clears a finding after `clear_after` windows in a row without it (at
    /// least 1: cleared by the first window without it, the behaviour without persistence).
    pub fn new(clear_after: u32) -> FindingTracker {
        FindingTracker {
            clear_after: clear_after.max(1),
            active: Vec::new(),
        }
    }

    /// Takes one closed window's findings (window from `start_ms` to `end_ms`) and returns
    /// the active findings after it, oldest first.
    pub fn close_window(
        &mut self,
        start_ms: i64,
        end_ms: i64,
        found: Vec<FindingState>,
    ) -> &[FindingState] {
        for a in &mut self.active {
            let seen = a.seen.get_or_insert_with(Seen::default);
            seen.active_windows += 1;
            seen.missing_windows += 1;
        }
        // Two findings of one detector about one subject in one window: the first stands
        // for both.
        let mut unique: Vec<FindingState> = Vec::new();
        for f in found {
            if !unique.iter().any(|u| same(u, &f)) {
                unique.push(f);
            }
        }
        for mut f in unique {
            match self.active.iter_mut().find(|a| same(a, &f)) {
                Some(a) => {
                    let mut seen = a.seen.unwrap_or_default();
                    seen.last_seen_ms = end_ms;
                    seen.missing_windows = 0;
                    f.seen = Some(seen);
                    *a = f;
                }
                None => {
                    f.seen = Some(Seen {
                        since_ms: start_ms,
                        last_seen_ms: end_ms,
                        active_windows: 1,
                        missing_windows: 0,
                    });
                    self.active.push(f);
                }
            }
        }
        let clear_after = u64::from(self.clear_after);
        self.active
            .retain(|a| a.seen.is_some_and(|s| s.missing_windows < clear_after));
        &self.active
    }

    /// The active findings.
    pub fn active(&self) -> &[FindingState] {
        &self.active
    }
}

/// Per active finding, `tailhunt_finding_active_windows` and `tailhunt_finding_missing_windows`
/// gauges labelled `detector` and `subject`.
pub fn finding_gauges(findings: &[FindingState]) -> Vec<ScalarMetric> {
    let mut out = Vec::new();
    for f in findings {
        let seen = f.seen.unwrap_or_default();
        let labels = vec![
            ("detector".to_string(), f.finding.detector.clone()),
            ("subject".to_string(), f.subject.clone()),
        ];
        out.push(ScalarMetric {
            name: "tailhunt_finding_active_windows".into(),
            help: "Closed windows since the finding became active.".into(),
            labels: labels.clone(),
            value: seen.active_windows as f64,
        });
        out.push(ScalarMetric {
            name: "tailhunt_finding_missing_windows".into(),
            help: "Windows in a row without the finding (it is cleared when this reaches the agent's findings_clear_after).".into(),
            labels,
            value: seen.missing_windows as f64,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::{Finding, Verdict};

    fn finding(detector: &str, subject: &str, confidence: f64) -> FindingState {
        FindingState {
            subject: subject.into(),
            finding: Finding {
                detector: detector.into(),
                verdict: Verdict::Detected,
                confidence,
                summary: format!("{detector} on {subject} at {confidence}"),
                evidence: vec![],
                fix: None,
            },
            seen: None,
        }
    }

    /// Runs `windows` (each the findings of one 10 s window) through a tracker; returns the
    /// active (detector, subject, seen) after each.
    fn run(clear_after: u32, windows: &[Vec<FindingState>]) -> Vec<Vec<(String, Seen, f64)>> {
        let mut t = FindingTracker::new(clear_after);
        windows
            .iter()
            .enumerate()
            .map(|(i, found)| {
                let start = i as i64 * 10_000;
                t.close_window(start, start + 10_000, found.clone())
                    .iter()
                    .map(|f| {
                        (
                            format!("{}/{}", f.finding.detector, f.subject),
                            f.seen.unwrap(),
                            f.finding.confidence,
                        )
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_finding_stays_through_quiet_windows_and_is_cleared_after_three() {
        let gc = || finding("gc-pause", "cache", 0.8);
        let out = run(3, &[vec![gc()], vec![], vec![], vec![], vec![]]);
        let names: Vec<usize> = out.iter().map(Vec::len).collect();
        // Active in the window that reported it and the next two quiet ones; the third clears it.
        assert_eq!(names, vec![1, 1, 1, 0, 0]);
        let seen: Vec<Seen> = out[..3].iter().map(|w| w[0].1).collect();
        assert!(seen
            .iter()
            .all(|s| s.since_ms == 0 && s.last_seen_ms == 10_000));
        assert_eq!(
            seen.iter()
                .map(|s| (s.active_windows, s.missing_windows))
                .collect::<Vec<_>>(),
            vec![(1, 0), (2, 1), (3, 2)]
        );
        // Without persistence (1) the first quiet window clears it.
        let out = run(1, &[vec![gc()], vec![]]);
        assert_eq!(out[1].len(), 0);
    }

    #[test]
    fn a_flickering_finding_is_one_entry_with_its_first_since() {
        let gc = |c| finding("gc-pause", "cache", c);
        let windows = [
            vec![gc(0.5)],
            vec![],
            vec![gc(0.7)],
            vec![],
            vec![],
            vec![gc(0.9)],
        ];
        let out = run(3, &windows);
        assert!(out.iter().all(|w| w.len() == 1), "{out:?}");
        let last = &out[5][0];
        assert_eq!(last.1.since_ms, 0, "since kept from the first window");
        assert_eq!(last.1.last_seen_ms, 60_000);
        assert_eq!((last.1.active_windows, last.1.missing_windows), (6, 0));
        assert_eq!(last.2, 0.9, "text and confidence are the latest window's");
        // While missing it keeps the last reported confidence.
        assert_eq!(out[4][0].2, 0.7);
        assert_eq!(out[4][0].1.missing_windows, 2);
    }

    #[test]
    fn findings_are_told_apart_by_detector_and_subject() {
        let windows = [
            vec![
                finding("gc-pause", "cache", 0.8),
                finding("gc-pause", "db", 0.6),
            ],
            vec![finding("latency-floor", "cache", 0.9)],
            vec![
                finding("gc-pause", "db", 0.6),
                finding("gc-pause", "db", 0.4),
            ],
        ];
        let out = run(2, &windows);
        let names =
            |w: &Vec<(String, Seen, f64)>| w.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&out[1]),
            ["gc-pause/cache", "gc-pause/db", "latency-floor/cache"]
        );
        // gc-pause/cache missed two windows in a row and was cleared; the duplicate in the
        // last window is one entry.
        assert_eq!(names(&out[2]), ["gc-pause/db", "latency-floor/cache"]);
        assert_eq!(out[2][0].1.since_ms, 0);
        assert_eq!(out[2][0].2, 0.6);
        let gauges = finding_gauges(&FindingTracker::new(2).active);
        assert!(gauges.is_empty());
    }

    #[test]
    fn the_gauges_carry_the_windows_counts() {
        let mut t = FindingTracker::new(3);
        t.close_window(0, 10, vec![finding("gc-pause", "cache", 0.8)]);
        t.close_window(10, 20, vec![]);
        let g = finding_gauges(t.active());
        let v: Vec<(&str, f64)> = g.iter().map(|m| (m.name.as_str(), m.value)).collect();
        assert_eq!(
            v,
            [
                ("tailhunt_finding_active_windows", 2.0),
                ("tailhunt_finding_missing_windows", 1.0)
            ]
        );
        assert_eq!(g[0].labels[1], ("subject".to_string(), "cache".to_string()));
    }
}
