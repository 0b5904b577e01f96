//! Real Prometheus and VictoriaMetrics servers for the tests: each started on a free loopback
//! port with its own data directory, and killed by PID when its guard drops.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tailhunt_histogram::Histogram;

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The path of a server binary, or None (and the reason printed) when it is not installed.
pub fn binary(name: &str) -> Option<PathBuf> {
    let path = Path::new("/usr/bin").join(name);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("SKIP: {name} is not installed (scripts/setup.sh installs it)");
        None
    }
}

/// A server process, killed and reaped on drop.
pub struct Proc {
    child: Option<Child>,
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its port.
    pub port: u16,
    /// Its log file.
    pub log: PathBuf,
}

impl Proc {
    /// Kills the server now (as an outage would).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the server with SIGTERM (it flushes what it holds) and reaps it.
    pub fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = s.len().saturating_sub(3000);
        s[start..].to_string()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn(bin: &Path, args: &[String], port: u16, log: PathBuf, ready_path: &str) -> Proc {
    spawn_until(bin, args, port, log, |url| {
        ureq::get(&format!("{url}{ready_path}"))
            .call()
            .is_ok_and(|r| r.status() == 200)
    })
}

/// Starts `bin` and waits until `ready(base_url)` (20 s at most).
fn spawn_until(
    bin: &Path,
    args: &[String],
    port: u16,
    log: PathBuf,
    ready: impl Fn(&str) -> bool,
) -> Proc {
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let p = Proc {
        child: Some(child),
        url: format!("http://127.0.0.1:{port}"),
        port,
        log,
    };
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if ready(&p.url) {
            return p;
        }
        assert!(
            Instant::now() < until,
            "{} did not become ready:\n{}",
            bin.display(),
            p.log_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts Prometheus with `flags` on `port`, data in `dir`, scraping `scrape` (host:port)
/// every second when given.
pub fn prometheus(dir: &Path, port: u16, scrape: Option<&str>, flags: &[&str]) -> Option<Proc> {
    let bin = binary("prometheus")?;
    let mut yml = String::from("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n");
    if let Some(target) = scrape {
        yml.push_str(&format!(
            "scrape_configs:\n  - job_name: agent\n    scrape_interval: 1s\n    static_configs:\n      - targets: ['{target}']\n"
        ));
    }
    std::fs::create_dir_all(dir).unwrap();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, yml).unwrap();
    let mut args = vec![
        format!("--config.file={}", cfg.display()),
        format!("--storage.tsdb.path={}", dir.join("data").display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
    ];
    args.extend(flags.iter().map(|f| f.to_string()));
    Some(spawn(&bin, &args, port, dir.join("log"), "/-/ready"))
}

/// Starts Prometheus with its remote-write receiver behind TLS (`cert`, `key`, PEM) on
/// `port`: its URL is `https://127.0.0.1:PORT`. `scrape` is appended to its configuration
/// (a `scrape_configs:` section, or empty). Ready when its log says so.
pub fn prometheus_tls(
    dir: &Path,
    port: u16,
    cert: &Path,
    key: &Path,
    scrape: &str,
) -> Option<Proc> {
    let bin = binary("prometheus")?;
    std::fs::create_dir_all(dir).unwrap();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, format!("global:\n  scrape_interval: 1s\n{scrape}")).unwrap();
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let args = vec![
        format!("--config.file={}", cfg.display()),
        format!("--storage.tsdb.path={}", dir.join("data").display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
        format!("--web.config.file={}", web.display()),
        "--web.enable-remote-write-receiver".to_string(),
    ];
    let log = dir.join("log");
    let log2 = log.clone();
    let mut p = spawn_until(&bin, &args, port, log, move |_| {
        std::fs::read_to_string(&log2).is_ok_and(|s| s.contains("ready to receive web requests"))
    });
    p.url = format!("https://127.0.0.1:{port}");
    Some(p)
}

/// Runs `openssl ARGS` in `dir`; panics naming the step when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl (installed by scripts/setup.sh)");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA made in `dir` as `NAME-ca.pem` (key `NAME-ca.key`) and a certificate for 127.0.0.1 it
/// signed, `NAME-cert.pem` with key `NAME-key.pem`. Returns (ca, cert, key).
pub fn tls_files(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let f = |s: &str| format!("{name}-{s}");
    let subj = format!("/CN={name}-test-ca");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &subj,
            "-keyout",
            &f("ca.key"),
            "-out",
            &f("ca.pem"),
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            &f("key.pem"),
            "-out",
            &f("leaf.csr"),
        ],
    );
    std::fs::write(
        dir.join(f("leaf.ext")),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &f("leaf.csr"),
            "-CA",
            &f("ca.pem"),
            "-CAkey",
            &f("ca.key"),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &f("leaf.ext"),
            "-out",
            &f("cert.pem"),
        ],
    );
    (
        dir.join(f("ca.pem")),
        dir.join(f("cert.pem")),
        dir.join(f("key.pem")),
    )
}

/// Starts VictoriaMetrics on `port` with data in `dir` (fresh data visible to queries at once).
pub fn victoria(dir: &Path, port: u16) -> Option<Proc> {
    let bin = binary("victoria-metrics")?;
    std::fs::create_dir_all(dir).unwrap();
    let args = vec![
        format!("-httpListenAddr=127.0.0.1:{port}"),
        format!("-storageDataPath={}", dir.join("data").display()),
        "-search.latencyOffset=0s".to_string(),
        "-search.disableCache".to_string(),
    ];
    Some(spawn(&bin, &args, port, dir.join("log"), "/health"))
}

/// An instant query: the values of the result vector (empty when there is none).
pub fn query(base: &str, promql: &str) -> Vec<f64> {
    query_with(&ureq::agent(), base, promql)
}

/// An instant query through `agent` (one set up for TLS, say).
pub fn query_with(agent: &ureq::Agent, base: &str, promql: &str) -> Vec<f64> {
    let url = format!("{base}/api/v1/query");
    let Ok(mut resp) = agent.get(&url).query("query", promql).call() else {
        return Vec::new();
    };
    let v: serde_json::Value = resp.body_mut().read_json().unwrap_or_default();
    v["data"]["result"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["value"][1].as_str()?.parse::<f64>().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Polls `promql` until it returns `n` values or `secs` pass.
pub fn query_until(base: &str, promql: &str, n: usize, secs: u64) -> Vec<f64> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let v = query(base, promql);
        if v.len() >= n || Instant::now() >= until {
            return v;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Polls `promql` until its values equal `want` or `secs` pass; returns the last answer.
pub fn query_until_eq(base: &str, promql: &str, want: &[f64], secs: u64) -> Vec<f64> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let v = query(base, promql);
        if v == want || Instant::now() >= until {
            return v;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// 10,000 known samples: 9,800 between 0.5 and 0.99 ms, 200 between 20 and 39.9 ms. The
/// nearest-rank p99 (rank 9,900) is 29.9 ms.
pub fn known_histogram() -> Histogram {
    let mut h = Histogram::new();
    for i in 0..10_000u64 {
        let v = if i < 9_800 {
            500_000 + i * 50
        } else {
            20_000_000 + (i - 9_800) * 100_000
        };
        h.record(v);
    }
    h
}

/// The p99 of [`known_histogram`], in seconds.
pub const KNOWN_P99: f64 = 0.0299;

/// A batch holding one counter `name` (`_total` added when written) at `n`, stamped now: one
/// more per batch makes every batch its own sample, counted back with `count_over_time`.
pub fn counter_batch(name: &str, n: u64) -> tailhunt_agent::remote_write::Batch {
    let snapshot = tailhunt_agent::exposition::Snapshot {
        counters: vec![tailhunt_agent::exposition::ScalarMetric {
            name: name.into(),
            help: String::new(),
            labels: vec![],
            value: n as f64,
        }],
        ..Default::default()
    };
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    tailhunt_agent::remote_write::Batch::from_snapshot(&snapshot, ts, &Vec::new()).unwrap()
}
