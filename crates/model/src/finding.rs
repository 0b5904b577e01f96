//! What a detector concluded, with the evidence.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A detector's verdict about its root cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The cause is present.
    Detected,
    /// The evidence speaks against it.
    RuledOut,
    /// Not enough evidence either way.
    Inconclusive,
    /// Not a cause but a trap in the measurement itself (a fragile percentile, say).
    Warning,
}

/// One piece of evidence: a series (by display name), an optional time range, and the numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Series the evidence comes from.
    pub series: String,
    /// Time range `[start, end)` in ns on the run's monotonic clock, when it is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_ns: Option<(i64, i64)>,
    /// Named numbers, units in the names (`p90_ns`, `share_below_gap`).
    pub values: BTreeMap<String, f64>,
    /// One sentence saying what the numbers show.
    pub note: String,
}

/// A detector's conclusion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Detector name, e.g. `fragile-percentile`.
    pub detector: String,
    /// Verdict.
    pub verdict: Verdict,
    /// Confidence in 0..=1.
    pub confidence: f64,
    /// One-line summary for people.
    pub summary: String,
    /// The evidence behind it.
    pub evidence: Vec<Evidence>,
    /// Suggested fix, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}
