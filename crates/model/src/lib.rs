//! The tailhunt data model.
//!
//! # Brief overview
//!
//! Everything tailhunt measures flows one way: sources produce [`Series`], a [`Run`] groups the
//! series of one invocation, analysis reads them back and detectors turn evidence into
//! [`Finding`]s. This crate holds those types and nothing else: no I/O, no printing.
//!
//! Times are integer nanoseconds. A run records a wall-clock origin and a monotonic origin taken
//! at the same instant ([`ClockOrigin`]), so sample times (monotonic) convert to wall-clock time
//! and line up with captures and kernel events.
//!
//! ```
//! use tailhunt_model::{Outcome, Sample, Series, SeriesData, Unit};
//!
//! let mut series = Series::new("latency", Unit::Nanoseconds);
//! series.push_sample(Sample::new(1_000, 1_200, 451_200, Outcome::Ok));
//! assert_eq!(series.samples().unwrap()[0].latency_ns(), 450_200);
//! assert!(matches!(series.data, SeriesData::Samples(_)));
//! ```
#![deny(missing_docs)]

pub mod evidence;
mod finding;
mod kind;
mod run;
mod sample;
mod series;
mod sink;
mod time;
mod unit;
pub mod units;

pub use finding::{Evidence, Finding, Verdict};
pub use kind::RunKind;
pub use run::{Run, RunStatus};
pub use sample::{Outcome, Sample, SamplePart};
pub use series::{
    display_name, parse_display_name, IntervalHistogram, Labels, Point, Series, SeriesData, Timing,
};
pub use sink::{SeriesKind, SeriesMeta, SeriesSink, SinkError};
pub use time::{
    format_duration_ns, format_rate, parse_duration_ns, unit_scale_ns, ClockOrigin, DurationNs,
    DurationParseError,
};
pub use unit::Unit;

/// The one nearest-rank rule for percentiles, in integer arithmetic (from the histogram crate,
/// here for sources that use no histograms).
pub use tailhunt_histogram::quantile;
