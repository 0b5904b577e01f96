//! A run: the series and findings of one invocation.

use serde::{Deserialize, Serialize};

use crate::{ClockOrigin, RunKind};

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

/// One invocation of a measuring command, as the store lists it: what produced it, its
/// parameters and how much it holds. Its series and findings are read from the store by id.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// Short unique id (hex); users may type any unique prefix.
    pub id: String,
    /// What produced it.
    pub kind: RunKind,
    /// `partial` or `complete`.
    pub status: RunStatus,
    /// When it was recorded, epoch ns.
    pub created_wall_ns: i64,
    /// Clock origins, read when the run started.
    pub origin: ClockOrigin,
    /// The parameters it ran with (flags, input file, host facts), as a JSON object.
    pub params: serde_json::Value,
    /// Number of series.
    pub series: u64,
    /// Samples (or histogram counts, or values) stored, over all series: a series worked out
    /// from another when read (a load step's `client_lateness` and `service`) adds none.
    pub samples: u64,
}
