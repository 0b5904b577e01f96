//! `tailhunt pcap` and `tailhunt capture` end to end, on captures the tests write themselves in
//! network namespaces (needs root: CI has it), compared with tshark.

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::capture::{
    detectors, empty_pcap, load_in, namespace, pcap_json, short_connections, tshark_fields, Tcpdump,
};
use common::{Env, BIN};
use serde_json::Value;
use tailhunt_netlab::netns::Netns;

/// A tailhunt reference server inside `ns`, killed on drop.
struct Server(Child);

impl Server {
    fn start(ns: &Netns, port: u16, extra: &[&str]) -> Server {
        let child = ns
            .command(BIN)
            .args(["serve", "tcp", "--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server");
        std::thread::sleep(Duration::from_millis(300));
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Traffic in a fresh namespace: `conns` connections at `rate` for `secs`, captured on lo.
fn capture_load(
    env: &Env,
    name: &str,
    server: &[&str],
    load: &[&str],
) -> Option<std::path::PathBuf> {
    let ns = namespace("pcap")?;
    let file = env.path(name);
    let dump = Tcpdump::start(&ns, "lo", &file, 0, &["tcp", "port", "7100"]);
    {
        let _server = Server::start(&ns, 7100, server);
        load_in(&ns, env, 7100, load);
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(200));
    dump.stop();
    Some(file)
}

#[test]
fn counts_flows_and_handshake_rtts_agree_with_tshark_root() {
    let env = Env::new();
    let Some(file) = capture_load(
        &env,
        "mixed.pcap",
        &["--think-time", "200us", "--reply-bytes", "3000"],
        &[
            "--rate",
            "300",
            "--duration",
            "1s",
            "--conns",
            "6",
            "--nodelay=true",
        ],
    ) else {
        return;
    };
    let (flows_csv, bins_csv) = (env.path("flows.csv"), env.path("bins.csv"));
    let doc = pcap_json(
        &env,
        &file,
        &[
            "--flows-csv",
            flows_csv.to_str().unwrap(),
            "--bins-csv",
            bins_csv.to_str().unwrap(),
        ],
    );
    let r = &doc["report"];
    let frames = tshark_fields(&file, None, &["frame.len"]);
    let bytes: u64 = frames.iter().map(|f| f[0].parse::<u64>().unwrap()).sum();
    assert_eq!(r["packets"].as_u64().unwrap(), frames.len() as u64);
    assert_eq!(r["wire_bytes"].as_u64().unwrap(), bytes);
    let mut streams: Vec<String> = tshark_fields(&file, Some("tcp"), &["tcp.stream"])
        .into_iter()
        .map(|f| f[0].clone())
        .collect();
    streams.sort();
    streams.dedup();
    let flows = r["flows"].as_array().unwrap();
    assert_eq!(flows.len(), streams.len(), "flows vs tshark tcp.stream");
    assert!(flows.len() >= 6, "{} flows", flows.len());
    // The CSV exports: a row per flow; every scope of bins adds up to the capture's bytes.
    let flow_rows = std::fs::read_to_string(&flows_csv).unwrap().lines().count() - 1;
    assert_eq!(flow_rows, flows.len());
    let bins = std::fs::read_to_string(&bins_csv).unwrap();
    for scope in ["to", "from", "pair", "flow"] {
        let sum: u64 = bins
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|c| c[1] == scope)
            .map(|c| c[3].parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, bytes, "bins of scope {scope}");
    }
    // tshark's initial RTT is SYN -> handshake ACK: our two legs added up, per client port.
    let initial = tshark_fields(
        &file,
        Some("tcp.flags.syn == 1 && tcp.flags.ack == 0"),
        &["tcp.srcport", "tcp.stream"],
    );
    let irtt = tshark_fields(
        &file,
        Some("tcp.analysis.initial_rtt"),
        &["tcp.stream", "tcp.analysis.initial_rtt"],
    );
    let mut compared = 0;
    for row in &initial {
        let (port, stream) = (&row[0], &row[1]);
        let Some(t) = irtt.iter().find(|r| &r[0] == stream) else {
            continue;
        };
        let theirs_ns = (t[1].parse::<f64>().unwrap() * 1e9).round() as i64;
        let flow = flows
            .iter()
            .find(|f| f["client"].as_str().unwrap().ends_with(&format!(":{port}")))
            .expect("flow for the client port");
        let hs = &flow["tcp"]["handshake"];
        let ours = hs["server_leg_ns"].as_i64().unwrap() + hs["client_leg_ns"].as_i64().unwrap();
        assert!(
            (ours - theirs_ns).abs() <= 1,
            "stream {stream}: ours {ours} ns, tshark {theirs_ns} ns"
        );
        compared += 1;
    }
    assert!(compared >= 6, "compared {compared} handshakes");
    // Payload bytes: the server answered 3000-byte replies on every connection.
    let down: u64 = flows
        .iter()
        .map(|f| f["server_to_client"]["payload_bytes"].as_u64().unwrap())
        .sum();
    let tshark_payload: u64 = tshark_fields(
        &file,
        Some("tcp.srcport == 7100 && tcp.len > 0"),
        &["tcp.len"],
    )
    .iter()
    .map(|f| f[0].parse::<u64>().unwrap())
    .sum();
    assert_eq!(down, tshark_payload);
    // Request latency per server port, from data turns.
    let port = &doc["ports"][0];
    assert_eq!(port["server_port"], 7100);
    assert!(port["answered"].as_u64().unwrap() >= 250, "{port}");
}

/// 20 requests/s for 2 s on one connection, each written in two pieces, TCP_NODELAY on both
/// ends or on neither.
fn split_write_capture(env: &Env, nodelay: bool) -> Option<std::path::PathBuf> {
    let flag = format!("--nodelay={nodelay}");
    let load = [
        "--rate",
        "20",
        "--duration",
        "2s",
        "--conns",
        "1",
        "--split-writes",
        &flag,
    ];
    capture_load(env, &format!("nodelay-{nodelay}.pcap"), &[&flag], &load)
}

/// Root cause #2 in a capture: write-write-read without TCP_NODELAY stalls on the delayed
/// ACK; with TCP_NODELAY on both ends the same traffic shows nothing.
#[test]
fn nagle_stalls_are_found_and_vanish_with_nodelay_root() {
    let env = Env::new();
    let Some(file) = split_write_capture(&env, false) else {
        return;
    };
    let doc = pcap_json(&env, &file, &[]);
    assert_eq!(
        detectors(&doc),
        vec!["nagle-stall"],
        "{:#}",
        doc["findings"]
    );
    let stalls = doc["report"]["stalls"].as_array().unwrap();
    // Most requests stall; on a loaded host the client may fall behind and send two at once.
    let exchanges = doc["ports"][0]["answered"].as_u64().unwrap() as usize;
    assert!(
        stalls.len() >= 5 && stalls.len() * 3 >= exchanges,
        "{} stalls for {exchanges} requests",
        stalls.len()
    );
    // The delayed-ACK timer: Linux's minimum is 40 ms (an adaptive timer may fire earlier on
    // some requests); the typical stall sits there.
    let mut delays: Vec<i64> = stalls
        .iter()
        .map(|s| s["ack_delay_ns"].as_i64().unwrap())
        .collect();
    delays.sort_unstable();
    let median = delays[delays.len() / 2];
    assert!(
        (30_000_000..=60_000_000).contains(&median),
        "median ack delay {median} ns: {delays:?}"
    );
    let p50 = doc["ports"][0]["p50_ns"].as_u64().unwrap();
    assert!((30_000_000..=60_000_000).contains(&p50), "p50 {p50} ns");

    let fixed = split_write_capture(&env, true).unwrap();
    let doc = pcap_json(&env, &fixed, &[]);
    assert!(detectors(&doc).is_empty(), "{:#}", doc["findings"]);
    let p99 = doc["ports"][0]["p99_ns"].as_u64().unwrap();
    assert!(p99 < 10_000_000, "p99 {p99} ns with TCP_NODELAY");
}

#[test]
fn a_truncated_capture_keeps_what_was_read_and_names_the_offset_root() {
    let env = Env::new();
    let Some(file) = capture_load(
        &env,
        "whole.pcap",
        &[],
        &["--rate", "200", "--duration", "1s", "--conns", "2"],
    ) else {
        return;
    };
    let data = std::fs::read(&file).unwrap();
    let cut = env.path("cut.pcap");
    std::fs::write(&cut, &data[..data.len() * 2 / 3 + 7]).unwrap();
    let out = env
        .cmd()
        .args(["pcap", cut.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("truncated") && err.contains("at byte") && err.contains("partial run"),
        "{err}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("the partial analysis is printed");
    common::check_schema("pcap", &doc);
    assert_eq!(doc["status"], "partial");
    let whole = pcap_json(&env, &file, &[]);
    let (part, all) = (
        doc["report"]["packets"].as_u64().unwrap(),
        whole["report"]["packets"].as_u64().unwrap(),
    );
    assert!(part > 0 && part < all, "{part} of {all}");
    let runs = env.ok(&["runs"]);
    assert!(
        runs.lines()
            .any(|l| l.contains("partial") && l.contains("cut.pcap")),
        "{runs}"
    );
}

/// `tcpdump -C 1` starts a new file every megabyte (`rot.pcap`, `rot.pcap1`, ...); a set whose
/// writer was killed, or rotated by time (`-G`) with nothing to write, ends in an empty file.
/// Every file is read, in order, as one capture, and the empty one is skipped with a note.
#[test]
fn a_rotated_tcpdump_set_with_an_empty_last_file_is_read_whole_root() {
    let env = Env::new();
    let Some(ns) = namespace("rotate") else {
        return;
    };
    let base = env.path("rot.pcap");
    // -Z root: tcpdump otherwise drops to its own user and cannot open the next file here.
    let filter = ["-Z", "root", "-C", "1", "tcp", "port", "7100"];
    let dump = Tcpdump::start(&ns, "lo", &base, 0, &filter);
    {
        let _server = Server::start(&ns, 7100, &["--reply-bytes", "4000"]);
        load_in(
            &ns,
            &env,
            7100,
            &["--rate", "400", "--duration", "2s", "--conns", "2"],
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    dump.stop();
    let mut files = vec![base];
    while let Some(next) = Some(env.path(&format!("rot.pcap{}", files.len()))) {
        if !next.exists() {
            break;
        }
        files.push(next);
    }
    assert!(
        files.len() >= 2,
        "tcpdump -C 1 wrote {} file(s)",
        files.len()
    );
    let frames: usize = files
        .iter()
        .map(|f| tshark_fields(f, None, &["frame.len"]).len())
        .sum();
    let empty = env.path(&format!("rot.pcap{}", files.len()));
    std::fs::write(&empty, b"").unwrap();
    files.push(empty);
    let names: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    let mut args = vec!["pcap"];
    args.extend(&names);
    let doc = env.json("pcap", &args);
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["report"]["packets"].as_u64().unwrap(), frames as u64);
    let statuses: Vec<&str> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["status"].as_str().unwrap())
        .collect();
    let mut want = vec!["read"; files.len() - 1];
    want.push("empty");
    assert_eq!(statuses, want);
    // Connections span the file boundaries: the set reads like one file of the same packets
    // (mergecap -a concatenates them).
    let whole = env.path("whole.pcapng");
    let merged = std::process::Command::new("mergecap")
        .arg("-a")
        .arg("-w")
        .arg(&whole)
        .args(&names[..names.len() - 1])
        .status()
        .expect("mergecap (installed with tshark by scripts/setup.sh)");
    assert!(merged.success());
    let one = pcap_json(&env, &whole, &[]);
    assert_eq!(one["report"]["packets"], doc["report"]["packets"]);
    for k in ["answered", "unanswered", "p50_ns", "max_ns"] {
        assert_eq!(one["ports"][0][k], doc["ports"][0][k], "{k}");
    }
    assert!(doc["ports"][0]["answered"].as_u64().unwrap() >= 700);
}

#[test]
fn live_capture_writes_what_it_analysed_root() {
    let env = Env::new();
    let Some(ns) = namespace("live") else {
        return;
    };
    let file = env.path("live.pcap");
    let mut cap = ns
        .command(BIN)
        .arg("--db")
        .arg(env.db())
        .args(["capture", "-i", "lo", "--duration", "5s", "--json", "-w"])
        .arg(&file)
        .args(["--filter", "tcp port 7100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Traffic starts once the capture says it is capturing.
    let mut err = std::io::BufReader::new(cap.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert!(line.starts_with("capturing on lo"), "{line}");
    {
        let _server = Server::start(&ns, 7100, &[]);
        load_in(&ns, &env, 7100, &["--rate", "100", "--duration", "1s"]);
    }
    let status = cap.wait().unwrap();
    let mut stdout = String::new();
    std::io::Read::read_to_string(cap.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "capture failed");
    let live: Value = serde_json::from_str(&stdout).unwrap();
    common::check_schema("pcap", &live);
    let seen = live["report"]["packets"].as_u64().unwrap();
    assert!(seen >= 200, "{seen} packets");
    let again = pcap_json(&env, &file, &[]);
    assert_eq!(again["report"]["packets"].as_u64().unwrap(), seen);
    assert_eq!(again["ports"][0]["answered"], live["ports"][0]["answered"]);
}

#[test]
fn bad_input_gets_clear_messages() {
    let env = Env::new();
    let junk = env.path("junk.pcap");
    std::fs::write(&junk, b"this is not a capture at all").unwrap();
    let err = env.fails(&["pcap", junk.to_str().unwrap()]);
    assert!(err.contains("not a pcap or pcapng capture"), "{err}");
    let err = env.fails(&["pcap", env.path("missing.pcap").to_str().unwrap()]);
    assert!(err.contains("missing.pcap"), "{err}");
    let ok = empty_pcap(&env);
    let err = env.fails(&["pcap", ok.to_str().unwrap(), "--link-rate", "fast"]);
    assert!(
        err.contains("--link-rate") && err.contains("'fast'"),
        "{err}"
    );
    let err = env.fails(&["pcap", ok.to_str().unwrap(), "--bin", "1us"]);
    assert!(
        err.contains("--bin") && err.contains("out of range"),
        "{err}"
    );
    let err = env.fails(&["capture", "-i", "no-such-if0", "--duration", "1s"]);
    assert!(
        err.contains("no-such-if0") && err.contains("interface"),
        "{err}"
    );
    // An empty capture is not an error: nothing to report.
    let doc = env.json("pcap", &["pcap", ok.to_str().unwrap()]);
    assert_eq!(doc["report"]["packets"], 0);
}

#[test]
fn diagnose_rereads_a_stored_capture_run() {
    let env = Env::new();
    let ok = empty_pcap(&env);
    env.ok(&["pcap", ok.to_str().unwrap()]);
    let d = env.json("diagnose", &["diagnose", "latest"]);
    let detectors = d["detectors"].as_array().unwrap();
    assert_eq!(detectors.len(), 5, "{detectors:?}");
    assert!(detectors.contains(&serde_json::json!("link-saturated")));
}

/// `tailhunt export RUN --flows | head`: a closed pipe ends the export quietly, as it does for
/// samples (the CSV writer's error hid the pipe, and the export failed with exit 2).
#[test]
fn exporting_flows_into_a_closed_pipe_is_not_an_error() {
    let env = Env::new();
    let file = short_connections(&env, 3000, 2);
    env.ok(&["pcap", file.to_str().unwrap()]);
    // 3,000 rows of CSV: more than the pipe and the writer's buffer hold.
    let mut child = env
        .cmd()
        .args(["export", "latest", "--flows"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut out, &mut first).unwrap();
    assert_eq!(&first[..3], b"id,");
    drop(out);
    let done = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{}: {err}", done.status);
    assert!(err.is_empty(), "{err}");
}

/// `tailhunt pcap cut.pcap 2>&1 | head`: once the reader of stderr has gone, the messages
/// written after (here the truncation's) are dropped, and the exit status is still the
/// truncation's 2. `eprintln!` panicked there, and the command exited 101 with no message.
#[test]
fn a_closed_stderr_does_not_turn_an_exit_status_into_a_panic() {
    let env = Env::new();
    let file = short_connections(&env, 300, 1);
    let whole = std::fs::read(&file).unwrap();
    std::fs::write(&file, &whole[..whole.len() - 7]).unwrap();
    // A pipe with no reader: every write to it fails (EPIPE).
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let done = env
        .cmd()
        .args(["pcap", file.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(done.code(), Some(2), "{done}");
}
