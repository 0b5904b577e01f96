//! Cgroup ids to paths and names, and where each hierarchy is mounted.
//!
//! The kernel side reports a cgroup by its kernfs node id, which is the inode number of the
//! cgroup's directory; walking a hierarchy's mount and reading inode numbers maps ids back to
//! paths. A path then gets a name people recognise: a Docker container, a Kubernetes pod's
//! container, a systemd unit, or just the path; the root cgroup and ids that cannot be resolved
//! are "system" (host processes outside any container).

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use tailhunt_model::evidence::runq::{CgroupKind, CgroupRef, Mounts};

/// Where the cgroup hierarchies are mounted, from `/proc/self/mountinfo`.
pub fn detect_mounts() -> Mounts {
    fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mounts(&t))
        .unwrap_or_default()
}

/// Parses mountinfo text (fields: id parent dev root mountpoint opts ... - fstype source super).
pub fn parse_mounts(mountinfo: &str) -> Mounts {
    let mut m = Mounts::default();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let rest: Vec<&str> = right.split(' ').collect();
        let (Some(point), Some(fstype)) = (fields.get(4), rest.first()) else {
            continue;
        };
        let point = PathBuf::from(unescape(point));
        match *fstype {
            "cgroup2" if m.v2.is_none() => m.v2 = Some(point),
            "cgroup" if m.v1_cpu.is_none() => {
                let opts = rest.get(2).copied().unwrap_or("");
                if opts.split(',').any(|o| o == "cpu") {
                    m.v1_cpu = Some(point);
                }
            }
            _ => {}
        }
    }
    m
}

/// mountinfo escapes spaces and a few other bytes as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A cgroup at `path` (relative to its mount), named for people.
pub fn cgroup_at(id: u64, path: &str) -> CgroupRef {
    let (kind, name) = name_of(path);
    CgroupRef {
        id,
        path: path.to_string(),
        name,
        kind,
    }
}

/// The readable name and kind of a cgroup path.
pub fn name_of(path: &str) -> (CgroupKind, String) {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return (CgroupKind::System, "system".into());
    }
    let last = trimmed.rsplit('/').next().unwrap_or(trimmed);
    let short = |id: &str| id.chars().take(12).collect::<String>();
    // A 64-hex container id, bare or inside a systemd scope name.
    let container_id = |s: &str| -> Option<String> {
        let core = s
            .trim_end_matches(".scope")
            .rsplit(['-', ':'])
            .next()
            .unwrap_or(s);
        (core.len() == 64 && core.bytes().all(|c| c.is_ascii_hexdigit())).then(|| core.to_string())
    };
    if trimmed.contains("kubepods") {
        // .../kubepods[-burstable]-pod<uid>.slice/cri-containerd-<id>.scope, or
        // /kubepods/burstable/pod<uid>/<id>
        let pod = trimmed.split('/').find_map(|c| {
            let c = c.trim_end_matches(".slice");
            let i = c.rfind("pod")?;
            let uid = &c[i + 3..];
            let uid_like = uid.len() >= 8
                && uid
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b'_');
            uid_like.then(|| uid.replace('_', "-"))
        });
        if let (Some(pod), Some(id)) = (pod.clone(), container_id(last)) {
            return (CgroupKind::Kubernetes, format!("pod {pod}:{}", short(&id)));
        }
        if let Some(pod) = pod {
            return (CgroupKind::Kubernetes, format!("pod {pod}"));
        }
    }
    if let Some(id) = container_id(last) {
        if trimmed.contains("docker") {
            return (CgroupKind::Docker, format!("docker:{}", short(&id)));
        }
        if trimmed.contains("containerd") || trimmed.contains("crio") || trimmed.contains("libpod")
        {
            return (CgroupKind::Docker, format!("container:{}", short(&id)));
        }
    }
    if [".service", ".scope", ".slice"]
        .iter()
        .any(|s| last.ends_with(s))
    {
        return (CgroupKind::Systemd, last.to_string());
    }
    (CgroupKind::Cgroup, trimmed.to_string())
}

/// Ids to paths for one hierarchy, filled by walking its mount.
#[derive(Debug, Default)]
pub struct CgroupIndex {
    root: Option<PathBuf>,
    paths: HashMap<u64, String>,
    /// Walked since the last [`CgroupIndex::expire`]: an id it still lacks is gone.
    fresh: bool,
}

impl CgroupIndex {
    /// An index of the hierarchy mounted at `root` (empty, and every id "system", without one).
    pub fn new(root: Option<&Path>) -> CgroupIndex {
        let mut index = CgroupIndex {
            root: root.map(Path::to_path_buf),
            paths: HashMap::new(),
            fresh: false,
        };
        index.refresh();
        index
    }

    /// Walks the hierarchy again (new cgroups appear; gone ones keep their last path).
    pub fn refresh(&mut self) {
        self.fresh = true;
        let Some(root) = self.root.clone() else {
            return;
        };
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(meta) = fs::metadata(&dir) else {
                continue;
            };
            let rel = dir
                .strip_prefix(&root)
                .map_or_else(|_| "/".to_string(), |r| format!("/{}", r.display()));
            self.paths.insert(meta.ino(), rel);
            if let Ok(entries) = fs::read_dir(&dir) {
                for e in entries.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
            }
        }
    }

    /// The cgroup with kernfs id `id`, when the last walk saw it.
    pub fn get(&self, id: u64) -> Option<CgroupRef> {
        self.paths.get(&id).map(|p| cgroup_at(id, p))
    }

    /// Like [`CgroupIndex::get`], walking the hierarchy first when `id` is new — at most once
    /// between two [`CgroupIndex::expire`] calls, however many unknown ids are asked for (a
    /// cgroup created and removed between walks is never found).
    pub fn find(&mut self, id: u64) -> Option<CgroupRef> {
        if !self.paths.contains_key(&id) && !self.fresh {
            self.refresh();
        }
        self.get(id)
    }

    /// Lets the next [`CgroupIndex::find`] of an unknown id walk again (once per interval).
    pub fn expire(&mut self) {
        self.fresh = false;
    }

    /// Whether the cgroup still exists.
    pub fn exists(&self, id: u64) -> bool {
        match (&self.root, self.paths.get(&id)) {
            (Some(root), Some(p)) => root.join(p.trim_start_matches('/')).is_dir(),
            _ => false,
        }
    }

    /// The directory of the cgroup with this id.
    pub fn dir(&self, id: u64) -> Option<PathBuf> {
        let root = self.root.as_ref()?;
        self.paths
            .get(&id)
            .map(|p| root.join(p.trim_start_matches('/')))
    }

    /// Every cgroup directory the last walk saw.
    pub fn dirs(&self) -> Vec<PathBuf> {
        let Some(root) = &self.root else {
            return Vec::new();
        };
        self.paths
            .values()
            .map(|p| root.join(p.trim_start_matches('/')))
            .collect()
    }

    /// The mount this index walks.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }
}

/// The kernfs id of a cgroup directory: its inode number.
pub fn id_of(dir: &Path) -> std::io::Result<u64> {
    Ok(fs::metadata(dir)?.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_and_unit_names() {
        let id = "3f2a1c9e0b7d".to_string() + &"a".repeat(52);
        assert_eq!(name_of("/"), (CgroupKind::System, "system".into()));
        assert_eq!(
            name_of(&format!("/docker/{id}")),
            (CgroupKind::Docker, "docker:3f2a1c9e0b7d".into())
        );
        assert_eq!(
            name_of(&format!("/system.slice/docker-{id}.scope")),
            (CgroupKind::Docker, "docker:3f2a1c9e0b7d".into())
        );
        assert_eq!(
            name_of(&format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c_3d4e_5f60.slice/cri-containerd-{id}.scope"
            )),
            (CgroupKind::Kubernetes, "pod 1b2c-3d4e-5f60:3f2a1c9e0b7d".into())
        );
        assert_eq!(
            name_of(&format!("/kubepods/burstable/pod1b2c-3d4e/{id}")),
            (CgroupKind::Kubernetes, "pod 1b2c-3d4e:3f2a1c9e0b7d".into())
        );
        assert_eq!(
            name_of("/system.slice/nginx.service"),
            (CgroupKind::Systemd, "nginx.service".into())
        );
        assert_eq!(
            name_of("/tailhunt-test/neighbour"),
            (CgroupKind::Cgroup, "/tailhunt-test/neighbour".into())
        );
    }

    #[test]
    fn mountinfo_of_a_hybrid_host() {
        let text = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        let m = parse_mounts(text);
        assert_eq!(m.v2.as_deref(), Some(Path::new("/sys/fs/cgroup/unified")));
        assert_eq!(m.v1_cpu.as_deref(), Some(Path::new("/sys/fs/cgroup/cpu")));
        let joint = parse_mounts(
            "32 31 0:29 / /sys/fs/cgroup/cpu\\054cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
        );
        assert_eq!(
            joint.v1_cpu.as_deref(),
            Some(Path::new("/sys/fs/cgroup/cpu,cpuacct"))
        );
        assert_eq!(joint.v2, None);
    }

    #[test]
    fn walking_this_hosts_hierarchy_finds_its_root() {
        let m = detect_mounts();
        if let Some(root) = m.v2.as_deref() {
            let index = CgroupIndex::new(Some(root));
            let id = id_of(root).unwrap();
            assert_eq!(index.get(id).unwrap().name, "system");
        }
    }
}
