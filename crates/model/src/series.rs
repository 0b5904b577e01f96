//! A named, labelled stream of values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tailhunt_histogram::Histogram;

use crate::{Sample, Unit};

/// Labels of a series (`{"rate": "1000", "proto": "tcp"}`), ordered so output is stable.
pub type Labels = BTreeMap<String, String>;

/// Whether the sample times of a series are real.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    /// Intended/start/end times are measured.
    #[default]
    Timed,
    /// Only latencies are known (e.g. an import of bare numbers); times are the sample index.
    Untimed,
}

/// A histogram covering one interval of time (as in HdrHistogram interval logs).
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalHistogram {
    /// Interval start, ns on the run's monotonic clock.
    pub start_ns: i64,
    /// Interval end, ns.
    pub end_ns: i64,
    /// Values recorded in the interval, in the series' unit.
    pub histogram: Histogram,
}

/// One value at one time: a bin of a binned series (`t_ns` is the bin's start), or a reading
/// of a sampled quantity (a window size, bytes in flight).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// Time, ns (on the run's clock: the monotonic clock, or epoch ns for captures, whose
    /// run origin is then `mono = wall`).
    pub t_ns: i64,
    /// The value, in the series' unit.
    pub value: i64,
}

/// What a series holds.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesData {
    /// Every request, raw.
    Samples(Vec<Sample>),
    /// One histogram per interval (when raw samples were never available).
    Histograms(Vec<IntervalHistogram>),
    /// Values over time: bins (bytes per millisecond; a missing bin is zero, and the series'
    /// `bin` label gives the width) or readings (window sizes over time).
    Values(Vec<Point>),
}

/// A named, labelled, unit-honest series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Name, e.g. `latency`.
    pub name: String,
    /// Labels distinguishing series of the same name.
    pub labels: Labels,
    /// Unit of the values.
    pub unit: Unit,
    /// Whether sample times are measured.
    pub timing: Timing,
    /// The values.
    pub data: SeriesData,
}

impl Series {
    /// An empty sample series.
    pub fn new(name: impl Into<String>, unit: Unit) -> Series {
        Series {
            name: name.into(),
            labels: Labels::new(),
            unit,
            timing: Timing::Timed,
            data: SeriesData::Samples(Vec::new()),
        }
    }

    /// An empty interval-histogram series.
    pub fn new_histograms(name: impl Into<String>, unit: Unit) -> Series {
        Series {
            data: SeriesData::Histograms(Vec::new()),
            ..Series::new(name, unit)
        }
    }

    /// Adds a label (builder style).
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Series {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// An empty values series.
    pub fn new_values(name: impl Into<String>, unit: Unit) -> Series {
        Series {
            data: SeriesData::Values(Vec::new()),
            ..Series::new(name, unit)
        }
    }

    /// Appends a sample; a histogram series ignores nothing silently: it panics in debug only
    /// if misused, so callers create the right kind with [`Series::new`].
    pub fn push_sample(&mut self, sample: Sample) {
        if let SeriesData::Samples(v) = &mut self.data {
            v.push(sample);
        } else {
            debug_assert!(false, "push_sample on a histogram series");
        }
    }

    /// The raw samples, if this series holds them.
    pub fn samples(&self) -> Option<&[Sample]> {
        match &self.data {
            SeriesData::Samples(v) => Some(v),
            SeriesData::Histograms(_) | SeriesData::Values(_) => None,
        }
    }

    /// The points, if this is a values series.
    pub fn points(&self) -> Option<&[Point]> {
        match &self.data {
            SeriesData::Values(v) => Some(v),
            _ => None,
        }
    }

    /// Number of values (samples, or counts summed over the interval histograms).
    pub fn count(&self) -> u64 {
        match &self.data {
            SeriesData::Samples(v) => v.len() as u64,
            SeriesData::Histograms(h) => h.iter().map(|i| i.histogram.count()).sum(),
            SeriesData::Values(v) => v.len() as u64,
        }
    }

    /// `name{k=v,...}` — how series are named to users.
    pub fn display_name(&self) -> String {
        display_name(&self.name, &self.labels)
    }
}

/// `name{k=v,...}`, or just `name` without labels.
pub fn display_name(name: &str, labels: &Labels) -> String {
    if labels.is_empty() {
        return name.to_string();
    }
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// Inverse of [`display_name`]: `latency{rate=50,repeat=1}` is the name `latency` with labels
/// `rate=50` and `repeat=1`. Pairs may also be separated by `;` (HdrHistogram tags cannot hold
/// commas). `None` unless the text has exactly that form: a name without braces, then `{`,
/// `key=value` pairs with unique non-empty keys and no `{}=,;` in keys or values, and `}` at
/// the very end. Text without braces is `None` too: it is a plain name.
pub fn parse_display_name(text: &str) -> Option<(String, Labels)> {
    let inner = text.strip_suffix('}')?;
    let (name, pairs) = inner.split_once('{')?;
    let special = |s: &str| s.contains(['{', '}', '=', ',', ';']);
    if name.is_empty() || name.contains('}') || pairs.is_empty() {
        return None;
    }
    let mut labels = Labels::new();
    for pair in pairs.split([',', ';']) {
        let (k, v) = pair.split_once('=')?;
        if k.is_empty() || special(k) || special(v) || labels.contains_key(k) {
            return None;
        }
        labels.insert(k.to_string(), v.to_string());
    }
    Some((name.to_string(), labels))
}

#[cfg(test)]
mod display_name_tests {
    use super::*;

    #[test]
    fn display_names_parse_back() {
        let mut labels = Labels::new();
        labels.insert("rate".into(), "50".into());
        labels.insert("repeat".into(), "1".into());
        let text = display_name("latency", &labels);
        assert_eq!(text, "latency{rate=50,repeat=1}");
        assert_eq!(
            parse_display_name(&text),
            Some(("latency".to_string(), labels.clone()))
        );
        assert_eq!(
            parse_display_name("latency{rate=50;repeat=1}"),
            Some(("latency".to_string(), labels))
        );
        let (_, one) = parse_display_name("x{phase=}").unwrap();
        assert_eq!(one.get("phase").map(String::as_str), Some(""));
    }

    #[test]
    fn other_names_are_plain_names() {
        for text in [
            "latency",
            "latency{}",
            "{a=1}",
            "x{a}",
            "x{=1}",
            "x{a=1,a=2}",
            "x{a=1}y",
            "x{a=b=c}",
            "x{a={}}",
            "x}{a=1}",
        ] {
            assert_eq!(parse_display_name(text), None, "{text}");
        }
    }
}
