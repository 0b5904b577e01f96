//! Host health around a step: CPU use and steal time (`/proc/stat`), and the host's TCP
//! retransmissions (`/proc/net/snmp`, for the client's network namespace).

/// Counters read at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Total jiffies over all CPUs.
    pub total: u64,
    /// Idle + iowait jiffies.
    pub idle: u64,
    /// Steal jiffies (time the hypervisor ran someone else).
    pub steal: u64,
    /// TCP segments retransmitted.
    pub retrans_segs: u64,
    /// TCP segments sent.
    pub out_segs: u64,
}

/// What happened between two snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Health {
    /// Share of CPU time busy (0..1), all CPUs.
    pub cpu_busy: f64,
    /// Share of CPU time stolen by the hypervisor (0..1).
    pub steal: f64,
    /// TCP segments retransmitted by this host.
    pub tcp_retransmits: u64,
    /// TCP segments sent by this host.
    pub tcp_out_segments: u64,
}

/// Reads the counters now; missing files give zeros (e.g. in a restricted container).
pub fn snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    if let Ok(stat) = std::fs::read_to_string("/proc/stat") {
        if let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) {
            let v: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal guest guest_nice; guests are
            // already counted in user/nice.
            s.total = v.iter().take(8).sum();
            s.idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            s.steal = v.get(7).copied().unwrap_or(0);
        }
    }
    if let Ok(snmp) = std::fs::read_to_string("/proc/net/snmp") {
        let tcp: Vec<&str> = snmp.lines().filter(|l| l.starts_with("Tcp:")).collect();
        if let [names, values] = tcp.as_slice() {
            for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
                match n {
                    "RetransSegs" => s.retrans_segs = v.parse().unwrap_or(0),
                    "OutSegs" => s.out_segs = v.parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
    }
    s
}

/// The change from `a` to `b`.
pub fn between(a: Snapshot, b: Snapshot) -> Health {
    let total = b.total.saturating_sub(a.total).max(1) as f64;
    Health {
        cpu_busy: 1.0 - b.idle.saturating_sub(a.idle) as f64 / total,
        steal: b.steal.saturating_sub(a.steal) as f64 / total,
        tcp_retransmits: b.retrans_segs.saturating_sub(a.retrans_segs),
        tcp_out_segments: b.out_segs.saturating_sub(a.out_segs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_host() {
        let a = snapshot();
        assert!(a.total > 0, "no /proc/stat?");
        std::thread::sleep(std::time::Duration::from_millis(30));
        let h = between(a, snapshot());
        assert!((0.0..=1.0).contains(&h.cpu_busy) && (0.0..=1.0).contains(&h.steal));
    }
}
