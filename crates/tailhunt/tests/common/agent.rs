//! A `tailhunt agent` started by a test: its address read from its first line, its stderr
//! kept being read (a closed pipe would stop it at its next status line), killed on drop.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (SIGKILL) and reaped on drop, also when the test fails.
pub struct Agent {
    child: Child,
    /// Its HTTP address, from its first line.
    pub addr: String,
    /// The rest of its stderr, read by a thread.
    rest: std::sync::mpsc::Receiver<String>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    /// Starts `tailhunt agent --config CFG ARGS...` and reads its first line (the address).
    pub fn start(cfg: &Path, args: &[&str]) -> Agent {
        let mut child = Command::new(super::BIN)
            .args(["agent", "--config"])
            .arg(cfg)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        // "serving http://ADDR/metrics" or "serving https://ADDR/metrics".
        let addr = first
            .split("://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_string();
        let (tx, rest) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            let _ = tx.send(text);
        });
        Agent { child, addr, rest }
    }

    /// Waits for the agent to exit by itself (`--duration`); its stderr after the first line.
    pub fn wait(mut self, secs: u64) -> String {
        let until = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                let rest = self.rest.recv().unwrap_or_default();
                assert!(status.success(), "{status}: {rest}");
                return rest;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the agent did not stop within {secs} s");
    }

    /// `GET /metrics` without a token, plain HTTP.
    pub fn metrics(&self) -> String {
        self.get("/metrics", None)
    }

    /// The whole answer (status line, headers, body) to `GET path`, plain HTTP.
    pub fn get(&self, path: &str, token: Option<&str>) -> String {
        let Ok(mut s) = TcpStream::connect(&self.addr) else {
            return String::new();
        };
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n{auth}\r\n").unwrap();
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        text
    }
}
