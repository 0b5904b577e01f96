//! End-to-end tests of `tailhunt hunt`: the real binary against real servers it did not
//! start itself — a healthy reference server, a split-write server without TCP_NODELAY behind
//! the link emulator, a Redis next to CPU hogs — and targets that refuse or cannot be reached.
//! Verdicts are read from `--json` (checked against `schema/hunt.schema.json`). Tests named
//! `root_*` need root (namespaces, captures, BPF) and skip with a message without it.

mod common;

use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::cgroups::{bpf_ready, Cgroups, HOG};
use common::servers::{free_port, redis_argv, tailhunt_serve, tailhunt_serve_in, wait_for_port};
use common::tls::tls_server;
use common::{check_schema, is_root, retry_on_noise, Env, BIN};
use serde_json::Value;
use tailhunt_netlab::link::{EmulatedLink, LinkConfig};
use tailhunt_netlab::netns::Netns;

/// Hunts load the machine: one at a time, so one does not spoil another's latencies.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `tailhunt --db DB --json hunt ARGS` (inside `ns` when given).
fn hunt(env: &Env, ns: Option<&Netns>, args: &[&str]) -> Output {
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns.name(), BIN]);
            c
        }
        None => Command::new(BIN),
    };
    c.env_remove("TAILHUNT_DB")
        .arg("--db")
        .arg(env.db())
        .args(["--json", "hunt"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run tailhunt hunt")
}

/// `tailhunt --db DB --json hunt ARGS` started in the background, output piped.
fn spawn_hunt(env: &Env, args: &[&str]) -> std::process::Child {
    env.cmd()
        .args(["--json", "hunt"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the hunt")
}

/// A hunt of a fresh local tcp server (`--budget BUDGET --max-rate 1k`), one at a time, sent
/// SIG`sig` after `after`: its store, output and stderr.
fn signalled(budget: &str, after: Duration, sig: &str) -> (Env, Output, String) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let srv = tailhunt_serve("tcp", &[]);
    let url = format!("tcp://{}", srv.addr);
    let child = spawn_hunt(&env, &[&url, "--budget", budget, "--max-rate", "1k"]);
    std::thread::sleep(after);
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args([&format!("-{sig}"), &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (env, out, err)
}

/// A hunt that must succeed: its document, checked against the schema.
fn hunt_json(env: &Env, ns: Option<&Netns>, args: &[&str]) -> Value {
    let out = hunt(env, ns, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "hunt {args:?} failed: {err}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("hunt --json prints JSON");
    check_schema("hunt", &doc);
    eprintln!("{err}");
    doc
}

/// The findings the hunt names: detected, at medium confidence (0.5) or above.
fn named(doc: &Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["verdict"] == "detected" && f["confidence"].as_f64().unwrap() >= 0.5)
        .map(|f| format!("{} ({}): {}", f["detector"], f["confidence"], f["summary"]))
        .collect()
}

/// The evidence line of a source.
fn evidence<'a>(doc: &'a Value, source: &str) -> &'a Value {
    doc["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["source"] == source)
        .unwrap_or_else(|| panic!("no evidence line for {source}: {doc:#}"))
}

/// Asserts a failed hunt exited 2 with one line on stderr containing `says`.
fn refused(out: &Output, says: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "exit status; stderr: {err}");
    let messages: Vec<&str> = err.lines().filter(|l| l.starts_with("tailhunt:")).collect();
    assert_eq!(messages.len(), 1, "one message expected: {err}");
    assert!(messages[0].contains(says), "{err}");
    assert!(out.stdout.is_empty(), "nothing on stdout");
    err
}

#[test]
fn hunt_a_healthy_local_server_names_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // On a host busy with other work a loopback server's low-rate p99 takes the host's
    // wake-up stalls (seen: 27 ms at 50/s against 0.4 ms at 4k/s, with two other test suites
    // running), which the sweep detector reads as latency rising as load falls.
    retry_on_noise("healthy hunt", healthy_hunt);
}

fn healthy_hunt() {
    let env = Env::new();
    let srv = tailhunt_serve("tcp", &[]);
    let url = format!("tcp://{}", srv.addr);
    let doc = hunt_json(&env, None, &[&url, "--budget", "25s", "--max-rate", "5k"]);
    assert_eq!(doc["status"], "complete");
    let floor = &doc["floor"];
    assert!(floor["connects"].as_u64().unwrap() > 0, "{floor}");
    let steps = doc["steps"].as_array().unwrap();
    let rates: Vec<f64> = steps.iter().map(|s| s["rate"].as_f64().unwrap()).collect();
    assert!(rates.contains(&50.0), "low rates are swept: {rates:?}");
    assert!(
        rates.iter().all(|&r| r <= 5000.0),
        "past --max-rate: {rates:?}"
    );
    assert!(
        steps.iter().any(|s| s["repeat"].as_u64() == Some(2)),
        "the rates reached are run again: {rates:?}"
    );
    assert!(
        named(&doc).is_empty(),
        "a healthy server: {:#?}",
        named(&doc)
    );
    // Every collected source is a run of the store, tagged with the hunt, that the other
    // commands read.
    for e in doc["evidence"].as_array().unwrap() {
        let Some(id) = e["run_id"].as_str() else {
            assert!(!e["note"].as_str().unwrap().is_empty(), "missing says why");
            continue;
        };
        let run = env.run_row(id);
        assert_eq!(run["params"]["hunt"], doc["hunt_id"], "{run:#}");
        if ["floor", "sweep"].contains(&e["source"].as_str().unwrap()) {
            // A chart's time axis starts at the run's origin: no request before it.
            let origin = run["origin"]["mono_ns"].as_i64().unwrap();
            let csv = env.ok(&["export", id, "--format", "csv"]);
            let first = csv
                .lines()
                .skip(1)
                // series,intended_ns,start_ns,end_ns,latency_ns,outcome; the series may be quoted.
                .filter_map(|l| l.rsplit(',').nth(4)?.parse::<i64>().ok())
                .min()
                .unwrap_or_else(|| panic!("no samples in run {id}: {csv}"));
            assert!(
                first >= origin,
                "{}: first request {} ms before the run's origin",
                e["source"],
                (origin - first) as f64 / 1e6
            );
        }
    }
    let sweep = evidence(&doc, "sweep")["run_id"].as_str().unwrap();
    let report = doc["report"]
        .as_str()
        .unwrap_or_else(|| panic!("no report: {doc:#}"));
    let html = std::fs::read_to_string(report).expect("the hunt's report");
    assert!(
        html.contains(&format!("run-{sweep}")),
        "the sweep is not in the report"
    );
    assert!(
        html.contains("data-kind=\"latency-vs-rate\""),
        "no latency-vs-rate chart"
    );
    // Every time axis is time from its run's (or capture's) start: within the hunt's
    // budget, not seconds since boot (a connection the socket sampler listed without a
    // reading once set the sockets run's axis at 0 of the monotonic clock).
    for axis in html.split("data-x=\"lin,").skip(1) {
        let f: Vec<&str> = axis.split('"').next().unwrap().split(',').collect();
        if f.get(4) == Some(&"s") {
            let (lo, hi): (f64, f64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
            assert!(
                lo >= -1.0 && hi < 600.0,
                "a time axis from {lo} s to {hi} s"
            );
        }
    }
    env.ok(&["diagnose", sweep]);
    env.ok(&["analyze", sweep]);
    if is_root() {
        for s in ["capture", "sockets"] {
            assert_eq!(evidence(&doc, s)["status"], "collected", "{doc:#}");
        }
    } else {
        let c = evidence(&doc, "capture");
        assert_eq!(c["status"], "missing");
        assert!(c["note"].as_str().unwrap().contains("root"), "{c}");
    }
}

#[test]
fn hunt_an_https_target_with_a_private_ca_sends_the_request_it_is_given() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let srv = tls_server(&env);
    let url = format!("https://{}/hunted", srv.addr);
    let ca = srv.ca.to_str().unwrap();
    let doc = hunt_json(
        &env,
        None,
        &[
            &url,
            "--budget",
            "10s",
            "--max-rate",
            "500",
            "--ca-file",
            ca,
            "--method",
            "post",
            "-H",
            "X-Test: hunt",
            "--body",
            "hello",
        ],
    );
    let steps = doc["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{doc:#}");
    let ok: u64 = steps.iter().map(|s| s["ok"].as_u64().unwrap()).sum();
    for s in steps {
        assert_eq!(s["errors"], 0, "{s:#}");
        assert!(s["ok"].as_u64().unwrap() > 0, "{s:#}");
    }
    // The server answered every measured request (and the warm-ups), the last one as given.
    assert!(srv.served() >= ok, "served {} < ok {ok}", srv.served());
    assert_eq!(srv.last(), "POST hunt hello");
    let sweep = evidence(&doc, "sweep")["run_id"].as_str().unwrap();
    let run = env.run_row(sweep);
    let http = &run["params"]["http"];
    assert_eq!(
        (&http["method"], &http["headers"], &http["body_bytes"]),
        (&Value::from("POST"), &Value::from(1), &Value::from(5)),
        "{run:#}"
    );
    // Without the CA the system's roots do not know the certificate: the first step's
    // handshake fails, and the hunt says why.
    let out = hunt(&env, None, &[&url, "--budget", "10s", "--max-rate", "200"]);
    refused(&out, "certificate");
    // A body for a target that cannot carry one is refused before anything connects.
    let out = hunt(
        &env,
        None,
        &["tcp://127.0.0.1:9", "--body", "x", "--budget", "10s"],
    );
    refused(&out, "are for http:// and https:// targets");
}

#[test]
fn hunt_a_refusing_target_exits_2_with_one_message_and_stores_nothing() {
    let env = Env::new();
    let url = format!("tcp://127.0.0.1:{}", free_port());
    let began = Instant::now();
    let out = hunt(&env, None, &[&url, "--budget", "2m"]);
    let err = refused(&out, &format!("cannot reach {url}"));
    assert!(err.contains("nothing listens there"), "{err}");
    // It ends at the first connect, not after the budget.
    assert!(
        began.elapsed() < Duration::from_secs(60),
        "{:?}",
        began.elapsed()
    );
    assert!(!env.db().exists(), "no store written for a refused target");
}

#[test]
fn hunt_an_unresolvable_or_unreachable_target_exits_2() {
    let env = Env::new();
    let out = hunt(
        &env,
        None,
        &["tcp://no-such-host.invalid:7000", "--budget", "10s"],
    );
    refused(&out, "cannot resolve 'no-such-host.invalid'");
    let out = hunt(&env, None, &["tcp://127.0.0.1:7000", "--budget", "1s"]);
    refused(&out, "--budget");
    if !is_root() {
        eprintln!("skipped the unreachable part: needs root (a namespace without routes)");
        return;
    }
    // A namespace with no route anywhere: the connect fails at once.
    let ns = Netns::new("hunt-nort").expect("namespace");
    let out = hunt(
        &env,
        Some(&ns),
        &["tcp://198.18.77.1:7000", "--budget", "2m"],
    );
    refused(&out, "cannot reach tcp://198.18.77.1:7000");
}

#[test]
fn hunt_a_server_that_goes_away_is_named_and_exits_2() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    // The server stops answering 4 s in, inside the first or second step.
    let srv = tailhunt_serve("tcp", &["--duration", "4s"]);
    let url = format!("tcp://{}", srv.addr);
    let out = hunt(&env, None, &[&url, "--budget", "30s", "--max-rate", "1k"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit status; stderr: {err}");
    assert!(err.contains("went away"), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("the verdict is printed");
    check_schema("hunt", &doc);
    assert_eq!(doc["status"], "partial");
    assert!(
        doc["failure"].as_str().unwrap().contains("went away"),
        "{doc:#}"
    );
    assert_eq!(evidence(&doc, "sweep")["status"], "partial", "{doc:#}");
}

/// Client 198.18.14.1 and server 198.18.14.2 joined by the link emulator, 2 ms each way.
/// Fields drop in order: the link, then the namespaces (also when a test fails).
struct Wan {
    _link: EmulatedLink,
    client: Netns,
    server: Netns,
}

const WAN_SERVER: &str = "198.18.14.2";

impl Wan {
    fn new() -> Wan {
        let client = Netns::new("hunt-c").expect("client namespace");
        let server = Netns::new("hunt-s").expect("server namespace");
        let cfg = LinkConfig::delay_ms(2);
        let link = EmulatedLink::start(
            &client,
            "198.18.14.1/30",
            &server,
            &format!("{WAN_SERVER}/30"),
            cfg,
            cfg,
        )
        .expect("start the link emulator");
        Wan {
            _link: link,
            client,
            server,
        }
    }
}

#[test]
fn root_hunt_names_nagle_behind_a_lab_link() {
    if !is_root() {
        eprintln!("skipping root_hunt_names_nagle_behind_a_lab_link: needs root (namespaces)");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    retry_on_noise("nagle hunt", nagle_hunt);
}

fn nagle_hunt() {
    let env = Env::new();
    let wan = Wan::new();
    let listen = format!("{WAN_SERVER}:7200");
    let _srv = tailhunt_serve_in(
        Some(wan.server.name()),
        "tcp",
        &listen,
        &["--nodelay=false", "--split-writes"],
    );
    let url = format!("tcp://{listen}");
    let doc = hunt_json(
        &env,
        Some(&wan.client),
        &[&url, "--budget", "30s", "--max-rate", "5k"],
    );
    let names = named(&doc);
    assert!(
        names.iter().any(|n| n.starts_with("\"nagle-stall\"")
            || n.starts_with("\"latency-rises-as-load-falls\"")),
        "Nagle not named: {names:#?}\n{doc:#}"
    );
    // The top finding is Nagle's, not another cause.
    let top = &doc["findings"][0]["detector"];
    assert!(
        top == "nagle-stall" || top == "latency-rises-as-load-falls",
        "top finding {top}: {names:#?}"
    );
    assert_eq!(evidence(&doc, "capture")["status"], "collected", "{doc:#}");
    // The hunt's report (beside the store by default) leads with Nagle and links its chart.
    let report = doc["report"]
        .as_str()
        .unwrap_or_else(|| panic!("no report: {doc:#}"));
    assert!(
        report.starts_with(env.dir.path().to_str().unwrap()),
        "{report}"
    );
    let html = std::fs::read_to_string(report).expect("the hunt's report");
    let findings = html
        .split("<section id=\"findings\">")
        .nth(1)
        .expect("findings section");
    // Top-level findings carry their verdict as a class; their evidence items do not.
    let first = findings.split("<li class=").nth(1).expect("a finding");
    assert!(
        first.contains("nagle-stall") || first.contains("latency-rises-as-load-falls"),
        "the report's first finding is not Nagle's: {first}"
    );
    assert!(first.contains("See the evidence"), "{first}");
}

/// `redis-server` on a free loopback port, inside the test's `victim` group and pinned to CPU
/// 0 (killed by the group's drop).
fn redis_in(cg: &mut Cgroups) -> String {
    let port = free_port();
    let argv = redis_argv(port);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    cg.spawn_cmd(Some("victim"), 0, &argv);
    wait_for_port(port);
    format!("redis://127.0.0.1:{port}/k")
}

#[test]
fn root_hunt_names_the_noisy_neighbour_of_a_local_redis() {
    if !bpf_ready("root_hunt_names_the_noisy_neighbour_of_a_local_redis") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let mut cg = Cgroups::new("hunt");
    cg.group("victim");
    cg.group("neighbour");
    // The weights of the run-queue tests: a small service next to a batch job.
    cg.set_top_v1("cpu.shares", "10240");
    cg.set_v1("victim", "cpu.shares", "64");
    cg.set_v1("neighbour", "cpu.shares", "8192");
    let url = redis_in(&mut cg);
    let child = spawn_hunt(&env, &[&url, "--budget", "25s", "--max-rate", "1k"]);
    // Calm first, then three hogs on the victim's CPU for the rest of the hunt.
    std::thread::sleep(Duration::from_secs(9));
    for _ in 0..3 {
        cg.spawn(Some("neighbour"), 0, HOG, 25.0);
    }
    let out = child.wait_with_output().expect("hunt ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "hunt failed: {err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_schema("hunt", &doc);
    eprintln!("{err}");
    assert_eq!(evidence(&doc, "runq")["status"], "collected", "{doc:#}");
    let names = named(&doc);
    eprintln!("named: {names:#?}");
    let neighbour = cg.display("neighbour");
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("\"noisy-neighbor\"") && n.contains(&neighbour)),
        "no noisy-neighbor naming {neighbour}: {names:#?}\n{doc:#}"
    );
    assert_eq!(
        doc["findings"][0]["detector"], "noisy-neighbor",
        "{names:#?}"
    );
}

#[test]
fn hunt_stopped_by_a_signal_keeps_what_it_measured() {
    // Into the sweep (the floor takes about half a second, each step about 10 s).
    let (env, out, err) = signalled("2m", Duration::from_secs(4), "TERM");
    assert_eq!(out.status.code(), Some(143), "exit status; stderr: {err}");
    assert!(err.contains("kept what was measured"), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("the summary is printed");
    check_schema("hunt", &doc);
    assert_eq!(
        (&doc["status"], &doc["interrupted"]),
        (&"partial".into(), &true.into())
    );
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "the step under way is kept: {doc:#}");
    assert_eq!(steps[0]["interrupted"], true);
    let sweep = evidence(&doc, "sweep");
    assert_eq!(sweep["status"], "partial", "{doc:#}");
    let runs = env.ok(&["runs"]);
    assert!(runs.contains(sweep["run_id"].as_str().unwrap()), "{runs}");
}

/// A signal during the floor (before the sweep's first step) is an interruption, not an
/// unreachable target: exit 130, the floor kept as a partial run, no verdict claimed.
#[test]
fn hunt_stopped_before_its_first_step_says_so_and_keeps_the_floor() {
    // Inside the floor: 20 connects 20 ms apart, about 0.4 s from the start.
    let (env, out, err) = signalled("1m", Duration::from_millis(200), "INT");
    assert_eq!(out.status.code(), Some(130), "exit status; stderr: {err}");
    assert!(
        err.contains("stopped before the rate sweep's first step") && !err.contains("cannot reach"),
        "{err}"
    );
    let runs = env.json("runs", &["runs"]);
    let runs = runs["runs"].as_array().unwrap();
    let floor: Vec<&Value> = runs.iter().filter(|r| r["kind"] == "floor").collect();
    assert_eq!(floor.len(), 1, "{runs:#?}");
    assert_eq!(floor[0]["status"], "partial", "cut short: {runs:#?}");
    // No sweep; a capture or socket run is kept only if it holds something, and every run
    // kept is named.
    for r in runs {
        assert_ne!(r["kind"], "load", "{runs:#?}");
        assert!(r["samples"].as_u64().unwrap() > 0, "{runs:#?}");
        assert!(err.contains(r["id"].as_str().unwrap()), "{err}");
    }
}
