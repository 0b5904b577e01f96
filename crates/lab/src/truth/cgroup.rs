//! The CPU cases' cgroups and the workloads in them.
//!
//! In: a tag. Out: a [`Cgroups`] guard with groups `/<name>/<group>` in both hierarchies of a
//! hybrid host (cgroup2, where `tailhunt runq` charges waits, and the v1 cpu controller, which
//! governs weights and quota there). Workloads started through it are killed (by PID) and the
//! groups removed when it drops, also when a case fails.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::work::WorkKind;
use super::TruthError;
use crate::scenario::procs::Proc;

/// Test cgroups and their workloads.
pub(crate) struct Cgroups {
    name: String,
    v2: PathBuf,
    v1: PathBuf,
    groups: Vec<String>,
    procs: Vec<Proc>,
}

fn cg_err(path: &Path) -> impl FnOnce(std::io::Error) -> TruthError + '_ {
    move |source| TruthError::Cgroup {
        path: path.to_path_buf(),
        source,
    }
}

/// The mount points of cgroup2 and of the v1 cpu controller.
fn mounts() -> Result<(PathBuf, PathBuf), TruthError> {
    let info = Path::new("/proc/self/mountinfo");
    let text = fs::read_to_string(info).map_err(cg_err(info))?;
    let (mut v2, mut v1) = (None, None);
    for l in text.lines() {
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
    match (v2, v1) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(TruthError::Work(
            "the CPU cases need a cgroup2 mount and the v1 cpu controller (a hybrid host)".into(),
        )),
    }
}

impl Cgroups {
    /// Creates `/tailhunt-truth-<tag>-<pid>` in both hierarchies.
    pub(crate) fn new(tag: &str) -> Result<Cgroups, TruthError> {
        let (v2, v1) = mounts()?;
        let name = format!("tailhunt-truth-{tag}-{}", std::process::id());
        let cg = Cgroups {
            v2: v2.join(&name),
            v1: v1.join(&name),
            name,
            groups: Vec::new(),
            procs: Vec::new(),
        };
        fs::create_dir_all(&cg.v2).map_err(cg_err(&cg.v2))?;
        fs::create_dir_all(&cg.v1).map_err(cg_err(&cg.v1))?;
        Ok(cg)
    }

    /// Creates `group` in both hierarchies.
    pub(crate) fn group(&mut self, group: &str) -> Result<(), TruthError> {
        for d in [self.v2.join(group), self.v1.join(group)] {
            fs::create_dir_all(&d).map_err(cg_err(&d))?;
        }
        self.groups.push(group.to_string());
        Ok(())
    }

    /// How `tailhunt runq` names the case's own top group.
    pub(crate) fn top(&self) -> String {
        format!("/{}", self.name)
    }

    /// How `tailhunt runq` names a group (its cgroup2 path), or `system` for the root.
    pub(crate) fn display(&self, group: Option<&str>) -> String {
        group.map_or_else(|| "system".into(), |g| format!("/{}/{g}", self.name))
    }

    /// Writes a v1 cpu controller file of the case's own top group.
    pub(crate) fn set_top_v1(&self, file: &str, value: &str) -> Result<(), TruthError> {
        let p = self.v1.join(file);
        fs::write(&p, value).map_err(cg_err(&p))
    }

    /// A number from a group's v1 `cpu.stat` (`nr_throttled`), as the kernel counts it.
    pub(crate) fn cpu_stat(&self, group: &str, key: &str) -> Option<u64> {
        let text = fs::read_to_string(self.v1.join(group).join("cpu.stat")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
    }

    /// Writes a v1 cpu controller file of a group (`cpu.shares`, `cpu.cfs_quota_us`).
    pub(crate) fn set_v1(&self, group: &str, file: &str, value: &str) -> Result<(), TruthError> {
        let p = self.v1.join(group).join(file);
        fs::write(&p, value).map_err(cg_err(&p))
    }

    /// Starts `tailhunt-truth work KIND` pinned to `cpu` in `group` (None: the root cgroup),
    /// writing its record to `record`.
    pub(crate) fn spawn(
        &mut self,
        worker: &Path,
        kind: WorkKind,
        group: Option<&str>,
        cpu: usize,
        seconds: f64,
        record: &Path,
    ) -> Result<(), TruthError> {
        let mut argv: Vec<String> = vec![worker.to_string_lossy().into_owned()];
        // `tailhunt-truth work`, or the same workloads as `tailhunt lab work` (the lab's
        // scenarios need no second binary).
        let truth = worker
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("tailhunt-truth"));
        if !truth {
            argv.push("lab".into());
        }
        argv.extend([
            "work".into(),
            kind.name().into(),
            "--seconds".into(),
            seconds.to_string(),
            "--cpu".into(),
            cpu.to_string(),
            "--out".into(),
            record.to_string_lossy().into_owned(),
        ]);
        // The root cgroup is joined explicitly too: the caller may sit in another one.
        let dirs = match group {
            Some(g) => [self.v2.join(g), self.v1.join(g)],
            None => [self.v2_root(), self.v1_root()],
        };
        for d in dirs {
            argv.push("--cgroup".into());
            argv.push(d.to_string_lossy().into_owned());
        }
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let what = format!("{} in {}", kind.name(), self.display(group));
        self.procs.push(Proc::spawn_host(&what, &argv)?);
        Ok(())
    }

    fn v2_root(&self) -> PathBuf {
        self.v2
            .parent()
            .map_or_else(|| self.v2.clone(), Path::to_path_buf)
    }

    fn v1_root(&self) -> PathBuf {
        self.v1
            .parent()
            .map_or_else(|| self.v1.clone(), Path::to_path_buf)
    }

    /// Waits for every workload to finish by itself.
    pub(crate) fn wait_all(&mut self, limit: Duration) -> Result<(), TruthError> {
        for p in &mut self.procs {
            p.wait_success(limit)?;
        }
        Ok(())
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        self.procs.clear();
        for g in &self.groups {
            for dir in [self.v2.join(g), self.v1.join(g)] {
                // A killed process leaves its cgroup a moment after it is reaped.
                for _ in 0..100 {
                    if fs::remove_dir(&dir).is_ok() || !dir.exists() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let _ = fs::remove_dir(&self.v2);
        let _ = fs::remove_dir(&self.v1);
    }
}
