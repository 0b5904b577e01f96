use super::*;
use tailhunt_model::Verdict;

fn hist(values: &[u64]) -> Histogram {
    let mut h = Histogram::new();
    for &v in values {
        h.record(v);
    }
    h
}

fn snapshot() -> Snapshot {
    Snapshot {
        histograms: vec![HistogramMetric {
            name: "t_latency_seconds".into(),
            help: "Latency.".into(),
            labels: vec![("target".into(), "db".into())],
            // 20 us, 1 ms (x2), 45 ms, 90 s.
            histogram: hist(&[20_000, 1_000_000, 1_000_000, 45_000_000, 90_000_000_000]),
        }],
        counters: vec![ScalarMetric {
            name: "t_probes".into(),
            help: "Probes.".into(),
            labels: vec![],
            value: 5.0,
        }],
        gauges: vec![ScalarMetric {
            name: "t_up".into(),
            help: "Up.".into(),
            labels: vec![("target".into(), "db".into())],
            value: 1.0,
        }],
        findings: vec![FindingState {
            subject: "db".into(),
            finding: Finding {
                detector: "gc-pause".into(),
                verdict: Verdict::Detected,
                confidence: 0.875,
                summary: "pauses".into(),
                evidence: vec![],
                fix: None,
            },
            seen: None,
        }],
    }
}

#[test]
fn text_has_cumulative_classic_buckets_exact_sum_and_count() {
    let text = render_text(Arc::new(snapshot())).unwrap();
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("no line {needle} in\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        line("t_latency_seconds_bucket{le=\"0.000025\",target=\"db\"}"),
        "1"
    );
    // 1 ms sits in tailhunt's bucket [0.999424, 1.003519] ms, whose midpoint is above 1 ms:
    // it counts under the next bound (the documented midpoint rule).
    assert_eq!(
        line("t_latency_seconds_bucket{le=\"0.001\",target=\"db\"}"),
        "1"
    );
    assert_eq!(
        line("t_latency_seconds_bucket{le=\"0.0015\",target=\"db\"}"),
        "3"
    );
    assert_eq!(
        line("t_latency_seconds_bucket{le=\"0.04\",target=\"db\"}"),
        "3"
    );
    assert_eq!(
        line("t_latency_seconds_bucket{le=\"0.05\",target=\"db\"}"),
        "4"
    );
    assert_eq!(
        line("t_latency_seconds_bucket{le=\"60.0\",target=\"db\"}"),
        "4"
    );
    assert_eq!(
        line("t_latency_seconds_bucket{le=\"+Inf\",target=\"db\"}"),
        "5"
    );
    assert_eq!(line("t_latency_seconds_count{target=\"db\"}"), "5");
    let sum: f64 = line("t_latency_seconds_sum{target=\"db\"}")
        .parse()
        .unwrap();
    assert!((sum - 90.04702).abs() < 1e-9, "{sum}");
    assert_eq!(line("t_probes_total"), "5.0");
    assert_eq!(line("t_up{target=\"db\"}"), "1.0");
    assert_eq!(
        line("tailhunt_finding{detector=\"gc-pause\",subject=\"db\"}"),
        "0.875"
    );
    assert!(text.contains("# TYPE t_latency_seconds histogram"));
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn a_counter_named_with_total_is_not_doubled() {
    let mut s = snapshot();
    s.counters[0].name = "t_probes_total".into();
    let text = render_text(Arc::new(s.clone())).unwrap();
    let line = text.lines().find(|l| l.starts_with("t_probes_total"));
    assert!(line.is_some_and(|l| l.ends_with(" 5.0")), "{text}");
    assert!(!text.contains("_total_total"));
    let fams = metric_families(&s).unwrap();
    assert!(fams
        .iter()
        .any(|f| f.name.as_deref() == Some("t_probes_total")));
}

#[test]
fn every_native_bucket_holds_its_values() {
    let values: Vec<u64> = (1..2000u64).map(|i| i * i * 997 + 3).collect();
    let h = hist(&values);
    let n = native_buckets(&h);
    assert_eq!(n.counts.iter().map(|c| c.1).sum::<u64>(), h.count());
    let scale = f64::from(1u32 << NATIVE_SCHEMA);
    for &v in &values {
        let s = v as f64 / 1e9;
        let k = native_index(s);
        assert!(2f64.powf(f64::from(k - 1) / scale) < s && s <= 2f64.powf(f64::from(k) / scale));
    }
    // Spans and deltas reproduce the absolute counts.
    let mut idx = Vec::new();
    let mut at = 0;
    for span in &n.spans {
        at += span.offset;
        for _ in 0..span.length {
            idx.push(at);
            at += 1;
        }
    }
    let mut c = 0i64;
    let counts: Vec<(i32, u64)> = idx
        .into_iter()
        .zip(&n.deltas)
        .map(|(i, d)| {
            c += d;
            (i, c as u64)
        })
        .collect();
    assert_eq!(counts, n.counts);
}

#[test]
fn protobuf_round_trips_with_native_and_classic_parts() {
    let bytes = render_protobuf(&snapshot()).unwrap();
    let mut buf = &bytes[..];
    let mut fams = Vec::new();
    while !buf.is_empty() {
        fams.push(proto::MetricFamily::decode_length_delimited(&mut buf).unwrap());
    }
    let names: Vec<&str> = fams.iter().map(|f| f.name.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "t_latency_seconds",
            "t_probes_total",
            "t_up",
            "tailhunt_finding"
        ]
    );
    let h = fams[0].metric[0].histogram.as_ref().unwrap();
    assert_eq!(h.sample_count, Some(5));
    assert_eq!(h.schema, Some(7));
    assert_eq!(h.bucket.last().unwrap().cumulative_count, Some(4));
    let mut c = 0i64;
    let total: i64 = h
        .positive_delta
        .iter()
        .map(|d| {
            c += d;
            c
        })
        .sum();
    assert_eq!(total, 5, "the native buckets hold all five samples");
    assert_eq!(fams[3].metric[0].gauge.as_ref().unwrap().value, Some(0.875));
}

#[test]
fn accept_header_picks_the_format() {
    assert_eq!(negotiate(None), Format::Text);
    assert_eq!(
        negotiate(Some("text/plain;version=0.0.4;q=0.5,*/*;q=0.1")),
        Format::Text
    );
    let prom = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3";
    assert_eq!(negotiate(Some(prom)), Format::Protobuf);
}

#[test]
fn bad_names_are_refused_with_the_name() {
    let mut s = snapshot();
    s.gauges[0].name = "9lives".into();
    let e = render_text(Arc::new(s)).unwrap_err().to_string();
    assert!(e.contains("9lives"), "{e}");
    let mut s = snapshot();
    s.gauges[0].labels[0].0 = "a-b".into();
    assert!(render_protobuf(&s).unwrap_err().to_string().contains("a-b"));
    let mut s = snapshot();
    s.gauges[0].name = "t_probes".into();
    assert!(matches!(
        render_protobuf(&s),
        Err(ExpositionError::NameClash(_))
    ));
}

#[test]
fn findings_are_json_with_their_subject() {
    let v: serde_json::Value = serde_json::from_str(&findings_json(&snapshot()).unwrap()).unwrap();
    assert_eq!(v[0]["subject"], "db");
    assert_eq!(v[0]["finding"]["detector"], "gc-pause");
}
