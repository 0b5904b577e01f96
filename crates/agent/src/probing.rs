//! The prober's samples, counted for export while they are stored.
//!
//! In: every sample the prober hands its [`SeriesSink`]. Out: the same calls passed on to the
//! store's run writer ([`Tee`]), and per (probe, variant) a latency histogram and
//! ok/error/timeout counters in an [`Aggregator`] shared with the exporter, cumulative since
//! the agent started (a counter never goes back, whatever window the store is on).
//!
//! The histogram holds ok and timed-out samples (a timeout counts at its timeout, the least it
//! took); errors are counted but left out of it, because a refused connection's few
//! microseconds are not a latency of the service. Latency is from the intended start
//! ([`Sample::latency_ns`]), so a probe that started late because the one before it hung
//! carries that wait.
//!
//! Memory: one histogram and three counters per series the prober opens (a fixed set, one per
//! probe, variant and path hop), whatever the rate.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use tailhunt_histogram::Histogram;
use tailhunt_model::{
    IntervalHistogram, Outcome, Point, Sample, SeriesMeta, SeriesSink, SinkError,
};

use crate::exposition::{HistogramMetric, Labels, ScalarMetric, Snapshot};

/// Name of the exported latency histogram.
pub const LATENCY_METRIC: &str = "tailhunt_probe_latency_seconds";
/// Name of the exported per-outcome sample counter (`_total` added by the text format).
pub const SAMPLES_METRIC: &str = "tailhunt_probe_samples";
/// The store's series name of a probe measurement (as the prober writes it).
const PROBE_SERIES: &str = "probe_latency";

#[derive(Debug, Clone, Default)]
struct Counts {
    histogram: Histogram,
    ok: u64,
    error: u64,
    timeout: u64,
}

/// Per (probe, variant) histograms and outcome counters; clones share the same state.
#[derive(Debug, Clone, Default)]
pub struct Aggregator {
    inner: Arc<Mutex<BTreeMap<Labels, Counts>>>,
}

impl Aggregator {
    /// An empty aggregator.
    pub fn new() -> Aggregator {
        Aggregator::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<Labels, Counts>> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Counts `samples` of the series labelled `labels`.
    pub fn record(&self, labels: &Labels, samples: &[Sample]) {
        let mut map = self.lock();
        let c = map.entry(labels.clone()).or_default();
        for s in samples {
            match s.outcome {
                Outcome::Ok => c.ok += 1,
                Outcome::Error => c.error += 1,
                Outcome::Timeout => c.timeout += 1,
            }
            if s.outcome != Outcome::Error {
                c.histogram.record(s.latency_ns().max(0) as u64);
            }
        }
    }

    /// Samples counted so far, over every series and outcome.
    pub fn samples(&self) -> u64 {
        self.lock()
            .values()
            .map(|c| c.ok + c.error + c.timeout)
            .sum()
    }

    /// Adds the latency histograms and the outcome counters to `snapshot`.
    pub fn fill(&self, snapshot: &mut Snapshot) {
        let map = self.lock();
        for (labels, c) in map.iter() {
            snapshot.histograms.push(HistogramMetric {
                name: LATENCY_METRIC.into(),
                help: "Probe latency from the intended start, ok and timed-out probes (a timeout at its timeout).".into(),
                labels: labels.clone(),
                histogram: c.histogram.clone(),
            });
            for (outcome, n) in [("ok", c.ok), ("error", c.error), ("timeout", c.timeout)] {
                let mut l = labels.clone();
                l.push(("outcome".into(), outcome.into()));
                snapshot.counters.push(ScalarMetric {
                    name: SAMPLES_METRIC.into(),
                    help: "Probe samples taken, by outcome.".into(),
                    labels: l,
                    value: n as f64,
                });
            }
        }
    }
}

/// The exported labels of a probe series: `probe`, `kind`, `variant`, `hop` (path probes) and
/// the probe's own labels, in a fixed order.
fn export_labels(meta: &SeriesMeta) -> Labels {
    let first = ["probe", "kind", "variant", "hop"];
    let mut out: Labels = first
        .iter()
        .filter_map(|k| meta.labels.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    out.extend(
        meta.labels
            .iter()
            .filter(|(k, _)| !first.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    out
}

/// A [`SeriesSink`] that passes everything to `inner` (the store) and counts the probe
/// samples in an [`Aggregator`]. A sample reaches the aggregator only once the store took it.
pub struct Tee<'a> {
    inner: &'a mut dyn SeriesSink,
    aggregator: &'a Aggregator,
    probe_series: HashMap<usize, Labels>,
}

impl<'a> Tee<'a> {
    /// Tees `inner` into `aggregator`.
    pub fn new(inner: &'a mut dyn SeriesSink, aggregator: &'a Aggregator) -> Tee<'a> {
        Tee {
            inner,
            aggregator,
            probe_series: HashMap::new(),
        }
    }
}

impl SeriesSink for Tee<'_> {
    fn open_series(&mut self, meta: &SeriesMeta) -> Result<usize, SinkError> {
        let h = self.inner.open_series(meta)?;
        if meta.name == PROBE_SERIES {
            self.probe_series.insert(h, export_labels(meta));
        }
        Ok(h)
    }

    fn push_samples(&mut self, series: usize, samples: &[Sample]) -> Result<(), SinkError> {
        self.inner.push_samples(series, samples)?;
        if let Some(labels) = self.probe_series.get(&series) {
            self.aggregator.record(labels, samples);
        }
        Ok(())
    }

    fn push_histogram(&mut self, series: usize, h: &IntervalHistogram) -> Result<(), SinkError> {
        self.inner.push_histogram(series, h)
    }

    fn push_values(&mut self, series: usize, points: &[Point]) -> Result<(), SinkError> {
        self.inner.push_values(series, points)
    }

    fn put_document(&mut self, name: &str, version: u32, json: &str) -> Result<(), SinkError> {
        self.inner.put_document(name, version, json)
    }

    fn commit_if_due(&mut self) -> Result<(), SinkError> {
        self.inner.commit_if_due()
    }

    fn commit_now(&mut self) -> Result<(), SinkError> {
        self.inner.commit_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::Series;

    fn meta(probe: &str, variant: &str) -> SeriesMeta {
        let mut m = SeriesMeta::latency(PROBE_SERIES);
        m.labels.insert("zone".into(), "a".into());
        m.labels.insert("variant".into(), variant.into());
        m.labels.insert("kind".into(), "tcp".into());
        m.labels.insert("probe".into(), probe.into());
        m
    }

    #[test]
    fn the_tee_stores_everything_and_counts_probe_samples_by_outcome() {
        let agg = Aggregator::new();
        let mut stored: Vec<Series> = Vec::new();
        {
            let mut tee = Tee::new(&mut stored, &agg);
            let a = tee.open_series(&meta("web", "connect")).unwrap();
            let other = tee.open_series(&SeriesMeta::latency("other")).unwrap();
            tee.push_samples(
                a,
                &[
                    Sample::new(0, 0, 2_000_000, Outcome::Ok),
                    Sample::new(10, 10, 1_000_000_010, Outcome::Timeout),
                    Sample::new(20, 20, 30, Outcome::Error),
                ],
            )
            .unwrap();
            tee.push_samples(other, &[Sample::new(0, 0, 5, Outcome::Ok)])
                .unwrap();
        }
        assert_eq!(stored.len(), 2);
        assert_eq!(agg.samples(), 3, "the other series is stored, not counted");
        let mut snap = Snapshot::default();
        agg.fill(&mut snap);
        assert_eq!(snap.histograms.len(), 1);
        let h = &snap.histograms[0];
        assert_eq!(
            h.labels,
            vec![
                ("probe".to_string(), "web".to_string()),
                ("kind".into(), "tcp".into()),
                ("variant".into(), "connect".into()),
                ("zone".into(), "a".into()),
            ]
        );
        assert_eq!(h.histogram.count(), 2, "the error is not a latency");
        let values: Vec<(String, f64)> = snap
            .counters
            .iter()
            .map(|c| (c.labels.last().unwrap().1.clone(), c.value))
            .collect();
        assert_eq!(
            values,
            vec![
                ("ok".into(), 1.0),
                ("error".into(), 1.0),
                ("timeout".into(), 1.0)
            ]
        );
    }
}
