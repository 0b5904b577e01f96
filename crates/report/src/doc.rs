//! The documents commands produce; `--json` prints them as they are.

use serde::Serialize;
use tailhunt_analyze::{compare::Comparison, Analysis};
use tailhunt_model::evidence::sweep::SweepStep;
use tailhunt_model::{Run, RunStatus};
use tailhunt_store::SeriesInfo;

/// `tailhunt import`.
#[derive(Debug, Clone, Serialize)]
pub struct ImportDoc {
    /// The new run.
    pub run_id: String,
    /// `complete`, or `partial` when the import stopped at an error.
    pub status: RunStatus,
    /// The file read.
    pub file: String,
    /// Format used.
    pub format: String,
    /// Series written.
    pub series: usize,
    /// Samples (or histogram counts) written.
    pub samples: u64,
    /// Data lines read.
    pub lines: u64,
    /// Samples per outcome.
    pub outcomes: Outcomes,
}

/// Samples per outcome.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Outcomes {
    /// Completed.
    pub ok: u64,
    /// Failed.
    pub error: u64,
    /// Timed out.
    pub timeout: u64,
}

/// `tailhunt runs`.
#[derive(Debug, Clone, Serialize)]
pub struct RunsDoc {
    /// The store read.
    pub db: String,
    /// Runs, oldest first.
    pub runs: Vec<Run>,
}

/// One analysed series.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesAnalysis {
    /// The series.
    pub series: SeriesInfo,
    /// What was found.
    pub analysis: Analysis,
    /// Which part of the path owns the tail (p99 and slower), when the run has a breakdown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<Vec<tailhunt_analyze::breakdown::PartShare>>,
    /// p99 per window of time, oldest first (timed series with enough samples), for the
    /// terminal's sparkline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_over_time: Option<OverTime>,
    /// With `--over-time`: percentiles per interval, change points and periods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<tailhunt_analyze::timeline::TimeAnalysis>,
}

/// One percentile over equal windows of a series' time range.
#[derive(Debug, Clone, Serialize)]
pub struct OverTime {
    /// Width of each window, ns.
    pub window_ns: i64,
    /// The percentile per window, ns (`None`: no samples in that window).
    pub values_ns: Vec<Option<u64>>,
}

/// The other side of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ComparisonDoc {
    /// Run compared against (the "before").
    pub baseline_run: String,
    /// Its series.
    pub baseline_series: String,
    /// Series of this run it was compared with.
    pub series: String,
    /// Result.
    pub comparison: Comparison,
}

/// `tailhunt analyze`.
#[derive(Debug, Clone, Serialize)]
pub struct AnalyzeDoc {
    /// The run.
    pub run: Run,
    /// One entry per analysed series.
    pub series: Vec<SeriesAnalysis>,
    /// Present with `--compare`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<ComparisonDoc>,
}

/// `tailhunt export` and `tailhunt lab synth` (files written).
#[derive(Debug, Clone, Serialize)]
pub struct WrittenDoc {
    /// Where it went (`-` for standard output).
    pub file: String,
    /// Format written.
    pub format: String,
    /// Values written.
    pub values: u64,
}

/// `tailhunt load`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadDoc {
    /// The run.
    pub run_id: String,
    /// Complete, or partial (stopped early).
    pub status: RunStatus,
    /// Target URL.
    pub target: String,
    /// Steps in the order they ran.
    pub steps: Vec<SweepStep>,
    /// Detector findings over the run.
    pub findings: Vec<tailhunt_model::Finding>,
    /// First error seen, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

/// `tailhunt diagnose`.
#[derive(Debug, Clone, Serialize)]
pub struct DiagnoseDoc {
    /// The run.
    pub run: Run,
    /// What the detectors found (empty: nothing wrong that they know of).
    pub findings: Vec<tailhunt_model::Finding>,
    /// Detectors that ran.
    pub detectors: Vec<String>,
    /// Whether the findings were stored in the run (not when the store is read-only).
    pub saved: bool,
}

/// `tailhunt serve` (printed when it stops).
#[derive(Debug, Clone, Serialize)]
pub struct ServeDoc {
    /// Address it listened on.
    pub listen: String,
    /// Protocol.
    pub proto: String,
    /// Connections accepted.
    pub connections: u64,
    /// Requests read.
    pub requests: u64,
    /// Replies written.
    pub replies: u64,
    /// Malformed requests.
    pub bad_requests: u64,
}
