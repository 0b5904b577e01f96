//! Mesh mode end to end (root): three agents in three network namespaces probe each other
//! (and themselves), a real Prometheus in the first namespace scrapes all three, and `tailhunt
//! mesh --from` prints the full 3x3 matrix. The links to the third namespace go through the
//! netlab TUN emulator with 5 ms one way (this kernel has no netem), so its row and its column
//! are slow and the other cells are not; the worst pairs named involve it.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::servers::free_port;
use serde_json::Value;
use tailhunt_netlab::link::{EmulatedLink, LinkConfig};
use tailhunt_netlab::netns::{self, Netns};

/// A child process killed and reaped on drop (also when the test fails).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const ECHO_PORT: u16 = 7470;
const METRICS_PORT: u16 = 9465;

/// Starts the agent `name` in `ns`, probing `peers` (`name=addr`, itself as 127.0.0.1).
fn agent(ns: &Netns, dir: &Path, name: &str, peers: &[String]) -> Killed {
    let cfg = dir.join(format!("{name}.toml"));
    let peers: Vec<String> = peers.iter().map(|p| format!("\"{p}\"")).collect();
    std::fs::write(
        &cfg,
        format!(
            "listen = \"0.0.0.0:{METRICS_PORT}\"\ninstance = \"{name}\"\ninterval = \"500ms\"\nstore = \"{store}\"\nprobe_interval = \"200ms\"\nwindow = \"30s\"\n\n[mesh]\nlisten = \"0.0.0.0:{ECHO_PORT}\"\ntimeout = \"50ms\"\npeers = [{peers}]\n",
            store = dir.join(format!("{name}.db")).display(),
            peers = peers.join(", ")
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let child = ns
        .command(env!("CARGO_BIN_EXE_tailhunt"))
        .args(["agent", "--config"])
        .arg(&cfg)
        .args(["--duration", "120s"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Killed(child)
}

fn mesh_json(ns: &Netns, port: u16) -> Option<Value> {
    let out = ns
        .command(env!("CARGO_BIN_EXE_tailhunt"))
        .args(["--json", "mesh", "--from"])
        .arg(format!("http://127.0.0.1:{port}"))
        .args(["--range", "10s"])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).ok()
}

fn p50(doc: &Value, from: &str, to: &str) -> Option<f64> {
    doc["pairs"]
        .as_array()?
        .iter()
        .find(|p| p["from"] == from && p["to"] == to)?["p50_s"]
        .as_f64()
}

#[test]
fn three_agents_give_the_full_matrix_and_a_slow_link_shows_in_its_row_and_column() {
    if !netns::is_root() {
        eprintln!("SKIP: mesh namespaces need root");
        return;
    }
    let prom_bin = Path::new("/usr/bin/prometheus");
    if !prom_bin.exists() {
        eprintln!("SKIP: prometheus is not installed (scripts/setup.sh installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        Netns::new("mesh-a").unwrap(),
        Netns::new("mesh-b").unwrap(),
        Netns::new("mesh-c").unwrap(),
    );
    // a-b: a plain veth; a-c and b-c: the emulator, 5 ms each way.
    let (va, vb) = netns::veth(&a, "198.18.41.1/30", &b, "198.18.41.2/30").unwrap();
    let slow = LinkConfig::delay_ms(5);
    let ac = EmulatedLink::start(&a, "198.18.42.1/30", &c, "198.18.42.2/30", slow, slow).unwrap();
    let bc = EmulatedLink::start(&b, "198.18.43.1/30", &c, "198.18.43.2/30", slow, slow).unwrap();
    let at = |addr: String| format!("{addr}:{ECHO_PORT}");
    let me = format!("127.0.0.1:{ECHO_PORT}");
    let _agents = [
        agent(
            &a,
            dir.path(),
            "a",
            &[
                format!("a={me}"),
                format!("b={}", at(vb.addr.clone())),
                format!("c={}", at(ac.b_addr().to_string())),
            ],
        ),
        agent(
            &b,
            dir.path(),
            "b",
            &[
                format!("a={}", at(va.addr.clone())),
                format!("b={me}"),
                format!("c={}", at(bc.b_addr().to_string())),
            ],
        ),
        agent(
            &c,
            dir.path(),
            "c",
            &[
                format!("a={}", at(ac.a_addr().to_string())),
                format!("b={}", at(bc.a_addr().to_string())),
                format!("c={me}"),
            ],
        ),
    ];
    // Prometheus in a: its own agent on loopback, b's over the veth, c's over the slow link.
    let port = free_port();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: mesh\n    static_configs:\n      - targets: ['127.0.0.1:{METRICS_PORT}', '{}:{METRICS_PORT}', '{}:{METRICS_PORT}']\n",
            vb.addr,
            ac.b_addr()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let _prom = Killed(
        a.command(prom_bin.to_str().unwrap())
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let logs = || {
        ["a.log", "b.log", "c.log", "prometheus.log"]
            .iter()
            .map(|f| {
                let t = std::fs::read_to_string(dir.path().join(f)).unwrap_or_default();
                format!("--- {f}\n{}", &t[t.len().saturating_sub(1500)..])
            })
            .collect::<String>()
    };
    // Wait for all nine pairs (each needs two scrapes of its agent within the range).
    let until = Instant::now() + Duration::from_secs(60);
    let doc = loop {
        let doc = mesh_json(&a, port);
        let n = doc
            .as_ref()
            .and_then(|d| d["pairs"].as_array().map(|p| p.len()))
            .unwrap_or(0);
        if n >= 9 || Instant::now() > until {
            break doc;
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    let doc = doc.unwrap_or_else(|| panic!("no matrix\n{}", logs()));
    // A little longer, so every cell's range holds several seconds of probes.
    std::thread::sleep(Duration::from_secs(8));
    let doc = mesh_json(&a, port).unwrap_or(doc);
    let names = ["a", "b", "c"];
    for f in names {
        for t in names {
            let v = p50(&doc, f, t).unwrap_or_else(|| panic!("no {f} -> {t}: {doc:#}\n{}", logs()));
            let slow_pair = f != t && (f == "c" || t == "c");
            eprintln!("{f} -> {t}: p50 {:.3} ms", v * 1e3);
            if slow_pair {
                assert!(
                    v >= 0.009,
                    "{f} -> {t} crosses the 5 ms link: p50 {v} s\n{doc:#}"
                );
            } else {
                assert!(
                    v < 0.004,
                    "{f} -> {t} does not cross it: p50 {v} s\n{doc:#}"
                );
            }
        }
    }
    let text = a
        .command(env!("CARGO_BIN_EXE_tailhunt"))
        .args(["mesh", "--from"])
        .arg(format!("http://127.0.0.1:{port}"))
        .args(["--range", "10s", "--worst", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    eprintln!("{text}");
    let worst = text.split("worst pairs by p99:").nth(1).unwrap_or("");
    assert_eq!(
        worst.lines().filter(|l| !l.trim().is_empty()).count(),
        2,
        "{text}"
    );
    for line in worst.lines().filter(|l| !l.trim().is_empty()) {
        assert!(line.contains("c ->") || line.contains("-> c"), "{text}");
    }
    drop((ac, bc));
}
