//! The per-connection report: what a user reads, what detectors weigh, what is stored.

use tailhunt_model::evidence::capture::{
    CloseKind, Handshake, Role, RttSummary, SenderRtt, SideSummary, TcpSummary,
};

use super::flow::TcpFlow;
use super::rtt::RttStats;

/// One leg's RTT samples summarised.
fn rtt_summary(s: &RttStats) -> Option<RttSummary> {
    (s.count > 0).then(|| RttSummary {
        count: s.count,
        min_ns: s.min_ns,
        mean_ns: s.sum_ns / s.count as i64,
        max_ns: s.max_ns,
    })
}

impl TcpFlow {
    /// The report of this connection.
    pub fn summary(&self) -> TcpSummary {
        let c = self.client();
        let s = 1 - c;
        let side = |i: usize| {
            let h = &self.halves[i];
            SideSummary {
                packets: h.packets,
                ip_bytes: h.ip_bytes,
                payload_bytes: h.payload_bytes,
                wscale: self.wscale(i),
                last_window: self.window(i),
                max_inflight: h.max_inflight,
                retransmissions: h.retrans,
                unseen_bytes: h.unseen_bytes,
                acked_unseen: h.acked_unseen,
                duplicate_frames: h.duplicate_frames,
                zero_windows: h.zero_windows,
                zero_window_ns: h.zero_window_ns,
                states: h.first_data_ns.map(|_| self.states[i].fractions()),
                first_data_ns: h.first_data_ns,
                last_data_ns: h.last_data_ns,
                resets: h.rsts,
            }
        };
        let main = if self.halves[s].payload_bytes >= self.halves[c].payload_bytes {
            s
        } else {
            c
        };
        let busy = self.states[main].busy_ns();
        let throughput = (busy > 0 && self.halves[main].payload_bytes > 0)
            .then(|| self.halves[main].payload_bytes as f64 * 8.0 / (busy as f64 / 1e9));
        let mean_window = self.window_points[main].busy_mean_window();
        let path_rtt = self.path_rtt_ns(main);
        let window_bound = match (mean_window, path_rtt) {
            (Some(w), Some(r)) if r > 0 => Some(w * 8.0 / (r as f64 / 1e9)),
            _ => None,
        };
        TcpSummary {
            handshake: self.syn_ns.map(|syn| Handshake {
                syn_ns: syn,
                server_leg_ns: self.synack_ns.map(|t| t - syn),
                client_leg_ns: match (self.synack_ns, self.handshake_ack_ns) {
                    (Some(a), Some(b)) => Some(b - a),
                    _ => None,
                },
            }),
            rtt_server_leg: rtt_summary(&self.rtt[c]),
            rtt_client_leg: rtt_summary(&self.rtt[s]),
            wscale_from_syn: !self.wscale_inferred(),
            client: side(c),
            server: side(s),
            main_sender: if main == c { "client" } else { "server" }.into(),
            throughput_bps: throughput,
            rwnd_limited_share: self.states[main].rwnd_share(),
            mean_window,
            path_rtt_ns: path_rtt,
            sender_rtt: self.sender_rtt(main),
            window_bound_bps: window_bound,
            exchanges: self.exchanges,
            nagle_stalls: self.stalls,
            close: self.close.summary(c, &self.halves).map(|mut close| {
                // A reset answering the SYN, before any SYN-ACK: a closed port (or a full
                // backlog), which reads as a refusal, not as a connection ended early.
                if close.by == Role::Server
                    && close.how == CloseKind::Rst
                    && self.syn_ns.is_some()
                    && self.synack_ns.is_none()
                {
                    close.note = "server refused the connection: a reset answered the SYN".into();
                }
                close
            }),
            ports_reused: self.reused,
        }
    }

    /// How the round trip of side `d`'s data was put together.
    fn sender_rtt(&self, d: usize) -> Option<SenderRtt> {
        let (receiver_leg_ns, sender_leg_ns) = self.sender_legs_ns(d)?;
        let echo = &self.echo[d];
        Some(SenderRtt {
            receiver_leg_ns,
            sender_leg_ns,
            sender_leg_from: self.rtt[1 - d].main_source().into(),
            echo_samples: echo.samples,
            echo_error_max_ns: echo.spread_max_ns,
        })
    }
}
