//! A client that abandons a download with data unread, so its close is a reset.
//!
//! `tailhunt transfer client --timeout` reads until its deadline and then closes; its receive
//! queue is usually empty by then, so the close is a FIN. Applications whose timer fires while
//! the reader is busy elsewhere close with data still queued, and the kernel answers that close
//! with a RST (RFC 2525 2.17; Linux `tcp_close`). No tailhunt command does that, so this one
//! does: it asks a `tailhunt transfer server` for `bytes` (that server's request: `THT1` and
//! the count as a big-endian u64, see `crates/sock/src/transfer`), reads until 200 ms before
//! its timeout, lets data queue up, and closes at the timeout.
//!
//! Out: its record (request and close on the realtime clock, bytes read, bytes still queued at
//! the close).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{wall_ns, TruthError};

/// How long before its timeout the client stops reading.
const QUEUE_UP: Duration = Duration::from_millis(200);

/// Downloads from `addr` until `timeout`, then closes with data unread.
pub fn abandon(addr: SocketAddr, bytes: u64, timeout: Duration) -> Result<Value, TruthError> {
    let fail = |what: &str, e: std::io::Error| TruthError::Work(format!("{what} {addr}: {e}"));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| fail("cannot connect to", e))?;
    let local = s
        .local_addr()
        .map_err(|e| fail("no local address for", e))?;
    let mut request = b"THT1".to_vec();
    request.extend_from_slice(&bytes.to_be_bytes());
    let request_ns = wall_ns();
    let began = Instant::now();
    s.write_all(&request)
        .map_err(|e| fail("cannot send the request to", e))?;
    let mut got = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let reading = timeout.saturating_sub(QUEUE_UP);
    while let Some(left) = reading
        .checked_sub(began.elapsed())
        .filter(|l| !l.is_zero())
    {
        let _ = s.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n as u64,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(fail("reading from", e)),
        }
    }
    let stopped_reading_ns = wall_ns();
    std::thread::sleep(timeout.saturating_sub(began.elapsed()));
    let unread = rustix::io::ioctl_fionread(&s).unwrap_or(0);
    let close_ns = wall_ns();
    drop(s);
    Ok(json!({
        "flow": format!("{local} -> {addr}"),
        "bytes_requested": bytes,
        "bytes_read": got,
        "request_wall_ns": request_ns,
        "timeout_ns": timeout.as_nanos() as u64,
        "stopped_reading_wall_ns": stopped_reading_ns,
        "close_wall_ns": close_ns,
        "unread_bytes_at_close": unread,
    }))
}
