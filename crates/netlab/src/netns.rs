//! Network namespaces and veth links: the lab's test hosts.
//!
//! In: names and addresses. Out: [`Netns`] handles that run commands inside the namespace and
//! delete it on drop (also when a test panics), and [`veth`] links between two of them with
//! segmentation offloads off, so captures hold wire-sized packets. A process killed outright
//! (SIGKILL, a CI time limit) runs no drop: the first namespace a later process makes deletes
//! those whose process is gone.
//!
//! Addresses come from 198.18.0.0/15, the block RFC 2544 reserves for benchmarking test
//! networks: it is never anybody's real host, and the lab's hosts live only inside namespaces
//! the lab created itself.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

/// Errors building the lab's network.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// A command (`ip`, `tc`, `ethtool`) failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed.
        stderr: String,
    },
    /// A command could not be started at all.
    #[error("cannot run `{program}`: {source} (install iproute2 and ethtool: scripts/setup.sh)")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Not root.
    #[error("network namespaces need root (or CAP_SYS_ADMIN and CAP_NET_ADMIN): run as root")]
    NotPermitted,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);
static REAPED: Once = Once::new();

/// A network namespace, deleted (with the veth ends inside it) when dropped.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace named `th-<role>-<pid>-<n>` with loopback up.
    pub fn new(role: &str) -> Result<Netns, NetnsError> {
        if !is_root() {
            return Err(NetnsError::NotPermitted);
        }
        REAPED.call_once(reap_orphans);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("th-{role}-{}-{n}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let ns = Netns { name };
        ns.run(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name (for `ip netns exec NAME ...`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command that runs `program` inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `argv` inside the namespace; an error carries its stderr.
    pub fn run(&self, argv: &[&str]) -> Result<Output, NetnsError> {
        let mut c = self.command(argv[0]);
        c.args(&argv[1..]);
        run(&mut c)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .output();
    }
}

/// Deletes the namespaces [`Netns::new`] made in a process that no longer runs (its drops never
/// ran). A namespace whose process lives is left alone, whoever made it.
fn reap_orphans() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let gone = owner_pid(&name)
            .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
        if gone {
            let _ = Command::new("ip").args(["netns", "delete", &name]).output();
        }
    }
}

/// The process id in a name [`Netns::new`] gives, `th-<role>-<pid>-<n>` (a role may hold
/// dashes); `None` for any other name.
fn owner_pid(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix("th-")?.rsplitn(3, '-');
    let (n, pid, role) = (parts.next()?, parts.next()?, parts.next()?);
    if role.is_empty() || n.parse::<u32>().is_err() {
        return None;
    }
    pid.parse().ok()
}

/// One end of a veth link.
#[derive(Debug, Clone)]
pub struct VethEnd {
    /// Interface name inside its namespace.
    pub iface: String,
    /// Its address (without prefix length).
    pub addr: String,
}

/// Joins `a` and `b` with a veth pair: `a_addr`/`b_addr` are CIDR (`198.18.0.1/24`). TSO, GSO
/// and GRO are turned off on both ends so packets are wire-sized in captures and shapers.
pub fn veth(
    a: &Netns,
    a_addr: &str,
    b: &Netns,
    b_addr: &str,
) -> Result<(VethEnd, VethEnd), NetnsError> {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // Interface names are limited to 15 bytes; the namespace keeps them apart anyway.
    let (ia, ib) = (format!("va{n}"), format!("vb{n}"));
    a.run(&[
        "ip",
        "link",
        "add",
        &ia,
        "type",
        "veth",
        "peer",
        "name",
        &ib,
        "netns",
        b.name(),
    ])?;
    for (ns, iface, addr) in [(a, &ia, a_addr), (b, &ib, b_addr)] {
        ns.run(&["ip", "addr", "add", addr, "dev", iface])?;
        ns.run(&["ip", "link", "set", iface, "up"])?;
        ns.run(&[
            "ethtool", "-K", iface, "tso", "off", "gso", "off", "gro", "off",
        ])?;
    }
    let strip = |s: &str| s.split('/').next().unwrap_or(s).to_string();
    Ok((
        VethEnd {
            iface: ia,
            addr: strip(a_addr),
        },
        VethEnd {
            iface: ib,
            addr: strip(b_addr),
        },
    ))
}

fn run(c: &mut Command) -> Result<Output, NetnsError> {
    let line = format!("{c:?}").replace('"', "");
    let out = c.output().map_err(|source| NetnsError::Spawn {
        program: c.get_program().to_string_lossy().into_owned(),
        source,
    })?;
    if !out.status.success() {
        return Err(NetnsError::Command {
            command: line,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out)
}

/// Whether this process runs as root (effective uid 0): the lab's namespaces, links and cases
/// need it.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Needs root (CI has it): two namespaces joined by a veth ping each other, and both are
    /// gone after drop.
    #[test]
    fn veth_joins_two_namespaces_and_drop_removes_them_root() {
        let (a, b) = match (Netns::new("ta"), Netns::new("tb")) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let (_ea, eb) = veth(&a, "198.18.200.1/24", &b, "198.18.200.2/24").unwrap();
        a.run(&["ping", "-c", "1", "-W", "2", &eb.addr]).unwrap();
        let names = [a.name().to_string(), b.name().to_string()];
        drop((a, b));
        let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let list = String::from_utf8_lossy(&list.stdout);
        for n in names {
            assert!(!list.contains(&n), "{n} still exists: {list}");
        }
    }

    #[test]
    fn only_names_netns_gives_have_an_owner() {
        assert_eq!(owner_pid("th-mb-cache-5285-48"), Some(5285));
        assert_eq!(owner_pid("th-sw-5285-49"), Some(5285));
        assert_eq!(owner_pid("th-h1-live-5285"), None);
        assert_eq!(owner_pid("th--5285-1"), None);
        assert_eq!(owner_pid("lab-5285-1"), None);
        assert_eq!(owner_pid("th-x-y-1"), None);
    }

    /// Needs root: a namespace named for a process that has exited is deleted by the next
    /// process's first namespace; one of a living process is kept.
    #[test]
    fn namespaces_of_a_process_that_is_gone_are_deleted_root() {
        if !is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let orphan = format!("th-orphan-{dead}-0");
        let alive = format!("th-alive-{}-999", std::process::id());
        for n in [&orphan, &alive] {
            run(Command::new("ip").args(["netns", "add", n])).unwrap();
        }
        reap_orphans();
        let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let list = String::from_utf8_lossy(&list.stdout).into_owned();
        let _ = Command::new("ip")
            .args(["netns", "delete", &alive])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "delete", &orphan])
            .output();
        assert!(!list.contains(&orphan), "{orphan} still exists: {list}");
        assert!(list.contains(&alive), "{alive} was deleted: {list}");
    }
}
