//! Which process owns a socket: socket inodes to pids through `/proc/*/fd`.
//!
//! In: nothing (reads `/proc`). Out: an [`Owners`] map from socket inode to the [`Process`]es
//! holding it (a socket shared after `fork` has several; the first is reported). Processes that
//! vanish or whose descriptors may not be read (another user's, without root) are skipped.
//! Socket inodes are unique across network namespaces, so one map serves all of them.

use std::collections::HashMap;
use std::fs;

use tailhunt_model::evidence::sock::Process;

/// Reads a process's command name; `None` when it does not exist.
pub fn process_of(pid: u32) -> Option<Process> {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(Process {
        pid,
        comm: comm.trim().to_string(),
    })
}

/// Socket inode -> owning process.
#[derive(Debug, Clone, Default)]
pub struct Owners {
    by_inode: HashMap<u64, Process>,
}

impl Owners {
    /// Scans every process's descriptors (or only `pid`'s).
    pub fn scan(pid: Option<u32>) -> Owners {
        let mut by_inode = HashMap::new();
        let pids: Vec<u32> = match pid {
            Some(p) => vec![p],
            None => fs::read_dir("/proc")
                .map(|d| {
                    d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default(),
        };
        for pid in pids {
            let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
                continue;
            };
            let mut comm = None;
            for fd in fds.flatten() {
                let Ok(target) = fs::read_link(fd.path()) else {
                    continue;
                };
                let Some(inode) = socket_inode(&target.to_string_lossy()) else {
                    continue;
                };
                let comm =
                    comm.get_or_insert_with(|| process_of(pid).map(|p| p.comm).unwrap_or_default());
                by_inode.entry(inode).or_insert_with(|| Process {
                    pid,
                    comm: comm.clone(),
                });
            }
        }
        Owners { by_inode }
    }

    /// The owner of a socket inode.
    pub fn get(&self, inode: u64) -> Option<&Process> {
        self.by_inode.get(&inode)
    }

    /// Adds what another scan found, keeping known owners.
    pub fn merge(&mut self, other: Owners) {
        for (k, v) in other.by_inode {
            self.by_inode.entry(k).or_insert(v);
        }
    }

    /// Number of sockets with a known owner.
    pub fn len(&self) -> usize {
        self.by_inode.len()
    }

    /// Whether none is known.
    pub fn is_empty(&self) -> bool {
        self.by_inode.is_empty()
    }
}

/// `socket:[12345]` -> 12345.
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;

    #[test]
    fn finds_its_own_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let link = fs::read_link(format!("/proc/self/fd/{}", l.as_raw_fd())).unwrap();
        let inode = socket_inode(&link.to_string_lossy()).unwrap();
        let owners = Owners::scan(Some(std::process::id()));
        let me = owners.get(inode).unwrap();
        assert_eq!(me.pid, std::process::id());
        assert_eq!(socket_inode("pipe:[1]"), None);
    }
}
