//! One run-queue wait as the kernel sends it through the ring buffer.

use serde::{Deserialize, Serialize};

/// A run-queue wait: `struct runq_event` in `src/bpf/runq.h`, field for field:
///
/// ```c
/// struct runq_event {
///     __u64 switch_ns;      // CLOCK_MONOTONIC when the task got the CPU
///     __u64 latency_ns;     // since it became runnable
///     __u64 cgroup_id;
///     __u64 prev_cgroup_id; // the task that ran just before it
///     __u32 pid, tgid, prev_pid, cpu;
///     char comm[16], prev_comm[16];
/// };
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunqEvent {
    /// When the task got the CPU, ns on the monotonic clock.
    pub switch_ns: u64,
    /// How long it had been runnable.
    pub latency_ns: u64,
    /// Its cgroup's kernfs id.
    pub cgroup_id: u64,
    /// The cgroup of the task that held the CPU just before (0: the CPU was idle).
    pub prev_cgroup_id: u64,
    /// Thread id.
    pub pid: u32,
    /// Process id.
    pub tgid: u32,
    /// Thread that held the CPU just before (0: idle).
    pub prev_pid: u32,
    /// CPU.
    pub cpu: u32,
    /// Command name of the waiting thread.
    pub comm: String,
    /// Command name of the thread it waited behind.
    pub prev_comm: String,
}

impl RunqEvent {
    /// Size of `struct runq_event`.
    pub const SIZE: usize = 80;

    /// Decodes one ring-buffer record (native byte order); `None` when it is too short.
    pub fn parse(b: &[u8]) -> Option<RunqEvent> {
        if b.len() < Self::SIZE {
            return None;
        }
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap_or_default());
        let comm = |o: usize| {
            let raw = &b[o..o + 16];
            let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).into_owned()
        };
        Some(RunqEvent {
            switch_ns: u64_at(0),
            latency_ns: u64_at(8),
            cgroup_id: u64_at(16),
            prev_cgroup_id: u64_at(24),
            pid: u32_at(32),
            tgid: u32_at(36),
            prev_pid: u32_at(40),
            cpu: u32_at(44),
            comm: comm(48),
            prev_comm: comm(64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_c_layout() {
        let mut b = Vec::new();
        for v in [5_000u64, 1_234, 77, 0] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [42u32, 40, 0, 1] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"hog\0");
        b.extend_from_slice(b"victim\0\0\0\0\0\0\0\0\0\0");
        b.extend_from_slice(&comm);
        assert_eq!(b.len(), RunqEvent::SIZE);
        let e = RunqEvent::parse(&b).unwrap();
        assert_eq!((e.switch_ns, e.latency_ns, e.cgroup_id), (5_000, 1_234, 77));
        assert_eq!((e.pid, e.tgid, e.prev_pid, e.cpu), (42, 40, 0, 1));
        assert_eq!((e.comm.as_str(), e.prev_comm.as_str()), ("victim", "hog"));
        assert!(RunqEvent::parse(&b[..79]).is_none());
    }
}
