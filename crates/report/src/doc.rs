//! The documents commands produce; `--json` prints them as they are.

use serde::Serialize;
use tailhunt_analyze::{compare::Comparison, Analysis};
use tailhunt_model::RunStatus;
use tailhunt_store::{RunInfo, SeriesInfo};

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
    pub runs: Vec<RunInfo>,
}

/// One analysed series.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesAnalysis {
    /// The series.
    pub series: SeriesInfo,
    /// What was found.
    pub analysis: Analysis,
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
    pub run: RunInfo,
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
