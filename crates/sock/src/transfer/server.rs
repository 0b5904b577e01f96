//! The sending server.
//!
//! In: a listen address and [`TransferOptions`] (SO_RCVBUF/SO_SNDBUF are set on the listening
//! socket, so accepted sockets inherit them before their SYN-ACK). Out: per connection, a
//! [`Transfer`] with the sender's view: how much it sent, whether the client reset the
//! connection, and its TCP_INFO (where `tcpi_rwnd_limited` lives). Connections are served one
//! at a time.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tailhunt_model::ClockOrigin;

use tailhunt_model::evidence::sock::{SenderView, TransferOutcome, TransferReport};

use super::sampler::{summarise, Sampler};
use super::{bound_bps, buffers, ends, own_comm, tcp_socket, Transfer, TransferOptions, MAGIC};
use crate::error::SockError;
use crate::kernel::read_context;

/// The largest transfer a client may ask for (1 TB).
pub const MAX_BYTES: u64 = 1_000_000_000_000;

/// A listening transfer server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    opts: TransferOptions,
}

impl Server {
    /// Listens on `addr` (port 0 picks a free one).
    pub fn bind(addr: SocketAddr, opts: TransferOptions) -> Result<Server, SockError> {
        let fd = tcp_socket(&addr, &opts)?;
        let listen = |e: rustix::io::Errno| SockError::Listen {
            addr,
            source: e.into(),
        };
        rustix::net::sockopt::set_socket_reuseaddr(&fd, true).map_err(listen)?;
        rustix::net::bind(&fd, &addr).map_err(listen)?;
        rustix::net::listen(&fd, 16).map_err(listen)?;
        Ok(Server {
            listener: TcpListener::from(fd),
            opts,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr, SockError> {
        self.listener
            .local_addr()
            .map_err(SockError::io("cannot read the listening address"))
    }

    /// Waits for the next client until `stop` is set (checked every 50 ms, so a signal is
    /// noticed although `accept` itself would not return for it) and serves it; `None` when
    /// stopped first. A connection in progress is served to its end.
    pub fn serve_next(&self, stop: &AtomicBool) -> Result<Option<Transfer>, SockError> {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let wait = Timespec {
            tv_sec: 0,
            tv_nsec: 50_000_000,
        };
        let listener = self.listener.as_fd();
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(None);
            }
            let mut fds = [PollFd::new(&listener, PollFlags::IN)];
            match poll(&mut fds, Some(&wait)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => continue,
                Ok(_) => return self.serve_one().map(Some),
                Err(e) => return Err(SockError::io("cannot wait for a connection")(e.into())),
            }
        }
    }

    /// Waits for one client and serves it. A client that does not speak the protocol is an
    /// error for this connection only.
    pub fn serve_one(&self) -> Result<Transfer, SockError> {
        let (stream, _) = self
            .listener
            .accept()
            .map_err(SockError::io("cannot accept a connection"))?;
        if self.opts.nodelay {
            let _ = stream.set_nodelay(true);
        }
        let (rcvbuf_effective, sndbuf_effective) = buffers(&stream);
        let stream = Arc::new(stream);
        let bytes = read_request(&stream)?;
        let (local, peer) = ends(&stream);
        let origin = ClockOrigin::now();
        let sampler = Sampler::start(stream.clone(), self.opts.sample_interval);
        let start_ns = ClockOrigin::now().mono_ns;
        let (sent, outcome, error) = send(&stream, bytes);
        if outcome == TransferOutcome::Complete {
            wait_acknowledged(&stream, sent, self.opts.sample_interval);
        }
        let end_ns = ClockOrigin::now().mono_ns;
        let readings = sampler.stop();
        let tcp = summarise(&readings, |r| r.t_ns >= start_ns && r.t_ns <= end_ns);
        if outcome == TransferOutcome::Complete {
            let view = SenderView {
                pid: std::process::id(),
                comm: own_comm(),
                sndbuf_effective,
                tcp: tcp.clone(),
            };
            finish(&stream, &view);
        }
        let window_bytes = tcp.snd_wnd_mean_bytes;
        let rtt_ns = tcp.rtt_bytes_mean_ns.or(tcp.rtt_mean_ns);
        let transfer_ns = (end_ns - start_ns).max(1) as u64;
        let report = TransferReport {
            role: "server".into(),
            // The flow is named from the client to the server, as everywhere.
            flow: format!("{peer} -> {local}"),
            local,
            peer,
            pid: std::process::id(),
            comm: own_comm(),
            bytes_requested: bytes,
            bytes_transferred: sent,
            outcome,
            error,
            timeout_ns: None,
            transfer_ns,
            throughput_bps: sent as f64 * 8.0 / (transfer_ns as f64 / 1e9),
            rcvbuf_requested: self.opts.rcvbuf,
            rcvbuf_effective,
            sndbuf_requested: self.opts.sndbuf,
            sndbuf_effective,
            nodelay: self.opts.nodelay,
            window_bound_bps: bound_bps(window_bytes, rtt_ns),
            rtt_ns,
            rtt_from: rtt_ns.map(|_| "sender".into()),
            window_bytes,
            tcp,
            sender: None,
            range_ns: (start_ns, end_ns),
            first_byte_ns: None,
            last_byte_ns: None,
            kernel: read_context(),
        };
        Ok(Transfer {
            report,
            readings,
            origin,
        })
    }
}

fn read_request(stream: &TcpStream) -> Result<u64, SockError> {
    let bad = |detail: String| SockError::Protocol {
        expected: "client",
        detail,
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut req = [0u8; 12];
    let mut s = stream;
    s.read_exact(&mut req)
        .map_err(|e| bad(format!("no request within 10 s: {e}")))?;
    if &req[..4] != MAGIC {
        return Err(bad(format!(
            "request starts with {:?}, not {MAGIC:?}",
            &req[..4]
        )));
    }
    let bytes = u64::from_be_bytes(req[4..].try_into().unwrap_or_default());
    if bytes == 0 || bytes > MAX_BYTES {
        return Err(bad(format!("asks for {bytes} bytes (1 .. {MAX_BYTES})")));
    }
    Ok(bytes)
}

/// Writes `bytes` of payload; returns what was sent and how it ended.
fn send(stream: &TcpStream, bytes: u64) -> (u64, TransferOutcome, Option<String>) {
    let chunk = vec![0x5au8; 64 * 1024];
    let mut sent = 0u64;
    let mut s = stream;
    while sent < bytes {
        let n = chunk.len().min((bytes - sent) as usize);
        match s.write(&chunk[..n]) {
            Ok(0) => {
                return (
                    sent,
                    TransferOutcome::Error,
                    Some("write returned 0".into()),
                )
            }
            Ok(k) => sent += k as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                let outcome = match e.kind() {
                    ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => TransferOutcome::Reset,
                    _ => TransferOutcome::Error,
                };
                return (
                    sent,
                    outcome,
                    Some(format!(
                        "the client went away after {sent} of {bytes} bytes: {e}"
                    )),
                );
            }
        }
    }
    (sent, TransferOutcome::Complete, None)
}

/// The longest the sender waits for its last bytes to be acknowledged.
const ACK_WAIT: Duration = Duration::from_secs(60);

/// Waits until the client has acknowledged all `sent` bytes (TCP_INFO's `bytes_acked`), the
/// connection fails, or [`ACK_WAIT`] passes. The write loop ends when the last byte is in the
/// send buffer, which autotuning grows to megabytes: without the wait, the sender's summary
/// (and the trailer the client reads) would end a large part of the transfer early, before
/// the round trip reached what the rest of the transfer waited through.
fn wait_acknowledged(stream: &TcpStream, sent: u64, every: Duration) {
    let until = std::time::Instant::now() + ACK_WAIT;
    while std::time::Instant::now() < until {
        match crate::sys::tcp_info(stream) {
            Ok(i) if i.state == crate::tcp_info::TCP_ESTABLISHED => {
                if i.bytes_acked.is_none_or(|a| a >= sent) {
                    return;
                }
            }
            _ => return,
        }
        std::thread::sleep(every.max(Duration::from_millis(1)));
    }
}

/// Sends the trailer and waits (up to 5 s) for the client to close first.
fn finish(stream: &TcpStream, view: &SenderView) {
    let body = serde_json::to_vec(view).unwrap_or_default();
    let mut s = stream;
    let mut msg = (body.len() as u32).to_be_bytes().to_vec();
    msg.extend_from_slice(&body);
    if s.write_all(&msg).is_err() {
        return;
    }
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut sink = [0u8; 64];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}
