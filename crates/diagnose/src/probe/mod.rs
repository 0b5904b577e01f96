//! Detectors over time and across variants, for probe runs (and timestamped imports): the
//! measurement traps and cold paths of root cause #5.
//!
//! The story (DESIGN.md, root cause #5): a latency benchmark service ran a growing set of
//! probes every 10 s for months (ping in-zone and cross-zone, ping by DNS name and by IP, a
//! request twice in a row on one connection, a memcache read, a database row read, a block
//! read) and kept every sample. Looking at the samples over time, not at one histogram, found:
//! a step on one date; the tail of one service oscillating on a period; a daily cycle; an
//! in-memory lookup whose *minimum* was 5 ms where the network gave 0.45 ms; 10-20 ms spikes
//! from DNS lookups and cold connections; and a p90 that read 12, 9 and 0.77 ms for three
//! nearly equal variants because it sat on a gap between modes. One module per finding:
//!
//! - [`step`]: `step-change`, a change point in the per-interval percentiles.
//! - [`periodic`]: `periodic-tail`, a period in p99 (the tail only, or with the median).
//! - [`floor`]: `latency-floor`, a probe whose fastest sample is far above the network's.
//! - [`cold`]: `cold-path`, one variant of a probe slower than its sibling, round by round.
//! - [`fragile_time`]: `fragile-percentile` per interval: a percentile that flips between
//!   modes from interval to interval.
//!
//! In: [`ProbeSeries`] (a series' display name, labels and samples) and, per series, its
//! [`tailhunt_analyze::timeline::TimeAnalysis`]. Out: findings whose evidence names the series,
//! the time ranges and the numbers.

pub mod cold;
pub mod floor;
pub mod fragile_time;
pub mod periodic;
pub mod step;

pub use tailhunt_analyze::timeline::format_offset;
use tailhunt_model::{format_duration_ns, Labels, Sample};

/// Detectors run on probe runs.
pub const DETECTORS: [&str; 5] = [
    step::DETECTOR,
    periodic::DETECTOR,
    floor::DETECTOR,
    cold::DETECTOR,
    crate::fragile::DETECTOR,
];

/// One stored latency series of a probe (or a timestamped import).
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSeries {
    /// `probe_latency{kind=dns,probe=resolver,variant=by-name}`.
    pub display_name: String,
    /// Its labels (`probe`, `kind`, `variant`, and the user's).
    pub labels: Labels,
    /// Its samples.
    pub samples: Vec<Sample>,
}

impl ProbeSeries {
    /// A label's value, or "".
    pub fn label(&self, key: &str) -> &str {
        self.labels.get(key).map_or("", String::as_str)
    }

    /// `resolver (dns, by-name)`: how a probe is named in sentences.
    pub fn who(&self) -> String {
        let probe = self.label("probe");
        if probe.is_empty() {
            return self.display_name.clone();
        }
        match (self.label("kind"), self.label("variant")) {
            ("", _) => probe.to_string(),
            (k, "" | "default") => format!("{probe} ({k})"),
            (k, v) => format!("{probe} ({k}, {v})"),
        }
    }
}

fn ns(v: f64) -> String {
    format_duration_ns(v)
}
