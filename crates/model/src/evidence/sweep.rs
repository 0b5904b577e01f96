//! A load run's steps: which series holds which offered rate, exactly.
//!
//! In: what `tailhunt load` ran and measured, one [`SweepStep`] per rate and repetition.
//! Out: [`SweepRecord`], the `sweep` document, which the `latency-rises-as-load-falls`
//! detector reads to put each series at its rate and the report prints. The rate is the number the user asked for (`--sweep 1234,1231` stays two
//! rates), never one parsed back from a series label.

use serde::{Deserialize, Serialize};

use super::Document;

/// Percentiles of a step's latency from the intended send time, ns (nearest rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepLatency {
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

/// One step of a sweep: what it offered, where its samples are, and what it measured. Runs
/// stored before some fields existed read them as zero or absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepStep {
    /// Offered rate, requests per second.
    #[serde(rename = "rate")]
    pub rate_per_s: f64,
    /// Repetition, 1-based.
    #[serde(default = "first")]
    pub repeat: usize,
    /// Display name of the series holding its measured samples (`latency{rate=1234}`).
    pub series: String,
    /// Requests scheduled in the measured window: `sent + unsent`.
    #[serde(default)]
    pub scheduled: u64,
    /// Written to a socket in the measured window: `ok + errors + timeouts`.
    #[serde(default)]
    pub sent: u64,
    /// Never written (no usable connection before their timeout, or the send failed).
    #[serde(default)]
    pub unsent: u64,
    /// Sent and answered ok.
    #[serde(default)]
    pub ok: u64,
    /// Sent and failed (an error reply, a broken or refused connection).
    #[serde(default)]
    pub errors: u64,
    /// Sent and not answered within the timeout.
    #[serde(default)]
    pub timeouts: u64,
    /// Ok completions per second of the time the step actually ran.
    #[serde(default)]
    pub achieved_rate: f64,
    /// Warm-up requests, kept apart (their own series) and in none of the counts above.
    #[serde(default)]
    pub warmup_samples: u64,
    /// Latency from the intended send time (absent without samples).
    #[serde(default)]
    pub latency_ns: Option<StepLatency>,
    /// 99th percentile of send lag over the sent requests, ns.
    #[serde(default)]
    pub send_lag_p99_ns: i64,
    /// The client's own lateness over the sent requests: intended to actual send time, ns
    /// (absent without sent requests, and in runs stored before it existed).
    #[serde(default)]
    pub client_lateness_ns: Option<StepLatency>,
    /// Service time over the sent requests: actual send to the reply (or the timeout or
    /// error), ns. Lateness + service = latency for every request.
    #[serde(default)]
    pub service_ns: Option<StepLatency>,
    /// CPU share the busiest client thread used (0..1).
    #[serde(default)]
    pub client_cpu: f64,
    /// Host CPU busy share during the step.
    #[serde(default)]
    pub cpu_busy: f64,
    /// Steal share during the step.
    #[serde(default)]
    pub steal: f64,
    /// Host TCP retransmissions during the step.
    #[serde(default)]
    pub tcp_retransmits: u64,
    /// The longest time no response came while requests were outstanding, ns (when at least
    /// 100 ms and 5x the median latency).
    #[serde(default)]
    pub silence_ns: Option<i64>,
    /// What held requests back, when something did: `client-cpu`, `server`, `pool`,
    /// `host-late`.
    #[serde(default)]
    pub bottleneck: Option<String>,
    /// Whether a signal cut it short.
    #[serde(default)]
    pub interrupted: bool,
    /// Set when the server went away during the step: what happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_lost: Option<String>,
    /// Warnings about the measurement.
    #[serde(default)]
    pub warnings: Vec<String>,
}

fn first() -> usize {
    1
}

/// The `sweep` document: every step in the order it ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepRecord {
    /// Steps in the order they ran. Two steps may share a series name only in runs written
    /// before rates were labelled exactly; the k-th such step then holds the k-th such series.
    pub steps: Vec<SweepStep>,
}

impl Document for SweepRecord {
    const NAME: &'static str = "sweep";
    const VERSION: u32 = 1;

    /// Load runs have always kept their steps, with the exact rate, as `params.steps`.
    fn from_params(params: &serde_json::Value) -> Option<Result<Self, String>> {
        let steps = params.get("steps")?;
        Some(
            serde_json::from_value::<Vec<SweepStep>>(steps.clone())
                .map(|steps| SweepRecord { steps })
                .map_err(|e| e.to_string()),
        )
    }
}
