//! Where the time of one request went.
//!
//! The client knows when it wrote the request and when it had the whole response (its own
//! clock); the reference server returns when the kernel received the request, when the
//! application had it and when it answered (its clock). Only differences taken on one clock are
//! used, so the two hosts' clocks need not agree:
//!
//! - `server_app` = server app send − server app receive (think time, the "application");
//! - `server_stack` = server app receive − server kernel receive (socket queue and wake-up);
//! - `network` = client service time − (server app send − server kernel receive): the round trip
//!   on the wire plus both directions of the client's stack and the server's outbound stack.
//!
//! Summed they give the client's service time (end − actual send).

use crate::wire::ServerTimes;

/// One request's split, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Breakdown {
    /// Server application time.
    pub server_app_ns: i64,
    /// Server inbound stack time (0 when the server has no kernel timestamp).
    pub server_stack_ns: i64,
    /// The rest: network round trip and the stacks around it.
    pub network_ns: i64,
}

impl Breakdown {
    /// Splits a service time given the server's timestamps; `None` when the server sent none.
    pub fn split(service_ns: i64, t: ServerTimes) -> Option<Breakdown> {
        if t.app_recv_ns == 0 || t.app_send_ns < t.app_recv_ns {
            return None;
        }
        let app = (t.app_send_ns - t.app_recv_ns) as i64;
        let stack = if t.rx_kernel_ns > 0 && t.rx_kernel_ns <= t.app_recv_ns {
            (t.app_recv_ns - t.rx_kernel_ns) as i64
        } else {
            0
        };
        Some(Breakdown {
            server_app_ns: app,
            server_stack_ns: stack,
            network_ns: (service_ns - app - stack).max(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_add_up_to_the_service_time() {
        let t = ServerTimes {
            rx_kernel_ns: 1_000,
            app_recv_ns: 1_500,
            app_send_ns: 2_001_500,
        };
        let b = Breakdown::split(2_100_000, t).unwrap();
        assert_eq!(b.server_app_ns, 2_000_000);
        assert_eq!(b.server_stack_ns, 500);
        assert_eq!(
            b.server_app_ns + b.server_stack_ns + b.network_ns,
            2_100_000
        );
        assert_eq!(Breakdown::split(5, ServerTimes::default()), None);
    }
}
