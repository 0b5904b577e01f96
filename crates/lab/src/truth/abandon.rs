//! A client that gives up at its timeout and closes with a reset, in the two ways real clients
//! do.
//!
//! - [`Ask::Download`] + [`Ending::Unread`]: `tailhunt transfer client --timeout` reads until
//!   its deadline and then closes; its receive queue is usually empty by then, so the close is
//!   a FIN. Applications whose timer fires while the reader is busy elsewhere close with data
//!   still queued, and the kernel answers that close with a RST (RFC 2525 2.17; Linux
//!   `tcp_close`). This client asks a `tailhunt transfer server` for `bytes` (that server's
//!   request: `THT1` and the count as a big-endian u64, see `crates/sock/src/transfer`), reads
//!   until 200 ms before its timeout, lets data queue up, and closes at the timeout.
//! - [`Ask::Frame`] + [`Ending::Abort`]: one request to `tailhunt serve tcp` (a frame: a
//!   big-endian u32 length, then the body, whose first 8 bytes are a sequence number; see
//!   `crates/load/src/wire.rs`), the response read if it comes before the timeout, and at the
//!   timeout an abort: SO_LINGER with a zero linger time, then close, which makes the kernel
//!   send a RST instead of a FIN whatever is queued (socket(7); what proxies configured to
//!   reset timed-out connections do). Against a server slower than the timeout, not one
//!   response byte crosses before the reset.
//!
//! Out: its record (request and close on the realtime clock, response bytes read before the
//! close, bytes still queued at the close).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{wall_ns, TruthError};

/// How long before its timeout a downloading client stops reading.
const QUEUE_UP: Duration = Duration::from_millis(200);

/// What the client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// `bytes` from a `tailhunt transfer server`.
    Download(u64),
    /// One request frame to `tailhunt serve tcp`.
    Frame,
}

/// How it closes at its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Stop reading 200 ms early and close with the data that came since unread.
    Unread,
    /// SO_LINGER 0, then close: an abort.
    Abort,
}

/// Asks `addr` for `ask`, reads what comes until `timeout` (less 200 ms for [`Ending::Unread`])
/// and closes at the timeout as `ending` says. A frame's response read in full ends the reading
/// early; the close still waits for the timeout (a client holding its connection until then:
/// the healthy twin of a timeout, closed the same way).
pub fn abandon(
    addr: SocketAddr,
    ask: Ask,
    ending: Ending,
    timeout: Duration,
) -> Result<Value, TruthError> {
    let fail = |what: &str, e: std::io::Error| TruthError::Work(format!("{what} {addr}: {e}"));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| fail("cannot connect to", e))?;
    let local = s
        .local_addr()
        .map_err(|e| fail("no local address for", e))?;
    let request = match ask {
        Ask::Download(bytes) => {
            let mut r = b"THT1".to_vec();
            r.extend_from_slice(&bytes.to_be_bytes());
            r
        }
        Ask::Frame => {
            let mut r = 8u32.to_be_bytes().to_vec();
            r.extend_from_slice(&1u64.to_be_bytes());
            r
        }
    };
    let request_ns = wall_ns();
    let began = Instant::now();
    s.write_all(&request)
        .map_err(|e| fail("cannot send the request to", e))?;
    let reading = match ending {
        Ending::Unread => timeout.saturating_sub(QUEUE_UP),
        Ending::Abort => timeout,
    };
    let (got, complete) =
        read_until(&mut s, ask, began, reading).map_err(|e| fail("reading from", e))?;
    let stopped_reading_ns = wall_ns();
    std::thread::sleep(timeout.saturating_sub(began.elapsed()));
    let unread = rustix::io::ioctl_fionread(&s).unwrap_or(0);
    if ending == Ending::Abort {
        rustix::net::sockopt::set_socket_linger(&s, Some(Duration::ZERO))
            .map_err(|e| fail("cannot set SO_LINGER 0 on the connection to", e.into()))?;
    }
    let close_ns = wall_ns();
    drop(s);
    Ok(json!({
        "flow": format!("{local} -> {addr}"),
        "ask": match ask { Ask::Download(_) => "download", Ask::Frame => "frame" },
        "ending": match ending { Ending::Unread => "unread", Ending::Abort => "abort" },
        "bytes_requested": match ask { Ask::Download(b) => Some(b), Ask::Frame => None },
        "bytes_read": got,
        "response_complete": complete,
        "request_wall_ns": request_ns,
        "timeout_ns": timeout.as_nanos() as u64,
        "stopped_reading_wall_ns": stopped_reading_ns,
        "close_wall_ns": close_ns,
        "unread_bytes_at_close": unread,
    }))
}

/// Reads until `reading` has passed since `began`, the peer closes, or (for a frame) the whole
/// response arrived; returns the bytes read and whether the response was complete.
fn read_until(
    s: &mut TcpStream,
    ask: Ask,
    began: Instant,
    reading: Duration,
) -> std::io::Result<(u64, bool)> {
    let mut got = 0u64;
    let mut head = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let complete = |got: u64, head: &[u8]| match ask {
        Ask::Download(bytes) => got >= bytes,
        Ask::Frame => {
            head.len() >= 4
                && got >= 4 + u64::from(u32::from_be_bytes([head[0], head[1], head[2], head[3]]))
        }
    };
    while let Some(left) = reading
        .checked_sub(began.elapsed())
        .filter(|l| !l.is_zero())
    {
        // A download reads on past its bytes (the server's trailer follows them), as
        // `tailhunt transfer client` would until its deadline.
        if ask == Ask::Frame && complete(got, &head) {
            break;
        }
        // Short read timeouts: the kernel's timer wheel lets a socket timeout of seconds
        // fire up to an eighth late (a 3 s one 100-250 ms late here); 50 ms ones are exact
        // to a tick, so the close comes at the timeout.
        s.set_read_timeout(Some(
            left.clamp(Duration::from_millis(1), Duration::from_millis(50)),
        ))?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let want = 4usize.saturating_sub(head.len()).min(n);
                head.extend_from_slice(&buf[..want]);
                got += n as u64;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok((got, complete(got, &head)))
}
