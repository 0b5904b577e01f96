//! `tailhunt sockets` counts what it shows: connections in TIME_WAIT (no TCP_INFO) are counted
//! by state rather than silently left out, and states are names in JSON. Needs root for the
//! namespace that keeps the test's sockets apart from the host's.

mod common;

use std::time::Duration;

use common::capture::{load_in, namespace};
use common::sock::Tailhunt;
use common::{check_schema, Env, BIN};
use serde_json::Value;

const PORT: u16 = 7300;

#[test]
fn time_wait_connections_are_counted_by_state_not_dropped_root() {
    let env = Env::new();
    let Some(ns) = namespace("sockstate") else {
        return;
    };
    let listen = format!("127.0.0.1:{PORT}");
    let port = PORT.to_string();
    let server = Tailhunt::spawn(Some(&ns), &env.db(), &["serve", "tcp", "--listen", &listen]);
    server.wait_line("serving", Duration::from_secs(10));
    // Three connections that end before the sampling: they sit in TIME_WAIT for 60 s.
    load_in(
        &ns,
        &env,
        PORT,
        &["--rate", "50", "--duration", "500ms", "--conns", "3"],
    );
    let args = [
        "sockets",
        "--no-audit",
        "--port",
        &port,
        "--duration",
        "2s",
        "--json",
    ];
    let sockets = Tailhunt::spawn(Some(&ns), &env.db(), &args);
    sockets.wait_line("sampling TCP sockets", Duration::from_secs(10));
    // One more that moves data while it samples.
    load_in(
        &ns,
        &env,
        PORT,
        &["--rate", "100", "--duration", "1s", "--conns", "1"],
    );
    let doc = sockets.json();
    check_schema("sockets", &doc);
    let conns = doc["connections"].as_array().unwrap();
    // The first three never had a reading; the last one had readings until it closed.
    let unread: Vec<&Value> = conns
        .iter()
        .filter(|c| c["state"] == "TIME_WAIT" && c["readings"] == 0)
        .collect();
    assert!(unread.len() >= 3, "{:#}", doc["connections"]);
    // A connection without a reading has no range; one with readings spans them.
    for c in conns {
        match c["readings"].as_u64().unwrap() {
            0 => assert!(c["range_ns"].is_null(), "{c:#}"),
            _ => assert!(
                c["range_ns"][0].as_i64() <= c["range_ns"][1].as_i64(),
                "{c:#}"
            ),
        }
    }
    // Version 1 of the stored report gave them the range [0, 0]: read, it is none.
    let mut v1 = doc.clone();
    for c in v1["connections"].as_array_mut().unwrap() {
        if c["range_ns"].is_null() {
            c["range_ns"] = serde_json::json!([0, 0]);
        }
    }
    use tailhunt_model::evidence::Document;
    let old = tailhunt_model::evidence::sock::SocketsReport::upgrade(1, v1).unwrap();
    assert!(old
        .connections
        .iter()
        .all(|c| (c.readings == 0) == c.range_ns.is_none()));
    let counts = &doc["counts"];
    assert_eq!(counts["seen"].as_u64().unwrap(), conns.len() as u64);
    let without: u64 = counts["without_readings"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        counts["with_readings"].as_u64().unwrap() + without,
        conns.len() as u64
    );
    assert!(counts["without_readings"]["TIME_WAIT"].as_u64().unwrap() >= 3);
    assert!(counts["active"].as_u64().unwrap() >= 1, "{counts:#}");
    // The text says how many are listed and why the others are not.
    let text = ns
        .command(BIN)
        .arg("--db")
        .arg(env.db())
        .args([
            "sockets",
            "--no-audit",
            "--port",
            &port,
            "--duration",
            "300ms",
        ])
        .output()
        .expect("run sockets");
    assert!(text.status.success());
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.contains("without a reading (") && out.contains(" TIME_WAIT"),
        "{out}"
    );
    drop(server);
}
