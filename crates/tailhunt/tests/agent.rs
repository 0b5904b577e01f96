//! `tailhunt agent`: serves its own state behind the token while a remote-write endpoint is
//! down, reports the outage, keeps the batches queued on disk; refuses a malformed
//! configuration naming line and key; an unreachable probe target is error samples and a
//! status line, not a stop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n{auth}\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[test]
fn agent_serves_its_state_and_queues_for_a_down_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down_port = down.local_addr().unwrap().port();
    drop(down);
    std::fs::write(dir.path().join("token"), "t0ken\n").unwrap();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:0\"\ntoken_file = \"{}\"\ninterval = \"200ms\"\nqueue_dir = \"{}\"\n\n[[remote_write]]\nname = \"down\"\nurl = \"http://127.0.0.1:{down_port}/api/v1/write\"\n",
            dir.path().join("token").display(),
            dir.path().join("queue").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailhunt"))
        .args(["agent", "--config"])
        .arg(&cfg)
        .args(["--duration", "4s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    assert!(first.contains("bearer token required"), "{first}");
    assert_eq!(get(&addr, "/metrics", None).0, 401);
    assert_eq!(get(&addr, "/metrics", Some("wrong")).0, 401);
    assert_eq!(get(&addr, "/healthz", None).0, 200);
    let until = Instant::now() + Duration::from_secs(3);
    let mut body = String::new();
    while Instant::now() < until {
        let (status, text) = get(&addr, "/metrics", Some("t0ken"));
        assert_eq!(status, 200);
        body = text;
        if body.contains("tailhunt_remote_write_failing{endpoint=\"down\"} 1") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        body.contains("tailhunt_remote_write_failing{endpoint=\"down\"} 1"),
        "{body}"
    );
    assert!(body.contains("tailhunt_remote_write_queue_batches{endpoint=\"down\"}"));
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {rest}");
    assert!(rest.contains("cannot reach"), "{rest}");
    assert!(rest.contains("stay queued on disk"), "{rest}");
    let left: u64 = rest
        .split("stopped; ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(left >= 5, "only {left} batches queued: {rest}");
}

#[test]
fn a_malformed_agent_config_names_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        "interval = \"1s\"\n[[remote_write]]\nname = \"p\"\nurl = \"http://127.0.0.1:1/w\"\nhistogram = \"native\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tailhunt"))
        .args(["agent", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 5") && err.contains("histogram"), "{err}");
}

#[test]
fn an_unreachable_target_is_error_samples_and_a_status_not_a_stop() {
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open_addr = open.local_addr().unwrap().to_string();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:0\"\ninterval = \"200ms\"\nstore = \"{}\"\nprobe_interval = \"100ms\"\ntimeout = \"20ms\"\nwindow = \"1s\"\nretention = \"1s\"\n\n[[probe]]\nname = \"gone\"\nkind = \"tcp-connect\"\ntarget = \"{closed_addr}\"\n\n[[probe]]\nname = \"here\"\nkind = \"tcp-connect\"\ntarget = \"{open_addr}\"\n",
            dir.path().join("agent.db").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailhunt"))
        .args(["agent", "--config"])
        .arg(&cfg)
        .args(["--duration", "4s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    std::thread::sleep(Duration::from_millis(3000));
    let (status, body) = get(&addr, "/metrics", None);
    assert_eq!(status, 200);
    let count = |probe: &str, outcome: &str| -> f64 {
        body.lines()
            .find(|l| {
                l.starts_with("tailhunt_probe_samples_total{")
                    && l.contains(&format!("probe=\"{probe}\""))
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    };
    assert!(count("gone", "error") >= 10.0, "{body}");
    assert_eq!(count("gone", "ok"), 0.0, "{body}");
    assert!(count("here", "ok") >= 10.0, "{body}");
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {rest}");
    assert!(rest.contains("probe 'gone' is failing"), "{rest}");
    // Windows of 1 s kept for 1 s: old ones were deleted while it ran.
    let summary = rest
        .lines()
        .find(|l| l.contains("probe samples measured"))
        .unwrap_or_else(|| panic!("{rest}"));
    let n = |word: &str| -> u64 {
        summary
            .split(word)
            .next()
            .and_then(|s| s.trim_end().rsplit(' ').next()?.parse().ok())
            .unwrap_or(0)
    };
    assert!(n(" window(s) stored") >= 2, "{summary}");
    assert!(n(" deleted by retention") >= 1, "{summary}");
    let nums: Vec<&str> = summary
        .split([' ', ',', ';'])
        .filter(|w| w.parse::<u64>().is_ok())
        .collect();
    assert_eq!(nums[0], nums[1], "measured and exported differ: {summary}");
    drop(open);
}
