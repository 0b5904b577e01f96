//! `tailhunt sockets`: the setsockopt audit attributes a test child's calls to its pid and
//! command (eBPF; needs root, which CI has), and bad input gets one clear line: an unknown
//! pid, an unknown namespace, no permission for BPF or namespaces, an impossible emulator
//! rate, a bad address or buffer size.

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::sock::Tailhunt;
use common::{check_schema, Env, BIN};
use serde_json::Value;

fn is_root() -> bool {
    rustix_uid() == 0
}

fn rustix_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

/// A child killed by its PID on drop.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const CHILD: &str = r#"
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print("done", flush=True)
time.sleep(5)
"#;

#[test]
fn setsockopt_by_a_child_process_is_attributed_to_its_pid_and_command_root() {
    if !is_root() {
        eprintln!("skipped: the audit needs root");
        return;
    }
    let env = Env::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let sockets = Tailhunt::spawn(
        None,
        &env.db(),
        &[
            "sockets",
            "--duration",
            "60s",
            "--interval",
            "50ms",
            "--json",
        ],
    );
    sockets.wait_line("with the setsockopt audit", Duration::from_secs(20));
    let mut kid = Kid(Command::new("python3")
        .args(["-c", CHILD, &port])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3"));
    let mut line = String::new();
    BufReader::new(kid.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "done");
    // A few sampling rounds with the connection open, so its inode names its peer.
    std::thread::sleep(Duration::from_millis(300));
    sockets.interrupt();
    let doc = sockets.interrupted_json();
    check_schema("sockets", &doc);
    let pid = kid.0.id();
    let audit = &doc["audit"];
    assert!(
        audit["attach"] == "tracepoint" || audit["attach"] == "raw_tp",
        "{audit:#}"
    );
    let mine: Vec<&Value> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["pid"] == pid)
        .collect();
    let peer = format!("127.0.0.1:{port}");
    let rcvbuf = mine
        .iter()
        .find(|e| e["option"] == "SO_RCVBUF")
        .unwrap_or_else(|| panic!("no SO_RCVBUF by pid {pid}: {audit:#}"));
    assert_eq!(rcvbuf["comm"], "python3");
    assert_eq!(rcvbuf["value"], 65536);
    // Set before connect(): the peer is found afterwards through the socket's inode.
    assert_eq!(rcvbuf["peer"], peer.as_str(), "{rcvbuf:#}");
    let nodelay = mine
        .iter()
        .find(|e| e["option"] == "TCP_NODELAY")
        .expect("TCP_NODELAY");
    assert_eq!(nodelay["value"], 1);
    assert_eq!(nodelay["peer"], peer.as_str());
    assert_eq!(rcvbuf["inode"], nodelay["inode"]);
    // The connection itself was sampled with its owner.
    let conn = doc["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["peer"] == peer.as_str() && c["owner"]["pid"] == pid)
        .unwrap_or_else(|| panic!("child's connection not sampled: {doc:#}"));
    assert_eq!(conn["owner"]["comm"], "python3");
    assert_eq!(conn["options_set"].as_array().unwrap().len(), 2);
}

#[test]
fn bad_input_gets_one_clear_line() {
    let env = Env::new();
    let e = env.fails(&["sockets", "--pid", "999999999", "--duration", "1s"]);
    assert!(e.contains("no process with pid 999999999"), "{e}");
    let e = env.fails(&["sockets", "--netns", "no-such-ns-th", "--duration", "1s"]);
    assert!(
        e.contains("'no-such-ns-th'") && e.contains("ip netns list"),
        "{e}"
    );
    let e = env.fails(&["transfer", "client", "not-an-address"]);
    assert!(e.contains("'not-an-address' is not IP:PORT"), "{e}");
    let e = env.fails(&["transfer", "client", "127.0.0.1:9", "--rcvbuf", "lots"]);
    assert!(e.contains("--rcvbuf") && e.contains("'lots'"), "{e}");
    let e = env.fails(&["transfer", "client", "127.0.0.1:9", "--bytes", "0"]);
    assert!(e.contains("--bytes 0"), "{e}");
    // Nothing listens on the discard port of loopback.
    let e = env.fails(&["transfer", "client", "127.0.0.1:9", "--bytes", "1k"]);
    assert!(e.contains("cannot connect to 127.0.0.1:9"), "{e}");
    if is_root() {
        let e = env.fails(&[
            "lab",
            "link",
            "--create",
            "--rate",
            "0bit",
            "--duration",
            "1s",
        ]);
        assert!(e.contains("rate 0 bit/s is impossible"), "{e}");
    }
}

/// As `nobody` (setpriv): the audit says it needs BPF privileges and how to do without; a
/// namespace needs root; sampling without the audit works unprivileged.
#[test]
fn without_privileges_the_messages_say_what_is_needed_root() {
    if !is_root() || Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: needs root and setpriv to drop to nobody");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let db = dir.path().join("nobody.db");
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                BIN,
                "--db",
            ])
            .arg(&db)
            .args(args)
            .output()
            .expect("setpriv")
    };
    let out = as_nobody(&["sockets", "--duration", "1s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs BPF") && err.contains("CAP_BPF") && err.contains("--no-audit"),
        "{err}"
    );
    let ns = tailhunt_netlab::netns::Netns::new("nobody").unwrap();
    let out = as_nobody(&[
        "sockets",
        "--no-audit",
        "--netns",
        ns.name(),
        "--duration",
        "1s",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(ns.name()) && err.contains("root"), "{err}");
    let out = as_nobody(&["sockets", "--no-audit", "--duration", "300ms", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_schema("sockets", &doc);
    assert_eq!(doc["audit"], Value::Null);
}
