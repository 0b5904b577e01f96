//! The kernel's `struct tcp_info`, read from raw bytes.
//!
//! In: the bytes `getsockopt(TCP_INFO)` or an `INET_DIAG_INFO` netlink attribute returned (a
//! prefix of the struct: older kernels return fewer fields). Out: a [`TcpInfo`] in honest
//! units (nanoseconds, bytes, bytes per second); a field the kernel did not return is `None`.
//!
//! Offsets are those of `include/uapi/linux/tcp.h`, which only ever grows at the end:
//! `tcpi_busy_time`, `tcpi_rwnd_limited`, `tcpi_sndbuf_limited` (Linux 4.10, commit
//! efd90174167530c6), `tcpi_snd_wnd` (5.4) and `tcpi_rcv_wnd` (6.2).

use serde::{Deserialize, Serialize};

/// The fields of `struct tcp_info` tailhunt uses, in tailhunt's units.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct TcpInfo {
    /// TCP state (`TCP_ESTABLISHED` = 1, ...).
    pub state: u8,
    /// Send-side window scale (shift).
    pub snd_wscale: u8,
    /// Receive-side window scale (shift).
    pub rcv_wscale: u8,
    /// Maximum segment size sent.
    pub snd_mss: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Segments SACKed.
    pub sacked: u32,
    /// Segments considered lost.
    pub lost: u32,
    /// Segments retransmitted and not yet acknowledged.
    pub retrans: u32,
    /// Zero-window probes sent and unanswered.
    pub probes: u8,
    /// Smoothed RTT, ns (kernel: µs).
    pub rtt_ns: u64,
    /// RTT variance, ns.
    pub rttvar_ns: u64,
    /// The receiver's own RTT estimate (from timestamps or data), ns; 0 when none.
    pub rcv_rtt_ns: u64,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// The receive space autotuning measured (what it sizes the buffer from), bytes.
    pub rcv_space: u32,
    /// The receive slow-start threshold (the window's current ceiling), bytes.
    pub rcv_ssthresh: u32,
    /// Total retransmissions.
    pub total_retrans: u32,
    /// Bytes acknowledged by the peer (Linux 4.1+).
    pub bytes_acked: Option<u64>,
    /// Bytes received (Linux 4.1+).
    pub bytes_received: Option<u64>,
    /// Minimum RTT seen, ns.
    pub min_rtt_ns: Option<u64>,
    /// Delivery rate, bytes per second (Linux 4.9+).
    pub delivery_rate: Option<u64>,
    /// Time with data outstanding, ns (Linux 4.10+).
    pub busy_ns: Option<u64>,
    /// Part of the busy time limited by the receiver's window, ns.
    pub rwnd_limited_ns: Option<u64>,
    /// Part of the busy time limited by the send buffer, ns.
    pub sndbuf_limited_ns: Option<u64>,
    /// The peer's advertised window as this end last saw it, bytes (Linux 5.4+).
    pub snd_wnd: Option<u32>,
    /// The window this end last advertised, bytes (Linux 6.2+).
    pub rcv_wnd: Option<u32>,
}

/// `TCP_ESTABLISHED`.
pub const TCP_ESTABLISHED: u8 = 1;

impl TcpInfo {
    /// Reads the prefix of `struct tcp_info` in `b` (native byte order). `None` when even the
    /// original (Linux 2.6) part is missing.
    pub fn parse(b: &[u8]) -> Option<TcpInfo> {
        let u32_at = |o: usize| {
            b.get(o..o + 4)
                .map(|s| u32::from_ne_bytes(s.try_into().unwrap_or_default()))
        };
        let u64_at = |o: usize| {
            b.get(o..o + 8)
                .map(|s| u64::from_ne_bytes(s.try_into().unwrap_or_default()))
        };
        let us = |o: usize| u32_at(o).map(|v| u64::from(v) * 1000);
        Some(TcpInfo {
            state: *b.first()?,
            probes: *b.get(3)?,
            snd_wscale: b.get(6)? & 0x0f,
            rcv_wscale: b.get(6)? >> 4,
            snd_mss: u32_at(16)?,
            unacked: u32_at(24)?,
            sacked: u32_at(28)?,
            lost: u32_at(32)?,
            retrans: u32_at(36)?,
            rcv_ssthresh: u32_at(64)?,
            rtt_ns: us(68)?,
            rttvar_ns: us(72)?,
            snd_cwnd: u32_at(80)?,
            rcv_rtt_ns: us(92)?,
            rcv_space: u32_at(96)?,
            total_retrans: u32_at(100)?,
            bytes_acked: u64_at(120),
            bytes_received: u64_at(128),
            min_rtt_ns: us(148),
            delivery_rate: u64_at(160),
            busy_ns: u64_at(168).map(|v| v * 1000),
            rwnd_limited_ns: u64_at(176).map(|v| v * 1000),
            sndbuf_limited_ns: u64_at(184).map(|v| v * 1000),
            snd_wnd: u32_at(228),
            rcv_wnd: u32_at(232),
        })
    }

    /// Bytes in flight as the kernel counts them (`tcp_packets_in_flight` times the MSS):
    /// unacknowledged segments, less SACKed and lost ones, plus retransmissions.
    pub fn bytes_in_flight(&self) -> u64 {
        let segs = (self.unacked + self.retrans).saturating_sub(self.sacked + self.lost);
        u64::from(segs) * u64::from(self.snd_mss)
    }
}

/// The size of `struct tcp_info` tailhunt asks for (more than any field it reads).
pub const TCP_INFO_LEN: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_from_their_offsets_and_missing_ones_are_none() {
        let mut b = vec![0u8; 240];
        b[0] = TCP_ESTABLISHED;
        b[6] = 0x97; // rcv_wscale 9, snd_wscale 7
        b[68..72].copy_from_slice(&80_000u32.to_ne_bytes());
        b[80..84].copy_from_slice(&10u32.to_ne_bytes());
        b[176..184].copy_from_slice(&5_000u64.to_ne_bytes());
        b[232..236].copy_from_slice(&65_536u32.to_ne_bytes());
        let t = TcpInfo::parse(&b).unwrap();
        assert_eq!((t.snd_wscale, t.rcv_wscale), (7, 9));
        assert_eq!(t.rtt_ns, 80_000_000);
        assert_eq!(t.snd_cwnd, 10);
        assert_eq!(t.rwnd_limited_ns, Some(5_000_000));
        assert_eq!(t.rcv_wnd, Some(65_536));
        // A 4.9 kernel's struct ends before busy_time.
        let old = TcpInfo::parse(&b[..168]).unwrap();
        assert_eq!((old.busy_ns, old.rcv_wnd), (None, None));
        assert!(old.delivery_rate.is_some());
        assert!(TcpInfo::parse(&b[..50]).is_none());
    }
}
