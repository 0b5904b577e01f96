//! Turning read records into samples and streaming them into the sink.
//!
//! In: one [`Record`] per data line (latency, times, outcome, series name), from the CSV or the
//! JSON-lines reader. Out: [`Sample`]s pushed to a [`SeriesSink`] in chunks, series opened on
//! first sight, and the counts of the [`ImportSummary`]. The rules that make a sample from the
//! times a tool wrote live here, once, for every text format.
//!
//! A series name of the form `name{key=value,...}` (as `tailhunt export` writes it) opens the
//! series `name` with those labels. Each series is timed or untimed by its first record.

use std::collections::HashMap;

use tailhunt_model::{
    parse_display_name, Labels, Outcome, Sample, SeriesKind, SeriesMeta, SeriesSink, Timing, Unit,
};

use crate::error::{shorten, LineError};
use crate::values::Instant;
use crate::{Format, ImportError, ImportSummary};

/// Samples buffered (over all series) before they are pushed to the sink.
const CHUNK: usize = 8192;

/// More distinct series than this is taken as a mistake (a column of ids read as series names),
/// not as data: each series costs the store a table entry.
const MAX_SERIES: usize = 10_000;

/// What one data line said, already parsed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Record<'a> {
    /// Latency, ns.
    pub latency_ns: Option<i64>,
    /// Generic timestamp.
    pub ts: Option<Instant>,
    /// Scheduled send time.
    pub intended: Option<Instant>,
    /// Actual send time.
    pub start: Option<Instant>,
    /// Completion time.
    pub end: Option<Instant>,
    /// How the request ended (ok when the line does not say).
    pub outcome: Option<Outcome>,
    /// Series name, when the line names one.
    pub series: Option<&'a str>,
}

impl Record<'_> {
    fn is_timed(&self) -> bool {
        self.ts.is_some() || self.intended.is_some() || self.start.is_some() || self.end.is_some()
    }
}

struct OpenSeries {
    handle: usize,
    timing: Timing,
    pending: Vec<Sample>,
    /// Samples so far: the time of the next untimed sample.
    count: u64,
}

/// Streams records of one file into a sink.
pub(crate) struct Emitter<'a> {
    file: &'a str,
    default_name: &'a str,
    sink: &'a mut dyn SeriesSink,
    series: Vec<OpenSeries>,
    by_name: HashMap<String, usize>,
    default_series: Option<usize>,
    pending: usize,
    /// Absolute (epoch) or relative times, decided by the first time seen.
    absolute: Option<bool>,
    summary: ImportSummary,
}

impl<'a> Emitter<'a> {
    pub fn new(
        file: &'a str,
        format: Format,
        default_name: &'a str,
        sink: &'a mut dyn SeriesSink,
    ) -> Emitter<'a> {
        Emitter {
            file,
            default_name,
            sink,
            series: Vec::new(),
            by_name: HashMap::new(),
            default_series: None,
            pending: 0,
            absolute: None,
            summary: ImportSummary::new(format),
        }
    }

    /// Counts a data line (one that is neither blank nor a comment nor the header).
    pub fn count_line(&mut self) {
        self.summary.lines += 1;
    }

    /// Turns `rec` into a sample of its series; `line` (1-based `line_no`) is the whole line,
    /// for messages.
    pub fn push(&mut self, rec: &Record<'_>, line: &str, line_no: u64) -> Result<(), ImportError> {
        self.push_inner(rec, line).map_err(|e| match e {
            Failure::Line(e) => e.at(self.file, line_no),
            Failure::Import(e) => e,
        })
    }

    fn push_inner(&mut self, rec: &Record<'_>, line: &str) -> Result<(), Failure> {
        let name = rec.series.filter(|s| !s.is_empty());
        let timing = self.check_clock(name, rec, line)?;
        let outcome = rec.outcome.unwrap_or(Outcome::Ok);
        // Build the sample before opening its series, so a bad line opens nothing.
        let mut sample = match timing {
            Timing::Timed => timed_sample(rec, outcome, line)?,
            Timing::Untimed => {
                let latency = rec.latency_ns.ok_or_else(|| no_latency(line))?;
                Sample::from_latency(0, latency, outcome)
            }
        };
        let slot = self.slot(name, timing)?;
        let Some(series) = self.series.get_mut(slot) else {
            return Ok(());
        };
        if timing == Timing::Untimed {
            let at = i64::try_from(series.count).unwrap_or(i64::MAX);
            sample = Sample::from_latency(at, sample.latency_ns(), outcome);
        }
        series.pending.push(sample);
        series.count += 1;
        if self.absolute == Some(true) {
            let first = self
                .summary
                .first_epoch_ns
                .get_or_insert(sample.intended_ns);
            *first = (*first).min(sample.intended_ns);
        }
        self.summary.outcomes[usize::from(outcome.code()).min(2)] += 1;
        self.summary.samples += 1;
        self.pending += 1;
        if self.pending >= CHUNK {
            self.flush().map_err(Failure::Import)?;
        }
        Ok(())
    }

    /// Whether the samples of series `name` are timed (decided by its first line), after
    /// checking that this line agrees, and that its times are epoch times exactly when the
    /// file's first time was.
    fn check_clock(
        &mut self,
        name: Option<&str>,
        rec: &Record<'_>,
        line: &str,
    ) -> Result<Timing, Failure> {
        let timed = rec.is_timed();
        let timing = match self.find(name) {
            Some(slot) => self.series[slot].timing,
            None if timed => Timing::Timed,
            None => Timing::Untimed,
        };
        if timed != (timing == Timing::Timed) {
            let reason = if timed {
                "this line has a time but the lines before it of the same series have none; give every line a time or none"
            } else {
                "this line has no time but the lines before it of the same series have one; give every line a time"
            };
            return Err(line_error(line, reason));
        }
        let times = [rec.ts, rec.intended, rec.start, rec.end];
        for t in times.into_iter().flatten() {
            let absolute = *self.absolute.get_or_insert(t.absolute);
            if absolute != t.absolute {
                let reason = if absolute {
                    "this line has a relative time but earlier times are epoch times; use one kind in a file"
                } else {
                    "this line has an epoch time but earlier times are relative; use one kind in a file"
                };
                return Err(line_error(line, reason));
            }
        }
        Ok(timing)
    }

    /// The index in `self.series` of the series named `name` (the default one for `None`), if
    /// it is open.
    fn find(&self, name: Option<&str>) -> Option<usize> {
        match name {
            None => self.default_series,
            Some(n) => self.by_name.get(n).copied(),
        }
    }

    /// The index in `self.series` of the series named `name` (the default one for `None`),
    /// opening it with `timing` on first sight.
    fn slot(&mut self, name: Option<&str>, timing: Timing) -> Result<usize, Failure> {
        if let Some(slot) = self.find(name) {
            return Ok(slot);
        }
        if self.series.len() >= MAX_SERIES {
            let n = name.unwrap_or(self.default_name);
            return Err(Failure::Line(LineError::new(
                n,
                format!(
                    "more than {MAX_SERIES} series (new one '{}'); is the series/name column \
                     really a series name? rename it to import everything as one series",
                    shorten(n)
                ),
            )));
        }
        let text = name.unwrap_or(self.default_name);
        let (name_only, labels) =
            parse_display_name(text).unwrap_or_else(|| (text.to_string(), Labels::new()));
        let meta = SeriesMeta {
            name: name_only,
            labels,
            unit: Unit::Nanoseconds,
            timing,
            kind: SeriesKind::Samples,
        };
        let handle = self.sink.open_series(&meta).map_err(|source| {
            Failure::Import(ImportError::Sink {
                file: self.file.to_string(),
                source,
            })
        })?;
        let slot = self.series.len();
        self.series.push(OpenSeries {
            handle,
            timing,
            pending: Vec::new(),
            count: 0,
        });
        match name {
            None => self.default_series = Some(slot),
            Some(n) => {
                self.by_name.insert(n.to_string(), slot);
            }
        }
        self.summary.series += 1;
        Ok(slot)
    }

    /// Pushes every pending sample.
    pub fn flush(&mut self) -> Result<(), ImportError> {
        for s in &mut self.series {
            if s.pending.is_empty() {
                continue;
            }
            self.sink
                .push_samples(s.handle, &s.pending)
                .map_err(|source| ImportError::Sink {
                    file: self.file.to_string(),
                    source,
                })?;
            s.pending.clear();
        }
        self.pending = 0;
        Ok(())
    }

    /// Flushes and returns the summary; an import without samples is an error.
    pub fn finish(mut self) -> Result<ImportSummary, ImportError> {
        self.flush()?;
        if self.summary.samples == 0 {
            return Err(ImportError::Empty {
                file: self.file.to_string(),
            });
        }
        Ok(self.summary)
    }

    /// On a data error: pushes the samples of the lines before it (the store keeps partial
    /// imports as partial runs), then hands the error back. A sink error while doing so loses
    /// to the data error, which is the one the user must fix.
    pub fn fail(mut self, e: ImportError) -> ImportError {
        if !matches!(e, ImportError::Sink { .. }) {
            let _ = self.flush();
        }
        e
    }
}

enum Failure {
    Line(LineError),
    Import(ImportError),
}

fn line_error(line: &str, reason: &str) -> Failure {
    Failure::Line(LineError::new(
        line,
        format!("{reason}: '{}'", shorten(line)),
    ))
}

fn no_latency(line: &str) -> Failure {
    line_error(
        line,
        "no latency on this line (name it latency, latency_ms, duration_us, rt or elapsed)",
    )
}

/// A sample from the times of a line: intended, else start, else the timestamp is when the
/// request was sent; it ends at the end time when there is one (times are exact where a
/// latency column may be rounded or measured from elsewhere: `tailhunt export` writes both, and
/// its latency counts from the intended time), else `latency` after the actual start.
fn timed_sample(rec: &Record<'_>, outcome: Outcome, line: &str) -> Result<Sample, Failure> {
    let Some(intended) = rec.intended.or(rec.start).or(rec.ts) else {
        return Err(line_error(
            line,
            "an end time without a start time; add a start, timestamp or latency column",
        ));
    };
    let start = rec.start.unwrap_or(intended).ns;
    let end = match (rec.end, rec.latency_ns) {
        (Some(end), _) if end.ns >= start => end.ns,
        (Some(_), _) => return Err(line_error(line, "the end time is before the start time")),
        (None, Some(latency)) => start.saturating_add(latency),
        (None, None) => return Err(no_latency(line)),
    };
    Ok(Sample::new(intended.ns, start, end, outcome))
}
