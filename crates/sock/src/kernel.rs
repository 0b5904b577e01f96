//! Kernel context: the kernel version and the sysctls that shape TCP windows and ACKs.
//!
//! In: nothing (reads `/proc/sys/kernel/osrelease`, `/proc/sys/kernel/version` and
//! `/proc/sys/net/...` of the calling thread's network namespace, where most TCP sysctls live
//! since Linux 4.15). Out: a [`KernelContext`] that every run of the socket commands stores in
//! its params, so a kernel upgrade that changed window behaviour shows when two runs are
//! compared, and findings cite the values. A sysctl this kernel lacks (`tcp_adv_win_scale` is
//! gone in newer ones) is simply absent.

use tailhunt_model::evidence::sock::KernelContext;

/// The sysctls recorded, relative to `/proc/sys/`.
pub const SYSCTLS: [&str; 16] = [
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/rmem_default",
    "net/core/wmem_default",
    "net/ipv4/tcp_moderate_rcvbuf",
    "net/ipv4/tcp_adv_win_scale",
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_window_scaling",
    "net/ipv4/tcp_timestamps",
    "net/ipv4/tcp_sack",
    "net/ipv4/tcp_slow_start_after_idle",
    "net/ipv4/tcp_notsent_lowat",
    "net/ipv4/tcp_shrink_window",
    "net/ipv4/tcp_no_metrics_save",
];

/// Reads the kernel context of the calling thread's network namespace.
pub fn read_context() -> KernelContext {
    let read = |p: &str| {
        std::fs::read_to_string(format!("/proc/sys/{p}"))
            .ok()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    KernelContext {
        release: read("kernel/osrelease").unwrap_or_default(),
        version: read("kernel/version").unwrap_or_default(),
        sysctls: SYSCTLS
            .iter()
            .filter_map(|p| Some((p.replace('/', "."), read(p)?)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_kernel_and_its_tcp_sysctls() {
        let k = read_context();
        assert!(!k.release.is_empty());
        assert!(k.get("net.ipv4.tcp_rmem").is_some(), "{k:?}");
        assert!(k.rmem_max_autotune().is_some_and(|m| m > 0));
        assert!(k.cite_window().contains("net.ipv4.tcp_rmem="));
    }
}
