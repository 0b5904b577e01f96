//! `tailhunt agent` over TLS both ways, against a real Prometheus whose own endpoints are TLS
//! (`--web.config.file`), with a CA and leaf certificates made by `openssl` here: Prometheus
//! scrapes the agent's `/metrics` over HTTPS (trusting the CA, sending the bearer token), and
//! the agent remote-writes into Prometheus over HTTPS (`ca_file`). Also: plain HTTP to the
//! agent's TLS port gets no answer, and a certificate with the wrong key, or a missing key
//! file, stops the agent at start naming the files.

#[path = "../../agent/tests/common/mod.rs"]
mod tsdb;

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::agent::Agent;
use tsdb::{binary, free_port, prometheus_tls, query_with, tls_files};

/// A client trusting `ca` only.
fn tls_client(ca: &std::path::Path) -> ureq::Agent {
    let cert = ureq::tls::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap();
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::Specific(Arc::new(vec![cert])))
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .build();
    ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .build()
        .into()
}

fn agent_config(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    let cfg = dir.join("agent.toml");
    std::fs::write(&cfg, body).unwrap();
    cfg
}

#[test]
fn prometheus_scrapes_the_agent_over_tls_and_receives_its_remote_write_over_tls() {
    if binary("prometheus").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ca, prom_cert, prom_key) = tls_files(d, "prom");
    // The agent's certificate is signed by its own CA, which Prometheus is told to trust.
    let (agent_ca, agent_cert, agent_key) = tls_files(d, "agent");
    std::fs::write(d.join("token"), "tls-t0ken\n").unwrap();
    let agent_port = free_port();
    let scrape = format!(
        "scrape_configs:\n  - job_name: agent\n    scheme: https\n    tls_config:\n      ca_file: {}\n    authorization:\n      credentials: tls-t0ken\n    static_configs:\n      - targets: ['127.0.0.1:{agent_port}']\n",
        agent_ca.display()
    );
    let prom =
        prometheus_tls(&d.join("prom"), free_port(), &prom_cert, &prom_key, &scrape).unwrap();
    let cfg = agent_config(
        d,
        &format!(
            "listen = \"127.0.0.1:{agent_port}\"\ntoken_file = \"{}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\ninterval = \"500ms\"\ninstance = \"tls-agent\"\nqueue_dir = \"{}\"\n\n[[remote_write]]\nname = \"prom\"\nurl = \"{}/api/v1/write\"\nca_file = \"{}\"\n",
            d.join("token").display(),
            agent_cert.display(),
            agent_key.display(),
            d.join("queue").display(),
            prom.url,
            ca.display()
        ),
    );
    let agent = Agent::start(&cfg, &[]);
    assert_eq!(agent.addr, format!("127.0.0.1:{agent_port}"));
    // Our own HTTPS client, trusting the agent's CA: the token still applies.
    let client = tls_client(&agent_ca);
    let url = format!("https://127.0.0.1:{agent_port}/metrics");
    let resp = client.get(&url).call().unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let mut resp = client
        .get(&url)
        .header("Authorization", "Bearer tls-t0ken")
        .call()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let body = resp.body_mut().read_to_string().unwrap();
    assert!(body.contains("tailhunt_agent_uptime_seconds"), "{body}");
    // Plain HTTP to the TLS port: no HTTP answer.
    let mut s = TcpStream::connect(("127.0.0.1", agent_port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut plain = Vec::new();
    let _ = s.read_to_end(&mut plain);
    assert!(
        !String::from_utf8_lossy(&plain).contains("HTTP/1"),
        "{}",
        String::from_utf8_lossy(&plain)
    );
    // Prometheus, over TLS both ways: the scrape (job="agent") and the remote write
    // (instance="tls-agent", no job) both land.
    let prom_client = tls_client(&ca);
    let until = Instant::now() + Duration::from_secs(20);
    let (mut up, mut written) = (Vec::new(), Vec::new());
    while Instant::now() < until {
        up = query_with(&prom_client, &prom.url, "up{job=\"agent\"}");
        written = query_with(
            &prom_client,
            &prom.url,
            "count_over_time(tailhunt_agent_uptime_seconds{instance=\"tls-agent\",job=\"\"}[5m])",
        );
        if up == [1.0] && written.first().is_some_and(|&n| n >= 3.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("scraped over TLS: up = {up:?}; remote-written over TLS: {written:?} samples");
    assert_eq!(up, vec![1.0], "{}", prom.log_tail());
    assert!(written.first().is_some_and(|&n| n >= 3.0), "{written:?}");
    let scraped = query_with(
        &prom_client,
        &prom.url,
        "tailhunt_agent_uptime_seconds{job=\"agent\"}",
    );
    assert_eq!(scraped.len(), 1, "{scraped:?}");
}

#[test]
fn an_unusable_certificate_or_key_stops_the_agent_naming_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_, cert, _) = tls_files(d, "one");
    let (_, _, other_key) = tls_files(d, "two");
    let run = |body: String| {
        let cfg = agent_config(d, &body);
        let out = Command::new(env!("CARGO_BIN_EXE_tailhunt"))
            .args(["agent", "--config"])
            .arg(&cfg)
            .args(["--duration", "1s"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, err) = run(format!(
        "listen = \"127.0.0.1:0\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
        cert.display(),
        other_key.display()
    ));
    eprintln!("{err}");
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("one-cert.pem")
            && err.contains("two-key.pem")
            && err.contains("not usable together"),
        "{err}"
    );
    let (code, err) = run(format!(
        "listen = \"127.0.0.1:0\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
        cert.display(),
        d.join("missing-key.pem").display()
    ));
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("tls_key") && err.contains("missing-key.pem") && err.contains("cannot read"),
        "{err}"
    );
}
