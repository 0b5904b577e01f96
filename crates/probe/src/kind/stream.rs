//! tcp-connect, and the request/response kinds over one TCP stream: tcp-echo (tailhunt's
//! frames), http (GET), redis (GET), memcached (get).
//!
//! In: an address and a deadline. Out: a connection ([`Connect`] stops at the handshake) or a
//! [`Session`] that writes one request with the load generator's codec for the kind and reads
//! until the codec finds the whole answer. Bytes that cannot be an answer, an error reply
//! (HTTP 4xx/5xx, Redis `-ERR`, memcached `SERVER_ERROR`) and a closed connection are errors.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use tailhunt_load::proto::{Frames, Http, Memcached, Redis, StreamProtocol};

use super::{conversation::split_host_port, Deadline, Dialer, Failure, Session};
use crate::spec::{Detail, Kind, ProbeSpec};

/// The largest answer read before giving up on it (a probe reads small replies).
const MAX_ANSWER: usize = 1 << 20;

/// Opens a TCP connection with TCP_NODELAY (a probe's one small request must not wait for
/// Nagle).
pub fn connect(addr: SocketAddr, deadline: Deadline) -> Result<TcpStream, Failure> {
    let s = TcpStream::connect_timeout(&addr, deadline.remaining()?)
        .map_err(|e| Failure::io("connect", &e))?;
    s.set_nodelay(true)
        .map_err(|e| Failure::io("connect", &e))?;
    Ok(s)
}

/// tcp-connect: the handshake only.
pub struct Connect;

struct Connected;

impl Session for Connected {
    fn request(&mut self, _deadline: Deadline) -> Result<(), Failure> {
        Ok(())
    }
}

impl Dialer for Connect {
    fn dial(&mut self, addr: SocketAddr, deadline: Deadline) -> Result<Box<dyn Session>, Failure> {
        // Dropping the stream closes it at once: the measurement was the handshake.
        connect(addr, deadline).map(|_| Box::new(Connected) as Box<dyn Session>)
    }
}

/// Opens [`StreamSession`]s speaking the kind's protocol.
pub struct StreamDialer {
    proto: Arc<dyn StreamProtocol>,
}

impl StreamDialer {
    /// The dialer for a tcp-echo, http, redis or memcached probe.
    pub fn new(spec: &ProbeSpec) -> StreamDialer {
        let text = |d: &Detail| match d {
            Detail::Key(k) | Detail::Path(k) => k.clone(),
            _ => String::new(),
        };
        let proto: Arc<dyn StreamProtocol> = match spec.kind {
            Kind::Http => {
                let host = split_host_port(&spec.target).map_or(spec.target.clone(), |h| h.0);
                Arc::new(Http::new(&host, &text(&spec.detail), 0))
            }
            Kind::Redis => Arc::new(Redis::new(&text(&spec.detail))),
            Kind::Memcached => Arc::new(Memcached::new(&text(&spec.detail))),
            _ => Arc::new(Frames { request_bytes: 0 }),
        };
        StreamDialer { proto }
    }
}

impl Dialer for StreamDialer {
    fn dial(&mut self, addr: SocketAddr, deadline: Deadline) -> Result<Box<dyn Session>, Failure> {
        Ok(Box::new(StreamSession {
            sock: connect(addr, deadline)?,
            proto: Arc::clone(&self.proto),
            out: Vec::new(),
            buf: Vec::new(),
            seq: 0,
        }))
    }
}

/// One connection speaking a request/response protocol.
pub struct StreamSession {
    sock: TcpStream,
    proto: Arc<dyn StreamProtocol>,
    out: Vec<u8>,
    buf: Vec<u8>,
    seq: u64,
}

impl Session for StreamSession {
    fn request(&mut self, deadline: Deadline) -> Result<(), Failure> {
        self.out.clear();
        self.seq += 1;
        self.proto.write_request(&mut self.out, self.seq);
        self.sock
            .set_write_timeout(Some(deadline.remaining()?))
            .map_err(|e| Failure::io("write", &e))?;
        self.sock
            .write_all(&self.out)
            .map_err(|e| Failure::io("write", &e))?;
        self.buf.clear();
        let mut chunk = [0u8; 4096];
        loop {
            match self.proto.parse_response(&self.buf) {
                Ok(Some(r)) if r.ok => return Ok(()),
                Ok(Some(_)) => return Err(Failure::error(error_reply(&self.buf))),
                Ok(None) => {}
                Err(e) => return Err(Failure::error(format!("garbage in the answer: {e}"))),
            }
            if self.buf.len() > MAX_ANSWER {
                return Err(Failure::error("the answer is larger than 1 MiB"));
            }
            self.sock
                .set_read_timeout(Some(deadline.remaining()?))
                .map_err(|e| Failure::io("read", &e))?;
            match self.sock.read(&mut chunk) {
                Ok(0) => return Err(Failure::error("the server closed the connection")),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::io("read", &e)),
            }
        }
    }

    fn closed(&mut self) -> bool {
        super::peer_gone(self.sock.as_raw_fd())
    }
}

/// The first line of an error answer, for the status line.
fn error_reply(buf: &[u8]) -> String {
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let text = String::from_utf8_lossy(line);
    format!(
        "error answer: {}",
        text.trim().chars().take(120).collect::<String>()
    )
}
