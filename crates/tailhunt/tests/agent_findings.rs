//! A finding of the real agent outlives the quiet windows after it: a 3 ms floor server gives
//! a `latency-floor` finding; once the server is gone the next windows do not report it, yet
//! `/findings` keeps it (same `since_ms`, `missing_windows` counting up) until
//! `findings_clear_after` windows in a row went without it, then drops it.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::agent::Agent;
use common::servers::tailhunt_serve;
use serde_json::Value;

/// The latency-floor entries of `/findings`; None when no JSON list came back.
fn floor_findings(addr: &str) -> Option<Vec<Value>> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /findings HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let body = text.split("\r\n\r\n").nth(1)?;
    let all: Vec<Value> = serde_json::from_str(body).ok()?;
    Some(
        all.into_iter()
            .filter(|f| f["finding"]["detector"] == "latency-floor")
            .collect(),
    )
}

#[test]
fn a_finding_stays_through_quiet_windows_then_clears() {
    let dir = tempfile::tempdir().unwrap();
    let floor = tailhunt_serve("http", &["--floor", "3ms"]);
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:0\"\ninterval = \"200ms\"\nstore = \"{}\"\nprobe_interval = \"50ms\"\nwindow = \"2s\"\ntimeout = \"25ms\"\nfindings_clear_after = 2\n\n[[probe]]\nname = \"net\"\nkind = \"tcp-connect\"\ntarget = \"{addr}\"\n\n[[probe]]\nname = \"web\"\nkind = \"http\"\ntarget = \"{addr}\"\n",
            dir.path().join("agent.db").display(),
            addr = floor.addr
        ),
    )
    .unwrap();
    let agent = Agent::start(&cfg, &[]);
    let addr = agent.addr.clone();
    let until = Instant::now() + Duration::from_secs(20);
    let mut found = Vec::new();
    while found.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
        found = floor_findings(&addr).unwrap_or_default();
    }
    assert_eq!(found.len(), 1, "no latency-floor finding within 20 s");
    let since = found[0]["since_ms"].as_i64().unwrap();
    assert_eq!(found[0]["missing_windows"], 0, "{found:?}");
    // The floor server goes: the next windows have no ok web samples, so no finding.
    drop(floor);
    let mut missing_seen = Vec::new();
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        assert!(
            Instant::now() < until,
            "still active after 15 s: {missing_seen:?}"
        );
        let Some(f) = floor_findings(&addr) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let Some(f) = f.first() else { break };
        assert_eq!(f["since_ms"].as_i64(), Some(since), "{f}");
        let m = f["missing_windows"].as_u64().unwrap();
        if missing_seen.last() != Some(&m) {
            missing_seen.push(m);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("missing_windows seen while active after the server went: {missing_seen:?}");
    // It was kept through one quiet window (missing 1), then the second cleared it.
    assert!(missing_seen.contains(&1), "{missing_seen:?}");
    assert!(missing_seen.iter().all(|&m| m < 2), "{missing_seen:?}");
}
