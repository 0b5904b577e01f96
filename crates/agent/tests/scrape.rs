//! A real Prometheus scrapes the exporter: the p99 it computes from the classic buckets, and
//! from the native histogram, matches the known p99 within the bucket error; the HTTP
//! endpoints' access rules hold over real sockets.

mod common;

use common::*;
use tailhunt_agent::exposition::{FindingState, HistogramMetric, ScalarMetric, Snapshot};
use tailhunt_agent::http::{Exported, Server};
use tailhunt_model::{Finding, Verdict};

fn snapshot() -> Snapshot {
    Snapshot {
        histograms: vec![HistogramMetric {
            name: "th_test_latency_seconds".into(),
            help: "Test latency.".into(),
            labels: vec![("target".into(), "cache".into())],
            histogram: known_histogram(),
        }],
        counters: vec![ScalarMetric {
            name: "th_test_probes".into(),
            help: "Probes sent.".into(),
            labels: vec![],
            value: 10_000.0,
        }],
        gauges: vec![],
        findings: vec![FindingState {
            subject: "cache".into(),
            finding: Finding {
                detector: "gc-pause".into(),
                verdict: Verdict::Detected,
                confidence: 0.8125,
                summary: "pauses of 40 ms every 2 s".into(),
                evidence: vec![],
                fix: None,
            },
            seen: None,
        }],
    }
}

/// Counters and findings arrive whichever format was scraped.
fn check_scalars(base: &str) {
    let probes = query_until(base, "th_test_probes_total", 1, 5);
    assert_eq!(probes, vec![10_000.0]);
    let q = "tailhunt_finding{detector=\"gc-pause\",subject=\"cache\"}";
    assert_eq!(query_until(base, q, 1, 5), vec![0.8125]);
}

fn serve(token: Option<&str>) -> Server {
    let exported = Exported::new();
    exported.set(snapshot());
    Server::start("127.0.0.1:0", token.map(String::from), exported).unwrap()
}

#[test]
fn prometheus_scrapes_classic_buckets_and_finds_the_p99() {
    let server = serve(None);
    let dir = tempfile::tempdir().unwrap();
    let target = server.local_addr().to_string();
    let Some(prom) = prometheus(dir.path(), free_port(), Some(&target), &[]) else {
        return;
    };
    let q = "histogram_quantile(0.99, th_test_latency_seconds_bucket)";
    let v = query_until(&prom.url, q, 1, 20);
    assert_eq!(v.len(), 1, "no answer to {q}:\n{}", prom.log_tail());
    // The classic bucket holding the p99 is (20 ms, 30 ms]; the interpolated answer lies in it.
    assert!((0.020..=0.030).contains(&v[0]), "p99 {} s", v[0]);
    assert!(
        (v[0] - KNOWN_P99).abs() / KNOWN_P99 < 0.34,
        "p99 {} s",
        v[0]
    );
    let count = query_until(&prom.url, "th_test_latency_seconds_count", 1, 5);
    assert_eq!(count, vec![10_000.0]);
    check_scalars(&prom.url);
    eprintln!(
        "classic p99 from Prometheus: {} s (known {KNOWN_P99} s)",
        v[0]
    );
}

#[test]
fn prometheus_scrapes_native_histograms_and_finds_the_p99() {
    let server = serve(None);
    let dir = tempfile::tempdir().unwrap();
    let target = server.local_addr().to_string();
    let flags = ["--enable-feature=native-histograms"];
    let Some(prom) = prometheus(dir.path(), free_port(), Some(&target), &flags) else {
        return;
    };
    let q = "histogram_quantile(0.99, th_test_latency_seconds)";
    let v = query_until(&prom.url, q, 1, 20);
    assert_eq!(v.len(), 1, "no answer to {q}:\n{}", prom.log_tail());
    // tailhunt's bucket (<= 0.78% wide) plus one native bucket (0.54%).
    let err = (v[0] - KNOWN_P99).abs() / KNOWN_P99;
    assert!(
        err < 0.014,
        "native p99 {} s, off by {:.2}%",
        v[0],
        err * 100.0
    );
    check_scalars(&prom.url);
    eprintln!(
        "native p99 from Prometheus: {} s (known {KNOWN_P99} s, {:.3}% off)",
        v[0],
        err * 100.0
    );
}

fn get(url: &str, auth: Option<&str>) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut req = agent.get(url);
    if let Some(a) = auth {
        req = req.header("Authorization", a);
    }
    req.call().unwrap().status().as_u16()
}

#[test]
fn the_token_guards_metrics_and_findings_but_not_healthz() {
    let server = serve(Some("s3cret"));
    let base = format!("http://{}", server.local_addr());
    for path in ["/metrics", "/findings"] {
        let url = format!("{base}{path}");
        assert_eq!(get(&url, None), 401, "{path} without a token");
        assert_eq!(get(&url, Some("Bearer wrong")), 401, "{path} wrong token");
        assert_eq!(get(&url, Some("Bearer s3cret")), 200, "{path} right token");
    }
    assert_eq!(get(&format!("{base}/healthz"), None), 200);
    assert_eq!(get(&format!("{base}/nothing"), Some("Bearer s3cret")), 404);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = agent
        .post(format!("{base}/metrics"))
        .header("Authorization", "Bearer s3cret")
        .send("x")
        .unwrap();
    assert_eq!(post.status().as_u16(), 405, "no endpoint changes anything");
}

#[test]
fn the_server_listens_on_loopback_by_default_and_says_why_a_bind_fails() {
    assert!(tailhunt_agent::http::DEFAULT_LISTEN.starts_with("127.0.0.1:"));
    let first = serve(None);
    let taken = first.local_addr().to_string();
    let e = Server::start(&taken, None, Exported::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains(&taken) && e.contains("--listen"), "{e}");
    let e = Server::start("127.0.0.1:0", Some(String::new()), Exported::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty"), "{e}");
}
