use super::*;
use crate::exposition::{HistogramMetric, ScalarMetric, Snapshot};
use tailhunt_histogram::Histogram;

fn batch() -> Batch {
    let mut h = Histogram::new();
    for v in [0u64, 1_000, 1_000_000, 1_000_000, 50_000_000] {
        h.record(v);
    }
    let snapshot = Snapshot {
        histograms: vec![HistogramMetric {
            name: "x_seconds".into(),
            help: String::new(),
            labels: vec![("zone".into(), "a".into())],
            histogram: h,
        }],
        counters: vec![ScalarMetric {
            name: "x_requests".into(),
            help: String::new(),
            labels: vec![("instance".into(), "own".into())],
            value: 3.0,
        }],
        ..Snapshot::default()
    };
    let extra = vec![("instance".to_string(), "host1".to_string())];
    Batch::from_snapshot(&snapshot, 1_700_000_000_000, &extra).unwrap()
}

fn names(req: &WriteRequest) -> Vec<String> {
    req.timeseries
        .iter()
        .map(|t| {
            t.labels
                .iter()
                .map(|l| format!("{}={}", l.name, l.value))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

#[test]
fn floats_and_histograms_go_in_separate_requests_with_sorted_labels() {
    let (reqs, bad) = render(&batch(), HistogramMode::Native);
    assert_eq!(bad, 0);
    assert_eq!(reqs.len(), 2);
    // A series' own label wins over the extra one.
    assert_eq!(names(&reqs[0]), ["__name__=x_requests_total,instance=own"]);
    assert!(reqs[0].timeseries[0].histograms.is_empty());
    let h = &reqs[1].timeseries[0].histograms[0];
    assert_eq!(h.count_int, 5);
    assert_eq!(h.zero_count_int, 1);
    assert_eq!(h.timestamp, 1_700_000_000_000);
    for req in &reqs {
        for t in &req.timeseries {
            assert!(t.labels.windows(2).all(|w| w[0].name < w[1].name), "{t:?}");
        }
    }
}

#[test]
fn classic_mode_writes_cumulative_le_buckets_sum_and_count() {
    let (reqs, _) = render(&batch(), HistogramMode::Classic);
    let series = &reqs[1].timeseries;
    assert_eq!(series.len(), CLASSIC_BOUNDS + 3);
    let inf = series
        .iter()
        .find(|t| t.labels.iter().any(|l| l.name == "le" && l.value == "+Inf"))
        .unwrap();
    assert_eq!(inf.samples[0].value, 5.0);
    let values: Vec<f64> = series[..CLASSIC_BOUNDS + 1]
        .iter()
        .map(|t| t.samples[0].value)
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] <= w[1]),
        "cumulative: {values:?}"
    );
    let count = series.last().unwrap();
    assert!(names(&WriteRequest {
        timeseries: vec![count.clone()]
    })[0]
        .contains("x_seconds_count"));
    assert_eq!(count.samples[0].value, 5.0);
}

const CLASSIC_BOUNDS: usize = crate::exposition::CLASSIC_BOUNDS_SECONDS.len();

#[test]
fn vmrange_buckets_are_exact_coarse_ranges_holding_every_sample() {
    let (reqs, _) = render(&batch(), HistogramMode::Vmrange);
    let ranges: Vec<String> = reqs[1]
        .timeseries
        .iter()
        .filter_map(|t| t.labels.iter().find(|l| l.name == "vmrange"))
        .map(|l| l.value.clone())
        .collect();
    assert_eq!(ranges.len(), 4, "{ranges:?}");
    let mut h = Histogram::new();
    for v in [123_456_789u64, 123_456_790, 999] {
        h.record(v);
    }
    let b = vmrange_buckets(&h);
    assert_eq!(b.iter().map(|x| x.2).sum::<u64>(), 3);
    for v in [123_456_789u64, 999] {
        assert!(
            b.iter().any(|&(lo, hi, _)| lo <= v && v < hi),
            "{v} in {b:?}"
        );
    }
    // 2.2% wide at most.
    assert!(b
        .iter()
        .all(|&(lo, hi, _)| (hi - lo) as f64 <= lo as f64 / 32.0 + 1.0));
}

#[test]
fn a_batch_survives_its_queue_encoding() {
    let b = batch();
    assert_eq!(Batch::decode(&b.encode_to_vec()[..]).unwrap(), b);
}

#[test]
fn a_bad_url_or_a_shared_queue_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = EndpointConfig::new(
        "a",
        "ftp://x/api/v1/write",
        HistogramMode::Classic,
        dir.path().join("a"),
    );
    let e = RemoteWriter::start(vec![a]).unwrap_err().to_string();
    assert!(e.contains("http://") && e.contains("https://"), "{e}");
    let a = EndpointConfig::new(
        "a",
        "http://127.0.0.1:1/w",
        HistogramMode::Classic,
        dir.path().join("q"),
    );
    let mut b = a.clone();
    b.name = "b".into();
    let e = RemoteWriter::start(vec![a, b]).unwrap_err().to_string();
    assert!(e.contains("same queue directory"), "{e}");
}

#[test]
fn endpoint_status_becomes_metrics() {
    let status = EndpointStatus {
        name: "vm".into(),
        mode: HistogramMode::Native,
        delivered_requests: 7,
        acknowledged_batches: 4,
        retries: 2,
        rejected_requests: 1,
        queue: crate::queue::QueueStats {
            pending_bytes: 300,
            pending_records: 3,
            max_bytes: 4096,
            dropped_records: 5,
            dropped_bytes: 500,
            lost_on_open_bytes: 0,
        },
        last_error: Some("down".into()),
        queue_full: true,
        events: vec![],
        events_total: 0,
    };
    let (counters, gauges) = status_metrics(&[status]);
    let get = |list: &[ScalarMetric], n: &str| {
        list.iter()
            .find(|m| m.name == format!("tailhunt_remote_write_{n}"))
            .map(|m| m.value)
    };
    assert_eq!(get(&counters, "dropped_batches"), Some(5.0));
    assert_eq!(get(&counters, "delivered_requests"), Some(7.0));
    assert_eq!(get(&gauges, "queue_bytes"), Some(300.0));
    assert_eq!(get(&gauges, "native"), Some(1.0));
    assert_eq!(get(&gauges, "failing"), Some(1.0));
    assert_eq!(get(&gauges, "queue_full"), Some(1.0));
    let snapshot = Snapshot {
        counters,
        gauges,
        ..Snapshot::default()
    };
    assert!(crate::exposition::render_text(std::sync::Arc::new(snapshot)).is_ok());
}
