//! Real database and DNS servers started by tests on loopback, each in its own temporary
//! directory on a free port, stopped by PID when dropped (also when the test fails):
//! PostgreSQL (`initdb` + `postgres`, run as `nobody` because it refuses root), MariaDB
//! (`mariadb-install-db` + `mariadbd`, grant tables skipped so any login works) and dnsmasq
//! (a caching resolver in front of an authority for `probe.test`; `void.test` is NXDOMAIN). Debian packages, installed
//! by scripts/setup.sh.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::servers::{free_port, wait_for_port, Proc};

/// A server and the directory it keeps its data in (removed after the server stops).
pub struct Server {
    pub proc: Proc,
    pub port: u16,
    /// The signal that shuts the server down cleanly, sent before it is killed: PostgreSQL
    /// killed outright leaves its dynamic shared memory segments in /dev/shm, two a run.
    shutdown: Option<&'static str>,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(signal) = self.shutdown else {
            return; // `proc` kills it
        };
        let pid = self.proc.child.id().to_string();
        let _ = Command::new("kill").args([signal, &pid]).status();
        // A fast shutdown takes milliseconds; past 10 s `proc` kills it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if !matches!(self.proc.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Server {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

fn quiet(c: &mut Command) -> &mut Command {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}

/// PostgreSQL's programs (`initdb`, `postgres`) from Debian's versioned directory.
fn pg_bin(name: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed: run scripts/setup.sh")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .collect();
    dirs.sort();
    dirs.pop().expect("no PostgreSQL version").join(name)
}

/// `nobody` and `nogroup` on Debian.
const NOBODY: u32 = 65534;

/// `program`, run as `nobody` when we are root (PostgreSQL refuses to run as root); the
/// switch happens in the child before exec, so its PID is the server's own.
fn as_nobody(program: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(program);
    if super::is_root() {
        c.uid(NOBODY).gid(NOBODY);
    }
    c
}

/// A private PostgreSQL on a free loopback port; user `postgres`, trust authentication.
pub fn postgres() -> Server {
    postgres_with(&[])
}

/// [`postgres`] with more server options (`-c name=value` pairs).
pub fn postgres_with(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    if super::is_root() {
        let st = Command::new("chown")
            .args([
                &format!("{NOBODY}:{NOBODY}"),
                &dir.path().display().to_string(),
            ])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let st = quiet(
        as_nobody(&pg_bin("initdb"))
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-D"])
            .arg(&data),
    )
    .status()
    .expect("initdb");
    assert!(st.success(), "initdb failed");
    let port = free_port();
    let child = quiet(
        as_nobody(&pg_bin("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-k"])
            .arg(dir.path())
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(extra),
    )
    .spawn()
    .expect("postgres");
    let proc = Proc {
        child,
        addr: format!("127.0.0.1:{port}"),
    };
    wait_for_port(port);
    Server {
        proc,
        port,
        // Fast shutdown: clients are disconnected, and its shared memory is removed.
        shutdown: Some("-INT"),
        _dir: dir,
    }
}

/// A private MariaDB on a free loopback port; grant tables skipped (any user logs in).
pub fn mariadb() -> Server {
    mariadb_with(&[])
}

/// [`mariadb`] with more server options (`--name=value`).
pub fn mariadb_with(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let st = quiet(
        Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                "--user=root",
                "--auth-root-authentication-method=normal",
            ])
            .arg(format!("--datadir={}", data.display())),
    )
    .status()
    .expect("mariadb-install-db");
    assert!(st.success(), "mariadb-install-db failed");
    let port = free_port();
    let child = quiet(
        Command::new("mariadbd")
            .args([
                "--no-defaults",
                "--user=root",
                "--skip-grant-tables",
                "--bind-address=127.0.0.1",
            ])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--port={port}"))
            .arg(format!("--socket={}", dir.path().join("sock").display()))
            .arg(format!("--pid-file={}", dir.path().join("pid").display()))
            .args(["--skip-log-bin", "--innodb-buffer-pool-size=16M"])
            .args(extra),
    )
    .spawn()
    .expect("mariadbd");
    let proc = Proc {
        child,
        addr: format!("127.0.0.1:{port}"),
    };
    wait_for_port(port);
    Server {
        proc,
        port,
        shutdown: None,
        _dir: dir,
    }
}

/// One dnsmasq on a free loopback port (UDP and TCP) with `extra` options.
fn dnsmasq_with(extra: &[String]) -> Server {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let child = quiet(
        Command::new("dnsmasq")
            .args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--bind-interfaces",
                "--listen-address=127.0.0.1",
                "--user=root",
            ])
            .args(extra)
            .arg(format!("--port={port}"))
            .arg(format!("--pid-file={}", dir.path().join("pid").display())),
    )
    .spawn()
    .expect("dnsmasq (installed by scripts/setup.sh)");
    let proc = Proc {
        child,
        addr: format!("127.0.0.1:{port}"),
    };
    wait_for_port(port);
    Server {
        proc,
        port,
        shutdown: None,
        _dir: dir,
    }
}

/// A resolver as most hosts have one: a caching dnsmasq that forwards `probe.test` to a second
/// dnsmasq (its authority, answering 127.0.0.1 with a 1 s TTL), so an uncached answer costs a
/// second hop and a name falls out of the cache every second; `void.test` does not exist
/// (NXDOMAIN, from the first).
pub struct Dns {
    front: Server,
    _authority: Server,
}

impl Dns {
    /// Where to send queries.
    pub fn addr(&self) -> String {
        self.front.addr()
    }
}

/// Starts the two dnsmasq of a [`Dns`].
pub fn dnsmasq() -> Dns {
    let authority = dnsmasq_with(&[
        "--address=/probe.test/127.0.0.1".into(),
        "--local-ttl=1".into(),
    ]);
    let front = dnsmasq_with(&[
        format!("--server=/probe.test/127.0.0.1#{}", authority.port),
        "--address=/void.test/".into(),
    ]);
    Dns {
        front,
        _authority: authority,
    }
}
