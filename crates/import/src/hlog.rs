//! HdrHistogram interval logs (`.hlog`, from wrk2, jHiccup and the HdrHistogram libraries).
//!
//! In: the whole log (logs hold one compressed histogram per interval, so they are small).
//! Out: one histogram series per distinct tag (untagged intervals go to the default series
//! name; a tag `name{key=value;...}`, as `tailhunt export` writes labels, opens `name` with
//! those labels), each interval pushed as an [`IntervalHistogram`]. Interval logs carry no
//! outcomes; their counts are reported as ok. A bad line stops the import with its line
//! number, after the intervals before it were pushed (the store keeps them as a partial run).

use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;

use tailhunt_histogram::hdr::{read_interval_log, HdrError};
use tailhunt_model::{
    parse_display_name, unit_scale_ns, IntervalHistogram, Labels, SeriesKind, SeriesMeta,
    SeriesSink, Timing, Unit,
};

use crate::error::{shorten, LineError};
use crate::{Format, ImportError, ImportSummary};

/// Reads an interval log whose values are in `unit` (ns when `None`).
pub(crate) fn read(
    file: &str,
    reader: &mut dyn BufRead,
    unit: Option<&str>,
    default_name: &str,
    sink: &mut dyn SeriesSink,
) -> Result<ImportSummary, ImportError> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|source| ImportError::Io {
            path: PathBuf::from(file),
            source,
        })?;
    let unit = unit.unwrap_or("ns");
    let ns_per_unit = unit_scale_ns(unit).ok_or_else(|| ImportError::UnknownUnit {
        unit: unit.to_string(),
    })?;
    let log = read_interval_log(&bytes, ns_per_unit).map_err(|source| ImportError::Hdr {
        file: file.to_string(),
        source,
    })?;
    let stopped = log.stopped.map(|e| bad_line(file, e));
    if log.intervals.is_empty() {
        return Err(stopped.unwrap_or_else(|| ImportError::Empty {
            file: file.to_string(),
        }));
    }
    let sink_error = |source| ImportError::Sink {
        file: file.to_string(),
        source,
    };
    let mut summary = ImportSummary::new(Format::HdrLog);
    let mut handles: HashMap<Option<String>, usize> = HashMap::new();
    for interval in log.intervals {
        let handle = match handles.get(&interval.tag) {
            Some(&h) => h,
            None => {
                let text = interval.tag.as_deref().unwrap_or(default_name);
                let (name, labels) =
                    parse_display_name(text).unwrap_or_else(|| (text.to_string(), Labels::new()));
                let meta = SeriesMeta {
                    name,
                    labels,
                    unit: Unit::Nanoseconds,
                    timing: Timing::Timed,
                    kind: SeriesKind::Histograms,
                };
                let h = sink.open_series(&meta).map_err(sink_error)?;
                handles.insert(interval.tag.clone(), h);
                summary.series += 1;
                h
            }
        };
        let count = interval.histogram.count();
        let h = IntervalHistogram {
            start_ns: interval.start_ns,
            end_ns: interval.start_ns.saturating_add(interval.duration_ns),
            histogram: interval.histogram,
        };
        sink.push_histogram(handle, &h).map_err(sink_error)?;
        if log.absolute {
            let first = summary.first_epoch_ns.get_or_insert(h.start_ns);
            *first = (*first).min(h.start_ns);
        }
        summary.lines += 1;
        // Counts come from the file: a crafted log could make them sum past u64.
        summary.samples = summary.samples.saturating_add(count);
        summary.outcomes[0] = summary.outcomes[0].saturating_add(count);
    }
    match stopped {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// A bad line of a log as an import error naming the file and line, like a CSV's.
fn bad_line(file: &str, e: HdrError) -> ImportError {
    match e {
        HdrError::Parse { line, content } => LineError::new(
            &content,
            format!(
                "not an HdrHistogram interval-log line: '{}'",
                shorten(&content)
            ),
        )
        .at(file, line as u64),
        HdrError::BadHistogram { line, reason } => LineError::new(
            "",
            format!("the interval's histogram does not decode: {reason}"),
        )
        .at(file, line as u64),
        other => ImportError::Hdr {
            file: file.to_string(),
            source: other,
        },
    }
}

#[cfg(test)]
mod tests {
    use tailhunt_histogram::hdr::{write_interval_log, IntervalToWrite};
    use tailhunt_histogram::Histogram;
    use tailhunt_model::{SeriesData, Timing};

    use crate::{import_text, Format, ImportOptions};

    const START_NS: i64 = 1_700_000_000_000_000_000;
    const SECOND: i64 = 1_000_000_000;

    fn histogram(values: &[u64]) -> Histogram {
        let mut h = Histogram::new();
        for &v in values {
            h.record(v);
        }
        h
    }

    fn log(tag: Option<&str>, histograms: &[Histogram]) -> String {
        let intervals: Vec<IntervalToWrite<'_>> = histograms
            .iter()
            .enumerate()
            .map(|(i, h)| IntervalToWrite {
                offset_ns: i as i64 * SECOND,
                duration_ns: SECOND,
                histogram: h,
            })
            .collect();
        let mut out = Vec::new();
        write_interval_log(&mut out, START_NS, tag, &intervals).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn untagged_log_is_one_histogram_series() {
        let h = [histogram(&[1_000, 2_000, 3_000]), histogram(&[5_000_000])];
        let text = log(None, &h);
        let (summary, series) = import_text("wrk2.hlog", &text, &ImportOptions::default()).unwrap();
        assert_eq!(summary.format, Format::HdrLog);
        assert_eq!((summary.series, summary.samples, summary.lines), (1, 4, 2));
        assert_eq!(summary.outcomes, [4, 0, 0]);
        assert_eq!(summary.first_epoch_ns, Some(START_NS));
        assert_eq!(series[0].name, "latency");
        assert_eq!(series[0].timing, Timing::Timed);
        let SeriesData::Histograms(intervals) = &series[0].data else {
            panic!("not a histogram series");
        };
        assert_eq!(intervals[1].start_ns, START_NS + SECOND);
        assert_eq!(intervals[1].end_ns, START_NS + 2 * SECOND);
        let p50 = intervals[0].histogram.quantile(0.5).unwrap() as f64;
        assert!((p50 - 2_000.0).abs() / 2_000.0 < 0.01, "{p50}");
    }

    #[test]
    fn tags_become_series_and_content_is_sniffed() {
        let a = log(Some("get"), &[histogram(&[1_000]), histogram(&[2_000])]);
        let b = log(Some("put"), &[histogram(&[3_000])]);
        let text: String = a
            .lines()
            .chain(b.lines().filter(|l| l.starts_with("Tag=")))
            .map(|l| format!("{l}\n"))
            .collect();
        // `-` has no extension: the `#[` headers say it is a log.
        let (summary, series) = import_text("-", &text, &ImportOptions::default()).unwrap();
        assert_eq!(summary.format, Format::HdrLog);
        assert_eq!(summary.series, 2);
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["get", "put"]);
        assert_eq!((series[0].count(), series[1].count()), (2, 1));
    }

    #[test]
    fn unit_option_scales_log_values() {
        let text = log(None, &[histogram(&[450])]);
        let opts = ImportOptions {
            unit: Some("us".into()),
            ..ImportOptions::default()
        };
        let (_, series) = import_text("wrk2.hlog", &text, &opts).unwrap();
        let SeriesData::Histograms(intervals) = &series[0].data else {
            panic!("not a histogram series");
        };
        let v = intervals[0].histogram.quantile(0.5).unwrap() as f64;
        assert!((v - 450_000.0).abs() / 450_000.0 < 0.01, "{v}");
    }

    /// A bad line in a log once kept nothing while a CSV kept the lines before it.
    #[test]
    fn intervals_before_a_bad_line_are_pushed_and_the_line_is_named() {
        let text = log(
            Some("latency{rate=50;repeat=1}"),
            &[histogram(&[1_000]), histogram(&[2_000, 3_000])],
        );
        let lines = text.lines().count();
        let text = format!("{text}0.0,1.0,0.0,HISTnotbase64!!\n");
        let mut series = Vec::new();
        let e = crate::import_reader(
            "wrk2.hlog",
            &mut text.as_bytes(),
            &ImportOptions::default(),
            &mut series,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with(&format!("wrk2.hlog:{}: ", lines + 1)), "{e}");
        assert_eq!(series.len(), 1);
        // Both intervals, three values.
        assert_eq!(series[0].count(), 3);
        assert_eq!(series[0].name, "latency");
        assert_eq!(series[0].display_name(), "latency{rate=50,repeat=1}");
    }
}
