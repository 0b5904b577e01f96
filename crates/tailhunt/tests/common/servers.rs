//! Servers started by tests: tailhunt's own reference servers and real Redis/memcached from
//! Debian. Each is killed (by its PID) when dropped, also when the test fails.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Proc {
    pub child: Child,
    pub addr: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tailhunt serve PROTO --listen 127.0.0.1:0 ARGS...`; waits for its "serving ... on ADDR" line.
pub fn tailhunt_serve(proto: &str, args: &[&str]) -> Proc {
    tailhunt_serve_in(None, proto, "127.0.0.1:0", args)
}

/// `tailhunt serve PROTO --listen LISTEN ARGS...`, inside the network namespace `netns` when
/// given (`ip netns exec`); waits for its "serving ... on ADDR" line.
pub fn tailhunt_serve_in(netns: Option<&str>, proto: &str, listen: &str, args: &[&str]) -> Proc {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, super::BIN]);
            c
        }
        None => Command::new(super::BIN),
    };
    let mut child = cmd
        .args(["serve", proto, "--listen", listen])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tailhunt serve");
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split(" on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in '{line}'"))
        .to_string();
    Proc { child, addr }
}

/// A free TCP port on 127.0.0.1 (bound and released; small race accepted in tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The command line of a redis-server on loopback `port`, without persistence, in the
/// foreground.
pub fn redis_argv(port: u16) -> Vec<String> {
    let port = port.to_string();
    [
        "redis-server",
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Waits until something accepts connections on loopback `port` (10 s at most).
pub fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server on port {port} did not come up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Debian's redis-server on a free loopback port, no persistence.
pub fn redis() -> Proc {
    let port = free_port();
    let argv = redis_argv(port);
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server (installed by scripts/setup.sh)");
    wait_for_port(port);
    Proc {
        child,
        addr: format!("127.0.0.1:{port}"),
    }
}

/// Debian's memcached on a free loopback port.
pub fn memcached() -> Proc {
    let port = free_port();
    let child = Command::new("memcached")
        .args([
            "-p",
            &port.to_string(),
            "-l",
            "127.0.0.1",
            "-U",
            "0",
            "-u",
            "root",
            "-m",
            "16",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("memcached (installed by scripts/setup.sh)");
    wait_for_port(port);
    Proc {
        child,
        addr: format!("127.0.0.1:{port}"),
    }
}
