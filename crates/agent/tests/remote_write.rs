//! Remote write into a real VictoriaMetrics and a real Prometheus, queried back: histograms in
//! each mode, a 30 s outage that loses no sample (counts compared exactly), the fall back from native to classic, an
//! unreachable endpoint whose queue stays bounded.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use tailhunt_agent::exposition::{HistogramMetric, ScalarMetric, Snapshot};
use tailhunt_agent::remote_write::{Batch, EndpointConfig, HistogramMode, RemoteWriter};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A snapshot whose counter is `n` (one more per batch, so every batch is its own sample).
fn snapshot(n: u64) -> Snapshot {
    Snapshot {
        histograms: vec![HistogramMetric {
            name: "th_rw_latency_seconds".into(),
            help: "Test latency.".into(),
            labels: vec![("target".into(), "cache".into())],
            histogram: known_histogram(),
        }],
        counters: vec![ScalarMetric {
            name: "th_rw_batches".into(),
            help: "Batches pushed.".into(),
            labels: vec![],
            value: n as f64,
        }],
        ..Snapshot::default()
    }
}

fn batch(n: u64) -> Batch {
    let extra = vec![("instance".to_string(), "test-host".to_string())];
    Batch::from_snapshot(&snapshot(n), now_ms(), &extra).unwrap()
}

fn endpoint(name: &str, url: String, mode: HistogramMode, dir: &Path) -> EndpointConfig {
    let mut c = EndpointConfig::new(name, &url, mode, dir.join(format!("queue-{name}")));
    c.backoff_min = Duration::from_millis(100);
    c.backoff_max = Duration::from_millis(800);
    c.timeout = Duration::from_secs(3);
    c
}

/// A writer with one endpoint at `base`, after its first batch was handled.
fn start_and_deliver_one(base: &str, name: &str, mode: HistogramMode, dir: &Path) -> RemoteWriter {
    let url = format!("{base}/api/v1/write");
    let writer = RemoteWriter::start(vec![endpoint(name, url, mode, dir)]).unwrap();
    assert!(writer.push(&batch(1)).is_empty());
    assert!(
        writer.wait_drained(Duration::from_secs(10)),
        "{:?}",
        writer.status()
    );
    writer
}

fn check_p99(base: &str, q: &str, tolerance: f64) -> f64 {
    let v = query_until(base, q, 1, 10);
    assert_eq!(v.len(), 1, "no answer to {q}");
    let err = (v[0] - KNOWN_P99).abs() / KNOWN_P99;
    assert!(err < tolerance, "{q}: {} s, {:.2}% off", v[0], err * 100.0);
    v[0]
}

/// The outage's length: one batch is queued per second while the receiver is down.
const OUTAGE: Duration = Duration::from_secs(30);
/// The number of the last batch: one before the outage, one per second of it.
const OUTAGE_LAST: u64 = 1 + OUTAGE.as_secs();

/// Queues batches `numbers`, one a second, while the receiver is down; checks they stay
/// queued and the failure is reported.
fn outage(writer: &RemoteWriter, numbers: std::ops::RangeInclusive<u64>) {
    let started = std::time::Instant::now();
    for n in numbers {
        std::thread::sleep(Duration::from_millis(1000));
        assert!(writer.push(&batch(n)).is_empty());
    }
    let s = &writer.status()[0];
    eprintln!(
        "outage of {:.1} s: {} batch(es) queued, {} retries, last error: {:?}",
        started.elapsed().as_secs_f64(),
        s.queue.pending_records,
        s.retries,
        s.last_error
    );
    assert!(s.queue.pending_records >= OUTAGE.as_secs() - 1, "{s:?}");
    assert!(
        s.retries > 0
            && s.last_error
                .as_deref()
                .unwrap_or("")
                .contains("cannot reach"),
        "{s:?}"
    );
}

/// After the receiver at `base` is back: the queue drains, nothing was dropped, and every
/// batch arrived exactly once (the counter's samples are 1..=OUTAGE_LAST).
fn assert_drained_exactly(writer: &RemoteWriter, base: &str) {
    assert!(
        writer.wait_drained(Duration::from_secs(20)),
        "{:?}",
        writer.status()
    );
    let s = &writer.status()[0];
    assert_eq!(s.queue.dropped_records, 0, "{s:?}");
    assert!(
        s.events.iter().any(|e| e.contains("delivering again")),
        "{:?}",
        s.events
    );
    let want = [OUTAGE_LAST as f64];
    let q = "count_over_time(th_rw_batches_total[10m])";
    let count = query_until_eq(base, q, &want, 10);
    let q = "max_over_time(th_rw_batches_total[10m])";
    let max = query_until_eq(base, q, &want, 5);
    let q = "min_over_time(th_rw_batches_total[10m])";
    let min = query_until_eq(base, q, &[1.0], 5);
    eprintln!("after the outage {base} holds {count:?} batches, {min:?} to {max:?}");
    assert_eq!(count, want, "batches lost or doubled");
    assert_eq!(
        (min, max),
        (vec![1.0], want.to_vec()),
        "a gap in the batches"
    );
}

#[test]
fn victoria_metrics_receives_vmrange_buckets_and_an_outage_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let Some(mut vm) = victoria(&dir.path().join("vm"), port) else {
        return;
    };
    let writer = start_and_deliver_one(&vm.url, "vm", HistogramMode::Vmrange, dir.path());
    // VictoriaMetrics turns vmrange buckets into le buckets and interpolates inside the 2.2%
    // wide bucket holding the p99.
    let p99 = check_p99(
        &vm.url,
        "histogram_quantile(0.99, th_rw_latency_seconds_bucket)",
        0.03,
    );
    eprintln!("vmrange p99 from VictoriaMetrics: {p99} s (known {KNOWN_P99} s)");

    // Outage: the receiver is down for 30 s while a batch is queued every second.
    vm.terminate();
    outage(&writer, 2..=OUTAGE_LAST);
    let mut vm = victoria(&dir.path().join("vm"), port).unwrap();
    assert_drained_exactly(&writer, &vm.url);
    vm.stop();
}

#[test]
fn prometheus_without_native_histograms_makes_the_endpoint_fall_back_to_classic() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--web.enable-remote-write-receiver"];
    let Some(prom) = prometheus(&dir.path().join("prom"), free_port(), None, &flags) else {
        return;
    };
    let writer = start_and_deliver_one(&prom.url, "prom", HistogramMode::Native, dir.path());
    let s = &writer.status()[0];
    assert_eq!(s.mode, HistogramMode::Classic, "{s:?}");
    let said = s
        .events
        .iter()
        .find(|e| e.contains("rejects native histograms"));
    assert!(said.is_some(), "{:?}", s.events);
    eprintln!("event: {}", said.unwrap());
    assert_eq!(
        query_until(&prom.url, "th_rw_batches_total", 1, 10),
        vec![1.0]
    );
    let p99 = check_p99(
        &prom.url,
        "histogram_quantile(0.99, th_rw_latency_seconds_bucket)",
        0.34,
    );
    assert!((0.020..=0.030).contains(&p99));
    // Later batches go classic from the start: delivered, no second rejection.
    let before = writer.status()[0].delivered_requests;
    writer.push(&batch(2));
    assert!(writer.wait_drained(Duration::from_secs(10)));
    let s = &writer.status()[0];
    assert_eq!(s.delivered_requests, before + 2, "{s:?}");
    let fallbacks = s
        .events
        .iter()
        .filter(|e| e.contains("rejects native"))
        .count();
    assert_eq!(fallbacks, 1, "{:?}", s.events);
    assert_eq!(
        query_until(&prom.url, "th_rw_latency_seconds_count", 1, 10),
        vec![10_000.0]
    );
}

#[test]
fn prometheus_with_native_histograms_receives_them_and_an_outage_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let flags = [
        "--web.enable-remote-write-receiver",
        "--enable-feature=native-histograms",
    ];
    let Some(mut prom) = prometheus(&dir.path().join("prom"), port, None, &flags) else {
        return;
    };
    let writer = start_and_deliver_one(&prom.url, "prom", HistogramMode::Native, dir.path());
    assert_eq!(writer.status()[0].mode, HistogramMode::Native);
    let p99 = check_p99(
        &prom.url,
        "histogram_quantile(0.99, th_rw_latency_seconds)",
        0.014,
    );
    eprintln!("native p99 from Prometheus (remote write): {p99} s (known {KNOWN_P99} s)");

    prom.terminate();
    outage(&writer, 2..=OUTAGE_LAST);
    let prom = prometheus(&dir.path().join("prom"), port, None, &flags).unwrap();
    assert_drained_exactly(&writer, &prom.url);
    // The histograms queued during the outage arrived too: one per batch.
    let q = "count_over_time(th_rw_latency_seconds[10m])";
    let got = query_until_eq(&prom.url, q, &[OUTAGE_LAST as f64], 10);
    assert_eq!(got, vec![OUTAGE_LAST as f64], "{}", prom.log_tail());
}

#[test]
fn an_unreachable_endpoint_is_reported_and_its_queue_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}/api/v1/write", free_port());
    let mut c = endpoint("nowhere", url, HistogramMode::Classic, dir.path());
    c.queue_max_bytes = 16 * 1024;
    let writer = RemoteWriter::start(vec![c]).unwrap();
    let one = {
        use prost::Message as _;
        batch(0).encode_to_vec().len() as u64
    };
    let n = 3 * (16 * 1024) / one + 5;
    for i in 0..n {
        assert!(writer.push(&batch(i)).is_empty());
    }
    std::thread::sleep(Duration::from_millis(300));
    let s = &writer.status()[0];
    assert!(s.queue.pending_bytes <= 16 * 1024, "{s:?}");
    assert!(s.queue.dropped_records > 0, "{s:?}");
    assert_eq!(s.queue.dropped_records + s.queue.pending_records, n);
    let err = s.last_error.clone().unwrap_or_default();
    assert!(
        err.contains("cannot reach") && err.contains("127.0.0.1"),
        "{err}"
    );
    assert!(
        s.events.iter().any(|e| e.contains("queue full")),
        "{:?}",
        s.events
    );
    eprintln!("{err}");
}

#[test]
fn endpoints_are_independent_one_down_does_not_hold_back_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let Some(vm) = victoria(&dir.path().join("vm"), free_port()) else {
        return;
    };
    if binary("prometheus").is_none() {
        return;
    }
    let prom_port = free_port();
    let writer = RemoteWriter::start(vec![
        endpoint(
            "vm",
            format!("{}/api/v1/write", vm.url),
            HistogramMode::Vmrange,
            dir.path(),
        ),
        endpoint(
            "prom",
            format!("http://127.0.0.1:{prom_port}/api/v1/write"),
            HistogramMode::Classic,
            dir.path(),
        ),
    ])
    .unwrap();
    for n in 1..=3 {
        assert!(writer.push(&batch(n)).is_empty());
        std::thread::sleep(Duration::from_millis(300));
    }
    let q = "count_over_time(th_rw_batches_total[10m])";
    assert_eq!(query_until_eq(&vm.url, q, &[3.0], 10), vec![3.0]);
    let s = writer.status();
    assert!(
        s[0].queue.pending_records == 0 && s[0].last_error.is_none(),
        "{s:?}"
    );
    assert_eq!(s[1].queue.pending_records, 3, "{s:?}");
    assert!(s[1].last_error.is_some(), "{s:?}");
    // The second receiver comes up: its queue drains into it.
    let flags = ["--web.enable-remote-write-receiver"];
    let prom = prometheus(&dir.path().join("prom"), prom_port, None, &flags).unwrap();
    assert!(
        writer.wait_drained(Duration::from_secs(15)),
        "{:?}",
        writer.status()
    );
    assert_eq!(query_until_eq(&prom.url, q, &[3.0], 10), vec![3.0]);
}

/// A receiver that wants `Authorization: Bearer right`: answers 401 with a message to any
/// other, 204 once `accept_any` is set. Returns its write URL and the request count.
fn token_receiver(
    accept_any: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::sync::atomic::Ordering;
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/v1/write", server.server_addr());
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for req in server.incoming_requests() {
            count.fetch_add(1, Ordering::SeqCst);
            let ok = accept_any.load(Ordering::SeqCst)
                || req
                    .headers()
                    .iter()
                    .any(|h| h.field.equiv("Authorization") && h.value == "Bearer right");
            let resp = if ok {
                tiny_http::Response::from_string("").with_status_code(204)
            } else {
                tiny_http::Response::from_string("authorization failed: bad bearer token")
                    .with_status_code(401)
            };
            let _ = req.respond(resp);
        }
    });
    (url, seen)
}

#[test]
fn a_wrong_token_is_reported_with_the_receivers_message_and_loses_nothing() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let accept = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (url, seen) = token_receiver(accept.clone());
    let mut c = endpoint("auth", url, HistogramMode::Classic, dir.path());
    c.bearer_token = Some("wrong".into());
    let writer = RemoteWriter::start(vec![c]).unwrap();
    for n in 1..=3 {
        assert!(writer.push(&batch(n)).is_empty());
    }
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while seen.load(Ordering::SeqCst) < 3 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = &writer.status()[0];
    let err = s.last_error.clone().unwrap_or_default();
    eprintln!("{err}");
    assert!(
        err.contains("401") && err.contains("bad bearer token") && err.contains("token_file"),
        "{err}"
    );
    assert_eq!(s.queue.pending_records, 3, "{s:?}");
    assert_eq!((s.delivered_requests, s.rejected_requests), (0, 0), "{s:?}");
    // Once the receiver takes the credentials, everything queued goes.
    accept.store(true, Ordering::SeqCst);
    assert!(
        writer.wait_drained(Duration::from_secs(10)),
        "{:?}",
        writer.status()
    );
    // Three batches, each a float and a histogram request.
    assert_eq!(writer.status()[0].delivered_requests, 6);
}
