//! The bulk-transfer test: the minimal reproduction of a window-limited download.
//!
//! # Brief overview
//!
//! A [`Server`] listens; a client ([`download`]) connects with the socket options it was
//! given (`SO_RCVBUF`, `SO_SNDBUF`, `TCP_NODELAY`, or none for autotuning), asks for N bytes and
//! reads them, giving up after its timeout the way a real client does (it stops reading and
//! closes the socket, so the server's remaining data meets resets). Both ends sample their own
//! socket's TCP_INFO every few milliseconds ([`sampler`]).
//!
//! In: [`TransferOptions`], the server address and the byte count. Out: a [`Transfer`]: the
//! [`TransferReport`] (time, throughput, outcome, the options asked for and what the kernel
//! made of them, a [`TcpInfoSummary`](tailhunt_model::evidence::sock::TcpInfoSummary) of each
//! end, the window-limited bound window/RTT) and the raw readings, which the caller stores as
//! series.
//!
//! Wire format (big-endian): the client sends `THT1` and the byte count (u64); the server sends
//! that many bytes, then a trailer: a u32 length and a JSON
//! [`SenderView`](tailhunt_model::evidence::sock::SenderView) (its pid, command, send buffer
//! and TCP_INFO summary — the sender's `tcpi_rwnd_limited`, which only the sender knows). A
//! client that timed out never reads the trailer.

mod client;
pub mod sampler;
mod server;

use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::net::{sockopt, AddressFamily, SocketType};
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::evidence::sock::TransferReport;
use tailhunt_model::{ClockOrigin, Labels, SeriesSink, SinkError};

pub use client::download;
pub use sampler::{Reading, Sampler};
pub use server::Server;

use crate::error::SockError;

/// The request's magic bytes.
pub(crate) const MAGIC: &[u8; 4] = b"THT1";
/// The largest trailer a client accepts.
pub(crate) const MAX_TRAILER: u32 = 1 << 16;

/// Socket options and sampling for one end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferOptions {
    /// `SO_RCVBUF` to set (before connect/listen, as applications do), bytes; None leaves
    /// the kernel to autotune.
    pub rcvbuf: Option<u32>,
    /// `SO_SNDBUF` to set, bytes; None: autotuning.
    pub sndbuf: Option<u32>,
    /// `TCP_NODELAY`.
    pub nodelay: bool,
    /// How often TCP_INFO is read.
    pub sample_interval: Duration,
    /// The client gives up after this long (from its request) and closes.
    pub timeout: Option<Duration>,
}

impl Default for TransferOptions {
    fn default() -> Self {
        TransferOptions {
            rcvbuf: None,
            sndbuf: None,
            nodelay: false,
            sample_interval: Duration::from_millis(5),
            timeout: None,
        }
    }
}

/// One end's result and its raw TCP_INFO readings.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// The summary.
    pub report: TransferReport,
    /// Every reading, in time order.
    pub readings: Vec<Reading>,
    /// The clocks as the sampler started, before the first reading: the stored run's
    /// origin (the run is stored once the transfer is over).
    pub origin: ClockOrigin,
}

impl Transfer {
    /// Records this end into a run: its TCP_INFO series (labels `role`, `flow`) and the
    /// `transfer` document.
    pub fn record(&self, sink: &mut dyn SeriesSink) -> Result<(), SinkError> {
        let r = &self.report;
        let mut labels = Labels::new();
        labels.insert("role".into(), r.role.clone());
        labels.insert("flow".into(), r.flow.clone());
        sampler::write_series(sink, &labels, &self.readings)?;
        put_evidence(sink, r)
    }
}

/// This process's command name.
pub(crate) fn own_comm() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A TCP socket for `addr`'s family with the buffer sizes applied (before connect or listen,
/// as applications do: the window scale is fixed by the SYN).
pub(crate) fn tcp_socket(addr: &SocketAddr, opts: &TransferOptions) -> Result<OwnedFd, SockError> {
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket(family, SocketType::STREAM, None)
        .map_err(|e| SockError::io("cannot create a TCP socket")(e.into()))?;
    if let Some(n) = opts.rcvbuf {
        sockopt::set_socket_recv_buffer_size(&fd, n as usize).map_err(|e| {
            SockError::SetOption {
                option: "SO_RCVBUF",
                value: n.to_string(),
                source: e.into(),
            }
        })?;
    }
    if let Some(n) = opts.sndbuf {
        sockopt::set_socket_send_buffer_size(&fd, n as usize).map_err(|e| {
            SockError::SetOption {
                option: "SO_SNDBUF",
                value: n.to_string(),
                source: e.into(),
            }
        })?;
    }
    if opts.nodelay {
        sockopt::set_tcp_nodelay(&fd, true).map_err(|e| SockError::SetOption {
            option: "TCP_NODELAY",
            value: "1".into(),
            source: e.into(),
        })?;
    }
    Ok(fd)
}

/// Effective (SO_RCVBUF, SO_SNDBUF) of a socket.
pub(crate) fn buffers<Fd: AsFd>(fd: Fd) -> (u32, u32) {
    let r = sockopt::socket_recv_buffer_size(&fd).unwrap_or(0) as u32;
    let s = sockopt::socket_send_buffer_size(&fd).unwrap_or(0) as u32;
    (r, s)
}

/// window / RTT in bits/s.
pub(crate) fn bound_bps(window: Option<f64>, rtt_ns: Option<u64>) -> Option<f64> {
    match (window, rtt_ns) {
        (Some(w), Some(r)) if w > 0.0 && r > 0 => Some(w * 8.0 / (r as f64 / 1e9)),
        _ => None,
    }
}

/// `a -> b` for a stream, from the client's side.
pub(crate) fn ends(s: &TcpStream) -> (String, String) {
    let show = |a: std::io::Result<SocketAddr>| a.map_or_else(|_| "?".into(), |a| a.to_string());
    (show(s.local_addr()), show(s.peer_addr()))
}
