//! The window detectors over what sockets said about themselves: a transfer test's report, or
//! the connections `tailhunt sockets` sampled.
//!
//! In: a [`TransferReport`] (either end) or [`SocketsReport`]. Out: `receive-window-limited`
//! and `application-timeout` findings, built by [`crate::window`] from [`WindowEvidence`] and
//! [`TimeoutEvidence`] with `source` `tcp_info`, naming the process whose receive buffer was
//! pinned and citing the kernel's window sysctls.

use tailhunt_model::Finding;
use tailhunt_sock::kernel::KernelContext;
use tailhunt_sock::monitor::SocketsReport;
use tailhunt_sock::transfer::{TransferOutcome, TransferReport};

use crate::window::{receive_window_limited, transfer_timeout, TimeoutEvidence, WindowEvidence};

/// Detectors run on transfer and sockets runs.
pub const DETECTORS: [&str; 2] = [
    crate::window::WINDOW_DETECTOR,
    crate::window::TIMEOUT_DETECTOR,
];

/// window/RTT if the buffer could grow to tcp_rmem's maximum (autotuning gives the window
/// roughly half the buffer: tcp_adv_win_scale=1 and the 6.6+ scaling ratio both land near it).
fn autotune_bound(kernel: &KernelContext, rtt_ns: u64) -> Option<f64> {
    let max = kernel.rmem_max_autotune()? as f64 / 2.0;
    (rtt_ns > 0).then(|| max * 8.0 / (rtt_ns as f64 / 1e9))
}

/// Runs both detectors on one end's transfer report.
pub fn diagnose_transfer(r: &TransferReport) -> Vec<Finding> {
    let mut out = Vec::new();
    // The rwnd-limited share is the sender's: the server's own, or what it told the client.
    let share = match r.role.as_str() {
        "server" => r.tcp.rwnd_limited_share,
        _ => r.sender.as_ref().and_then(|s| s.tcp.rwnd_limited_share),
    };
    if let (Some(share), Some(window), Some(rtt)) = (share, r.window_bytes, r.rtt_ns) {
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
            source: "tcp_info".into(),
            bytes: r.bytes_transferred,
            rwnd_limited_share: share,
            throughput_bps: r.throughput_bps,
            window_bytes: window,
            rtt_ns: rtt as i64,
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
            out.extend(transfer_timeout(&TimeoutEvidence {
                flow: r.flow.clone(),
                client: format!("pid {} ({})", r.pid, r.comm),
                timeout_ns,
                elapsed_ns: r.transfer_ns,
                bytes_wanted: r.bytes_requested,
                bytes_received: r.bytes_transferred,
                window_bound_bps: r.window_bound_bps,
                range_ns: Some(r.range_ns),
            }));
        }
    }
    out
}

/// Runs the window detector on every sampled connection that sent data.
pub fn diagnose_sockets(r: &SocketsReport) -> Vec<Finding> {
    let evidence: Vec<WindowEvidence> = r
        .connections
        .iter()
        .filter_map(|c| {
            let share = c.rwnd_limited_share?;
            let rtt = c.rtt_mean_ns?;
            let receiver = c.peer_owner.as_ref().map(|o| o.describe());
            let pinned = c.peer_rcvbuf_set.as_ref().map(|s| s.describe());
            Some(WindowEvidence {
                flow: c.flow.clone(),
                source: "tcp_info".into(),
                bytes: c.bytes_sent,
                rwnd_limited_share: share,
                throughput_bps: c.throughput_bps?,
                window_bytes: c.snd_wnd_mean_bytes?,
                rtt_ns: rtt as i64,
                range_ns: Some(c.range_ns),
                scale_inferred: false,
                receiver,
                pinned,
                kernel: Some(r.kernel.cite_window()),
                autotune_bound_bps: autotune_bound(&r.kernel, rtt),
            })
        })
        .collect();
    receive_window_limited(&evidence)
}
