//! The one trait sources write through.
//!
//! A source (importer, load generator, capture reader) streams its series into a [`SeriesSink`]:
//! the store implements it to write blocks as they fill (so a killed run keeps what it measured),
//! and `Vec<Series>` implements it for tests and small in-memory uses.

use crate::{
    IntervalHistogram, Labels, Point, Sample, SamplePart, Series, SeriesData, Timing, Unit,
};

/// Error a sink may return; sources pass it through untouched.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// What kind of values a series will hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeriesKind {
    /// Raw samples.
    Samples,
    /// Interval histograms.
    Histograms,
    /// Values over time ([`Point`]s).
    Values,
}

impl SeriesKind {
    /// Name used in the store (`samples`, `histograms`, `values`).
    pub fn name(self) -> &'static str {
        match self {
            SeriesKind::Samples => "samples",
            SeriesKind::Histograms => "histograms",
            SeriesKind::Values => "values",
        }
    }

    /// Inverse of [`SeriesKind::name`].
    pub fn from_name(name: &str) -> Option<SeriesKind> {
        match name {
            "samples" => Some(SeriesKind::Samples),
            "histograms" => Some(SeriesKind::Histograms),
            "values" => Some(SeriesKind::Values),
            _ => None,
        }
    }
}

/// Everything about a series except its values.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesMeta {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// Unit.
    pub unit: Unit,
    /// Whether sample times are measured.
    pub timing: Timing,
    /// Samples or histograms.
    pub kind: SeriesKind,
}

impl SeriesMeta {
    /// Timed raw-sample series in ns.
    pub fn latency(name: impl Into<String>) -> SeriesMeta {
        SeriesMeta {
            name: name.into(),
            labels: Labels::new(),
            unit: Unit::Nanoseconds,
            timing: Timing::Timed,
            kind: SeriesKind::Samples,
        }
    }
}

/// Where sources put their series. Handles are small integers returned by `open_series`.
pub trait SeriesSink {
    /// Declares a series; returns its handle.
    fn open_series(&mut self, meta: &SeriesMeta) -> Result<usize, SinkError>;
    /// Declares a sample series that holds `part` of each sample pushed to `parent` (a sample
    /// series opened before), in the same order; returns its handle. The caller still pushes
    /// its samples, so every sink holds them; a sink that can work them out from the parent's
    /// when they are read (the store) may keep the derivation instead. The default opens it
    /// as any other series.
    fn open_derived(
        &mut self,
        meta: &SeriesMeta,
        parent: usize,
        part: SamplePart,
    ) -> Result<usize, SinkError> {
        let _ = (parent, part);
        self.open_series(meta)
    }
    /// Appends samples to a sample series.
    fn push_samples(&mut self, series: usize, samples: &[Sample]) -> Result<(), SinkError>;
    /// Appends one interval histogram to a histogram series.
    fn push_histogram(&mut self, series: usize, h: &IntervalHistogram) -> Result<(), SinkError>;
    /// Appends points to a values series. Sinks that only take latencies (the default)
    /// refuse them.
    fn push_values(&mut self, series: usize, points: &[Point]) -> Result<(), SinkError> {
        let _ = points;
        Err(format!("series handle {series}: this sink does not store values series").into())
    }
    /// Stores one of the run's evidence documents (JSON of a shape at `version`), replacing
    /// an earlier one of the same name; sources call it through
    /// [`crate::evidence::put_evidence`]. Sinks that keep series only (the default) refuse it.
    fn put_document(&mut self, name: &str, version: u32, json: &str) -> Result<(), SinkError> {
        let _ = (version, json);
        Err(format!("this sink does not store documents ('{name}')").into())
    }
    /// Like [`SeriesSink::put_document`], with the JSON written by `write`, so that a sink
    /// that compresses need not hold a large document's text. The default collects the text
    /// and calls `put_document`.
    fn put_document_from(
        &mut self,
        name: &str,
        version: u32,
        write: &mut dyn FnMut(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<(), SinkError> {
        let mut text = Vec::new();
        write(&mut text)
            .map_err(|e| SinkError::from(format!("cannot encode the '{name}' document: {e}")))?;
        let text = String::from_utf8(text)
            .map_err(|e| SinkError::from(format!("the '{name}' document is not UTF-8: {e}")))?;
        self.put_document(name, version, &text)
    }
    /// Stores a batch of one of the run's evidence lists (the items' shape at `version`), for a
    /// list too long to hold in memory: sources call it through [`crate::evidence::put_rows`]
    /// as items are produced. Sinks that keep series only (the default) refuse it.
    fn put_rows(
        &mut self,
        name: &str,
        version: u32,
        rows: &crate::evidence::RowChunk,
    ) -> Result<(), SinkError> {
        let _ = (version, rows);
        Err(format!("this sink does not store evidence lists ('{name}')").into())
    }
    /// Says that no more points come for `series` (a capture's pass has ended): a sink that
    /// holds the series' open block writes it and frees its buffer. Pushing to the series
    /// afterwards still works (it starts a new block). Sinks that hold nothing per series
    /// (the default) have nothing to do.
    fn close_series(&mut self, series: usize) -> Result<(), SinkError> {
        let _ = series;
        Ok(())
    }
    /// Makes what was pushed durable when the sink's commit interval has passed (sources
    /// call it while they wait, so a slow source is committed by time too). In-memory sinks
    /// have nothing to do.
    fn commit_if_due(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// Makes everything pushed so far durable now (at the end of a step, say).
    fn commit_now(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

impl SeriesSink for Vec<Series> {
    fn open_series(&mut self, meta: &SeriesMeta) -> Result<usize, SinkError> {
        let data = match meta.kind {
            SeriesKind::Samples => SeriesData::Samples(Vec::new()),
            SeriesKind::Histograms => SeriesData::Histograms(Vec::new()),
            SeriesKind::Values => SeriesData::Values(Vec::new()),
        };
        self.push(Series {
            name: meta.name.clone(),
            labels: meta.labels.clone(),
            unit: meta.unit,
            timing: meta.timing,
            data,
        });
        Ok(self.len() - 1)
    }

    fn push_samples(&mut self, series: usize, samples: &[Sample]) -> Result<(), SinkError> {
        match self.get_mut(series).map(|s| &mut s.data) {
            Some(SeriesData::Samples(v)) => {
                v.extend_from_slice(samples);
                Ok(())
            }
            _ => Err(format!("series handle {series} is not a sample series").into()),
        }
    }

    fn push_histogram(&mut self, series: usize, h: &IntervalHistogram) -> Result<(), SinkError> {
        match self.get_mut(series).map(|s| &mut s.data) {
            Some(SeriesData::Histograms(v)) => {
                v.push(h.clone());
                Ok(())
            }
            _ => Err(format!("series handle {series} is not a histogram series").into()),
        }
    }
    fn push_values(&mut self, series: usize, points: &[Point]) -> Result<(), SinkError> {
        match self.get_mut(series).map(|s| &mut s.data) {
            Some(SeriesData::Values(v)) => {
                v.extend_from_slice(points);
                Ok(())
            }
            _ => Err(format!("series handle {series} is not a values series").into()),
        }
    }
}

impl Series {
    /// The series' metadata.
    pub fn meta(&self) -> SeriesMeta {
        SeriesMeta {
            name: self.name.clone(),
            labels: self.labels.clone(),
            unit: self.unit,
            timing: self.timing,
            kind: match self.data {
                SeriesData::Samples(_) => SeriesKind::Samples,
                SeriesData::Histograms(_) => SeriesKind::Histograms,
                SeriesData::Values(_) => SeriesKind::Values,
            },
        }
    }
}
