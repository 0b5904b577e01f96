//! Capture helpers: a network namespace to keep test traffic alone, and tcpdump in it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use tailhunt_netlab::netns::Netns;

/// A namespace with loopback up, or `None` (with the reason printed) where namespaces cannot
/// be made (not root). CI runs as root, so there these tests run.
pub fn namespace(role: &str) -> Option<Netns> {
    match Netns::new(role) {
        Ok(ns) => Some(ns),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// tcpdump writing `file` from `iface` inside `ns`; stopped (SIGINT, so it flushes) on drop.
pub struct Tcpdump {
    child: Child,
}

impl Tcpdump {
    pub fn start(ns: &Netns, iface: &str, file: &Path, snaplen: u32, filter: &[&str]) -> Tcpdump {
        let mut c = ns.command("tcpdump");
        c.args(["-i", iface, "-U", "-n", "--time-stamp-precision", "nano"])
            .args(["-s", &snaplen.to_string(), "-w"])
            .arg(file)
            .args(filter)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .expect("start tcpdump (scripts/setup.sh installs it)");
        // tcpdump says "listening on ..." once its socket is open.
        let mut err = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        while err.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("listening on") {
            line.clear();
        }
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Tcpdump { child }
    }

    /// Stops it and waits until the file is complete.
    pub fn stop(mut self) {
        self.interrupt();
    }

    fn interrupt(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let _ = self.child.wait();
    }
}

impl Drop for Tcpdump {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.interrupt();
        }
    }
}

/// `tshark -r FILE -T fields -e ...` rows (tab-separated fields).
pub fn tshark_fields(file: &Path, filter: Option<&str>, fields: &[&str]) -> Vec<Vec<String>> {
    let mut c = Command::new("tshark");
    c.arg("-r").arg(file).args(["-T", "fields"]);
    if let Some(f) = filter {
        c.args(["-Y", f]);
    }
    for f in fields {
        c.args(["-e", f]);
    }
    let out = c
        .output()
        .expect("run tshark (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// `tailhunt pcap FILE EXTRA... --json`, checked against the schema.
pub fn pcap_json(env: &super::Env, file: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["pcap", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    env.json("pcap", &args)
}

/// Names of the detectors that fired.
pub fn detectors(doc: &serde_json::Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["detector"].as_str().unwrap().to_string())
        .collect()
}

/// A valid pcap file with no packets (Ethernet, µs).
pub fn empty_pcap(env: &super::Env) -> std::path::PathBuf {
    let path = env.path("empty.pcap");
    let mut header = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    header.extend_from_slice(&[0; 8]);
    header.extend_from_slice(&65535u32.to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes());
    std::fs::write(&path, &header).unwrap();
    path
}

/// `conns.pcap`: `connections` short TCP connections over `seconds` from 250 client hosts to
/// one server, written by `bench/gen/conns.py` (the benchmark's many-connection generator).
pub fn short_connections(env: &super::Env, connections: u32, seconds: u32) -> std::path::PathBuf {
    let file = env.path("conns.pcap");
    let gen = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/gen/conns.py");
    let status = Command::new("python3")
        .arg(gen)
        .arg(&file)
        .args(["--connections", &connections.to_string()])
        .args(["--seconds", &seconds.to_string()])
        .status()
        .expect("run python3 (scripts/setup.sh installs it)");
    assert!(status.success(), "bench/gen/conns.py: {status}");
    file
}

/// `tailhunt load tcp://127.0.0.1:PORT --warmup 0s ARGS` inside `ns` (its own store); asserts
/// that it succeeded.
pub fn load_in(ns: &Netns, env: &super::Env, port: u16, args: &[&str]) {
    let out = ns
        .command(super::BIN)
        .arg("--db")
        .arg(env.path("load.db"))
        .args(["load", &format!("tcp://127.0.0.1:{port}"), "--warmup", "0s"])
        .args(args)
        .output()
        .expect("run load");
    assert!(
        out.status.success(),
        "load failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
