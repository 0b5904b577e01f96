//! Kernel context: the kernel version and the sysctls that shape TCP windows and ACKs.
//!
//! In: nothing (reads `/proc/sys/kernel/osrelease`, `/proc/sys/kernel/version` and
//! `/proc/sys/net/...` of the calling thread's network namespace, where most TCP sysctls live
//! since Linux 4.15). Out: a [`KernelContext`] that every run of the socket commands stores in
//! its params, so a kernel upgrade that changed window behaviour shows when two runs are
//! compared, and findings cite the values. A sysctl this kernel lacks (`tcp_adv_win_scale` is
//! gone in newer ones) is simply absent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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

/// What the kernel is and how it is tuned.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct KernelContext {
    /// `uname -r`.
    pub release: String,
    /// `uname -v` (build string).
    pub version: String,
    /// `net.ipv4.tcp_rmem` style names to their values (whitespace collapsed).
    pub sysctls: BTreeMap<String, String>,
}

impl KernelContext {
    /// Reads the context of the calling thread's network namespace.
    pub fn read() -> KernelContext {
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

    /// A sysctl by its dotted name (`net.ipv4.tcp_rmem`).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.sysctls.get(name).map(String::as_str)
    }

    /// The largest receive buffer autotuning may grow to (`tcp_rmem`'s third value), bytes.
    pub fn rmem_max_autotune(&self) -> Option<u64> {
        self.get("net.ipv4.tcp_rmem")?
            .split_whitespace()
            .nth(2)?
            .parse()
            .ok()
    }

    /// One line for findings: `kernel 6.18.4; net.ipv4.tcp_rmem=4096 131072 33554432, ...`,
    /// with the sysctls that decide a receive window.
    pub fn cite_window(&self) -> String {
        let keys = [
            "net.ipv4.tcp_rmem",
            "net.core.rmem_max",
            "net.ipv4.tcp_moderate_rcvbuf",
            "net.ipv4.tcp_adv_win_scale",
            "net.ipv4.tcp_window_scaling",
        ];
        let parts: Vec<String> = keys
            .iter()
            .filter_map(|k| Some(format!("{k}={}", self.get(k)?)))
            .collect();
        format!("kernel {}; {}", self.release, parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_kernel_and_its_tcp_sysctls() {
        let k = KernelContext::read();
        assert!(!k.release.is_empty());
        assert!(k.get("net.ipv4.tcp_rmem").is_some(), "{k:?}");
        assert!(k.rmem_max_autotune().is_some_and(|m| m > 0));
        assert!(k.cite_window().contains("net.ipv4.tcp_rmem="));
    }
}
