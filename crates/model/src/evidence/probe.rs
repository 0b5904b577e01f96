//! Prober evidence: how each probe of a `probe` run fared, and how well the schedule kept time.
//!
//! In: what `tailhunt-probe` counts while it runs (it fills [`ProbeStatus`] per probe and
//! [`ScheduleDrift`] for the whole run) and records as the `probe` document beside the
//! `probe_latency{probe,kind,variant}` series. Out: the status lines `tailhunt probe` prints
//! and facts a detector may cite (a probe that kept failing, a schedule that ran late); the
//! samples themselves stay the evidence of latency.

use serde::{Deserialize, Serialize};

use super::Document;

/// The `probe` document of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// The round cadence, ns (also in the run's params as `interval_ns`).
    pub interval_ns: u64,
    /// Rounds planned and dispatched.
    pub rounds: u64,
    /// Seed of the random order and jitter.
    pub seed: u64,
    /// One status per configured probe, in configuration order.
    pub probes: Vec<ProbeStatus>,
    /// How late the scheduled probes started.
    pub drift: ScheduleDrift,
}

/// What one probe gave over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeStatus {
    /// The probe's name (the `probe` label of its series).
    pub name: String,
    /// Its kind (the `kind` label).
    pub kind: String,
    /// Its variants (the `variant` labels), in the order configured.
    pub variants: Vec<String>,
    /// The host it measures (its target without the port, as configured), when it has one: a
    /// probe's latency floor is read against the network probes of the same host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The per-measurement timeout, ns; a timeout sample ends at start + this.
    pub timeout_ns: u64,
    /// Samples stored (every outcome).
    pub samples: u64,
    /// Samples that succeeded.
    pub ok: u64,
    /// Samples that failed (refused, reset, garbage, nothing resolved, ...).
    pub errors: u64,
    /// Samples censored at the timeout.
    pub timeouts: u64,
    /// The longest run of consecutive failures (errors and timeouts).
    pub longest_failure_run: u64,
    /// Consecutive failures at the end of the run (0: the last sample succeeded).
    pub failing_now: u64,
    /// The last error's message, if any failed.
    pub last_error: Option<String>,
}

impl ProbeStatus {
    /// Whether the probe failed every time it ran in its last [`KEEPS_FAILING`] samples or
    /// more: the status line says it keeps failing.
    pub fn keeps_failing(&self) -> bool {
        self.failing_now >= KEEPS_FAILING
    }
}

/// Consecutive failures from which a probe is reported as failing.
pub const KEEPS_FAILING: u64 = 3;

/// How late scheduled probes started (actual start minus the scheduled time), ns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScheduleDrift {
    /// Scheduled probes that started.
    pub started: u64,
    /// Median lateness.
    pub p50_ns: u64,
    /// 99th percentile of lateness.
    pub p99_ns: u64,
    /// Largest lateness.
    pub max_ns: u64,
    /// Rounds whose first probe started later than a tenth of the interval.
    pub late_rounds: u64,
}

impl Document for ProbeRecord {
    const NAME: &'static str = "probe";
    const VERSION: u32 = 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_keeps_failing_from_three_failures_in_a_row() {
        let mut s = ProbeStatus {
            failing_now: 2,
            ..ProbeStatus::default()
        };
        assert!(!s.keeps_failing());
        s.failing_now = 3;
        assert!(s.keeps_failing());
        let doc = ProbeRecord {
            probes: vec![s],
            ..ProbeRecord::default()
        };
        let back: ProbeRecord =
            serde_json::from_str(&serde_json::to_string(&doc).unwrap()).unwrap();
        assert_eq!(back, doc);
    }
}
