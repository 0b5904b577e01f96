//! The endpoint-neutral [`Batch`] that is queued, and its rendering into remote-write
//! requests for one [`HistogramMode`] (see the parent module for the modes).

use tailhunt_histogram::{Histogram, Layout};

use super::HistogramMode;
use crate::exposition::{
    self, classic_counts, native_buckets, Labels, Snapshot, CLASSIC_BOUNDS_SECONDS, NATIVE_SCHEMA,
    NATIVE_ZERO_THRESHOLD,
};
use crate::proto::{Label, RwHistogram, Sample, TimeSeries, WriteRequest};

/// Sub-bucket bits of the `vmrange` buckets.
pub const VMRANGE_SUB_BITS: u32 = 5;

/// A histogram series in a batch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct QueuedHistogram {
    /// Labels, `__name__` included, sorted.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// The histogram in tailhunt's codec (nanoseconds).
    #[prost(bytes = "vec", tag = "2")]
    pub encoded: Vec<u8>,
}

/// A float series in a batch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct QueuedFloat {
    /// Labels, `__name__` included, sorted.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// The value.
    #[prost(double, tag = "2")]
    pub value: f64,
}

/// Everything sampled at one moment, as queued.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Batch {
    /// Sample time, milliseconds since the epoch.
    #[prost(int64, tag = "1")]
    pub timestamp_ms: i64,
    /// Counters, gauges and findings.
    #[prost(message, repeated, tag = "2")]
    pub floats: Vec<QueuedFloat>,
    /// Histograms.
    #[prost(message, repeated, tag = "3")]
    pub histograms: Vec<QueuedHistogram>,
}

fn labels_with_name(name: &str, labels: &Labels, extra: &Labels) -> Vec<Label> {
    let mut out: Vec<Label> = std::iter::once(("__name__".to_string(), name.to_string()))
        .chain(extra.iter().cloned())
        .chain(labels.iter().cloned())
        .map(|(name, value)| Label { name, value })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    // A series' own label wins over an extra one of the same name.
    let mut dedup: Vec<Label> = Vec::with_capacity(out.len());
    for l in out {
        match dedup.last_mut() {
            Some(last) if last.name == l.name => *last = l,
            _ => dedup.push(l),
        }
    }
    dedup
}

impl Batch {
    /// The snapshot at `timestamp_ms`, every series also labelled with `extra` (say
    /// `instance` and `job`, which remote write does not add).
    pub fn from_snapshot(
        snapshot: &Snapshot,
        timestamp_ms: i64,
        extra: &Labels,
    ) -> Result<Batch, exposition::ExpositionError> {
        exposition::validate(snapshot)?;
        let mut floats = Vec::new();
        for c in &snapshot.counters {
            let name = format!("{}_total", c.name.strip_suffix("_total").unwrap_or(&c.name));
            floats.push(QueuedFloat {
                labels: labels_with_name(&name, &c.labels, extra),
                value: c.value,
            });
        }
        for g in &snapshot.gauges {
            floats.push(QueuedFloat {
                labels: labels_with_name(&g.name, &g.labels, extra),
                value: g.value,
            });
        }
        for f in &snapshot.findings {
            let labels = vec![
                ("detector".to_string(), f.finding.detector.clone()),
                ("subject".to_string(), f.subject.clone()),
            ];
            floats.push(QueuedFloat {
                labels: labels_with_name("tailhunt_finding", &labels, extra),
                value: f.finding.confidence,
            });
        }
        let histograms = snapshot
            .histograms
            .iter()
            .map(|h| QueuedHistogram {
                labels: labels_with_name(&h.name, &h.labels, extra),
                encoded: h.histogram.encode(),
            })
            .collect();
        Ok(Batch {
            timestamp_ms,
            floats,
            histograms,
        })
    }
}

fn with_name(labels: &[Label], suffix: &str, extra: Option<(&str, String)>) -> Vec<Label> {
    let mut out: Vec<Label> = labels
        .iter()
        .map(|l| {
            if l.name == "__name__" {
                Label {
                    name: l.name.clone(),
                    value: format!("{}{suffix}", l.value),
                }
            } else {
                l.clone()
            }
        })
        .collect();
    if let Some((k, v)) = extra {
        out.push(Label {
            name: k.to_string(),
            value: v,
        });
        out.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out
}

fn float_series(labels: Vec<Label>, value: f64, ts: i64) -> TimeSeries {
    TimeSeries {
        labels,
        samples: vec![Sample {
            value,
            timestamp: ts,
        }],
        histograms: Vec::new(),
    }
}

/// Coarsens a histogram to [`VMRANGE_SUB_BITS`]: `(lower_ns, upper_exclusive_ns, count)`.
pub fn vmrange_buckets(h: &Histogram) -> Vec<(u64, u64, u64)> {
    let fine = h.layout();
    let coarse = Layout::new(VMRANGE_SUB_BITS.min(fine.sub_bits())).unwrap_or(fine);
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for b in h.buckets() {
        let i = coarse.index(b.lower);
        let (lo, hi) = (coarse.lower(i), coarse.upper(i).saturating_add(1));
        match out.last_mut() {
            Some(last) if last.0 == lo => last.2 += b.count,
            _ => out.push((lo, hi, b.count)),
        }
    }
    out
}

/// The histogram series of one stored histogram in the given mode.
fn histogram_series(
    q: &QueuedHistogram,
    h: &Histogram,
    mode: HistogramMode,
    ts: i64,
) -> Vec<TimeSeries> {
    let sum = exposition::sum_seconds(h);
    let mut out = Vec::new();
    match mode {
        HistogramMode::Native => {
            let n = native_buckets(h);
            out.push(TimeSeries {
                labels: q.labels.clone(),
                samples: Vec::new(),
                histograms: vec![RwHistogram {
                    count_int: h.count(),
                    sum,
                    schema: NATIVE_SCHEMA,
                    zero_threshold: NATIVE_ZERO_THRESHOLD,
                    zero_count_int: n.zero_count,
                    positive_spans: n.spans,
                    positive_deltas: n.deltas,
                    timestamp: ts,
                }],
            });
            return out;
        }
        HistogramMode::Classic => {
            let mut cumulative = 0;
            let bounds = CLASSIC_BOUNDS_SECONDS.iter().map(|b| b.to_string());
            for (le, c) in bounds.chain(["+Inf".to_string()]).zip(classic_counts(h)) {
                cumulative += c;
                let labels = with_name(&q.labels, "_bucket", Some(("le", le)));
                out.push(float_series(labels, cumulative as f64, ts));
            }
        }
        HistogramMode::Vmrange => {
            for (lo, hi, c) in vmrange_buckets(h) {
                let range = format!("{:.6e}...{:.6e}", lo as f64 / 1e9, hi as f64 / 1e9);
                let labels = with_name(&q.labels, "_bucket", Some(("vmrange", range)));
                out.push(float_series(labels, c as f64, ts));
            }
        }
    }
    out.push(float_series(with_name(&q.labels, "_sum", None), sum, ts));
    out.push(float_series(
        with_name(&q.labels, "_count", None),
        h.count() as f64,
        ts,
    ));
    out
}

/// The requests a batch becomes for an endpoint in `mode`: floats first, then histograms;
/// empty ones left out. Histograms that do not decode are skipped and counted.
pub fn render(batch: &Batch, mode: HistogramMode) -> (Vec<WriteRequest>, usize) {
    let ts = batch.timestamp_ms;
    let mut requests = Vec::new();
    let floats: Vec<TimeSeries> = batch
        .floats
        .iter()
        .map(|f| float_series(f.labels.clone(), f.value, ts))
        .collect();
    if !floats.is_empty() {
        requests.push(WriteRequest { timeseries: floats });
    }
    let mut bad = 0;
    let mut hist = Vec::new();
    for q in &batch.histograms {
        match Histogram::decode(&q.encoded) {
            Ok(h) => hist.extend(histogram_series(q, &h, mode, ts)),
            Err(_) => bad += 1,
        }
    }
    if !hist.is_empty() {
        requests.push(WriteRequest { timeseries: hist });
    }
    (requests, bad)
}
