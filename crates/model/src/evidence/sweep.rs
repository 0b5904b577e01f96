//! A load run's steps: which series holds which offered rate, exactly.
//!
//! In: what `tailhunt load` ran (one step per rate and repetition). Out: [`SweepRecord`], the
//! `sweep` document, which the `latency-rises-as-load-falls` detector reads to put each series
//! at its rate. The rate is the number the user asked for (`--sweep 1234,1231` stays two
//! rates), never one parsed back from a series label.

use serde::{Deserialize, Serialize};

use super::Document;

/// One step of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepStep {
    /// Offered rate, requests per second.
    #[serde(rename = "rate")]
    pub rate_per_s: f64,
    /// Repetition, 1-based.
    #[serde(default = "first")]
    pub repeat: usize,
    /// Display name of the series holding its measured samples (`latency{rate=1234}`).
    pub series: String,
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
