//! Cgroups and workloads for the run-queue tests: groups created in both hierarchies of this
//! host (cgroup2 and the v1 cpu controller), processes started in them pinned to one CPU, and
//! everything killed (by PID) and removed on drop, also when a test fails.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A sleeper that wakes every millisecond and works 50 us: what a latency-sensitive service
/// does. Ends by itself after argv[1] seconds.
pub const SLEEPER: &str = "import sys, time
end = time.time() + float(sys.argv[1])
while time.time() < end:
    time.sleep(0.001)
    t = time.perf_counter()
    while time.perf_counter() - t < 0.00005:
        pass
";

/// Works 2 ms, sleeps 1 ms: two thirds of a CPU, enough to run out of a 10% quota.
pub const WORKER: &str = "import sys, time
end = time.time() + float(sys.argv[1])
while time.time() < end:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.002:
        pass
    time.sleep(0.001)
";

/// Spins for argv[1] seconds.
pub const HOG: &str = "import sys, time
end = time.time() + float(sys.argv[1])
while time.time() < end:
    pass
";

/// Whether this machine can run the BPF tests: root with BTF. Prints why not otherwise.
pub fn bpf_ready(test: &str) -> bool {
    let root = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    if !(root && btf) {
        eprintln!("skipping {test}: needs root ({root}) and kernel BTF ({btf})");
    }
    root && btf
}

/// The mount points of this host's hierarchies.
fn mounts() -> (PathBuf, PathBuf) {
    let info = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let mut v2 = None;
    let mut v1 = None;
    for l in info.lines() {
        let (left, right) = l.split_once(" - ").unwrap_or((l, ""));
        let point = left.split(' ').nth(4).unwrap_or("");
        let mut r = right.split(' ');
        let fstype = r.next().unwrap_or("");
        let opts = r.nth(1).unwrap_or("");
        if fstype == "cgroup2" && v2.is_none() {
            v2 = Some(PathBuf::from(point));
        } else if fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") && v1.is_none() {
            v1 = Some(PathBuf::from(point));
        }
    }
    (
        v2.expect("a cgroup2 mount"),
        v1.expect("a v1 cpu controller mount (this host is hybrid)"),
    )
}

/// Test cgroups `/<name>/<group>` in both hierarchies, and the processes started in them.
pub struct Cgroups {
    pub name: String,
    v2: PathBuf,
    v1: PathBuf,
    groups: Vec<String>,
    children: Vec<Child>,
}

impl Cgroups {
    pub fn new(tag: &str) -> Cgroups {
        let (v2, v1) = mounts();
        let name = format!("tailhunt-test-{tag}-{}", std::process::id());
        let cg = Cgroups {
            v2: v2.join(&name),
            v1: v1.join(&name),
            name,
            groups: Vec::new(),
            children: Vec::new(),
        };
        fs::create_dir_all(&cg.v2).expect("create cgroup2 test group");
        fs::create_dir_all(&cg.v1).expect("create v1 cpu test group");
        cg
    }

    /// Creates `group` in both hierarchies.
    pub fn group(&mut self, group: &str) {
        fs::create_dir_all(self.v2.join(group)).expect("cgroup2 group");
        fs::create_dir_all(self.v1.join(group)).expect("v1 cpu group");
        self.groups.push(group.to_string());
    }

    /// The cgroup2 directory of the test (`None`) or of one group.
    pub fn v2_dir(&self, group: Option<&str>) -> PathBuf {
        group.map_or_else(|| self.v2.clone(), |g| self.v2.join(g))
    }

    /// The name `tailhunt runq` gives a group (its cgroup2 path).
    pub fn display(&self, group: &str) -> String {
        format!("/{}/{group}", self.name)
    }

    /// Writes a v1 cpu controller file of the test's own top group.
    pub fn set_top_v1(&self, file: &str, value: &str) {
        fs::write(self.v1.join(file), value)
            .unwrap_or_else(|e| panic!("write {file}={value}: {e}"));
    }

    /// Writes a v1 cpu controller file of a group (`cpu.shares`, `cpu.cfs_quota_us`).
    pub fn set_v1(&self, group: &str, file: &str, value: &str) {
        fs::write(self.v1.join(group).join(file), value)
            .unwrap_or_else(|e| panic!("write {file}={value}: {e}"));
    }

    /// Starts `python3 -c PROGRAM SECONDS` pinned to `cpu`, inside `group` in both hierarchies
    /// before it runs a line of Python (or in the root cgroup with `None`). Returns its pid.
    pub fn spawn(&mut self, group: Option<&str>, cpu: u32, program: &str, seconds: f64) -> u32 {
        let dirs: Vec<PathBuf> =
            group.map_or_else(Vec::new, |g| vec![self.v2.join(g), self.v1.join(g)]);
        self.spawn_in(&dirs, cpu, program, seconds)
    }

    /// Like [`Cgroups::spawn`], but only in the cgroup2 group: the v1 cpu controller keeps the
    /// process in its root, scheduled as a task among the host's own (a service in a cgroup2
    /// slice without CPU accounting).
    pub fn spawn_v2(&mut self, group: &str, cpu: u32, program: &str, seconds: f64) -> u32 {
        let dirs = vec![self.v2.join(group)];
        self.spawn_in(&dirs, cpu, program, seconds)
    }

    fn spawn_in(&mut self, dirs: &[PathBuf], cpu: u32, program: &str, seconds: f64) -> u32 {
        let seconds = seconds.to_string();
        self.exec_in(dirs, cpu, &["python3", "-c", program, &seconds])
    }

    /// Starts `argv` (a server, say) pinned to `cpu` inside `group` in both hierarchies (or
    /// the root cgroup with `None`), output discarded. Returns its pid; killed on drop.
    pub fn spawn_cmd(&mut self, group: Option<&str>, cpu: u32, argv: &[&str]) -> u32 {
        let dirs: Vec<PathBuf> =
            group.map_or_else(Vec::new, |g| vec![self.v2.join(g), self.v1.join(g)]);
        self.exec_in(&dirs, cpu, argv)
    }

    /// `sh` moves itself into `dirs`, then execs `taskset -c CPU argv...`: the program runs
    /// in the groups from its first instruction.
    fn exec_in(&mut self, dirs: &[PathBuf], cpu: u32, argv: &[&str]) -> u32 {
        let mut script = String::new();
        for dir in dirs {
            script.push_str(&format!("echo $$ > '{}/cgroup.procs' && ", dir.display()));
        }
        script.push_str("exec taskset -c \"$0\" \"$@\"");
        let cpu = cpu.to_string();
        let child = Command::new("sh")
            .args(["-c", &script, &cpu])
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn workload");
        let pid = child.id();
        self.children.push(child);
        pid
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for g in &self.groups {
            for dir in [self.v2.join(g), self.v1.join(g)] {
                // A killed process leaves its cgroup a moment after wait() returns.
                for _ in 0..50 {
                    if fs::remove_dir(&dir).is_ok() || !dir.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
        let _ = fs::remove_dir(&self.v2);
        let _ = fs::remove_dir(&self.v1);
    }
}
