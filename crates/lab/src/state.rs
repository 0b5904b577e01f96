//! What a lab run leaves behind, recorded so that a later `tailhunt lab clean` can remove it
//! after a crash or `kill -9`.
//!
//! In: [`begin`] from the process that runs scenarios; every process the lab starts is noted
//! by `note_process` (called by the lab's process guards). Out: a state directory
//! `/run/tailhunt-lab/<pid>/` holding `owner` (the lab run's pid and start time) and one file
//! per started process under `procs/` (its pid, start time and what it is), and [`clean`], which
//! removes what runs that are gone left: their processes (checked by start time, so a reused
//! pid is never killed), their network namespaces (`th-<role>-<pid>-<n>`, the lab's naming,
//! which take their veth and TUN devices and qdiscs with them) and their cgroups
//! (`tailhunt-*-<pid>` at the top of each hierarchy). Nothing else is touched.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

/// Where lab runs record their state.
pub const STATE_ROOT: &str = "/run/tailhunt-lab";

static ACTIVE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The state of the running lab run; removed on drop (after its own guards cleaned up).
#[derive(Debug)]
pub struct StateGuard {
    dir: PathBuf,
}

impl Drop for StateGuard {
    fn drop(&mut self) {
        if let Ok(mut a) = ACTIVE.lock() {
            *a = None;
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Starts recording this process's lab state under `root` (normally [`STATE_ROOT`]).
pub fn begin(root: &Path) -> std::io::Result<StateGuard> {
    let me = std::process::id();
    let dir = root.join(me.to_string());
    fs::create_dir_all(dir.join("procs"))?;
    let started = start_time(me).unwrap_or(0);
    fs::write(dir.join("owner"), format!("{me} {started}\n"))?;
    if let Ok(mut a) = ACTIVE.lock() {
        *a = Some(dir.clone());
    }
    Ok(StateGuard { dir })
}

/// Notes a process the lab started (no-op outside a lab run).
pub(crate) fn note_process(pid: u32, what: &str) {
    let Ok(a) = ACTIVE.lock() else { return };
    if let Some(dir) = a.as_ref() {
        let started = start_time(pid).unwrap_or(0);
        let _ = fs::write(
            dir.join("procs").join(pid.to_string()),
            format!("{started} {what}\n"),
        );
    }
}

/// Forgets a process the lab reaped.
pub(crate) fn forget_process(pid: u32) {
    let Ok(a) = ACTIVE.lock() else { return };
    if let Some(dir) = a.as_ref() {
        let _ = fs::remove_file(dir.join("procs").join(pid.to_string()));
    }
}

/// A process's start time (field 22 of `/proc/PID/stat`, clock ticks since boot).
fn start_time(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    // After the name, state is field 3: starttime (22) is the 20th of the rest.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `pid` is alive and is the process that started at `started`.
fn same_process(pid: u32, started: u64) -> bool {
    start_time(pid).is_some_and(|s| s == started)
}

/// What [`clean`] found and removed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cleaned {
    /// Lab runs whose leftovers were removed (their pids).
    pub runs: Vec<u32>,
    /// Lab runs still running, left alone.
    pub running: Vec<u32>,
    /// Processes killed (`pid what`).
    pub processes: Vec<String>,
    /// Network namespaces deleted (with their veth and TUN devices and qdiscs).
    pub namespaces: Vec<String>,
    /// Cgroups removed.
    pub cgroups: Vec<String>,
    /// TUN devices removed (left in this namespace).
    pub devices: Vec<String>,
    /// What could not be removed, with why.
    pub failures: Vec<String>,
}

/// Removes what lab runs that are no longer running left behind, found through their state
/// directories under `root`. A run still alive is left alone.
pub fn clean(root: &Path) -> Cleaned {
    let mut out = Cleaned::default();
    let Ok(entries) = fs::read_dir(root) else {
        return out;
    };
    for e in entries.flatten() {
        let dir = e.path();
        let Some((owner, started)) = read_owner(&dir) else {
            continue;
        };
        if owner != std::process::id() && same_process(owner, started) {
            out.running.push(owner);
            continue;
        }
        if owner == std::process::id() {
            continue;
        }
        clean_run(&dir, owner, &mut out);
        match fs::remove_dir_all(&dir) {
            Ok(()) => out.runs.push(owner),
            Err(e) => out.failures.push(format!("{}: {e}", dir.display())),
        }
    }
    out
}

fn read_owner(dir: &Path) -> Option<(u32, u64)> {
    let text = fs::read_to_string(dir.join("owner")).ok()?;
    let mut f = text.split_whitespace();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

fn clean_run(dir: &Path, owner: u32, out: &mut Cleaned) {
    // Processes first, so nothing holds a namespace or a cgroup.
    if let Ok(procs) = fs::read_dir(dir.join("procs")) {
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let text = fs::read_to_string(p.path()).unwrap_or_default();
            let (started, what) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
            if started.parse().is_ok_and(|s| same_process(pid, s)) {
                kill(pid);
                out.processes.push(format!("{pid} {what}"));
            }
        }
    }
    for ns in lab_namespaces(owner) {
        for pid in netns_pids(&ns) {
            kill(pid);
            out.processes.push(format!("{pid} (in namespace {ns})"));
        }
        let r = Command::new("ip").args(["netns", "delete", &ns]).output();
        match r {
            Ok(o) if o.status.success() => out.namespaces.push(ns),
            Ok(o) => out.failures.push(format!(
                "namespace {ns}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => out.failures.push(format!("namespace {ns}: {e}")),
        }
    }
    for top in lab_cgroups(owner) {
        remove_cgroup_tree(&top, out);
    }
    // The link emulator's TUN devices (`tl<pid>-<n><role>`) close with the process that held
    // them; one still in this namespace is removed by name.
    for dev in lab_tun_devices(owner) {
        let r = Command::new("ip").args(["link", "delete", &dev]).output();
        match r {
            Ok(o) if o.status.success() => out.devices.push(dev),
            _ => out.failures.push(format!("TUN device {dev}")),
        }
    }
}

fn lab_tun_devices(owner: u32) -> Vec<String> {
    let Ok(o) = Command::new("ip")
        .args(["-o", "link", "show", "type", "tun"])
        .output()
    else {
        return Vec::new();
    };
    let prefix = format!("tl{}-", owner % 10_000_000);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// The namespaces the run with pid `owner` created: `th-<role>-<owner>-<n>`.
fn lab_namespaces(owner: u32) -> Vec<String> {
    let Ok(o) = Command::new("ip").args(["netns", "list"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| is_lab_namespace(n, owner))
        .map(str::to_string)
        .collect()
}

/// Whether `name` is `th-<role>-<owner>-<n>`.
pub(crate) fn is_lab_namespace(name: &str, owner: u32) -> bool {
    let Some(rest) = name.strip_prefix("th-") else {
        return false;
    };
    let parts: Vec<&str> = rest.rsplitn(3, '-').collect();
    parts.len() == 3
        && parts[0].parse::<u32>().is_ok()
        && parts[1] == owner.to_string()
        && !parts[2].is_empty()
}

fn netns_pids(ns: &str) -> Vec<u32> {
    let Ok(o) = Command::new("ip").args(["netns", "pids", ns]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether a top-level cgroup directory name is `tailhunt-<anything>-<owner>`.
pub(crate) fn is_lab_cgroup(name: &str, owner: u32) -> bool {
    name.starts_with("tailhunt-") && name.rsplit('-').next() == Some(owner.to_string().as_str())
}

/// The cgroup mount points (cgroup2 and every v1 hierarchy).
fn cgroup_roots() -> Vec<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fstype = right.split(' ').next()?;
            (fstype == "cgroup2" || fstype == "cgroup")
                .then(|| PathBuf::from(left.split(' ').nth(4).unwrap_or("")))
        })
        .collect()
}

fn lab_cgroups(owner: u32) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for root in cgroup_roots() {
        let Ok(entries) = fs::read_dir(&root) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() && is_lab_cgroup(&name, owner) {
                v.push(e.path());
            }
        }
    }
    v
}

/// Kills the processes in `dir` and its children, then removes them, deepest first.
fn remove_cgroup_tree(dir: &Path, out: &mut Cleaned) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                remove_cgroup_tree(&e.path(), out);
            }
        }
    }
    let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.split_whitespace().filter_map(|p| p.parse().ok()) {
        kill(pid);
        out.processes
            .push(format!("{pid} (in cgroup {})", dir.display()));
    }
    // A killed process leaves its cgroup a moment after it is reaped.
    for _ in 0..100 {
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            out.cgroups.push(dir.display().to_string());
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    out.failures
        .push(format!("cgroup {}: still busy after 2 s", dir.display()));
}

/// Sends SIGKILL to `pid` and waits (up to 2 s) until it is gone or a zombie: SIGKILL is
/// delivered asynchronously, and a namespace or cgroup is only free once its processes exited.
fn kill(pid: u32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
    for _ in 0..200 {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        if matches!(state, None | Some("Z") | Some("X")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_labs_own_names_match() {
        assert!(is_lab_namespace("th-ng-cli-1234-0", 1234));
        assert!(is_lab_namespace("th-sw-1234-17", 1234));
        assert!(!is_lab_namespace("th-sw-12345-17", 1234));
        assert!(!is_lab_namespace("th-sw-1234-x", 1234));
        assert!(!is_lab_namespace("other-sw-1234-1", 1234));
        assert!(is_lab_cgroup("tailhunt-lab-noisy-1234", 1234));
        assert!(!is_lab_cgroup("tailhunt-lab-noisy-11234", 1234));
        assert!(!is_lab_cgroup("user.slice", 1234));
    }

    #[test]
    fn a_dead_runs_state_is_removed_and_a_live_one_kept() {
        let root = std::env::temp_dir().join(format!("th-state-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        // A live run: this test's own parent (alive, with its real start time).
        let parent = rustix::process::getppid().map_or(1, |p| p.as_raw_nonzero().get() as u32);
        let live = root.join(parent.to_string());
        fs::create_dir_all(live.join("procs")).unwrap();
        let st = start_time(parent).unwrap();
        fs::write(live.join("owner"), format!("{parent} {st}\n")).unwrap();
        // A dead run: a pid whose start time does not match.
        let dead = root.join("4000000");
        fs::create_dir_all(dead.join("procs")).unwrap();
        fs::write(dead.join("owner"), "4000000 1\n").unwrap();
        // Its process file names this process with a wrong start time: it must not be killed.
        let me = std::process::id();
        fs::write(dead.join("procs").join(me.to_string()), "1 not me\n").unwrap();
        let c = clean(&root);
        assert_eq!(c.runs, vec![4000000]);
        assert_eq!(c.running, vec![parent]);
        assert!(c.processes.is_empty(), "{:?}", c.processes);
        assert!(live.exists() && !dead.exists());
        let _ = fs::remove_dir_all(&root);
    }
}
