//! The window detectors over what sockets said about themselves: a transfer test's report, or
//! the connections `tailhunt sockets` sampled.
//!
//! In: a [`TransferReport`] (either end) or [`SocketsReport`]. Out: `receive-window-limited`
//! and `application-timeout` findings, built by [`crate::window`] from [`WindowEvidence`] and
//! [`TimeoutEvidence`] with `source` `tcp_info`, naming the process whose receive buffer was
//! pinned and citing the kernel's window sysctls.

use tailhunt_model::evidence::sock::{
    KernelContext, SocketsReport, TransferOutcome, TransferReport,
};
use tailhunt_model::Finding;

use crate::timeout::{transfer_timeout, TimeoutEvidence};
use crate::window::{receive_window_limited, WindowEvidence, WindowSource};

/// Detectors run on transfer and sockets runs.
pub const DETECTORS: [&str; 2] = [
    crate::window::WINDOW_DETECTOR,
    crate::timeout::TIMEOUT_DETECTOR,
];

/// window/RTT if the buffer could grow to tcp_rmem's maximum (autotuning gives the window
/// roughly half the buffer: tcp_adv_win_scale=1 and the 6.6+ scaling ratio both land near it).
fn autotune_bound(kernel: &KernelContext, rtt_ns: u64) -> Option<f64> {
    let max = kernel.rmem_max_autotune()? as f64 / 2.0;
    (rtt_ns > 0).then(|| max * 8.0 / (rtt_ns as f64 / 1e9))
}

/// The window-limited share of a transfer and whose view it is: the sender's
/// `tcpi_rwnd_limited` (the server's own, or what its trailer told the client), else — a
/// client whose transfer never completed has no trailer — the receiver's own view of its
/// window (`TcpInfoSummary::receiver_window_share`).
fn transfer_share(r: &TransferReport) -> Option<(f64, WindowSource)> {
    let sender = match r.role.as_str() {
        "server" => r.tcp.rwnd_limited_share,
        _ => r.sender.as_ref().and_then(|s| s.tcp.rwnd_limited_share),
    };
    match (sender, r.role.as_str()) {
        (Some(s), _) => Some((s, WindowSource::TcpInfo)),
        (None, "client") => r
            .tcp
            .receiver_window_share
            .map(|s| (s, WindowSource::TcpInfoReceiver)),
        _ => None,
    }
}

/// Runs both detectors on one end's transfer report.
pub fn diagnose_transfer(r: &TransferReport) -> Vec<Finding> {
    let mut out = Vec::new();
    if let (Some((share, source)), Some(window), Some(rtt)) =
        (transfer_share(r), r.window_bytes, r.rtt_ns)
    {
        let (receiver, pinned) = if r.role == "client" {
            let who = format!("pid {} ({})", r.pid, r.comm);
            let pinned = r.rcvbuf_requested.map(|n| {
                format!(
                    "{who} set SO_RCVBUF={n} on the socket to {} (the kernel doubled it to {})",
                    r.peer, r.rcvbuf_effective
                )
            });
            (Some(who), pinned)
        } else {
            (Some(format!("the client at {}", r.peer)), None)
        };
        let evidence = WindowEvidence {
            flow: r.flow.clone(),
            source,
            bytes: r.bytes_transferred,
            rwnd_limited_share: share,
            throughput_bps: r.throughput_bps,
            window_bytes: window,
            rtt_ns: rtt as i64,
            rtt_from: Some(match r.rtt_from.as_deref() {
                Some("receiver") => "the receiver's own estimate of its sender's round trip (tcpi_rcv_rtt, from TCP timestamps), averaged over the bytes received: the sender's trailer never came".into(),
                _ => "the sender's smoothed RTT, averaged over the bytes acknowledged".into(),
            }),
            rtt_legs_ns: None,
            range_ns: Some(r.range_ns),
            scale_inferred: false,
            receiver,
            pinned,
            kernel: Some(r.kernel.cite_window()),
            autotune_bound_bps: autotune_bound(&r.kernel, rtt),
        };
        out.extend(receive_window_limited(&[evidence]));
    }
    if r.role == "client" && r.outcome == TransferOutcome::Timeout {
        if let Some(timeout_ns) = r.timeout_ns {
            let (start, end) = r.range_ns;
            out.extend(transfer_timeout(&TimeoutEvidence {
                flow: r.flow.clone(),
                client: format!("pid {} ({})", r.pid, r.comm),
                timeout_ns,
                elapsed_ns: r.transfer_ns,
                bytes_wanted: r.bytes_requested,
                bytes_received: r.bytes_transferred,
                first_byte_ns: r.first_byte_ns.map(|t| (t - start).max(0) as u64),
                quiet_before_close_ns: r.last_byte_ns.map(|t| (end - t).max(0) as u64),
                window_bound_bps: r.window_bound_bps,
                range_ns: Some(r.range_ns),
            }));
        }
    }
    out
}

/// Runs the window detector on every sampled connection that sent data, and on receivers whose
/// sender was not sampled (the usual case: a local client, a remote server).
pub fn diagnose_sockets(r: &SocketsReport) -> Vec<Finding> {
    let receivers = r
        .connections
        .iter()
        .filter(|c| !c.peer_sampled && c.bytes_received > c.bytes_sent)
        .filter_map(|c| {
            // Never the receiver's smoothed RTT: it measures the receiver's own data.
            let rtt = c.rcv_rtt_mean_ns?;
            let who = c.owner.as_ref().map(|o| o.describe());
            let pinned = c
                .options_set
                .iter()
                .rev()
                .find(|e| e.option == "SO_RCVBUF" || e.option == "SO_RCVBUFFORCE")
                .map(|e| e.describe());
            Some(WindowEvidence {
                flow: c.flow.clone(),
                source: WindowSource::TcpInfoReceiver,
                bytes: c.bytes_received,
                rwnd_limited_share: c.receiver_window_share?,
                throughput_bps: c.throughput_bps?,
                window_bytes: c.rcv_wnd_mean_bytes?,
                rtt_ns: rtt as i64,
                rtt_from: Some(
                    "the receiver's own estimate of its sender's round trip (tcpi_rcv_rtt), mean"
                        .into(),
                ),
                rtt_legs_ns: None,
                range_ns: c.range_ns,
                scale_inferred: false,
                receiver: who,
                pinned,
                kernel: Some(r.kernel.cite_window()),
                autotune_bound_bps: autotune_bound(&r.kernel, rtt),
            })
        });
    let evidence: Vec<WindowEvidence> = r
        .connections
        .iter()
        .filter(|c| c.bytes_sent >= c.bytes_received)
        .filter_map(|c| {
            let share = c.rwnd_limited_share?;
            let rtt = c.rtt_mean_ns?;
            let receiver = c.peer_owner.as_ref().map(|o| o.describe());
            let pinned = c.peer_rcvbuf_set.as_ref().map(|s| s.describe());
            Some(WindowEvidence {
                flow: c.flow.clone(),
                source: WindowSource::TcpInfo,
                bytes: c.bytes_sent,
                rwnd_limited_share: share,
                throughput_bps: c.throughput_bps?,
                window_bytes: c.snd_wnd_mean_bytes?,
                rtt_ns: rtt as i64,
                rtt_from: Some("the sender's smoothed RTT, mean".into()),
                rtt_legs_ns: None,
                range_ns: c.range_ns,
                scale_inferred: false,
                receiver,
                pinned,
                kernel: Some(r.kernel.cite_window()),
                autotune_bound_bps: autotune_bound(&r.kernel, rtt),
            })
        })
        .chain(receivers)
        .collect();
    receive_window_limited(&evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::evidence::sock::{SenderView, TcpInfoSummary};

    /// A 10 MB download over 80 ms; `share` is the sender's rwnd-limited share.
    fn report(share: f64, mbit: f64, window: f64, outcome: TransferOutcome) -> TransferReport {
        let mut kernel = KernelContext::default();
        kernel
            .sysctls
            .insert("net.ipv4.tcp_rmem".into(), "4096 131072 33554432".into());
        TransferReport {
            role: "client".into(),
            local: "198.18.12.1:5000".into(),
            peer: "198.18.12.2:7400".into(),
            flow: "198.18.12.1:5000 -> 198.18.12.2:7400".into(),
            pid: 1699,
            comm: "java".into(),
            bytes_requested: 10_000_000,
            bytes_transferred: 10_000_000,
            outcome,
            error: None,
            timeout_ns: None,
            transfer_ns: (80e6 / mbit * 1e3) as u64,
            throughput_bps: mbit * 1e6,
            rcvbuf_requested: Some(65536),
            rcvbuf_effective: 131072,
            sndbuf_requested: None,
            sndbuf_effective: 87040,
            nodelay: false,
            tcp: TcpInfoSummary::default(),
            sender: Some(SenderView {
                tcp: TcpInfoSummary {
                    rwnd_limited_share: Some(share),
                    ..TcpInfoSummary::default()
                },
                ..SenderView::default()
            }),
            window_bytes: Some(window),
            rtt_ns: Some(80_000_000),
            rtt_from: Some("sender".into()),
            window_bound_bps: Some(window * 8.0 / 0.08),
            range_ns: (0, 1),
            first_byte_ns: None,
            last_byte_ns: None,
            kernel,
        }
    }

    #[test]
    fn window_limited_transfer_names_the_pinning_process_and_the_kernel() {
        let f = diagnose_transfer(&report(0.45, 7.8, 80_000.0, TransferOutcome::Complete));
        assert_eq!(f.len(), 1);
        assert!(
            f[0].summary
                .contains("pid 1699 (java) set SO_RCVBUF=65536 on the socket to 198.18.12.2:7400"),
            "{}",
            f[0].summary
        );
        assert!(f[0].evidence[0]
            .note
            .contains("net.ipv4.tcp_rmem=4096 131072 33554432"));
        assert!(f[0].evidence[0].values["autotune_bound_bps"] > 1e9);
    }

    #[test]
    fn silent_when_the_window_is_not_the_limit() {
        // Far below window/RTT (autotuned), or hardly ever rwnd-limited.
        assert!(
            diagnose_transfer(&report(0.0, 60.0, 4_000_000.0, TransferOutcome::Complete))
                .is_empty()
        );
        assert!(
            diagnose_transfer(&report(0.05, 7.8, 80_000.0, TransferOutcome::Complete)).is_empty()
        );
    }

    #[test]
    fn timeout_fires_when_the_client_gave_up_at_its_timeout() {
        let mut r = report(0.45, 7.8, 80_000.0, TransferOutcome::Timeout);
        r.sender = None;
        r.timeout_ns = Some(3_000_000_000);
        r.transfer_ns = 3_000_000_000;
        r.range_ns = (0, 3_000_000_000);
        r.first_byte_ns = Some(90_000_000);
        r.last_byte_ns = Some(2_999_000_000);
        r.bytes_transferred = 2_900_000;
        let f = diagnose_transfer(&r);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].detector, "application-timeout");
        assert_eq!(f[0].evidence[0].values["timeout_s"], 3.0);
        assert!(f[0]
            .fix
            .as_ref()
            .unwrap()
            .contains("see receive-window-limited"));
        // A window that would have finished in time: still a timeout (the client gave up),
        // but the window is not named as what held the transfer back.
        r.window_bytes = Some(4_000_000.0);
        r.window_bound_bps = Some(4_000_000.0 * 8.0 / 0.08);
        let f = diagnose_transfer(&r);
        assert_eq!(f.len(), 1);
        assert!(!f[0].summary.contains("window"), "{}", f[0].summary);
        assert!(!f[0]
            .fix
            .as_ref()
            .unwrap()
            .contains("receive-window-limited"));
        // Closed well before its timeout: not the timeout's doing.
        r.window_bound_bps = Some(8e6);
        r.transfer_ns = 1_000_000_000;
        assert!(diagnose_transfer(&r).is_empty());
    }

    /// A client that gave up has no trailer: its own view of its window (the share of
    /// intervals that brought the window per round trip, `tcpi_rcv_rtt` its round trip)
    /// names the window, and the timeout points to it.
    #[test]
    fn a_client_that_timed_out_names_its_window_from_its_own_view() {
        let mut r = report(0.0, 2.6, 82_000.0, TransferOutcome::Timeout);
        r.sender = None;
        r.tcp.receiver_window_share = Some(0.9);
        r.rtt_ns = Some(250_000_000);
        r.window_bound_bps = Some(82_000.0 * 8.0 / 0.25);
        r.timeout_ns = Some(3_000_000_000);
        r.transfer_ns = 3_000_000_000;
        r.bytes_transferred = 975_000;
        let f = diagnose_transfer(&r);
        let names: Vec<&str> = f.iter().map(|f| f.detector.as_str()).collect();
        assert_eq!(names, ["receive-window-limited", "application-timeout"]);
        assert_eq!(f[0].evidence[0].series, "window (tcp_info_receiver)");
        assert!(
            f[1].summary.contains("close to window/RTT"),
            "{}",
            f[1].summary
        );
        // An autotuned download held by the path's rate: the window is not named, and the
        // timeout's need is the achieved rate's.
        r.tcp.receiver_window_share = Some(0.04);
        r.window_bytes = Some(3_000_000.0);
        r.window_bound_bps = Some(3_000_000.0 * 8.0 / 0.25);
        let f = diagnose_transfer(&r);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].detector, "application-timeout");
        assert!(!f[0].summary.contains("window"), "{}", f[0].summary);
    }
}
