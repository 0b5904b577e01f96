//! Helpers for the socket tests: an 80 ms path through the link emulator between two
//! namespaces, and tailhunt processes inside them, killed (by PID) when dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use tailhunt_netlab::link::{EmulatedLink, LinkConfig};
use tailhunt_netlab::netns::Netns;

use super::BIN;

/// Client 198.18.12.1 and server 198.18.12.2 joined by the emulator: 40 ms each way,
/// 100 Mbit/s, 2 MB drop-tail queue. Fields drop in order: the link first, then the
/// namespaces (also when a test fails).
pub struct Path80 {
    pub link: EmulatedLink,
    pub client: Netns,
    pub server: Netns,
}

pub const CLIENT: &str = "198.18.12.1";
pub const SERVER: &str = "198.18.12.2";

impl Path80 {
    /// None (with the reason printed) when not root.
    pub fn new(role: &str) -> Option<Path80> {
        let (client, server) = match (
            Netns::new(&format!("{role}-c")),
            Netns::new(&format!("{role}-s")),
        ) {
            (Ok(c), Ok(s)) => (c, s),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("skipped: {e}");
                return None;
            }
        };
        let cfg = LinkConfig {
            rate_bps: Some(100_000_000),
            queue_bytes: 2_000_000,
            ..LinkConfig::delay_ms(40)
        };
        let link = EmulatedLink::start(
            &client,
            &format!("{CLIENT}/30"),
            &server,
            &format!("{SERVER}/30"),
            cfg,
            cfg,
        )
        .expect("start the link emulator");
        Some(Path80 {
            link,
            client,
            server,
        })
    }
}

/// A tailhunt process, killed by its PID on drop; its stderr lines arrive on a channel.
pub struct Tailhunt {
    pub child: Child,
    lines: mpsc::Receiver<String>,
}

impl Tailhunt {
    /// `ip netns exec NS tailhunt --db DB ARGS` (or without a namespace), stdout piped.
    pub fn spawn(ns: Option<&Netns>, db: &Path, args: &[&str]) -> Tailhunt {
        let mut c = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns.name(), BIN]);
                c
            }
            None => Command::new(BIN),
        };
        c.env_remove("TAILHUNT_DB").arg("--db").arg(db).args(args);
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tailhunt");
        let lines = forward(child.stderr.take().expect("stderr"));
        Tailhunt { child, lines }
    }

    /// Waits for a stderr line containing `text`; panics with what came instead.
    pub fn wait_line(&self, text: &str, limit: Duration) -> String {
        let mut seen = Vec::new();
        loop {
            match self.lines.recv_timeout(limit) {
                Ok(l) if l.contains(text) => return l,
                Ok(l) => seen.push(l),
                Err(_) => panic!("no '{text}' within {limit:?}; stderr: {seen:?}"),
            }
        }
    }

    /// Waits for the exit; asserts success and returns stdout as JSON.
    pub fn json(self) -> Value {
        self.json_with_status(0, "")
    }

    /// After [`Tailhunt::interrupt`]: the command stopped early, kept what it sampled as a
    /// partial run and exited 130; returns its summary (stdout) as JSON.
    pub fn interrupted_json(self) -> Value {
        self.json_with_status(130, "partial run")
    }

    fn json_with_status(mut self, code: i32, says: &str) -> Value {
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("read stdout");
        let status = self.child.wait().expect("wait");
        // The process has ended: its last stderr lines come before the channel closes.
        let mut err = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            err.push(l);
        }
        assert!(
            status.code() == Some(code) && err.join(" ").contains(says),
            "tailhunt ended with {status}, not {code}: {err:?}\n{out}"
        );
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }

    /// Sends SIGINT (Ctrl-C) to this process, by its PID.
    pub fn interrupt(&self) {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill");
        assert!(ok.success());
    }
}

impl Drop for Tailhunt {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn forward(stderr: ChildStderr) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The findings of a document with this detector.
pub fn findings<'a>(doc: &'a Value, detector: &str) -> Vec<&'a Value> {
    doc["findings"]
        .as_array()
        .map(|f| f.iter().filter(|x| x["detector"] == detector).collect())
        .unwrap_or_default()
}
