//! Run-queue evidence for a local target: the process listening on the target's port, its
//! cgroup, and run-queue tracing of that cgroup while the sweep runs.
//!
//! In: the target's port (and whether the route to it is local). Out: a [`Listener`] (the
//! process and its cgroup) for the plan, and [`start`]/[`Runq::finish`], which trace it into
//! a `runq` run tagged with the hunt, or say why not.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use serde::Serialize;
use serde_json::{json, Value};
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::{ClockOrigin, RunKind};
use tailhunt_sched::record::Recorder;
use tailhunt_sched::TracerConfig;
use tailhunt_store::Store;

use crate::buffer::Buffer;
use crate::plan::{Host, PlannedSource};
use crate::watch::{either, merge};
use crate::{Collected, Source};

/// The local process that listens on the target's port.
#[derive(Debug, Clone, Serialize)]
pub struct Listener {
    /// Its pid.
    pub pid: u32,
    /// Its command name.
    pub comm: String,
    /// Its cgroup as `/proc/PID/cgroup` names it (cgroup2 path, or the v1 cpu controller's).
    pub cgroup: String,
}

/// The process listening on `port` in this network namespace (TCP, or a bound UDP socket),
/// with its cgroup. Other users' processes are found only as root.
pub fn listener(port: u16, udp: bool) -> Option<Listener> {
    let (tables, state) = if udp {
        (["/proc/net/udp", "/proc/net/udp6"], "07")
    } else {
        (["/proc/net/tcp", "/proc/net/tcp6"], "0A")
    };
    let inodes: Vec<u64> = tables
        .iter()
        .filter_map(|f| fs::read_to_string(f).ok())
        .flat_map(|t| listening_inodes(&t, port, state))
        .collect();
    let owners = tailhunt_sock::owners::Owners::scan(None);
    let p = inodes.iter().find_map(|i| owners.get(*i))?.clone();
    let cgroup = fs::read_to_string(format!("/proc/{}/cgroup", p.pid))
        .ok()
        .and_then(|t| cgroup_of(&t))
        .unwrap_or_else(|| "/".into());
    Some(Listener {
        pid: p.pid,
        comm: p.comm,
        cgroup,
    })
}

/// Socket inodes in a `/proc/net/{tcp,udp}` table bound to `port` in `state` (`0A`: a TCP
/// listener; `07`: an unconnected UDP socket).
fn listening_inodes(table: &str, port: u16, state: &str) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit(':').next()?;
            let listening = *f.get(3)? == state;
            let same = u16::from_str_radix(local_port, 16).ok()? == port;
            (listening && same).then(|| f.get(9)?.parse().ok())?
        })
        .collect()
}

/// The cgroup to trace from `/proc/PID/cgroup`: the cgroup2 path (the tracer's default
/// hierarchy, as `tailhunt runq`), else the v1 cpu controller's.
fn cgroup_of(text: &str) -> Option<String> {
    let mut v1 = None;
    for l in text.lines() {
        let mut parts = l.splitn(3, ':');
        let (_, ctrl, path) = (parts.next()?, parts.next()?, parts.next()?);
        if ctrl.is_empty() {
            return Some(path.to_string());
        }
        if ctrl.split(',').any(|c| c == "cpu") {
            v1 = Some(path.to_string());
        }
    }
    v1
}

/// The run-queue line of the plan.
pub fn planned(host: &Host) -> PlannedSource {
    let (planned, note) = match (&host.local, host.root) {
        (None, _) if !host.local_route => (
            false,
            "the target does not run on this host: its run queue cannot be traced from here"
                .to_string(),
        ),
        (None, true) => (
            false,
            "the target's address is local but no process of this network namespace listens on its port"
                .to_string(),
        ),
        (None, false) => (
            false,
            "not root: the process behind the local target cannot be found (other users' sockets are not readable) and tracing needs BPF"
                .to_string(),
        ),
        (Some(l), false) => (
            false,
            format!(
                "not root: tracing the run queue of pid {} ({}) in cgroup {} needs root (BPF)",
                l.pid, l.comm, l.cgroup
            ),
        ),
        // Tracing the root cgroup traces every cgroup of the host, and the detectors would
        // judge them all: a hunt of a healthy server once named another test's victim cgroup.
        (Some(l), true) if l.cgroup == "/" => (
            false,
            format!(
                "pid {} ({}) runs in the root cgroup, with the host's own work: its run queue cannot be told apart from everyone else's (run it in a cgroup, or use `tailhunt runq`)",
                l.pid, l.comm
            ),
        ),
        (Some(l), true) => (
            true,
            format!(
                "run-queue latency of pid {} ({}), cgroup {}, and who took its CPU",
                l.pid, l.comm, l.cgroup
            ),
        ),
    };
    PlannedSource {
        source: Source::Runq,
        planned,
        note,
    }
}

/// The cgroup2 directory of a cgroup path, where cgroup2 is mounted (`unified` beside v1, or
/// the whole of `/sys/fs/cgroup`); none for the root cgroup.
fn cgroup2_dir(path: &str) -> Option<PathBuf> {
    let rel = path.trim_start_matches('/');
    if rel.is_empty() {
        return None;
    }
    ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .iter()
        .map(|root| PathBuf::from(root).join(rel))
        .find(|d| d.join("cgroup.procs").exists())
}

/// Run-queue tracing running in its own thread.
pub struct Runq {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<Collected, String>>,
}

/// Starts tracing the run queue of `l`'s cgroup (the plan leaves out a target in the root
/// cgroup) into a `runq` run tagged with the hunt; it stops at [`Runq::finish`] or when `halt`
/// rises.
pub fn start(l: &Listener, store: &Path, tags: &Value, halt: &Arc<AtomicBool>) -> Runq {
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = TracerConfig {
        cgroups: cgroup2_dir(&l.cgroup).into_iter().collect(),
        ..TracerConfig::default()
    };
    let mut params = json!({
        "interval_ns": cfg.interval.as_nanos() as u64,
        "duration_ns": null,
        "cgroups": cfg.cgroups,
        "hierarchy": format!("{:?}", cfg.hierarchy),
        "outlier_ns": cfg.outlier_ns,
        "all_events": cfg.all_events,
        "target_pid": l.pid,
        "target_cgroup": l.cgroup,
    });
    merge(&mut params, tags, "runq");
    let (path, mine, halt) = (store.to_path_buf(), Arc::clone(&stop), Arc::clone(halt));
    let who = format!("pid {} ({}), cgroup {}", l.pid, l.comm, l.cgroup);
    let thread = std::thread::spawn(move || trace_run(&path, &cfg, params, &mine, &halt, &who));
    Runq { stop, thread }
}

impl Runq {
    /// Stops the tracer and returns its run, or why there is none.
    pub fn finish(self) -> Result<Collected, String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .unwrap_or_else(|_| Err("the tracer's thread failed (a bug: please report it)".into()))
    }
}

fn trace_run(
    path: &Path,
    cfg: &TracerConfig,
    params: Value,
    mine: &Arc<AtomicBool>,
    halt: &Arc<AtomicBool>,
    who: &str,
) -> Result<Collected, String> {
    if let Some(why) = tailhunt_sched::tracing_unavailable() {
        return Err(format!("run-queue tracing is unavailable: {why}"));
    }
    // The tracer polls one flag: raise it when the hunt ends or a signal arrives.
    let (both, relay) = either(mine, halt);
    let result = traced(path, cfg, params, &both);
    mine.store(true, Ordering::Relaxed);
    let _ = relay.join();
    let (id, intervals) = result?;
    Ok(Collected {
        run_id: id,
        partial: false,
        note: format!("{intervals} one-second interval(s) of {who}"),
    })
}

fn traced(
    path: &Path,
    cfg: &TracerConfig,
    params: Value,
    stop: &AtomicBool,
) -> Result<(String, usize), String> {
    let origin = ClockOrigin::now();
    let mut buffer = Buffer::default();
    let mut recorder = Recorder::new(&mut buffer);
    let result = tailhunt_sched::trace(cfg, stop, &mut recorder);
    let record = recorder.record();
    let summary = result.map_err(|e| format!("tracing the run queue: {e}"))?;
    put_evidence(&mut buffer, &record).map_err(|e| e.to_string())?;
    let mut store = Store::open(path).map_err(|e| e.to_string())?;
    let mut writer = store
        .begin_run(RunKind::Runq, params, origin)
        .map_err(|e| e.to_string())?;
    buffer.replay(&mut writer).map_err(|e| e.to_string())?;
    let id = writer.finish(json!({})).map_err(|e| e.to_string())?;
    Ok((id, summary.intervals))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_in_the_root_cgroup_is_not_traced() {
        let l = |cgroup: &str| Listener {
            pid: 7,
            comm: "redis-server".into(),
            cgroup: cgroup.into(),
        };
        let host = |local| Host {
            root: true,
            interface: Ok("lo".into()),
            local_route: true,
            local,
        };
        let p = planned(&host(Some(l("/"))));
        assert!(!p.planned && p.note.contains("root cgroup"), "{p:?}");
        assert!(planned(&host(Some(l("/svc/victim")))).planned);
    }

    #[test]
    fn finds_the_listener_inode_of_a_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1B58 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1\n   1: 0100007F:1B58 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 999 1\n";
        assert_eq!(listening_inodes(table, 7000, "0A"), vec![12345]);
        assert!(listening_inodes(table, 7001, "0A").is_empty());
    }

    #[test]
    fn names_the_cgroup2_path_first() {
        let t = "12:cpu,cpuacct:/victim\n0::/user.slice\n";
        assert_eq!(cgroup_of(t).as_deref(), Some("/user.slice"));
        assert_eq!(cgroup_of("12:cpu,cpuacct:/v\n").as_deref(), Some("/v"));
    }

    #[test]
    fn finds_this_tests_own_listener() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let found = listener(port, false).expect("our own listener");
        assert_eq!(found.pid, std::process::id());
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = u.local_addr().unwrap().port();
        assert_eq!(
            listener(port, true).map(|l| l.pid),
            Some(std::process::id())
        );
    }
}
