//! Writing a run's series out for other tools: CSV, JSON lines, HdrHistogram interval logs.
//!
//! In: the series of a run, one at a time, each with the name users see (`name{labels}`), and
//! the run's clock origin; a writer the caller opened (a file, standard output). Out: the bytes
//! of the format on that writer and the number of values written. One file per format.
//!
//! `tailhunt import` reads every format back. CSV and JSON lines carry each sample's intended,
//! start and end times (ns on the run's clock), its latency from the intended time and its
//! outcome, so an import rebuilds the very same samples and a second export is byte for byte
//! the first; untimed series (latencies without times) leave the times empty. Interval logs
//! hold histograms: values come back within their bucket error, counts exactly.
//!
//! ```
//! use tailhunt_model::{ClockOrigin, Outcome, Sample, Series, SeriesKind, Unit};
//! use tailhunt_report::export::{exporter, ExportFormat};
//!
//! let mut series = Series::new("latency", Unit::Nanoseconds);
//! series.push_sample(Sample::new(1_000, 1_200, 451_200, Outcome::Ok));
//! let mut out = Vec::new();
//! let mut csv = exporter(ExportFormat::Csv, &mut out, &[SeriesKind::Samples], ClockOrigin::wall(0))?;
//! assert_eq!(csv.write_series("latency{rate=50,repeat=1}", &series)?, 1);
//! csv.finish()?;
//! assert_eq!(
//!     String::from_utf8(out).unwrap(),
//!     "series,intended_ns,start_ns,end_ns,latency_ns,outcome\n\
//!      \"latency{rate=50,repeat=1}\",1000,1200,451200,450200,ok\n"
//! );
//! # Ok::<(), tailhunt_report::export::ExportError>(())
//! ```

pub mod csv;
pub mod flows;
pub mod hlog;
pub mod jsonl;

use std::io::Write;

use tailhunt_histogram::hdr::HdrError;
use tailhunt_model::{ClockOrigin, SeriesKind};
use thiserror::Error;

pub use tailhunt_model::Series;

/// A format `tailhunt export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ExportFormat {
    /// One sample (or point) per row, with a header.
    Csv,
    /// One JSON object per sample (or point).
    #[cfg_attr(feature = "clap", value(name = "jsonl"))]
    JsonLines,
    /// HdrHistogram interval log: one histogram per second of samples (values in ns).
    #[cfg_attr(feature = "clap", value(name = "hlog"))]
    HdrLog,
}

impl ExportFormat {
    /// `csv`, `jsonl` or `hlog`.
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Csv => "csv",
            ExportFormat::JsonLines => "jsonl",
            ExportFormat::HdrLog => "hlog",
        }
    }
}

/// Why an export failed.
#[derive(Debug, Error)]
pub enum ExportError {
    /// The output could not be written.
    #[error("writing the export: {0}")]
    Io(#[from] std::io::Error),
    /// CSV has one header: sample and values series cannot share a file.
    #[error(
        "the selection mixes sample series with values series (bins), which have other CSV \
         columns: choose one kind with --series, or use --format jsonl"
    )]
    MixedCsv,
    /// Values over time are not latencies.
    #[error(
        "series {0} holds values over time (bins), not latencies: export it with --format csv \
         or jsonl"
    )]
    ValuesAsHlog(String),
    /// Histograms have no samples to list.
    #[error("series {0} holds interval histograms, not samples: export it with --format hlog")]
    HistogramsAsText(String),
    /// The interval-log writer failed.
    #[error("writing interval log: {0}")]
    Hlog(#[from] HdrError),
}

impl From<::csv::Error> for ExportError {
    fn from(e: ::csv::Error) -> ExportError {
        ExportError::Io(csv_io(e))
    }
}

/// A CSV writer's error as the I/O error it is: `csv::Error` names no source, so a closed
/// pipe (`| head`, which the binary takes for success) would not show in the error's chain.
pub(crate) fn csv_io(e: ::csv::Error) -> std::io::Error {
    match e.into_kind() {
        ::csv::ErrorKind::Io(io) => io,
        other => std::io::Error::other(format!("{other:?}")),
    }
}

/// Writes series in one format.
pub trait Exporter {
    /// Writes one series under `name` (`name{labels}`, as users see it); returns the number of
    /// values written (samples, points, or histogram counts).
    fn write_series(&mut self, name: &str, series: &Series) -> Result<u64, ExportError>;
    /// Flushes what is buffered.
    fn finish(self: Box<Self>) -> Result<(), ExportError>;
}

/// An exporter of `format` writing to `out`, for a selection of series of the `kinds` given
/// (CSV needs them to choose its header; mixing samples and values is refused there). `origin`
/// is the run's clock origin, which interval logs use for their wall-clock start.
pub fn exporter<'w>(
    format: ExportFormat,
    out: &'w mut dyn Write,
    kinds: &[SeriesKind],
    origin: ClockOrigin,
) -> Result<Box<dyn Exporter + 'w>, ExportError> {
    Ok(match format {
        ExportFormat::Csv => Box::new(csv::CsvExporter::new(out, kinds)?),
        ExportFormat::JsonLines => Box::new(jsonl::JsonLinesExporter::new(out)),
        ExportFormat::HdrLog => Box::new(hlog::HlogExporter::new(out, origin)),
    })
}

/// The three times of a sample as exported: empty for untimed series, whose times are only
/// sample numbers.
fn times(series: &Series, s: &tailhunt_model::Sample) -> [Option<i64>; 3] {
    match series.timing {
        tailhunt_model::Timing::Timed => [Some(s.intended_ns), Some(s.start_ns), Some(s.end_ns)],
        tailhunt_model::Timing::Untimed => [None; 3],
    }
}
