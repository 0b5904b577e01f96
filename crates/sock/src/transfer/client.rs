//! The downloading client.
//!
//! In: the server address, the byte count, [`TransferOptions`]. Out: a [`Transfer`] with the
//! client's view. The client sets its options before `connect()`, sends the request, reads
//! until every byte arrived or its timeout fired — then it closes the socket without reading
//! further, as an application that gave up does (unread data makes the kernel reset the
//! connection; data still arriving is answered with resets) — and reads the server's trailer
//! when the transfer completed.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tailhunt_model::ClockOrigin;

use tailhunt_model::evidence::sock::{SenderView, TcpInfoSummary, TransferOutcome, TransferReport};

use super::sampler::{summarise, Sampler};
use super::{
    bound_bps, buffers, ends, own_comm, tcp_socket, Transfer, TransferOptions, MAGIC, MAX_TRAILER,
};
use crate::error::SockError;
use crate::kernel::read_context;

/// Downloads `bytes` from the server at `addr`.
pub fn download(
    addr: SocketAddr,
    bytes: u64,
    opts: &TransferOptions,
) -> Result<Transfer, SockError> {
    if bytes == 0 {
        return Err(SockError::Config(
            "--bytes 0: ask for at least one byte (e.g. --bytes 10M)".into(),
        ));
    }
    let fd = tcp_socket(&addr, opts)?;
    rustix::net::connect(&fd, &addr).map_err(|e| SockError::Connect {
        addr,
        source: e.into(),
    })?;
    let (rcvbuf_effective, sndbuf_effective) = buffers(&fd);
    let stream = Arc::new(TcpStream::from(fd));
    let (local, peer) = ends(&stream);
    let origin = ClockOrigin::now();
    let sampler = Sampler::start(stream.clone(), opts.sample_interval);

    let start_ns = ClockOrigin::now().mono_ns;
    let began = Instant::now();
    let mut request = Vec::with_capacity(12);
    request.extend_from_slice(MAGIC);
    request.extend_from_slice(&bytes.to_be_bytes());
    (&*stream)
        .write_all(&request)
        .map_err(SockError::io(format!("cannot send the request to {addr}")))?;

    let deadline = opts.timeout.map(|t| began + t);
    let Payload {
        got,
        first_byte_ns,
        last_byte_ns,
        outcome,
        error,
    } = read_payload(&stream, bytes, deadline, start_ns);
    let end_ns = if outcome == TransferOutcome::Complete {
        last_byte_ns
    } else {
        ClockOrigin::now().mono_ns
    };
    let sender = if outcome == TransferOutcome::Complete {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        read_trailer(&stream).ok()
    } else {
        None
    };
    let readings = sampler.stop();
    // Closing: the last reference to the socket goes here (the sampler has stopped).
    drop(stream);

    let tcp = summarise(&readings, |r| r.t_ns >= start_ns && r.t_ns <= end_ns);
    let window_bytes = tcp.rcv_wnd_mean_bytes;
    let (rtt_ns, rtt_from) = transfer_rtt(sender.as_ref(), &tcp);
    let transfer_ns = (end_ns - start_ns).max(1) as u64;
    let report = TransferReport {
        role: "client".into(),
        flow: format!("{local} -> {peer}"),
        local,
        peer,
        pid: std::process::id(),
        comm: own_comm(),
        bytes_requested: bytes,
        bytes_transferred: got,
        outcome,
        error,
        timeout_ns: opts.timeout.map(|t| t.as_nanos() as u64),
        transfer_ns,
        throughput_bps: got as f64 * 8.0 / (transfer_ns as f64 / 1e9),
        rcvbuf_requested: opts.rcvbuf,
        rcvbuf_effective,
        sndbuf_requested: opts.sndbuf,
        sndbuf_effective,
        nodelay: opts.nodelay,
        tcp,
        sender,
        window_bytes,
        rtt_ns,
        rtt_from,
        window_bound_bps: bound_bps(window_bytes, rtt_ns),
        range_ns: (start_ns, end_ns),
        first_byte_ns,
        last_byte_ns: first_byte_ns.map(|_| last_byte_ns),
        kernel: read_context(),
    };
    Ok(Transfer {
        report,
        readings,
        origin,
    })
}

/// The round trip the sender lived with and whose view it is: the sender's own (its trailer,
/// when the transfer completed), else the receiver's estimate of it (`tcpi_rcv_rtt`), both
/// averaged over the bytes moved. Never the receiver's smoothed RTT (`tcpi_rtt`): a receiver
/// measures that on its own data — the request, sent before any queue filled — so it says
/// nothing of the path the download waits through (90-144 µs over a 300 ms queue).
fn transfer_rtt(
    sender: Option<&SenderView>,
    own: &TcpInfoSummary,
) -> (Option<u64>, Option<String>) {
    if let Some(r) = sender.and_then(|s| s.tcp.rtt_bytes_mean_ns.or(s.tcp.rtt_mean_ns)) {
        return (Some(r), Some("sender".into()));
    }
    match own.rcv_rtt_bytes_mean_ns {
        Some(r) => (Some(r), Some("receiver".into())),
        None => (None, None),
    }
}

/// What reading the payload came to.
struct Payload {
    got: u64,
    first_byte_ns: Option<i64>,
    last_byte_ns: i64,
    outcome: TransferOutcome,
    error: Option<String>,
}

/// Reads `bytes` or until the deadline passes (the timeout) or the connection fails.
fn read_payload(
    stream: &TcpStream,
    bytes: u64,
    deadline: Option<Instant>,
    start_ns: i64,
) -> Payload {
    let mut p = Payload {
        got: 0,
        first_byte_ns: None,
        last_byte_ns: start_ns,
        outcome: TransferOutcome::Complete,
        error: None,
    };
    let mut buf = vec![0u8; 256 * 1024];
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "the server".into(), |a| a.to_string());
    while p.got < bytes {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            p.outcome = TransferOutcome::Timeout;
            break;
        }
        // A read timeout of zero means none; the loop checks the deadline itself.
        let _ = stream.set_read_timeout(left.map(|l| l.max(Duration::from_millis(1))));
        let want = buf
            .len()
            .min((bytes - p.got).min(usize::MAX as u64) as usize);
        match (&*stream).read(&mut buf[..want]) {
            Ok(0) => {
                p.outcome = TransferOutcome::Error;
                p.error = Some(format!(
                    "the server closed the connection after {} of {bytes} bytes",
                    p.got
                ));
                break;
            }
            Ok(n) => {
                p.got += n as u64;
                p.last_byte_ns = ClockOrigin::now().mono_ns;
                p.first_byte_ns.get_or_insert(p.last_byte_ns);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                p.outcome = if e.kind() == ErrorKind::ConnectionReset {
                    TransferOutcome::Reset
                } else {
                    TransferOutcome::Error
                };
                p.error = Some(format!("reading from {peer} after {} bytes: {e}", p.got));
                break;
            }
        }
    }
    p
}

fn read_trailer(stream: &TcpStream) -> Result<SenderView, SockError> {
    let bad = |detail: String| SockError::Protocol {
        expected: "server",
        detail,
    };
    let mut len = [0u8; 4];
    let mut s = stream;
    s.read_exact(&mut len)
        .map_err(|e| bad(format!("no trailer: {e}")))?;
    let len = u32::from_be_bytes(len);
    if len > MAX_TRAILER {
        return Err(bad(format!("trailer of {len} bytes")));
    }
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body)
        .map_err(|e| bad(format!("short trailer: {e}")))?;
    serde_json::from_slice(&body).map_err(|e| bad(format!("trailer is not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A download through a queue that filled after the request: the receiver's smoothed
    /// RTT is its request's (69 µs), its `tcpi_rcv_rtt` the queue's. Without the sender's
    /// trailer (a timeout) the bound takes the latter, and says whose it is.
    #[test]
    fn the_receiver_never_takes_its_own_request_rtt_for_the_path() {
        let own = TcpInfoSummary {
            rtt_mean_ns: Some(69_000),
            rcv_rtt_bytes_mean_ns: Some(230_000_000),
            ..TcpInfoSummary::default()
        };
        assert_eq!(
            transfer_rtt(None, &own),
            (Some(230_000_000), Some("receiver".into()))
        );
        let sender = SenderView {
            tcp: TcpInfoSummary {
                rtt_mean_ns: Some(48_000_000),
                rtt_bytes_mean_ns: Some(77_000_000),
                ..TcpInfoSummary::default()
            },
            ..SenderView::default()
        };
        assert_eq!(
            transfer_rtt(Some(&sender), &own),
            (Some(77_000_000), Some("sender".into()))
        );
        let nothing = TcpInfoSummary {
            rtt_mean_ns: Some(69_000),
            ..TcpInfoSummary::default()
        };
        assert_eq!(transfer_rtt(None, &nothing), (None, None));
    }
}
