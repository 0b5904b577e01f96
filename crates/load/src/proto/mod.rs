//! Request/response codecs of the stream protocols, one file each, behind [`StreamProtocol`].
//!
//! The engine owns sockets and time; a protocol only writes request bytes and finds where a
//! response ends. Responses arrive in request order on a connection (pipelining).

mod frames;
mod http;
mod memcached;
mod redis;

use thiserror::Error;

pub use frames::Frames;
pub use http::Http;
pub use memcached::Memcached;
pub use redis::Redis;

use crate::target::{Scheme, Target};
use crate::wire::ServerTimes;

/// One parsed response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// Bytes it took in the read buffer.
    pub len: usize,
    /// Whether the server answered successfully (HTTP 2xx/3xx, no Redis/memcached error).
    pub ok: bool,
    /// The server's timestamps, when the protocol carries them.
    pub server: Option<ServerTimes>,
}

/// Bytes that cannot be a response: the connection is unusable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("protocol error: {0}")]
pub struct ProtoError(pub String);

/// A request/response protocol over a byte stream.
pub trait StreamProtocol: Send + Sync {
    /// Appends one request with sequence number `seq`; returns the offset (from where this
    /// request starts) at which a split write begins its second `write`.
    fn write_request(&self, out: &mut Vec<u8>, seq: u64) -> usize;
    /// The first complete response in `buf`, or `None` if more bytes are needed.
    fn parse_response(&self, buf: &[u8]) -> Result<Option<Response>, ProtoError>;
}

/// The codec for a target; `None` for UDP (datagrams have their own path).
pub fn for_target(t: &Target, request_bytes: usize) -> Option<Box<dyn StreamProtocol>> {
    Some(match t.scheme {
        Scheme::Tcp => Box::new(Frames { request_bytes }),
        Scheme::Http => Box::new(Http::new(&t.host, &t.path, request_bytes)),
        Scheme::Redis => Box::new(Redis::new(&t.path)),
        Scheme::Memcached => Box::new(Memcached::new(&t.path)),
        Scheme::Udp => return None,
    })
}

/// Finds `\r\n` from `from`; returns the index of `\r`.
pub(crate) fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| p + from)
}
