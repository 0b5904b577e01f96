//! Whether this process may load tracing programs, read from `/proc/self/status`.

use std::fs;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_or_bpf_with_perfmon_is_enough() {
        assert!(denied_by(1 << CAP_SYS_ADMIN).is_none());
        assert!(denied_by((1 << CAP_BPF) | (1 << CAP_PERFMON)).is_none());
        let only_bpf = denied_by(1 << CAP_BPF).unwrap();
        assert!(only_bpf.contains("CAP_PERFMON") && !only_bpf.contains("CAP_BPF "));
        assert!(denied_by(0).unwrap().contains("CAP_BPF and CAP_PERFMON"));
    }
}
