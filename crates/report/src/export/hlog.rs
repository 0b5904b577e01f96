//! HdrHistogram interval-log export: each series becomes tagged intervals of one second
//! (counted from its first intended time), or one interval when the series is untimed;
//! histogram series are written interval for interval. Values are in ns.
//!
//! Tags cannot hold commas or spaces, so a series name's label separators are written as `;`
//! (`latency{rate=50;repeat=1}`, which `tailhunt import` reads back as the same labels) and
//! spaces as `_`.

use std::io::Write;

use tailhunt_histogram::hdr::{write_interval_log, IntervalToWrite};
use tailhunt_histogram::Histogram;
use tailhunt_model::{ClockOrigin, IntervalHistogram, Sample, SeriesData, Timing};

use super::{ExportError, Exporter, Series};

/// Interval length when samples are turned into an interval log.
pub const INTERVAL_NS: i64 = 1_000_000_000;

/// Writes interval logs, one after another (each series with its own headers).
pub struct HlogExporter<'w> {
    out: &'w mut dyn Write,
    origin: ClockOrigin,
}

impl<'w> HlogExporter<'w> {
    /// An exporter writing to `out`; `origin` turns run times into wall-clock times.
    pub fn new(out: &'w mut dyn Write, origin: ClockOrigin) -> HlogExporter<'w> {
        HlogExporter { out, origin }
    }
}

impl Exporter for HlogExporter<'_> {
    fn write_series(&mut self, name: &str, series: &Series) -> Result<u64, ExportError> {
        let per_second;
        let intervals: &[IntervalHistogram] = match &series.data {
            SeriesData::Samples(samples) => {
                per_second = intervals_of(samples, series.timing);
                &per_second
            }
            SeriesData::Histograms(hs) => hs,
            SeriesData::Values(_) => return Err(ExportError::ValuesAsHlog(name.to_string())),
        };
        let first = intervals.first().map_or(0, |i| i.start_ns);
        let to_write: Vec<IntervalToWrite<'_>> = intervals
            .iter()
            .map(|iv| IntervalToWrite {
                offset_ns: iv.start_ns - first,
                duration_ns: iv.end_ns - iv.start_ns,
                histogram: &iv.histogram,
            })
            .collect();
        let mut buf = Vec::new();
        let start_wall_ns = match series.timing {
            Timing::Timed => self.origin.to_wall(first),
            Timing::Untimed => self.origin.wall_ns,
        };
        write_interval_log(&mut buf, start_wall_ns, Some(&tag(name)), &to_write)?;
        self.out.write_all(&buf)?;
        Ok(intervals.iter().map(|i| i.histogram.count()).sum())
    }

    fn finish(self: Box<Self>) -> Result<(), ExportError> {
        self.out.flush()?;
        Ok(())
    }
}

/// A series name as an interval-log tag.
pub fn tag(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ',' => ';',
            c if c.is_whitespace() => '_',
            c => c,
        })
        .collect()
}

/// Samples as histograms of latency: one per second of intended time, or one for all of an
/// untimed series.
fn intervals_of(samples: &[Sample], timing: Timing) -> Vec<IntervalHistogram> {
    let latency = |s: &Sample| s.latency_ns().max(0) as u64;
    if timing == Timing::Untimed {
        let mut h = Histogram::new();
        samples.iter().for_each(|s| h.record(latency(s)));
        return vec![IntervalHistogram {
            start_ns: 0,
            end_ns: INTERVAL_NS,
            histogram: h,
        }];
    }
    let Some(first) = samples.iter().map(|s| s.intended_ns).min() else {
        return Vec::new();
    };
    let mut sorted: Vec<&Sample> = samples.iter().collect();
    sorted.sort_by_key(|s| s.intended_ns);
    let mut out: Vec<IntervalHistogram> = Vec::new();
    for s in sorted {
        let start = first + (s.intended_ns - first) / INTERVAL_NS * INTERVAL_NS;
        if out.last().is_none_or(|iv| iv.start_ns != start) {
            out.push(IntervalHistogram {
                start_ns: start,
                end_ns: start + INTERVAL_NS,
                histogram: Histogram::new(),
            });
        }
        if let Some(iv) = out.last_mut() {
            iv.histogram.record(latency(s));
        }
    }
    out
}
