//! A run: the series and findings of one invocation.

use serde::{Deserialize, Serialize};

use crate::{ClockOrigin, Finding, Series};

/// Whether a run finished writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Still being written, or its writer died (kill -9, power loss): what is there is kept and
    /// marked partial.
    Partial,
    /// Finished.
    Complete,
}

impl RunStatus {
    /// Name used in the store and JSON.
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Partial => "partial",
            RunStatus::Complete => "complete",
        }
    }

    /// Inverse of [`RunStatus::name`].
    pub fn from_name(name: &str) -> Option<RunStatus> {
        match name {
            "partial" => Some(RunStatus::Partial),
            "complete" => Some(RunStatus::Complete),
            _ => None,
        }
    }
}

/// One invocation of a measuring command.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Short unique id (hex); users may type any unique prefix.
    pub id: String,
    /// What produced it: `import`, `load`, `pcap`, ...
    pub kind: String,
    /// Clock origins, read when the run started.
    pub origin: ClockOrigin,
    /// The parameters it ran with (flags, input file, host facts), as JSON.
    pub params: serde_json::Value,
    /// Complete or partial.
    pub status: RunStatus,
    /// Its series.
    pub series: Vec<Series>,
    /// Findings attached to it.
    pub findings: Vec<Finding>,
}
