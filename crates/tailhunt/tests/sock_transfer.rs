//! Root cause #4 end to end over the link emulator at 80 ms RTT: `tailhunt transfer` with a
//! pinned SO_RCVBUF is window-limited and the detector names the buffer and the process (seen
//! by the transfer itself and by `tailhunt sockets` with the setsockopt audit); without it the
//! same download is at least twice as fast and the detector is silent; a client timeout
//! shorter than the transfer closes the connection, the server sees resets and
//! `application-timeout` fires. Needs root (CI has it); namespaces and TUN devices are removed
//! by Drop guards, also when an assertion fails.

mod common;

use std::time::Duration;

use common::sock::{findings, Path80, Tailhunt, SERVER};
use common::{check_schema, Env};
use serde_json::Value;

const PORT: &str = "7400";

fn server_addr() -> String {
    format!("{SERVER}:{PORT}")
}

fn start_server(path: &Path80, env: &Env, count: &str) -> Tailhunt {
    let listen = server_addr();
    let s = Tailhunt::spawn(
        Some(&path.server),
        &env.db(),
        &[
            "transfer", "server", "--listen", &listen, "--count", count, "--json",
        ],
    );
    s.wait_line("listening on", Duration::from_secs(10));
    s
}

fn download(path: &Path80, env: &Env, extra: &[&str]) -> (u32, Value) {
    let addr = server_addr();
    let mut args = vec![
        "transfer",
        "client",
        addr.as_str(),
        "--bytes",
        "10M",
        "--json",
    ];
    args.extend_from_slice(extra);
    let c = Tailhunt::spawn(Some(&path.client), &env.db(), &args);
    // `ip netns exec` execs tailhunt: the child's pid is the client's.
    let pid = c.child.id();
    let doc = c.json();
    check_schema("transfer", &doc);
    (pid, doc)
}

fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn pinned_rcvbuf_at_80ms_is_window_limited_and_named_autotuning_is_2x_faster_root() {
    let Some(path) = Path80::new("xfer") else {
        return;
    };
    let env = Env::new();
    let server = start_server(&path, &env, "2");
    let sockets = Tailhunt::spawn(
        None,
        &env.db(),
        &[
            "sockets",
            "--netns",
            path.client.name(),
            "--netns",
            path.server.name(),
            "--duration",
            "120s",
            "--interval",
            "50ms",
            "--json",
        ],
    );
    sockets.wait_line(
        "sampling TCP sockets with the setsockopt audit",
        Duration::from_secs(20),
    );
    // The usual production view: only the receiving host (the sender is remote).
    let receiver_only = Tailhunt::spawn(
        None,
        &env.db(),
        &[
            "sockets",
            "--netns",
            path.client.name(),
            "--duration",
            "120s",
            "--interval",
            "50ms",
            "--json",
        ],
    );
    receiver_only.wait_line("sampling TCP sockets", Duration::from_secs(20));

    let (pid, pinned) = download(&path, &env, &["--rcvbuf", "64k"]);
    assert_eq!(pinned["outcome"], "complete", "{pinned:#}");
    assert_eq!(pinned["pid"], pid);
    assert_eq!(pinned["rcvbuf_requested"], 65536);
    // Window-limited: throughput within 25% of window/RTT, the sender's rwnd-limited share
    // reported.
    let ratio = f64_of(&pinned["bound_ratio"]);
    assert!(
        (0.75..=1.25).contains(&ratio),
        "throughput/bound {ratio}: {pinned:#}"
    );
    let rtt = f64_of(&pinned["rtt_ns"]);
    assert!((75e6..150e6).contains(&rtt), "RTT {rtt} ns");
    let share = f64_of(&pinned["sender"]["tcp"]["rwnd_limited_share"]);
    assert!(share > 0.2, "sender's rwnd-limited share {share}");
    let window = findings(&pinned, "receive-window-limited");
    assert_eq!(window.len(), 1, "{pinned:#}");
    let summary = window[0]["summary"].as_str().unwrap();
    let who = format!("pid {pid} (tailhunt) set SO_RCVBUF=65536");
    assert!(summary.contains(&who), "{summary}");
    assert!(window[0]["fix"].as_str().unwrap().contains("autotune"));
    assert!(window[0]["evidence"][0]["note"]
        .as_str()
        .unwrap()
        .contains("net.ipv4.tcp_rmem="));

    let (_, tuned) = download(&path, &env, &[]);
    assert_eq!(tuned["outcome"], "complete");
    assert_eq!(tuned["rcvbuf_requested"], Value::Null);
    let (t_pinned, t_tuned) = (
        f64_of(&pinned["transfer_ns"]),
        f64_of(&tuned["transfer_ns"]),
    );
    assert!(
        t_pinned >= 2.0 * t_tuned,
        "pinned {t_pinned} ns vs autotuned {t_tuned} ns"
    );
    assert!(
        findings(&tuned, "receive-window-limited").is_empty(),
        "{tuned:#}"
    );

    // The server's own runs: the sender's view of both.
    let served = server.json();
    check_schema("transfer-server", &served);
    let conns = served["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 2);
    assert!(conns
        .iter()
        .all(|c| c["outcome"] == "complete" && c["role"] == "server"));

    // `tailhunt sockets` saw the sender held by the window and named the receiver's pinning
    // from the audit.
    sockets.interrupt();
    let doc = sockets.interrupted_json();
    check_schema("sockets", &doc);
    let conns = doc["connections"].as_array().unwrap();
    let pinned_flow = format!("{} -> {}", server_addr(), pinned["local"].as_str().unwrap());
    let sender = conns
        .iter()
        .find(|c| c["flow"] == pinned_flow.as_str())
        .unwrap_or_else(|| panic!("{pinned_flow} not sampled: {doc:#}"));
    assert!(
        sender["flags"]
            .as_array()
            .unwrap()
            .contains(&Value::from("receive-window-limited")),
        "{sender:#}"
    );
    assert_eq!(sender["peer_owner"]["pid"], pid);
    assert_eq!(sender["peer_rcvbuf_set"]["option"], "SO_RCVBUF");
    assert_eq!(sender["peer_rcvbuf_set"]["value"], 65536);
    let tuned_flow = format!("{} -> {}", server_addr(), tuned["local"].as_str().unwrap());
    let other = conns
        .iter()
        .find(|c| c["flow"] == tuned_flow.as_str())
        .expect("autotuned flow sampled");
    assert!(other["flags"].as_array().unwrap().is_empty(), "{other:#}");
    let f = findings(&doc, "receive-window-limited");
    assert_eq!(f.len(), 1, "{doc:#}");
    let s = f[0]["summary"].as_str().unwrap();
    assert!(s.contains(&pinned_flow) && s.contains(&who), "{s}");

    // From the receiver alone: its connection is flagged, the finding names its own SO_RCVBUF.
    receiver_only.interrupt();
    let doc = receiver_only.interrupted_json();
    check_schema("sockets", &doc);
    let conns = doc["connections"].as_array().unwrap();
    let rx = |local: &Value| {
        conns
            .iter()
            .find(|c| c["local"] == *local && c["peer"] == server_addr().as_str())
            .unwrap_or_else(|| panic!("{local} not sampled: {doc:#}"))
    };
    let pinned_rx = rx(&pinned["local"]);
    assert_eq!(pinned_rx["peer_sampled"], false);
    assert!(
        pinned_rx["flags"]
            .as_array()
            .unwrap()
            .contains(&Value::from("receive-window-limited")),
        "{pinned_rx:#}"
    );
    assert!(
        rx(&tuned["local"])["flags"].as_array().unwrap().is_empty(),
        "{doc:#}"
    );
    let f = findings(&doc, "receive-window-limited");
    assert_eq!(f.len(), 1, "{doc:#}");
    let s = f[0]["summary"].as_str().unwrap();
    assert!(
        s.contains(&format!("{who} on the socket to {}", server_addr())),
        "{s}"
    );

    // `tailhunt diagnose` on the stored client run gives the same finding.
    let run = pinned["run_id"].as_str().unwrap();
    let d = env.json("diagnose", &["diagnose", run]);
    assert_eq!(findings(&d, "receive-window-limited").len(), 1, "{d:#}");
    // The run's clock origin is the transfer's start (it is stored once the transfer is over),
    // so its readings are not before it.
    let origin = env.run_row(run)["origin"]["mono_ns"].as_i64().unwrap();
    let start = pinned["range_ns"][0].as_i64().unwrap();
    assert!(
        origin <= start,
        "origin {} ms after the transfer began",
        (origin - start) as f64 / 1e6
    );
}

#[test]
fn client_timeout_closes_server_sees_resets_and_application_timeout_fires_root() {
    let Some(path) = Path80::new("tmo") else {
        return;
    };
    let env = Env::new();
    let server = start_server(&path, &env, "1");
    // The pinned transfer needs ~10 s here; the client gives up after 3 s.
    let (pid, doc) = download(&path, &env, &["--rcvbuf", "64k", "--timeout", "3s"]);
    assert_eq!(doc["outcome"], "timeout", "{doc:#}");
    let got = doc["bytes_transferred"].as_u64().unwrap();
    assert!(got > 0 && got < 10_000_000, "{got}");
    assert_eq!(doc["timeout_ns"], 3_000_000_000u64);
    let f = findings(&doc, "application-timeout");
    assert_eq!(f.len(), 1, "{doc:#}");
    assert_eq!(f[0]["evidence"][0]["values"]["timeout_s"], 3.0);
    let s = f[0]["summary"].as_str().unwrap();
    assert!(
        s.contains("3.00s timeout") && s.contains(&format!("pid {pid} (tailhunt)")),
        "{s}"
    );
    let needed = f64_of(&f[0]["evidence"][0]["values"]["needed_ns"]);
    assert!(needed > 3e9, "{needed}");
    // Data was arriving until the close, at the pinned window's rate: a transfer too slow
    // for the timeout, held back by the window (not a server that never answered).
    assert!(
        s.contains("still arriving") && s.contains("close to window/RTT"),
        "{s}"
    );
    let fix = f[0]["fix"].as_str().unwrap();
    assert!(fix.contains("see receive-window-limited"), "{fix}");

    let served = server.json();
    check_schema("transfer-server", &served);
    let c = &served["connections"][0];
    assert_eq!(c["outcome"], "reset", "{served:#}");
    let sent = c["bytes_transferred"].as_u64().unwrap();
    assert!(
        sent >= got && sent < 10_000_000,
        "server sent {sent}, client got {got}"
    );
    let err = c["error"].as_str().unwrap().to_lowercase();
    assert!(
        err.contains("reset") || err.contains("broken pipe"),
        "{err}"
    );
}
