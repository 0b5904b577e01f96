//! Units of series values.

use serde::{Deserialize, Serialize};

/// The unit of a series' values. Time is always stored as integer nanoseconds; other units
/// exist so that later sources (bytes per bin, packets, counts) are unit-honest too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Nanoseconds (every latency and duration).
    #[serde(rename = "ns")]
    Nanoseconds,
    /// Bytes.
    Bytes,
    /// Packets.
    Packets,
    /// A dimensionless count.
    Count,
    /// A ratio in 0..=1.
    Ratio,
}

impl Unit {
    /// The short name used in the store and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Nanoseconds => "ns",
            Unit::Bytes => "bytes",
            Unit::Packets => "packets",
            Unit::Count => "count",
            Unit::Ratio => "ratio",
        }
    }

    /// Inverse of [`Unit::name`].
    pub fn from_name(name: &str) -> Option<Unit> {
        [
            Unit::Nanoseconds,
            Unit::Bytes,
            Unit::Packets,
            Unit::Count,
            Unit::Ratio,
        ]
        .into_iter()
        .find(|u| u.name() == name)
    }
}
