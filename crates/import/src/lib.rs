//! Importing latency numbers that other tools wrote.
//!
//! # Brief overview
//!
//! A load generator, a tracing tool or a spreadsheet leaves latencies in a file; this crate reads
//! them and streams them as series into a [`SeriesSink`] (the store, or a `Vec<Series>` in
//! tests). Three formats:
//!
//! * **CSV** (also TSV and `;`-separated): a single column of latencies, `timestamp,latency`, or
//!   any columns named by a header (`ts_ms,latency_us,status,series`).
//! * **JSON lines**: one object per line with the same names as keys.
//! * **HdrHistogram interval logs** (`.hlog`): one histogram series per tag.
//!
//! Latencies are written with a unit (`12ms`, `450us`, `0.45 ms`) or as bare numbers whose unit
//! the column name (`latency_ms`, `rt (s)`) or [`ImportOptions::unit`] gives. Times are seconds
//! (or the column's unit), RFC 3339 strings, or durations since the start; numbers above 1e9
//! seconds are epoch times. With times, samples are [`Timing::Timed`](tailhunt_model::Timing)
//! and, for epoch times, are epoch nanoseconds; without, they are `Untimed` and numbered from 0.
//! An `intended`/`scheduled` column next to `start` keeps the schedule, so latency counts from
//! the intended send time (no coordinated omission).
//!
//! Text formats are read line by line in constant memory. Errors name the file, the line, the
//! offending text and the fix; on a data error the samples of the lines before it have been
//! pushed to the sink (the store keeps them as a partial run).
//!
//! ```
//! use tailhunt_import::{import_reader, Format, ImportOptions};
//! use tailhunt_model::Series;
//!
//! let csv = "ts,latency_ms,status\n0.00,12.5,200\n0.25,450,503\n";
//! let mut series: Vec<Series> = Vec::new();
//! let summary =
//!     import_reader("run.csv", &mut csv.as_bytes(), &ImportOptions::default(), &mut series)?;
//! assert_eq!(summary.format, Format::Csv);
//! assert_eq!((summary.samples, summary.outcomes), (2, [1, 1, 0]));
//! let samples = series[0].samples().unwrap();
//! assert_eq!(samples[1].latency_ns(), 450_000_000);
//! assert_eq!(samples[1].intended_ns, 250_000_000);
//! # Ok::<(), tailhunt_import::ImportError>(())
//! ```
#![deny(missing_docs)]

mod csv;
mod emit;
mod error;
mod hlog;
mod jsonl;
mod lines;
mod names;
mod values;

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use tailhunt_model::SeriesSink;

use crate::emit::Emitter;
pub use crate::error::ImportError;

/// A file format this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// Comma-, tab- or semicolon-separated values.
    Csv,
    /// One JSON object per line.
    #[cfg_attr(feature = "clap", value(name = "jsonl"))]
    JsonLines,
    /// HdrHistogram interval log.
    #[cfg_attr(feature = "clap", value(name = "hlog"))]
    HdrLog,
}

impl Format {
    /// The short name: `csv`, `jsonl` or `hlog`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::JsonLines => "jsonl",
            Format::HdrLog => "hlog",
        }
    }

    /// Inverse of [`Format::name`], case-insensitive, also accepting `tsv`, `json`, `ndjson`
    /// and `hdr`.
    pub fn from_name(name: &str) -> Result<Format, ImportError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "csv" | "tsv" => Ok(Format::Csv),
            "jsonl" | "json" | "ndjson" => Ok(Format::JsonLines),
            "hlog" | "hdr" | "hdrlog" => Ok(Format::HdrLog),
            _ => Err(ImportError::UnknownFormat {
                name: name.to_string(),
            }),
        }
    }

    /// The format a file name's extension says, if it says one.
    fn from_extension(name: &str) -> Option<Format> {
        let ext = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "csv" | "tsv" | "txt" => Some(Format::Csv),
            "json" | "jsonl" | "ndjson" => Some(Format::JsonLines),
            "hlog" => Some(Format::HdrLog),
            _ => None,
        }
    }

    /// The format the start of a file looks like: an interval log has `#[` headers or
    /// `HISTF` (the base64 of an HdrHistogram cookie), JSON lines open with `{`, the rest is CSV.
    fn sniff(head: &[u8]) -> Format {
        let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
        let start = head
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(head.len());
        let head = head.get(start..).unwrap_or_default();
        if head.starts_with(b"#[") || head.windows(5).any(|w| w == b"HISTF") {
            Format::HdrLog
        } else if head.starts_with(b"{") {
            Format::JsonLines
        } else {
            Format::Csv
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to read an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    /// The format; `None` detects it from the extension (`.csv`/`.tsv`/`.txt`,
    /// `.json`/`.jsonl`/`.ndjson`, `.hlog`), else from the content.
    pub format: Option<Format>,
    /// Unit of bare latency numbers (`ns`, `us`, `ms`, `s`) when the column name gives none (a
    /// unit in the name wins); for interval logs, the unit the log's values are in (default ns).
    pub unit: Option<String>,
    /// Series name when the input does not name its series.
    pub series_name: String,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            format: None,
            unit: None,
            series_name: "latency".to_string(),
        }
    }
}

/// What an import read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// The format read.
    pub format: Format,
    /// Series opened in the sink.
    pub series: usize,
    /// Samples (for interval logs: histogram counts) written.
    pub samples: u64,
    /// Data lines read (not counting blanks, comments and the header); intervals for logs.
    pub lines: u64,
    /// With epoch timestamps, the earliest, in ns since the epoch. Sample times are then epoch
    /// ns too, so the run's clock origin is `ClockOrigin { wall_ns: t, mono_ns: t }`.
    pub first_epoch_ns: Option<i64>,
    /// Samples that were ok, errors and timeouts, in that order.
    pub outcomes: [u64; 3],
}

impl ImportSummary {
    pub(crate) fn new(format: Format) -> ImportSummary {
        ImportSummary {
            format,
            series: 0,
            samples: 0,
            lines: 0,
            first_epoch_ns: None,
            outcomes: [0; 3],
        }
    }
}

/// Bytes read at a time from a file.
const READ_BUFFER_BYTES: usize = 1 << 16;

/// Imports the file at `path` into `sink`; see [`import_reader`]. Messages name the file as
/// `path` is written.
pub fn import_path(
    path: &Path,
    opts: &ImportOptions,
    sink: &mut dyn SeriesSink,
) -> Result<ImportSummary, ImportError> {
    let file = File::open(path).map_err(|source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    import_reader(&path.display().to_string(), &mut reader, opts, sink)
}

/// Imports from `reader` into `sink`; `name` is the file name used for format detection and in
/// messages (`-` for stdin, shown as `<stdin>`).
///
/// Series are opened on first sight and samples pushed in chunks of 8192 as lines are read. On
/// any error the import stops; what was pushed stays pushed, and on a data error the samples of
/// every line before the bad one have been pushed.
pub fn import_reader(
    name: &str,
    reader: &mut dyn BufRead,
    opts: &ImportOptions,
    sink: &mut dyn SeriesSink,
) -> Result<ImportSummary, ImportError> {
    let file = if name == "-" { "<stdin>" } else { name };
    let unit = match opts.unit.as_deref() {
        None => None,
        Some(u) => Some(
            names::canonical_unit(&u.trim().to_ascii_lowercase()).ok_or_else(|| {
                ImportError::UnknownUnit {
                    unit: u.to_string(),
                }
            })?,
        ),
    };
    let format = match opts.format.or_else(|| Format::from_extension(name)) {
        Some(f) => f,
        None => Format::sniff(reader.fill_buf().map_err(|source| ImportError::Io {
            path: file.into(),
            source,
        })?),
    };
    let text_reader = match format {
        Format::HdrLog => return hlog::read(file, reader, unit, &opts.series_name, sink),
        Format::Csv => csv::read,
        Format::JsonLines => jsonl::read,
    };
    let mut em = Emitter::new(file, format, &opts.series_name, sink);
    match text_reader(file, reader, unit, &mut em) {
        Ok(()) => em.finish(),
        Err(e) => Err(em.fail(e)),
    }
}

/// Test helper: imports `text` as if read from a file called `name`.
#[cfg(test)]
pub(crate) fn import_text(
    name: &str,
    text: &str,
    opts: &ImportOptions,
) -> Result<(ImportSummary, Vec<tailhunt_model::Series>), ImportError> {
    let mut series = Vec::new();
    let summary = import_reader(name, &mut text.as_bytes(), opts, &mut series)?;
    Ok((summary, series))
}
