//! `tailhunt load`'s numbers add up and its warnings blame the right side: sent = ok + errors +
//! timeouts with never-sent and warm-up apart, a refused UDP request is an error, absurd flags
//! are refused at once, and the client-saturation advice comes only when the client's own
//! thread was busy. Real binary, real servers on loopback, started and stopped by the tests.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::servers::{free_port, tailhunt_serve};
use common::Env;
use serde_json::Value;

fn only_step(doc: &Value) -> &Value {
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{doc:#}");
    &steps[0]
}

fn n(s: &Value, k: &str) -> u64 {
    s[k].as_u64().unwrap_or_else(|| panic!("no {k}: {s:#}"))
}

/// The step's counts add up, whatever happened.
fn assert_adds_up(s: &Value) {
    assert_eq!(
        n(s, "ok") + n(s, "errors") + n(s, "timeouts"),
        n(s, "sent"),
        "{s:#}"
    );
    assert_eq!(n(s, "sent") + n(s, "unsent"), n(s, "scheduled"), "{s:#}");
}

/// The `--json` document of a `load` run that succeeded.
fn succeeded(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn warnings(s: &Value) -> String {
    s["warnings"].to_string()
}

/// Advice that makes sense only when the client is the bottleneck.
fn blames_the_client(s: &Value) -> bool {
    let w = warnings(s);
    w.contains("client is saturated") || w.contains("raise --conns")
}

#[test]
fn warm_up_is_reported_apart_and_the_counts_add_up() {
    let env = Env::new();
    let server = tailhunt_serve("tcp", &[]);
    let doc = env.json(
        "load",
        &[
            "load",
            &format!("tcp://{}", server.addr),
            "--rate",
            "200",
            "--duration",
            "2s",
            "--warmup",
            "1s",
            "--nodelay=true",
        ],
    );
    let s = only_step(&doc);
    assert_adds_up(s);
    // 2 s at 200/s measured, 1 s of warm-up apart: `sent` holds only the measured window.
    assert!((395..=405).contains(&n(s, "sent")), "{s:#}");
    assert!((195..=205).contains(&n(s, "warmup_samples")), "{s:#}");
    let text = env.ok(&[
        "load",
        &format!("tcp://{}", server.addr),
        "--rate",
        "100",
        "--duration",
        "1s",
        "--warmup",
        "500ms",
    ]);
    assert!(text.contains("never sent"), "{text}");
    assert!(text.contains("warm-up: 50 requests"), "{text}");
}

#[test]
fn a_refused_udp_request_is_an_error_not_a_timeout() {
    let env = Env::new();
    let port = free_port(); // nothing listens there: the host answers ICMP port unreachable
    let out = env.run(&[
        "load",
        &format!("udp://127.0.0.1:{port}"),
        "--rate",
        "100",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--timeout",
        "500ms",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    common::check_schema("load", &doc);
    let s = only_step(&doc);
    assert_adds_up(s);
    assert_eq!(n(s, "timeouts"), 0, "{s:#}");
    assert!(n(s, "errors") >= 95, "{s:#}");
    // Nothing ever answered: that is the server's side, named, exit 2.
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("ICMP port unreachable"), "{err}");
    assert!(!blames_the_client(s), "{s:#}");
}

/// Acceptance: `--rate 1e9` and a 20-digit rate are refused in well under a second with a
/// message naming the limit (on the old build one aborted allocating 355 TB and the other
/// grew past 4 GB). Guarded: a hang fails the test instead of hanging it.
#[test]
fn absurd_rates_are_refused_at_once_naming_the_limit() {
    let env = Env::new();
    for rate in ["1e9", "99999999999999999999"] {
        let mut child = env
            .cmd()
            .args(["load", "tcp://127.0.0.1:9", "--rate", rate])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("--rate {rate} did not end within 20 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{rate}: {err}");
        assert!(
            err.contains("above the limit of 10000000 requests/s") && err.contains("--rate"),
            "{rate}: {err}"
        );
    }
    for (flags, says) in [
        (
            &["--rate", "100k", "--duration", "10m"][..],
            "schedules 60100000 requests",
        ),
        (
            &["--rate", "10", "--conns", "99999"],
            "--conns 99999 is above the limit",
        ),
        (
            &["--rate", "10", "--max-inflight", "1000000"],
            "requests in flight",
        ),
    ] {
        let mut args = vec!["load", "tcp://127.0.0.1:9"];
        args.extend_from_slice(flags);
        let err = env.fails(&args);
        assert!(err.contains(says), "{flags:?}: {err}");
    }
    // Refused before the store is touched: no empty partial run left behind.
    assert!(env.ok(&["runs"]).contains("no runs"));
}

/// 13.5: a server that stops answering is not the client's fault.
#[test]
fn a_paused_server_is_not_blamed_on_the_client() {
    let env = Env::new();
    let server = tailhunt_serve("tcp", &["--pause", "1s+3s"]);
    let doc = env.json(
        "load",
        &[
            "load",
            &format!("tcp://{}", server.addr),
            "--rate",
            "200",
            "--duration",
            "5s",
            "--warmup",
            "0s",
            "--timeout",
            "1s",
            "--nodelay=true",
        ],
    );
    let s = only_step(&doc);
    assert_adds_up(s);
    assert!(!blames_the_client(s), "{s:#}");
    assert!(
        warnings(s).contains("the server paused or stopped answering"),
        "{s:#}"
    );
    assert_eq!(s["bottleneck"], "server", "{s:#}");
}

/// 13.5: a client that wakes late while its own thread is idle (here: it runs at nice 19 on a
/// CPU a spinning process holds) is told so, not told to add threads.
#[test]
fn a_low_rate_client_woken_late_is_not_called_saturated() {
    let env = Env::new();
    let server = tailhunt_serve("tcp", &[]);
    let hog = Command::new("taskset")
        .args(["-c", "0", "python3", "-c"])
        .arg("import time\nend = time.time() + 8\nwhile time.time() < end: pass")
        .spawn()
        .expect("python3");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _hog = Kill(hog);
    let out = Command::new("taskset")
        .args(["-c", "0", "nice", "-n", "19", common::BIN, "--db"])
        .arg(env.db())
        .args(["load", &format!("tcp://{}", server.addr)])
        .args([
            "--rate",
            "20",
            "--duration",
            "4s",
            "--warmup",
            "0s",
            "--json",
        ])
        .output()
        .unwrap();
    let doc = succeeded(&out);
    let s = only_step(&doc);
    assert_adds_up(s);
    assert!(!blames_the_client(s), "{s:#}");
    assert!(s["client_cpu"].as_f64().unwrap() < 0.5, "{s:#}");
    // The spinning neighbour makes the wake-ups late; say so when the lag shows it.
    if s["send_lag_p99_ns"].as_i64().unwrap() > 1_000_000 {
        assert_eq!(s["bottleneck"], "host-late", "{s:#}");
        assert!(warnings(s).contains("the host woke it late"), "{s:#}");
    }
}

/// The other commands' flags that size memory are bounded the same way.
#[test]
fn other_commands_refuse_flags_that_would_size_memory_without_bound() {
    let env = Env::new();
    for (args, says) in [
        (
            &["lab", "synth", "lognormal", "--count", "1000000000000"][..],
            "--count 1000000000000 is above the limit",
        ),
        (
            &["runq", "--max-cgroups", "4000000000", "--duration", "1s"],
            "--max-cgroups 4000000000: give 1 to 16384",
        ),
        (
            &["sockets", "--duration", "1000h", "--interval", "1ms"],
            "sampling rounds, above the limit",
        ),
        (
            &[
                "transfer",
                "client",
                "127.0.0.1:9",
                "--sample-interval",
                "1us",
            ],
            "give 1ms or more",
        ),
    ] {
        let err = env.fails(args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A server that closes every connection after its answer (Python's http.server speaks
/// HTTP/1.0) over a 20 ms round trip (the TUN link emulator between two namespaces): each
/// request after the first waits for a new connection, a handshake of one round trip. That
/// wait is the network's and the server's, so it is in the request's service time, not in
/// the client's lateness. (Before, the connect fell in the client lateness: p50 about 20 ms
/// here, and the service time was one round trip.) Latency from the intended send is the
/// same either way.
#[test]
fn a_connect_the_request_waited_for_is_service_time_not_client_lateness_root() {
    use tailhunt_netlab::link::{EmulatedLink, LinkConfig};
    use tailhunt_netlab::netns::Netns;
    let (client, server) = match (Netns::new("lat-c"), Netns::new("lat-s")) {
        (Ok(c), Ok(s)) => (c, s),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let cfg = LinkConfig::delay_ms(10);
    let _link = EmulatedLink::start(
        &client,
        "198.18.31.1/30",
        &server,
        "198.18.31.2/30",
        cfg,
        cfg,
    )
    .unwrap();
    let mut http = server
        .command("python3")
        .args(["-m", "http.server", "--bind", "198.18.31.2", "8080"])
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let listening = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        let out = server.run(&["ss", "-ltnH", "sport = :8080"]).unwrap();
        !out.stdout.is_empty()
    });
    let env = Env::new();
    let out = client
        .command(common::BIN)
        .args(["--db", env.db().to_str().unwrap(), "load"])
        .args([
            "http://198.18.31.2:8080/",
            "--rate",
            "10",
            "--duration",
            "3s",
        ])
        .args([
            "--conns",
            "1",
            "--max-inflight",
            "1",
            "--warmup",
            "0s",
            "--json",
        ])
        .output()
        .unwrap();
    let _ = http.kill();
    let _ = http.wait();
    assert!(listening, "http.server did not listen in its namespace");
    let doc = succeeded(&out);
    let s = only_step(&doc);
    assert_adds_up(s);
    // The emulator's threads share this test process's two CPUs with the other tests: a
    // request or two may be lost to a stall (seen once in a dozen runs); the medians are
    // what this test is about.
    assert!(n(s, "errors") + n(s, "timeouts") <= 2, "{s:#}");
    assert!(n(s, "ok") >= 25, "{s:#}");
    let ms = |part: &str, q: &str| s[part][q].as_f64().unwrap() / 1e6;
    // Two round trips (handshake, request) of 20 ms each for all but the first request.
    assert!(ms("service_ns", "p50") >= 38.0, "{s:#}");
    assert!(ms("latency_ns", "p50") >= 38.0, "{s:#}");
    assert!(ms("client_lateness_ns", "p50") < 5.0, "{s:#}");
}
