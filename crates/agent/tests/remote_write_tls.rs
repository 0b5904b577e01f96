//! Remote write over TLS into a real Prometheus serving its receiver behind
//! `--web.config.file` TLS, with a CA and a leaf certificate made by `openssl` here: the
//! endpoint trusting that CA delivers; one given another CA delivers nothing and says why; a
//! missing or certificate-less `ca_file` is refused at start naming the file.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use tailhunt_agent::remote_write::{Batch, EndpointConfig, HistogramMode, RemoteWriter};

fn batch(n: u64) -> Batch {
    counter_batch("th_tls_batches", n)
}

fn endpoint(name: &str, url: &str, ca: &std::path::Path, dir: &std::path::Path) -> EndpointConfig {
    let mut c = EndpointConfig::new(name, url, HistogramMode::Classic, dir.join(name));
    c.ca_file = Some(ca.to_path_buf());
    c.backoff_min = Duration::from_millis(100);
    c.backoff_max = Duration::from_millis(500);
    c
}

/// A client trusting `ca` only, for the queries.
fn tls_client(ca: &std::path::Path) -> ureq::Agent {
    let pem = std::fs::read(ca).unwrap();
    let cert = ureq::tls::Certificate::from_pem(&pem).unwrap();
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::Specific(Arc::new(vec![cert])))
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .build();
    ureq::Agent::config_builder().tls_config(tls).build().into()
}

#[test]
fn remote_write_over_tls_checks_the_receivers_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = tls_files(dir.path(), "good");
    let (other_ca, _, _) = tls_files(dir.path(), "other");
    let Some(prom) = prometheus_tls(&dir.path().join("prom"), free_port(), &cert, &key, "") else {
        return;
    };
    let url = format!("{}/api/v1/write", prom.url);
    let writer = RemoteWriter::start(vec![
        endpoint("trusted", &url, &ca, dir.path()),
        endpoint("untrusted", &url, &other_ca, dir.path()),
    ])
    .unwrap();
    for n in 1..=3 {
        assert!(writer.push(&batch(n)).is_empty());
        // Distinct millisecond timestamps: Prometheus refuses a second value at the same one.
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let s = writer.status();
    assert_eq!(s[0].queue.pending_records, 0, "{:?}", s[0]);
    assert_eq!(s[0].delivered_requests, 3, "{:?}", s[0]);
    // The other CA did not sign Prometheus' certificate: nothing goes, the reason is given,
    // the batches stay queued.
    let err = s[1].last_error.clone().unwrap_or_default();
    eprintln!("untrusted endpoint: {err}");
    assert_eq!(s[1].queue.pending_records, 3, "{:?}", s[1]);
    assert_eq!(s[1].delivered_requests, 0);
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    let client = tls_client(&ca);
    let q = "count_over_time(th_tls_batches_total[10m])";
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let mut got = query_with(&client, &prom.url, q);
    while got != [3.0] && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(250));
        got = query_with(&client, &prom.url, q);
    }
    assert_eq!(got, vec![3.0], "{}", prom.log_tail());
    // Plain http to the TLS port is not delivered either.
    assert!(query(&prom.url.replace("https", "http"), q).is_empty());
}

#[test]
fn a_missing_or_empty_ca_file_is_refused_at_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = "https://127.0.0.1:1/api/v1/write";
    let missing = dir.path().join("nope.pem");
    let e = RemoteWriter::start(vec![endpoint("a", url, &missing, dir.path())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope.pem") && e.contains("cannot read"), "{e}");
    let empty = dir.path().join("key-only.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let e = RemoteWriter::start(vec![endpoint("a", url, &empty, dir.path())])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("key-only.pem") && e.contains("no PEM certificate"),
        "{e}"
    );
    let e = RemoteWriter::start(vec![endpoint(
        "a",
        "http://127.0.0.1:1/api/v1/write",
        &empty,
        dir.path(),
    )])
    .unwrap_err()
    .to_string();
    assert!(e.contains("https://"), "{e}");
    eprintln!("{e}");
}
