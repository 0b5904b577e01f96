//! `tailhunt probe` against real servers on loopback, started and stopped by each test:
//! redis-server, memcached, PostgreSQL, MariaDB, dnsmasq and tailhunt's echo servers with a
//! latency floor; and against targets that hang, refuse, answer garbage or resolve to nothing.

mod common;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::databases;
use common::servers::{self, tailhunt_serve};
use common::Env;
use tailhunt_model::evidence::probe::ProbeRecord;
use tailhunt_model::{Outcome, Sample};
use tailhunt_store::Store;

/// Every stored `probe_latency` sample of `run`, by (probe, variant).
fn samples(env: &Env, run: &str) -> BTreeMap<(String, String), Vec<Sample>> {
    let store = Store::open_read_only(&env.db()).unwrap();
    let mut out = BTreeMap::new();
    for info in store.series(run).unwrap() {
        assert_eq!(info.name, "probe_latency");
        let key = (info.labels["probe"].clone(), info.labels["variant"].clone());
        out.insert(key, store.load_samples(info.id).unwrap());
    }
    out
}

fn record(env: &Env, run: &str) -> ProbeRecord {
    let store = Store::open_read_only(&env.db()).unwrap();
    store
        .evidence::<ProbeRecord>(run)
        .unwrap()
        .expect("probe document")
}

/// Runs `tailhunt probe` on `config` (written to `name` in the test's directory) for
/// `duration`: its JSON document.
fn probe_with_config(env: &Env, name: &str, config: &str, duration: &str) -> serde_json::Value {
    let file = env.path(name);
    std::fs::write(&file, config).unwrap();
    env.json(
        "probe",
        &[
            "probe",
            "--config",
            file.to_str().unwrap(),
            "--duration",
            duration,
        ],
    )
}

#[test]
fn every_kind_and_variant_yields_samples_from_real_servers() {
    let env = Env::new();
    let redis = servers::redis();
    let memcached = servers::memcached();
    let pg = databases::postgres();
    let maria = databases::mariadb();
    let dns = databases::dnsmasq();
    let tcp_floor = tailhunt_serve("tcp", &["--floor", "3ms"]);
    let udp_floor = tailhunt_serve("udp", &["--floor", "3ms"]);
    let web = tailhunt_serve("http", &[]);
    let disk_file = env.path("disk.bin");
    std::fs::write(&disk_file, vec![7u8; 1 << 20]).unwrap();
    // Every connection-based probe reaches its server by the name dnsmasq answers.
    let by_name = |addr: &str| addr.replace("127.0.0.1", "probe.test");
    let resolver = dns.addr();
    let config = format!(
        r#"
interval = "3s"
timeout = "250ms"
[[probe]]
name = "cache"
kind = "redis"
target = "{redis}"
resolver = "{resolver}"
compare = ["name", "connection", "pair"]
[[probe]]
name = "mc"
kind = "memcached"
target = "{mc}"
compare = ["pair"]
[[probe]]
name = "pg"
kind = "postgres"
target = "{pg}"
resolver = "{resolver}"
compare = ["name", "connection", "pair"]
[[probe]]
name = "maria"
kind = "mysql"
target = "{maria}"
compare = ["connection", "pair"]
[[probe]]
name = "lookup"
kind = "dns"
lookup = "probe.test"
resolver = "{resolver}"
[[probe]]
name = "echo"
kind = "tcp-echo"
target = "{tcp}"
[[probe]]
name = "uecho"
kind = "udp-echo"
target = "{udp}"
[[probe]]
name = "connect"
kind = "tcp-connect"
target = "{tcp_name}"
resolver = "{resolver}"
compare = ["name"]
[[probe]]
name = "true"
kind = "command"
command = ["true"]
labels = {{ zone = "a" }}
[[probe]]
name = "web"
kind = "http"
target = "{web}"
compare = ["connection"]
[[probe]]
name = "disk"
kind = "disk"
path = "{disk}"
[[probe]]
name = "route"
kind = "path"
target = "127.0.0.1"
hops = 4
"#,
        redis = by_name(&redis.addr),
        mc = memcached.addr,
        pg = by_name(&pg.addr()),
        maria = maria.addr(),
        tcp = tcp_floor.addr,
        udp = udp_floor.addr,
        tcp_name = by_name(&tcp_floor.addr),
        web = web.addr,
        disk = disk_file.display(),
    );
    // ICMP needs a raw socket where ping sockets are not allowed: root (as CI runs).
    let config = if common::is_root() {
        config + &format!("[[probe]]\nname = \"ping\"\nkind = \"icmp\"\ntarget = \"probe.test\"\nresolver = \"{resolver}\"\ncompare = [\"name\"]\n")
    } else {
        eprintln!("not root: the icmp probe is left out (no raw socket)");
        config
    };
    let doc = probe_with_config(&env, "probes.toml", &config, "10s");
    let run = doc["run_id"].as_str().unwrap();
    assert_eq!(doc["status"], "complete");
    let rounds = doc["rounds"].as_u64().unwrap();
    assert!(rounds >= 4, "{doc:#}");
    let got = samples(&env, run);
    let want: &[(&str, &[&str])] = &[
        (
            "cache",
            &["by-name", "by-ip", "fresh", "reused", "first", "second"],
        ),
        ("mc", &["first", "second"]),
        (
            "pg",
            &["by-name", "by-ip", "fresh", "reused", "first", "second"],
        ),
        ("maria", &["fresh", "reused", "first", "second"]),
        ("lookup", &["default"]),
        ("echo", &["default"]),
        ("uecho", &["default"]),
        ("connect", &["by-name", "by-ip"]),
        ("true", &["default"]),
        ("web", &["fresh", "reused"]),
        ("disk", &["default"]),
        ("route", &["default"]),
        ("ping", &["by-name", "by-ip"]),
    ];
    for (probe, variants) in want {
        if *probe == "ping" && !common::is_root() {
            continue;
        }
        for v in *variants {
            let s = got
                .get(&(probe.to_string(), v.to_string()))
                .unwrap_or_else(|| panic!("no samples for {probe}/{v}: {:?}", got.keys()));
            // One sample per round, never dropped; every one of them answered.
            assert_eq!(s.len() as u64, rounds, "{probe}/{v}");
            let ok = s.iter().filter(|x| x.outcome == Outcome::Ok).count();
            assert!(
                ok * 4 >= s.len() * 3,
                "{probe}/{v}: {ok} of {} ok: {doc:#}",
                s.len()
            );
        }
    }
    // The echo servers' floor shows in every answer.
    for p in ["echo", "uecho"] {
        let s = &got[&(p.to_string(), "default".to_string())];
        assert!(
            s.iter()
                .filter(|x| x.outcome == Outcome::Ok)
                .all(|x| x.service_ns() >= 3_000_000),
            "{p}: {s:?}"
        );
    }
    // The round of a sample is (intended - origin) / interval: each variant once per round.
    let store = Store::open_read_only(&env.db()).unwrap();
    let origin = store.run(run).unwrap().origin.mono_ns;
    for ((p, v), s) in &got {
        let mut r: Vec<i64> = s
            .iter()
            .map(|x| (x.intended_ns - origin) / 3_000_000_000)
            .collect();
        r.dedup();
        assert_eq!(r, (0..rounds as i64).collect::<Vec<_>>(), "{p}/{v}");
    }
    let rec = record(&env, run);
    assert_eq!(rec.probes.len(), if common::is_root() { 13 } else { 12 });
    assert!(
        rec.probes
            .iter()
            .all(|p| p.samples > 0 && !p.keeps_failing()),
        "{rec:#?}"
    );
    assert_eq!(
        rec.drift.started,
        rec.probes.iter().map(|p| p.samples).sum::<u64>() - rounds * 4
    );
}

/// Database servers that close a kept connection left idle past their limit (PostgreSQL's
/// `idle_session_timeout`, MariaDB's `wait_timeout`), shorter here than the interval: the
/// `reused` variant finds its connection closed before each round, opens it again untimed,
/// and every round's query answers. (Before, the query went to the closed connection and
/// every other round failed, and PostgreSQL's notice of it counted as a timeout.)
#[test]
fn databases_that_close_idle_connections_do_not_fail_every_other_round() {
    let env = Env::new();
    let pg = databases::postgres_with(&["-c", "idle_session_timeout=400"]);
    let maria = databases::mariadb_with(&["--wait-timeout=1"]);
    let config = format!(
        r#"
interval = "1500ms"
timeout = "300ms"
[[probe]]
name = "pg"
kind = "postgres"
target = "{pg}"
compare = ["connection"]
[[probe]]
name = "maria"
kind = "mysql"
target = "{maria}"
compare = ["connection"]
[[probe]]
name = "pgerr"
kind = "postgres"
target = "{pg}"
query = "DO $$BEGIN RAISE EXCEPTION 'lock timeout'; END$$"
"#,
        pg = pg.addr(),
        maria = maria.addr(),
    );
    let doc = probe_with_config(&env, "probes.toml", &config, "6s");
    let run = doc["run_id"].as_str().unwrap();
    let rounds = doc["rounds"].as_u64().unwrap();
    assert!(rounds >= 3, "{doc:#}");
    let got = samples(&env, run);
    for probe in ["pg", "maria"] {
        for variant in ["fresh", "reused"] {
            let s = &got[&(probe.to_string(), variant.to_string())];
            assert_eq!(s.len() as u64, rounds, "{probe}/{variant}");
            let failed: Vec<_> = s.iter().filter(|x| x.outcome != Outcome::Ok).collect();
            assert!(failed.is_empty(), "{probe}/{variant}: {failed:?}\n{doc:#}");
        }
    }
    // A server's error that mentions a timeout is the server's error, not the probe's
    // timeout (the idle-session FATAL was counted as a timeout before).
    let s = &got[&("pgerr".to_string(), "default".to_string())];
    assert!(
        !s.is_empty() && s.iter().all(|x| x.outcome == Outcome::Error),
        "{s:?}"
    );
}

/// The acceptance case of the cold path and the floor: a name looked up at a caching resolver
/// (whose uncached answers take a second hop to the authority) costs more than the address,
/// round by round, with an interval above zero; a server that never answers in under 3 ms is
/// a floor against the TCP connect to the same host. The run's own findings say so.
#[test]
fn a_lookup_is_a_cold_path_and_a_slow_minimum_a_floor() {
    let env = Env::new();
    let dns = databases::dnsmasq();
    let echo = tailhunt_serve("tcp", &[]);
    let floor = tailhunt_serve("http", &["--floor", "3ms"]);
    let config = format!(
        r#"
interval = "100ms"
timeout = "25ms"
[[probe]]
name = "echo"
kind = "tcp-echo"
target = "{echo_name}"
resolver = "{resolver}"
compare = ["name"]
[[probe]]
name = "net"
kind = "tcp-connect"
target = "{echo}"
[[probe]]
name = "web"
kind = "http"
target = "{floor}"
"#,
        echo_name = echo.addr.replace("127.0.0.1", "probe.test"),
        resolver = dns.addr(),
        echo = echo.addr,
        floor = floor.addr,
    );
    let doc = probe_with_config(&env, "cold.toml", &config, "8s");
    let findings = doc["findings"].as_array().unwrap();
    let about = |detector: &str, probe: &str| {
        findings
            .iter()
            .find(|f| {
                f["detector"] == detector
                    && f["summary"]
                        .as_str()
                        .unwrap()
                        .starts_with(&format!("{probe} ("))
            })
            .unwrap_or_else(|| panic!("no {detector} about {probe}: {doc:#}"))
    };
    let cold = about("cold-path", "echo");
    let values = &cold["evidence"][0]["values"];
    assert!(
        values["median_diff_low_ns"].as_f64().unwrap() > 0.0,
        "the lookup's interval must exclude zero: {cold:#}"
    );
    assert!(
        cold["summary"]
            .as_str()
            .unwrap()
            .contains("a DNS lookup adds"),
        "{cold:#}"
    );
    let floor = about("latency-floor", "web");
    // Held to the TCP connect of its own host, and the 3 ms show.
    assert!(
        floor["summary"]
            .as_str()
            .unwrap()
            .contains("net (tcp-connect"),
        "{floor:#}"
    );
    assert!(
        floor["evidence"][0]["values"]["min_ns"].as_f64().unwrap() >= 3e6,
        "{floor:#}"
    );
    // Nothing else: the network probes are no floor, the address is no cold path.
    assert!(
        !findings.iter().any(|f| f["verdict"] == "detected"
            && (f["summary"].as_str().unwrap().starts_with("net (")
                || f["detector"] == "step-change"
                || f["detector"] == "periodic-tail")),
        "{doc:#}"
    );
    let rec = record(&env, doc["run_id"].as_str().unwrap());
    let web = rec.probes.iter().find(|p| p.name == "web").unwrap();
    assert_eq!(web.host.as_deref(), Some("127.0.0.1"));
}

/// A service that goes away mid-run is a probe that keeps failing, not a latency that stepped
/// down: refused connections fail in microseconds, and errors are not read as latency.
#[test]
fn a_server_that_goes_away_is_failing_not_a_step() {
    let env = Env::new();
    let echo = tailhunt_serve("tcp", &["--duration", "3s"]);
    let doc = env.json(
        "probe",
        &[
            "probe",
            &format!("tcp-echo://{}", echo.addr),
            "--interval",
            "50ms",
            "--duration",
            "7s",
        ],
    );
    let p = &doc["probes"][0];
    assert!(p["errors"].as_u64().unwrap() >= 40, "{doc:#}");
    assert!(p["failing_now"].as_u64().unwrap() >= 3, "{doc:#}");
    let findings = doc["findings"].as_array().unwrap();
    assert!(
        findings.iter().all(|f| f["detector"] != "step-change"),
        "{doc:#}"
    );
}

/// A TCP server that answers every connection with bytes no protocol accepts.
fn garbage_server() -> (std::thread::JoinHandle<()>, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    l.set_nonblocking(false).unwrap();
    let h = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let deadline = Instant::now() + Duration::from_secs(30);
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut buf = [0u8; 256];
            let _ = c.set_read_timeout(Some(Duration::from_secs(1)));
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"%%garbage\r\n");
            if Instant::now() > deadline {
                break;
            }
        }
    });
    (h, addr)
}

#[test]
fn failing_targets_give_error_and_timeout_samples_and_the_schedule_holds() {
    let env = Env::new();
    let echo = tailhunt_serve("tcp", &[]);
    let dns = databases::dnsmasq();
    // Hangs: accepts (the kernel completes the handshake from its backlog) and never answers.
    let hang = TcpListener::bind("127.0.0.1:0").unwrap();
    // Refuses: a port nobody listens on any more.
    let refused = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (_garbage_thread, garbage) = garbage_server();
    let config = format!(
        r#"
interval = "300ms"
timeout = "80ms"
[[probe]]
name = "hangs"
kind = "tcp-echo"
target = "{hang}"
[[probe]]
name = "refuses"
kind = "tcp-connect"
target = "{refused}"
[[probe]]
name = "garbage"
kind = "redis"
target = "{garbage}"
[[probe]]
name = "nothing"
kind = "dns"
lookup = "void.test"
resolver = "{dns}"
[[probe]]
name = "fine"
kind = "tcp-echo"
target = "{echo}"
"#,
        hang = hang.local_addr().unwrap(),
        dns = dns.addr(),
        echo = echo.addr,
    );
    let file = env.path("bad.toml");
    std::fs::write(&file, config).unwrap();
    let output = env.run(&[
        "probe",
        "--config",
        file.to_str().unwrap(),
        "--duration",
        "3s",
    ]);
    assert!(output.status.success());
    let out = String::from_utf8(output.stdout).unwrap();
    // Each failing probe is announced on stderr while the run goes on, the healthy one never.
    let err = String::from_utf8(output.stderr).unwrap();
    for p in ["hangs", "refuses", "garbage", "nothing"] {
        assert!(
            err.contains(&format!("probe '{p}' is failing: default: ")),
            "{err}"
        );
    }
    assert!(!err.contains("probe 'fine' is failing"), "{err}");
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no status line for {name}:\n{out}"))
            .to_string()
    };
    assert!(
        line("hangs").contains("FAILING") && line("hangs").contains("no answer within 80.0ms"),
        "{out}"
    );
    assert!(
        line("refuses").contains("FAILING") && line("refuses").contains("refused"),
        "{out}"
    );
    assert!(
        line("garbage").contains("FAILING") && line("garbage").contains("garbage"),
        "{out}"
    );
    assert!(
        line("nothing").contains("FAILING") && line("nothing").contains("resolves to nothing"),
        "{out}"
    );
    assert!(line("fine").ends_with(" ok"), "{out}");
    assert!(out.contains("schedule drift"), "{out}");
    let store = Store::open_read_only(&env.db()).unwrap();
    let run = store.runs().unwrap().pop().unwrap();
    let rec = record(&env, &run.id);
    // Every probe has a sample for every round: failures are samples, none dropped, and the
    // hanging probe did not hold the others back.
    for p in &rec.probes {
        assert_eq!(p.samples, rec.rounds, "{p:?}");
    }
    assert!(rec.rounds >= 9, "{rec:#?}");
    // The schedule kept time: no probe started as late as a whole interval.
    assert!(rec.drift.max_ns < 300_000_000, "{:?}", rec.drift);
    let got = samples(&env, &run.id);
    let hung = &got[&("hangs".to_string(), "default".to_string())];
    assert!(
        hung.iter()
            .all(|s| s.outcome == Outcome::Timeout && s.service_ns() == 80_000_000),
        "{hung:?}"
    );
    for p in ["refuses", "garbage", "nothing"] {
        let s = &got[&(p.to_string(), "default".to_string())];
        assert!(s.iter().all(|s| s.outcome == Outcome::Error), "{p}: {s:?}");
    }
    drop(hang);
}

#[test]
fn kill_9_keeps_the_samples_up_to_the_last_commit_and_sigterm_keeps_a_partial_run() {
    let env = Env::new();
    let echo = tailhunt_serve("tcp", &[]);
    let url = format!("tcp-echo://{}", echo.addr);
    let start = |extra: &[&str]| {
        env.cmd()
            .args(["probe", &url, "--interval", "20ms", "--timeout", "5ms"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = start(&["--commit-interval", "100ms"]);
    std::thread::sleep(Duration::from_millis(2500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let store = Store::open_read_only(&env.db()).unwrap();
    let runs = store.runs().unwrap();
    let run = &runs[0];
    assert_eq!(run.status, tailhunt_model::RunStatus::Partial);
    // About 2.5 s of 20 ms rounds ran; all but the last commit interval's are kept.
    assert!(run.samples >= 50, "{} samples kept", run.samples);
    drop(store);

    let child = start(&[]);
    std::thread::sleep(Duration::from_millis(1000));
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(partial)") && text.contains(&url), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("kept what was measured as partial run"),
        "{err}"
    );
}

#[test]
fn a_bad_configuration_is_refused_naming_the_key_and_the_fix() {
    let env = Env::new();
    let file = env.path("p.toml");
    std::fs::write(&file, "[[probe]]\nkind = \"redis\"\ntraget = \"x:1\"\n").unwrap();
    let err = env.fails(&["probe", "--config", file.to_str().unwrap(), "--once"]);
    assert!(
        err.contains("unknown field `traget`") && err.contains("target"),
        "{err}"
    );
    std::fs::write(&file, "[[probe]]\nkind = \"redis\"\n").unwrap();
    let err = env.fails(&["probe", "--config", file.to_str().unwrap(), "--once"]);
    assert!(err.contains("`target` is missing"), "{err}");
    let err = env.fails(&["probe", "ftp://x:1", "--once"]);
    assert!(err.contains("unknown scheme"), "{err}");
    // Nothing ran, so nothing was stored.
    assert!(
        !env.db().exists()
            || Store::open_read_only(&env.db())
                .unwrap()
                .runs()
                .unwrap()
                .is_empty()
    );
}

#[test]
fn the_path_probe_times_each_hop_of_a_routed_path_root() {
    use tailhunt_netlab::netns::{veth, Netns};
    // client 198.18.21.1 -- .2 router .5 -- 198.18.21.6 server: two hops.
    let make = |role: &str| match Netns::new(role) {
        Ok(ns) => Some(ns),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    };
    let (Some(client), Some(router), Some(server)) = (
        make("probe-path-c"),
        make("probe-path-r"),
        make("probe-path-s"),
    ) else {
        return;
    };
    veth(&client, "198.18.21.1/30", &router, "198.18.21.2/30").unwrap();
    veth(&router, "198.18.21.5/30", &server, "198.18.21.6/30").unwrap();
    client
        .run(&["ip", "route", "add", "default", "via", "198.18.21.2"])
        .unwrap();
    server
        .run(&["ip", "route", "add", "default", "via", "198.18.21.5"])
        .unwrap();
    router
        .run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        .unwrap();
    let env = Env::new();
    let out = client
        .command(common::BIN)
        .args([
            "--db",
            env.db().to_str().unwrap(),
            "probe",
            "path://198.18.21.6",
        ])
        .args([
            "--interval",
            "1s",
            "--timeout",
            "30ms",
            "--duration",
            "3s",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    common::check_schema("probe", &doc);
    let rounds = doc["rounds"].as_u64().unwrap();
    let store = Store::open_read_only(&env.db()).unwrap();
    let run = doc["run_id"].as_str().unwrap();
    let mut hops = BTreeMap::new();
    for info in store.series(run).unwrap() {
        let s = store.load_samples(info.id).unwrap();
        hops.insert(info.labels["hop"].clone(), s);
    }
    // The router answers hop 1 (time exceeded), the server hop 2 (port unreachable); the
    // probe stops there, every round.
    assert_eq!(
        hops.keys().cloned().collect::<Vec<_>>(),
        ["1", "2"],
        "{doc:#}"
    );
    for s in hops.values() {
        assert_eq!(s.len() as u64, rounds);
        assert!(s.iter().all(|x| x.outcome == Outcome::Ok), "{s:?}");
    }
}
