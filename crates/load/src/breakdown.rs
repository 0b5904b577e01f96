//! Where the time of one request went.
//!
//! In: the client's service time of a request (end − actual send, CLOCK_MONOTONIC), the
//! [`ServerTimes`] the reference server returned in its reply and the client's own
//! [`ClientTimes`] (kernel timestamps from [`crate::tstamp`] when `--breakdown` could get them).
//! Out: a [`Breakdown`] whose four parts add up to the service time.
//!
//! The two hosts' clocks need not agree: every part is a difference of two times taken on **one**
//! host's clock, never a client time minus a server time. With `c_send`/`c_recv` the client
//! application's send and receive, `c_tx`/`c_rx` its kernel's transmit and receive timestamps,
//! `s_rx` the server kernel's receive timestamp and `s_recv`/`s_send` the server application's
//! receive and send:
//!
//! - `server_app` = `s_send − s_recv` (think time, the "application");
//! - `server_stack` = `s_recv − s_rx` (socket queue and wake-up; 0 without `s_rx`);
//! - `network` = `(c_rx − c_tx) − (s_send − s_rx)`: the client kernel's round trip minus the
//!   time the server held the request. That leaves the wire both ways, the server's outbound
//!   stack and the client kernel's inbound path below the socket timestamp;
//! - `client_stack` = `service − (c_rx − c_tx)`, which is `(c_tx − c_send) + (c_recv − c_rx)`:
//!   the client's write down to the device plus the wake-up and read of the reply. It is the
//!   remainder rather than that sum because `service` is on CLOCK_MONOTONIC and the kernel
//!   stamps on CLOCK_REALTIME: both tick at the same rate, but reading both clocks at the
//!   application points would leave a few ns of disagreement, and the parts must add up exactly.
//!
//! Adding them, `s_send`, `s_recv` and `s_rx` cancel and `c_rx − c_tx` cancels: the sum is
//! `service`. When a client kernel time is missing (timestamps refused, a TX stamp lost), the
//! known half of `client_stack` (`c_tx − c_send` or `c_recv − c_rx`, on CLOCK_REALTIME) is kept
//! and `network` is the rest, `service − client_stack − server_stack − server_app`; with neither
//! it is the old split (`client_stack` 0, the client's stack counted in `network`). Times that
//! contradict each other (a clock stepped between two stamps) are ignored the same way. If the
//! server reports more time than the client measured in all (impossible on one clock; across
//! hosts only through clock rate errors of a few ppm), the server parts are cut to fit so the
//! sum still holds.

use crate::wire::ServerTimes;

/// The client's own times of one request, ns on its CLOCK_REALTIME (0 = unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientTimes {
    /// Just before the application wrote the request.
    pub app_send_ns: u64,
    /// The kernel's transmit timestamp of the request's last byte.
    pub kernel_tx_ns: u64,
    /// The kernel's receive timestamp of the data that completed the response.
    pub kernel_rx_ns: u64,
    /// When the application had the whole response.
    pub app_recv_ns: u64,
}

/// One request's split, ns; the parts add up to the service time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Breakdown {
    /// Client stack: write to kernel transmit plus kernel receive to the application (0 when
    /// the client has no kernel timestamps).
    pub client_stack_ns: i64,
    /// Server application time.
    pub server_app_ns: i64,
    /// Server inbound stack time (0 when the server has no kernel timestamp).
    pub server_stack_ns: i64,
    /// Network round trip (and, without client kernel timestamps, the client's stack).
    pub network_ns: i64,
}

/// `later − earlier` when both are known and in order.
fn span(earlier: u64, later: u64) -> Option<i64> {
    (earlier > 0 && later >= earlier).then(|| (later - earlier) as i64)
}

impl Breakdown {
    /// Splits a service time given the server's timestamps only; `None` when the server sent
    /// none.
    pub fn split(service_ns: i64, server: ServerTimes) -> Option<Breakdown> {
        Breakdown::split_with_client(service_ns, server, ClientTimes::default())
    }

    /// Splits a service time given the server's and the client's timestamps (see the module
    /// docs); `None` when the server sent none.
    pub fn split_with_client(
        service_ns: i64,
        server: ServerTimes,
        client: ClientTimes,
    ) -> Option<Breakdown> {
        let app = span(server.app_recv_ns, server.app_send_ns)?;
        let service = service_ns.max(0);
        let app = app.min(service);
        let stack = span(server.rx_kernel_ns, server.app_recv_ns)
            .unwrap_or(0)
            .min(service - app);
        let held = app + stack; // s_send − s_rx (or s_send − s_recv without s_rx)
        let client_stack = match span(client.kernel_tx_ns, client.kernel_rx_ns) {
            // The client kernel's round trip holds the server's time and fits in the service.
            Some(rtt) if rtt >= held && rtt <= service => service - rtt,
            _ => {
                let out = span(client.app_send_ns, client.kernel_tx_ns).unwrap_or(0);
                let back = span(client.kernel_rx_ns, client.app_recv_ns).unwrap_or(0);
                if out + back <= service - held {
                    out + back
                } else {
                    0
                }
            }
        };
        Some(Breakdown {
            client_stack_ns: client_stack,
            server_app_ns: app,
            server_stack_ns: stack,
            network_ns: service - held - client_stack,
        })
    }

    /// Sum of the parts (the service time it was split from).
    pub fn total_ns(&self) -> i64 {
        self.client_stack_ns + self.network_ns + self.server_stack_ns + self.server_app_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: ServerTimes = ServerTimes {
        rx_kernel_ns: 1_000,
        app_recv_ns: 1_500,
        app_send_ns: 2_001_500,
    };

    #[test]
    fn parts_add_up_to_the_service_time() {
        let b = Breakdown::split(2_100_000, SERVER).unwrap();
        assert_eq!(b.server_app_ns, 2_000_000);
        assert_eq!(b.server_stack_ns, 500);
        assert_eq!(b.client_stack_ns, 0);
        assert_eq!(b.network_ns, 2_100_000 - 2_000_500);
        assert_eq!(b.total_ns(), 2_100_000);
        assert_eq!(Breakdown::split(5, ServerTimes::default()), None);
    }

    #[test]
    fn client_kernel_times_split_the_client_stack_from_the_network() {
        // Client clock: send at 10_000, kernel out 12_000 (2 us down the stack), kernel in
        // 2_062_000, application has it at 2_065_000 (3 us up). The kernel round trip is
        // 2_050_000 ns, the server held the request 2_000_500 ns: 49_500 ns on the wire.
        let client = ClientTimes {
            app_send_ns: 10_000,
            kernel_tx_ns: 12_000,
            kernel_rx_ns: 2_062_000,
            app_recv_ns: 2_065_000,
        };
        let service = 2_055_000; // c_recv − c_send, as the monotonic clock saw it
        let b = Breakdown::split_with_client(service, SERVER, client).unwrap();
        assert_eq!(b.network_ns, (2_062_000 - 12_000) - (2_001_500 - 1_000));
        assert_eq!(b.network_ns, 49_500);
        assert_eq!(b.client_stack_ns, 5_000);
        assert_eq!((b.server_app_ns, b.server_stack_ns), (2_000_000, 500));
        assert_eq!(b.total_ns(), service);
        // The monotonic service time a few ns off the realtime one: the client stack absorbs
        // it, the network part is still the kernel-only difference.
        let b = Breakdown::split_with_client(service + 7, SERVER, client).unwrap();
        assert_eq!((b.network_ns, b.client_stack_ns), (49_500, 5_007));
        assert_eq!(b.total_ns(), service + 7);
    }

    #[test]
    fn half_known_client_times_keep_the_half_they_know() {
        let service = 2_055_000;
        let rx_only = ClientTimes {
            kernel_rx_ns: 2_062_000,
            app_recv_ns: 2_065_000,
            ..ClientTimes::default()
        };
        let b = Breakdown::split_with_client(service, SERVER, rx_only).unwrap();
        assert_eq!(b.client_stack_ns, 3_000);
        assert_eq!(b.total_ns(), service);
        let tx_only = ClientTimes {
            app_send_ns: 10_000,
            kernel_tx_ns: 12_000,
            ..ClientTimes::default()
        };
        let b = Breakdown::split_with_client(service, SERVER, tx_only).unwrap();
        assert_eq!(b.client_stack_ns, 2_000);
        assert_eq!(b.total_ns(), service);
    }

    #[test]
    fn contradictory_times_fall_back_and_still_add_up() {
        let service = 2_055_000;
        // A round trip shorter than the server's hold (a stamp matched to the wrong request, a
        // clock step): ignored, and the application-side halves are inconsistent too.
        let bad = ClientTimes {
            app_send_ns: 10_000,
            kernel_tx_ns: 2_000_000,
            kernel_rx_ns: 2_001_000,
            app_recv_ns: 9_000_000,
        };
        let b = Breakdown::split_with_client(service, SERVER, bad).unwrap();
        assert_eq!(b, Breakdown::split(service, SERVER).unwrap());
        // The server claims more than the client measured: server parts cut to fit.
        let b = Breakdown::split_with_client(1_000_000, SERVER, ClientTimes::default()).unwrap();
        assert_eq!((b.server_app_ns, b.server_stack_ns), (1_000_000, 0));
        assert_eq!(b.total_ns(), 1_000_000);
        assert!(b.network_ns == 0 && b.client_stack_ns == 0);
    }
}
