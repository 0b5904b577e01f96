//! The agent probing for real, scraped by a real Prometheus, and every query of the committed
//! Grafana dashboard (`dashboards/tailhunt.json`) run through Prometheus' HTTP API: each must
//! return data, so the dashboard cannot silently rot. Also: the latencies Prometheus computes
//! from the agent's buckets tell a 3 ms floor server from an echo server, and the findings of
//! a closed window reach `/findings` and `tailhunt_finding`. The agent is a mesh of one (it probes
//! its own echo) so the matrix panels have data; `agent_mesh.rs` tests the mesh itself. Run-queue
//! tracing is on, with a busy cgroup (a hog next to a sleeper on one CPU), so the run-queue
//! panels have data: it needs root and kernel BTF, and the test fails saying so without them
//! (the CI machine has both); `agent_runq.rs` tests the tracing itself.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cgroups::{bpf_ready, Cgroups, HOG, SLEEPER};
use common::servers::{free_port, tailhunt_serve};
use serde_json::Value;

/// A child process killed and reaped on drop (also when the test fails).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text
}

fn prometheus(dir: &Path, port: u16, target: &str) -> Option<Killed> {
    let bin = Path::new("/usr/bin/prometheus");
    if !bin.exists() {
        eprintln!("SKIP: prometheus is not installed (scripts/setup.sh installs it)");
        return None;
    }
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: agent\n    static_configs:\n      - targets: ['{target}']\n"),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Some(Killed(child))
}

/// An instant query's result vector (empty on any failure).
fn query(port: u16, promql: &str) -> Vec<Value> {
    let url = format!("http://127.0.0.1:{port}/api/v1/query");
    let Ok(mut resp) = ureq::get(&url).query("query", promql).call() else {
        return Vec::new();
    };
    let v: Value = resp.body_mut().read_json().unwrap_or_default();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn value(r: &Value) -> f64 {
    r["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

fn query_until(port: u16, promql: &str, secs: u64) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let v = query(port, promql);
        if !v.is_empty() || Instant::now() >= until {
            return v;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Every `expr` in the dashboard, and the metric of each `label_values(METRIC, ...)` variable.
fn dashboard_queries(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", Value::String(e)) => out.push(e.clone()),
                    ("definition", Value::String(d)) if d.starts_with("label_values(") => {
                        let metric = d["label_values(".len()..]
                            .split([',', ')'])
                            .next()
                            .unwrap_or("")
                            .trim();
                        out.push(metric.to_string());
                    }
                    _ => dashboard_queries(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| dashboard_queries(x, out)),
        _ => {}
    }
}

/// Grafana's variables as a test's Prometheus sees them: every host, a rate window of a few
/// scrapes.
fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "20s")
        .replace("${instance}", ".*")
        .replace("$instance", ".*")
}

#[test]
fn every_dashboard_query_returns_data_from_a_real_agent() {
    assert!(
        bpf_ready("every_dashboard_query_returns_data_from_a_real_agent"),
        "the run-queue panels need the agent's eBPF tracing: root and kernel BTF (see above)"
    );
    let dir = tempfile::tempdir().unwrap();
    // A busy cgroup: a hog and a sleeper sharing CPU 0, so waits and preemptions are traced.
    let mut cg = Cgroups::new("dash");
    cg.group("victim");
    cg.group("hog");
    cg.spawn(Some("victim"), 0, SLEEPER, 90.0);
    cg.spawn(Some("hog"), 0, HOG, 90.0);
    let echo = tailhunt_serve("tcp", &[]);
    let floor = tailhunt_serve("http", &["--floor", "3ms"]);
    // A remote-write endpoint nobody listens on: the queue panel needs an endpoint.
    let down = free_port();
    // A mesh of one (the agent probes its own echo), for the matrix panels.
    let echo_port = free_port();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"listen = "127.0.0.1:0"
interval = "500ms"
queue_dir = "{queue}"
store = "{store}"
probe_interval = "100ms"
window = "4s"
timeout = "25ms"

[runq]
interval = "500ms"

[sockets]
interval = "500ms"

[mesh]
listen = "127.0.0.1:{echo_port}"
peers = ["self=127.0.0.1:{echo_port}"]
timeout = "25ms"

[[remote_write]]
name = "down"
url = "http://127.0.0.1:{down}/api/v1/write"

[[probe]]
name = "echo"
kind = "tcp-echo"
target = "{echo}"

[[probe]]
name = "net"
kind = "tcp-connect"
target = "{echo}"

[[probe]]
name = "web"
kind = "http"
target = "{floor}"
"#,
            queue = dir.path().join("queue").display(),
            store = dir.path().join("agent.db").display(),
            echo = echo.addr,
            floor = floor.addr,
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailhunt"))
        .args(["agent", "--config"])
        .arg(&cfg)
        .args(["--duration", "90s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let agent = Killed(child);
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    // The rest of the log is read away so the agent never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    assert!(first.contains("5 probe(s) every 100ms"), "{first}");
    assert!(first.contains("run-queue tracing every 500ms"), "{first}");
    let port = free_port();
    let Some(_prom) = prometheus(dir.path(), port, &addr) else {
        return;
    };
    let log = || std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
    // A finding arrives once a window has closed and been diagnosed (4 s windows).
    let found = query_until(port, "tailhunt_finding{detector=\"latency-floor\"}", 40);
    assert!(
        !found.is_empty(),
        "no latency-floor finding scraped; /findings says:\n{}\nprometheus:\n{}",
        get(&addr, "/findings"),
        log()
    );
    let findings = get(&addr, "/findings");
    assert!(findings.contains("latency-floor"), "{findings}");
    // Let a few more scrapes in, so every rate() has two points in its window.
    std::thread::sleep(Duration::from_secs(4));
    let p50 = |probe: &str| {
        let q = format!("histogram_quantile(0.5, sum by (le) (rate(tailhunt_probe_latency_seconds_bucket{{probe=\"{probe}\"}}[20s])))");
        query(port, &q).first().map(value).unwrap_or(f64::NAN)
    };
    let (web, net) = (p50("web"), p50("net"));
    eprintln!("p50 from Prometheus: web {web} s (3 ms floor), net {net} s");
    assert!(web >= 0.003, "the 3 ms floor server's p50 is {web} s");
    assert!(net < 0.003, "a loopback connect's p50 is {net} s");
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../dashboards/tailhunt.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut queries = Vec::new();
    dashboard_queries(&dash, &mut queries);
    assert!(queries.len() >= 10, "only {} queries found", queries.len());
    for needed in [
        "tailhunt_runq_latency_seconds_bucket",
        "tailhunt_runq_preempted_total",
    ] {
        assert!(
            queries.iter().any(|q| q.contains(needed)),
            "no dashboard query reads {needed}"
        );
    }
    let mut empty = Vec::new();
    for q in &queries {
        let promql = substitute(q);
        let r = query_until(port, &promql, 10);
        eprintln!("{} series: {promql}", r.len());
        if r.is_empty() {
            empty.push(promql);
        }
    }
    assert!(
        empty.is_empty(),
        "dashboard queries without data:\n{}\nprometheus:\n{}",
        empty.join("\n"),
        log()
    );
    drop(agent);
    drop(cg);
}
