//! What tailhunt's eBPF sources (`crates/sched`, `crates/sock`) share.
//!
//! # Brief overview
//!
//! - [`bpf_denied`]: whether this process may load tracing programs, and if not, which
//!   capabilities it lacks (read from `/proc/self/status`, before trying: a verifier rejection is
//!   `EACCES` too, so the load error cannot tell the two apart).
//! - [`enable_run_time_stats`]: the kernel's per-program statistics, on for as long as the
//!   returned descriptor lives.
//! - [`program_stats`]: `run_cnt` and `run_time_ns` of loaded programs, by id.
//! - `include/tailhunt_bpf_types.h`: the scalar types and BPF constants every program's
//!   hand-written `vmlinux.h` starts from (build scripts add `-I../bpf/include`).
//!
//! ```no_run
//! if let Some(why) = tailhunt_bpf::bpf_denied() {
//!     eprintln!("cannot trace: {why}");
//! }
//! let _stats = tailhunt_bpf::enable_run_time_stats();
//! ```
#![deny(missing_docs)]

use std::fs;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Capability bits (include/uapi/linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Why BPF tracing is not permitted, or `None` when it is: CAP_SYS_ADMIN alone, or CAP_BPF
/// together with CAP_PERFMON (Linux 5.8+), in the effective set.
pub fn bpf_denied() -> Option<String> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())?;
    denied_by(eff)
}

fn denied_by(eff: u64) -> Option<String> {
    let has = |cap: u32| eff & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return None;
    }
    let missing: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .iter()
        .filter(|(c, _)| !has(*c))
        .map(|(_, n)| *n)
        .collect();
    Some(format!(
        "effective capabilities {eff:#x} lack {}",
        missing.join(" and ")
    ))
}

/// Why BTF-typed tracing cannot run here, or `None` when it can: the kernel must describe its
/// types (`/sys/kernel/btf/vmlinux`, CONFIG_DEBUG_INFO_BTF=y) and this process may load tracing
/// programs ([`bpf_denied`]). The sentence says what to do.
pub fn tracing_unavailable() -> Option<String> {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing; it needs CONFIG_DEBUG_INFO_BTF=y)".into());
    }
    bpf_denied().map(|why| {
        format!(
            "not permitted to load BPF programs ({why}): run as root or grant CAP_BPF and CAP_PERFMON"
        )
    })
}

/// Turns on the kernel's per-program run-time statistics (`run_time_ns`, `run_cnt`) for as long
/// as the returned descriptor is open; closing it turns them off again, so a crash never leaves
/// them on for the rest of the host (the `kernel.bpf_stats_enabled` sysctl would).
#[allow(unsafe_code)]
pub fn enable_run_time_stats() -> io::Result<OwnedFd> {
    // SAFETY: bpf_enable_stats takes an enum by value and returns a new descriptor or -errno;
    // it touches no memory of ours.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: `fd` was just returned to us by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `(run_cnt, run_time_ns)` of each program id in `ids`, in order; `(0, 0)` for an id that is
/// not loaded (or when statistics were never on).
pub fn program_stats(ids: &[u32]) -> Vec<(u64, u64)> {
    let mut out = vec![(0, 0); ids.len()];
    for info in libbpf_rs::query::ProgInfoIter::default() {
        if let Some(i) = ids.iter().position(|&id| id == info.id) {
            out[i] = (info.run_cnt, info.run_time_ns);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_or_bpf_with_perfmon_is_enough() {
        assert!(denied_by(1 << CAP_SYS_ADMIN).is_none());
        assert!(denied_by((1 << CAP_BPF) | (1 << CAP_PERFMON)).is_none());
        let only_bpf = denied_by(1 << CAP_BPF).unwrap();
        assert!(only_bpf.contains("lack CAP_PERFMON"), "{only_bpf}");
        assert!(denied_by(0).unwrap().contains("CAP_BPF and CAP_PERFMON"));
    }

    #[test]
    fn unknown_programs_cost_nothing() {
        assert_eq!(program_stats(&[u32::MAX]), vec![(0, 0)]);
    }
}
