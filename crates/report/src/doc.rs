//! The documents commands produce; `--json` prints them as they are.

use serde::Serialize;
use tailhunt_analyze::{compare::Comparison, Analysis};
use tailhunt_model::Run;
use tailhunt_model::RunStatus;
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

/// One step of `tailhunt load`.
#[derive(Debug, Clone, Serialize)]
pub struct StepDoc {
    /// Offered rate, requests/s.
    pub rate: f64,
    /// Repetition (1-based).
    pub repeat: usize,
    /// Series holding its measured samples.
    pub series: String,
    /// Requests scheduled in the measured window: `sent + unsent`.
    pub scheduled: u64,
    /// Written to a socket in the measured window: `ok + errors + timeouts`.
    pub sent: u64,
    /// Never written (no usable connection before their timeout, or the send failed).
    pub unsent: u64,
    /// Sent and answered ok.
    pub ok: u64,
    /// Sent and failed (an error reply, a broken or refused connection).
    pub errors: u64,
    /// Sent and not answered within the timeout.
    pub timeouts: u64,
    /// Ok completions per second of the time the step actually ran.
    pub achieved_rate: f64,
    /// Warm-up requests, kept apart (their own series) and in none of the counts above.
    pub warmup_samples: u64,
    /// Latency from the intended send time: p50/p90/p99/p99.9/max, ns (absent without samples).
    pub latency_ns: Option<LatencyDoc>,
    /// 99th percentile of send lag over the sent requests, ns.
    pub send_lag_p99_ns: i64,
    /// CPU share the busiest client thread used (0..1).
    pub client_cpu: f64,
    /// Host CPU busy share during the step.
    pub cpu_busy: f64,
    /// Steal share during the step.
    pub steal: f64,
    /// Host TCP retransmissions during the step.
    pub tcp_retransmits: u64,
    /// The longest time no response came while requests were outstanding, ns (when at least
    /// 100 ms and 5x the median latency).
    pub silence_ns: Option<i64>,
    /// What held requests back, when something did: `client-cpu`, `server`, `pool`,
    /// `host-late`.
    pub bottleneck: Option<String>,
    /// Whether a signal cut it short.
    pub interrupted: bool,
    /// Set when the server went away during the step: what happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_lost: Option<String>,
    /// Warnings about the measurement.
    pub warnings: Vec<String>,
}

/// Percentiles of a step.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyDoc {
    /// Median.
    pub p50: u64,
    /// 90th.
    pub p90: u64,
    /// 99th.
    pub p99: u64,
    /// 99.9th.
    pub p999: u64,
    /// Largest.
    pub max: u64,
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
    pub steps: Vec<StepDoc>,
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
