//! Exposition: a [`Snapshot`] of tailhunt's model types rendered for a scraper.
//!
//! In: a [`Snapshot`] — latency histograms (tailhunt [`Histogram`]s in nanoseconds, cumulative
//! since the exporter started), counters, gauges and the active findings. Out: either
//! OpenMetrics text ([`render_text`], classic histograms through `prometheus-client`) or the
//! Prometheus protobuf exposition format ([`render_protobuf`], native histograms next to the
//! same classic buckets), chosen from a request's `Accept` header by [`negotiate`].
//!
//! Units: histogram values are exported in seconds (name them `..._seconds`).
//!
//! Classic buckets ([`CLASSIC_BOUNDS_SECONDS`]): 25 us to 60 s, seven per decade
//! (1, 1.5, 2, 3, 4, 5, 7.5), so a quantile interpolated inside one is off by at most that
//! bucket's width (50% of its lower edge at worst). A tailhunt bucket is counted under `le` when
//! its midpoint (the value tailhunt reports for it) is `<= le`. `_sum` and `_count` are exact.
//!
//! Native histograms use schema [`NATIVE_SCHEMA`] = 7: bucket boundaries `2^(k/128)`, 0.54%
//! wide, narrower than tailhunt's own buckets (at most 0.78% wide), so the export adds at most
//! one native bucket's width to tailhunt's error. Each tailhunt bucket goes whole into the native
//! bucket holding its midpoint.
//!
//! Findings become `tailhunt_finding{detector,subject}` gauges whose value is the confidence.

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType as PcMetricType;
use prometheus_client::registry::Registry;
use prost::Message as _;
use serde::Serialize;
use tailhunt_histogram::Histogram;
use tailhunt_model::Finding;

use crate::proto;

/// Upper bounds of the classic buckets, in seconds (`+Inf` is added after the last).
pub const CLASSIC_BOUNDS_SECONDS: [f64; 42] = [
    25e-6, 30e-6, 40e-6, 50e-6, 75e-6, //
    100e-6, 150e-6, 200e-6, 300e-6, 400e-6, 500e-6, 750e-6, //
    1e-3, 1.5e-3, 2e-3, 3e-3, 4e-3, 5e-3, 7.5e-3, //
    10e-3, 15e-3, 20e-3, 30e-3, 40e-3, 50e-3, 75e-3, //
    100e-3, 150e-3, 200e-3, 300e-3, 400e-3, 500e-3, 750e-3, //
    1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.5, //
    10.0, 60.0,
];

/// Native-histogram schema (see the module docs for why 7).
pub const NATIVE_SCHEMA: i32 = 7;

/// Zero threshold of the native histograms: only an exact 0 ns falls in the zero bucket. Not 0
/// itself, because a scraper tells a native histogram from a classic one by a non-zero
/// threshold or populated spans.
pub const NATIVE_ZERO_THRESHOLD: f64 = 1e-12;

/// Content type of the OpenMetrics text answer.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of the protobuf answer (length-delimited `MetricFamily` messages).
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Label pairs, in the order given.
pub type Labels = Vec<(String, String)>;

/// A latency histogram to export.
#[derive(Debug, Clone)]
pub struct HistogramMetric {
    /// Metric name, e.g. `tailhunt_probe_latency_seconds`.
    pub name: String,
    /// Help text.
    pub help: String,
    /// Labels of this series.
    pub labels: Labels,
    /// Samples in nanoseconds, cumulative since the exporter started.
    pub histogram: Histogram,
}

/// A counter or gauge to export.
#[derive(Debug, Clone)]
pub struct ScalarMetric {
    /// Metric name; a counter's name gets `_total` appended in the text format.
    pub name: String,
    /// Help text.
    pub help: String,
    /// Labels of this series.
    pub labels: Labels,
    /// Current value.
    pub value: f64,
}

/// A finding as the exporter shows it: what it is about, and the detector's finding.
#[derive(Debug, Clone, Serialize)]
pub struct FindingState {
    /// What the finding is about (a target, a host, a container).
    pub subject: String,
    /// The finding itself.
    pub finding: Finding,
    /// Since when it is active and when it was last reported, when the agent keeps findings
    /// across windows (`since_ms`, `last_seen_ms`, `active_windows`, `missing_windows` in JSON).
    #[serde(flatten)]
    pub seen: Option<crate::rolling::Seen>,
}

/// Everything exported at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Latency histograms.
    pub histograms: Vec<HistogramMetric>,
    /// Monotonic counters.
    pub counters: Vec<ScalarMetric>,
    /// Gauges.
    pub gauges: Vec<ScalarMetric>,
    /// Active findings.
    pub findings: Vec<FindingState>,
}

/// A name the exposition formats cannot carry.
#[derive(Debug, thiserror::Error)]
pub enum ExpositionError {
    /// A metric or label name with characters outside `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    #[error("{what} name {name:?} is not valid: use letters, digits, '_' (and ':' in metric names), not starting with a digit")]
    BadName {
        /// `metric` or `label`.
        what: &'static str,
        /// The offending name.
        name: String,
    },
    /// The same metric name used for two kinds (say a counter and a gauge).
    #[error("metric name {0:?} is used for two different kinds of metric: give each its own name")]
    NameClash(String),
    /// The text encoder failed (it writes into memory, so only on a malformed label).
    #[error("OpenMetrics encoding failed")]
    Text,
    /// The findings could not be written as JSON.
    #[error("findings could not be written as JSON: {0}")]
    Json(String),
}

/// The format a scraper asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics text, classic histograms.
    Text,
    /// Prometheus protobuf, native histograms (and classic buckets).
    Protobuf,
}

/// Picks the format from an `Accept` header: protobuf when the scraper lists the
/// `io.prometheus.client.MetricFamily` delimited protobuf type (Prometheus does when native
/// histograms are enabled), text otherwise.
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Text;
    };
    for part in accept.split(',') {
        let part = part.trim().to_ascii_lowercase();
        if part.starts_with("application/vnd.google.protobuf")
            && part.contains("proto=io.prometheus.client.metricfamily")
            && part.contains("encoding=delimited")
            && !part.contains("q=0;")
            && !part.ends_with("q=0")
        {
            return Format::Protobuf;
        }
    }
    Format::Text
}

fn check_name(what: &'static str, name: &str, colon: bool) -> Result<(), ExpositionError> {
    let ok_first = |c: char| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':');
    let ok_rest = |c: char| ok_first(c) || c.is_ascii_digit();
    let mut chars = name.chars();
    let good = chars.next().is_some_and(ok_first) && chars.all(ok_rest);
    if good {
        Ok(())
    } else {
        Err(ExpositionError::BadName {
            what,
            name: name.to_string(),
        })
    }
}

/// Checks every metric and label name of a snapshot, and that no name is used for two kinds.
pub fn validate(snapshot: &Snapshot) -> Result<(), ExpositionError> {
    let mut kinds: BTreeMap<String, u8> = BTreeMap::new();
    let mut check = |name: &str, labels: &Labels, kind: u8| -> Result<(), ExpositionError> {
        check_name("metric", name, true)?;
        for (k, _) in labels {
            check_name("label", k, false)?;
        }
        if *kinds
            .entry(name.strip_suffix("_total").unwrap_or(name).to_string())
            .or_insert(kind)
            != kind
        {
            return Err(ExpositionError::NameClash(name.to_string()));
        }
        Ok(())
    };
    for h in &snapshot.histograms {
        check(&h.name, &h.labels, 0)?;
    }
    for c in &snapshot.counters {
        check(&c.name, &c.labels, 1)?;
    }
    for g in &snapshot.gauges {
        check(&g.name, &g.labels, 2)?;
    }
    check("tailhunt_finding", &Labels::new(), 2)
}

/// Nanoseconds to seconds.
pub fn ns_to_seconds(ns: f64) -> f64 {
    ns / 1e9
}

/// Per-classic-bucket counts (not cumulative), one per [`CLASSIC_BOUNDS_SECONDS`] entry and
/// a last one for `+Inf`.
pub fn classic_counts(h: &Histogram) -> Vec<u64> {
    let layout = h.layout();
    let mut out = vec![0u64; CLASSIC_BOUNDS_SECONDS.len() + 1];
    let mut slot = 0;
    for b in h.buckets() {
        let mid = ns_to_seconds(layout.representative(b.index) as f64);
        while slot < CLASSIC_BOUNDS_SECONDS.len() && mid > CLASSIC_BOUNDS_SECONDS[slot] {
            slot += 1;
        }
        out[slot] += b.count;
    }
    out
}

/// The native-histogram bucket (schema [`NATIVE_SCHEMA`]) holding `seconds > 0`: bucket `k`
/// covers `(2^((k-1)/128), 2^(k/128)]`.
pub fn native_index(seconds: f64) -> i32 {
    let scale = f64::from(1u32 << NATIVE_SCHEMA);
    let mut k = (seconds.log2() * scale).ceil() as i32;
    // Guard the float rounding at an exact boundary.
    if 2f64.powf(f64::from(k - 1) / scale) >= seconds {
        k -= 1;
    } else if 2f64.powf(f64::from(k) / scale) < seconds {
        k += 1;
    }
    k
}

/// A histogram's native form: zero-bucket count and sparse positive buckets.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NativeBuckets {
    /// Samples of exactly 0 ns.
    pub zero_count: u64,
    /// Spans of consecutive buckets.
    pub spans: Vec<proto::BucketSpan>,
    /// Bucket counts, each as the difference to the previous bucket's.
    pub deltas: Vec<i64>,
    /// The same counts, absolute, with their bucket index (for tests and readers).
    pub counts: Vec<(i32, u64)>,
}

/// Maps a tailhunt histogram to native buckets of schema [`NATIVE_SCHEMA`].
pub fn native_buckets(h: &Histogram) -> NativeBuckets {
    let layout = h.layout();
    let mut by_index: BTreeMap<i32, u64> = BTreeMap::new();
    let mut out = NativeBuckets::default();
    for b in h.buckets() {
        let mid = layout.representative(b.index);
        if mid == 0 {
            out.zero_count += b.count;
            continue;
        }
        *by_index
            .entry(native_index(ns_to_seconds(mid as f64)))
            .or_insert(0) += b.count;
    }
    let mut prev_index: Option<i32> = None;
    let mut prev_count = 0i64;
    for (&k, &c) in &by_index {
        match prev_index {
            Some(p) if k == p + 1 => {
                if let Some(last) = out.spans.last_mut() {
                    last.length += 1;
                }
            }
            Some(p) => out.spans.push(proto::BucketSpan {
                offset: k - p - 1,
                length: 1,
            }),
            None => out.spans.push(proto::BucketSpan {
                offset: k,
                length: 1,
            }),
        }
        out.deltas.push(c as i64 - prev_count);
        prev_count = c as i64;
        prev_index = Some(k);
        out.counts.push((k, c));
    }
    out
}

/// Sum of a histogram in seconds.
pub fn sum_seconds(h: &Histogram) -> f64 {
    h.sum() as f64 / 1e9
}

fn finding_labels(f: &FindingState) -> Labels {
    vec![
        ("detector".to_string(), f.finding.detector.clone()),
        ("subject".to_string(), f.subject.clone()),
    ]
}

/// Groups series by metric name, keeping the first help text and the order of first use.
fn families<T>(
    items: &[T],
    name: impl Fn(&T) -> &str,
    help: impl Fn(&T) -> &str,
) -> Vec<(&str, &str, Vec<&T>)> {
    let mut out: Vec<(&str, &str, Vec<&T>)> = Vec::new();
    for item in items {
        match out.iter_mut().find(|(n, _, _)| *n == name(item)) {
            Some((_, _, v)) => v.push(item),
            None => out.push((name(item), help(item), vec![item])),
        }
    }
    out
}

#[derive(Debug)]
struct SnapshotCollector(Arc<Snapshot>);

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        for (name, help, series) in families(&s.histograms, |h| &h.name, |h| &h.help) {
            let mut family =
                encoder.encode_descriptor(name, help, None, PcMetricType::Histogram)?;
            for h in series {
                let counts = classic_counts(&h.histogram);
                let buckets: Vec<(f64, u64)> = CLASSIC_BOUNDS_SECONDS
                    .iter()
                    .copied()
                    .chain([f64::INFINITY])
                    .zip(counts)
                    .collect();
                family
                    .encode_family(&h.labels)?
                    .encode_histogram::<NoLabelSet>(
                        sum_seconds(&h.histogram),
                        h.histogram.count(),
                        &buckets,
                        None,
                    )?;
            }
        }
        for (list, is_counter) in [(&s.counters, true), (&s.gauges, false)] {
            let kind = if is_counter {
                PcMetricType::Counter
            } else {
                PcMetricType::Gauge
            };
            for (name, help, series) in families(list, |m| &m.name, |m| &m.help) {
                // The encoder adds `_total` to a counter's name itself.
                let name = name.strip_suffix("_total").unwrap_or(name);
                let mut family = encoder.encode_descriptor(name, help, None, kind)?;
                for m in series {
                    let mut e = family.encode_family(&m.labels)?;
                    if is_counter {
                        e.encode_counter::<NoLabelSet, f64, f64>(&m.value, None)?;
                    } else {
                        e.encode_gauge(&m.value)?;
                    }
                }
            }
        }
        if !s.findings.is_empty() {
            let mut family = encoder.encode_descriptor(
                "tailhunt_finding",
                "Active findings; the value is the detector's confidence (0..1).",
                None,
                PcMetricType::Gauge,
            )?;
            for f in &s.findings {
                family
                    .encode_family(&finding_labels(f))?
                    .encode_gauge(&f.finding.confidence)?;
            }
        }
        Ok(())
    }
}

/// OpenMetrics text (ending in `# EOF`) with classic histograms.
pub fn render_text(snapshot: Arc<Snapshot>) -> Result<String, ExpositionError> {
    validate(&snapshot)?;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SnapshotCollector(snapshot)));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .map_err(|_| ExpositionError::Text)?;
    Ok(out)
}

fn label_pairs(labels: &Labels) -> Vec<proto::LabelPair> {
    labels
        .iter()
        .map(|(k, v)| proto::LabelPair {
            name: Some(k.clone()),
            value: Some(v.clone()),
        })
        .collect()
}

fn expo_histogram(h: &Histogram) -> proto::ExpoHistogram {
    let mut cumulative = 0u64;
    let bucket = CLASSIC_BOUNDS_SECONDS
        .iter()
        .zip(classic_counts(h))
        .map(|(&le, c)| {
            cumulative += c;
            proto::ClassicBucket {
                cumulative_count: Some(cumulative),
                upper_bound: Some(le),
            }
        })
        .collect();
    let native = native_buckets(h);
    proto::ExpoHistogram {
        sample_count: Some(h.count()),
        sample_sum: Some(sum_seconds(h)),
        bucket,
        schema: Some(NATIVE_SCHEMA),
        zero_threshold: Some(NATIVE_ZERO_THRESHOLD),
        zero_count: Some(native.zero_count),
        positive_span: native.spans,
        positive_delta: native.deltas,
    }
}

fn scalar_family(name: &str, help: &str, kind: proto::MetricType) -> proto::MetricFamily {
    proto::MetricFamily {
        name: Some(name.to_string()),
        help: Some(help.to_string()),
        r#type: Some(kind as i32),
        metric: Vec::new(),
    }
}

/// The snapshot as `MetricFamily` messages (counters named with `_total`, as Prometheus'
/// own clients do in this format).
pub fn metric_families(snapshot: &Snapshot) -> Result<Vec<proto::MetricFamily>, ExpositionError> {
    validate(snapshot)?;
    let mut out = Vec::new();
    for (name, help, series) in families(&snapshot.histograms, |h| &h.name, |h| &h.help) {
        let mut fam = scalar_family(name, help, proto::MetricType::Histogram);
        fam.metric = series
            .iter()
            .map(|h| proto::Metric {
                label: label_pairs(&h.labels),
                histogram: Some(expo_histogram(&h.histogram)),
                ..Default::default()
            })
            .collect();
        out.push(fam);
    }
    for (name, help, series) in families(&snapshot.counters, |m| &m.name, |m| &m.help) {
        let total = format!("{}_total", name.strip_suffix("_total").unwrap_or(name));
        let mut fam = scalar_family(&total, help, proto::MetricType::Counter);
        fam.metric = series
            .iter()
            .map(|m| proto::Metric {
                label: label_pairs(&m.labels),
                counter: Some(proto::Counter {
                    value: Some(m.value),
                }),
                ..Default::default()
            })
            .collect();
        out.push(fam);
    }
    let findings: Vec<ScalarMetric> = snapshot
        .findings
        .iter()
        .map(|f| ScalarMetric {
            name: "tailhunt_finding".into(),
            help: "Active findings; the value is the detector's confidence (0..1).".into(),
            labels: finding_labels(f),
            value: f.finding.confidence,
        })
        .collect();
    for (name, help, series) in families(
        &[snapshot.gauges.as_slice(), findings.as_slice()].concat(),
        |m| &m.name,
        |m| &m.help,
    ) {
        let mut fam = scalar_family(name, help, proto::MetricType::Gauge);
        fam.metric = series
            .iter()
            .map(|m| proto::Metric {
                label: label_pairs(&m.labels),
                gauge: Some(proto::Gauge {
                    value: Some(m.value),
                }),
                ..Default::default()
            })
            .collect();
        out.push(fam);
    }
    Ok(out)
}

/// The protobuf exposition: length-delimited `MetricFamily` messages.
pub fn render_protobuf(snapshot: &Snapshot) -> Result<Vec<u8>, ExpositionError> {
    let mut out = Vec::new();
    for fam in metric_families(snapshot)? {
        // Writing into a Vec cannot run out of room.
        let _ = fam.encode_length_delimited(&mut out);
    }
    Ok(out)
}

/// Findings as JSON (the `/findings` answer): a list of `{subject, finding, since_ms, ...}`
/// objects.
pub fn findings_json(snapshot: &Snapshot) -> Result<String, ExpositionError> {
    let mut out = serde_json::to_string_pretty(&snapshot.findings)
        .map_err(|e| ExpositionError::Json(e.to_string()))?;
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests;
