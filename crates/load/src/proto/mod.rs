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
pub use http::{Http, HttpRequest};
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
    /// The server closes the connection after this response (HTTP `Connection: close`, or
    /// HTTP/1.0 without `Connection: keep-alive`): no request may follow it on this
    /// connection, and its end is no failure.
    pub closes: bool,
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

/// A request the target's protocol cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct RequestError(pub String);

/// The path's segments, percent-decoded (`%2F` is a `/` inside a segment).
fn segments(path: &str) -> Vec<Vec<u8>> {
    path.trim_start_matches('/')
        .split('/')
        .map(|s| percent_encoding::percent_decode_str(s).collect())
        .collect()
}

/// Whether a path segment names a command (letters only: `GET`, `set`, `HINCRBY`).
fn is_command(word: &[u8]) -> bool {
    !word.is_empty() && word.iter().all(u8::is_ascii_alphabetic)
}

/// A response's first line as text, for a message: up to its line end (CR LF or LF), at most
/// 120 characters, bytes that are not UTF-8 replaced. HTTP's status line, a Redis error
/// (`-ERR unknown command ...`), memcached's `SERVER_ERROR ...`.
pub fn first_line(response: &[u8]) -> String {
    const MAX: usize = 120;
    let end = memchr::memchr(b'\n', response).unwrap_or(response.len());
    let line = String::from_utf8_lossy(&response[..end]);
    let line = line.trim_end_matches('\r');
    match line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_string(),
    }
}

/// The codec for a target; `None` for UDP (datagrams have their own path).
///
/// Redis: `redis://H/KEY` is `GET KEY`; `redis://H/CMD/ARG/...` sends any command (`SET/k` gets
/// a value of `request_bytes` bytes). memcached: `memcached://H/KEY` is `get KEY`,
/// `memcached://H/set/KEY` stores `request_bytes` bytes. HTTP: `http` sets the method, headers
/// and body; other schemes refuse them.
pub fn for_target(
    t: &Target,
    request_bytes: usize,
    http: &HttpRequest,
) -> Result<Option<Box<dyn StreamProtocol>>, RequestError> {
    let is_http = matches!(t.scheme, Scheme::Http | Scheme::Https);
    if !is_http && *http != HttpRequest::default() {
        return Err(RequestError(format!(
            "--method, --header and --body are for http:// and https:// targets, not {}://",
            t.scheme.name()
        )));
    }
    Ok(Some(match t.scheme {
        Scheme::Tcp => Box::new(Frames { request_bytes }),
        Scheme::Http | Scheme::Https => Box::new(Http::with(&t.host, &t.path, http, request_bytes)),
        Scheme::Redis => {
            let mut words = segments(&t.path);
            if words.len() < 2 || !is_command(&words[0]) {
                return Ok(Some(Box::new(Redis::new(&t.path))));
            }
            words[0].make_ascii_uppercase();
            if words[0] == b"SET" && words.len() == 2 {
                words.push(vec![b'x'; request_bytes]);
            }
            let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
            Box::new(Redis::command(&refs))
        }
        Scheme::Memcached => {
            let words = segments(&t.path);
            let text = |w: &[u8]| String::from_utf8_lossy(w).into_owned();
            match words.as_slice() {
                [cmd, key] if cmd.eq_ignore_ascii_case(b"set") => {
                    Box::new(Memcached::set(&text(key), request_bytes))
                }
                [cmd, key] if cmd.eq_ignore_ascii_case(b"get") => {
                    Box::new(Memcached::new(&text(key)))
                }
                [cmd, ..] if words.len() > 1 && is_command(cmd) => {
                    return Err(RequestError(format!(
                        "memcached://HOST/{}/...: only get and set are supported (memcached://HOST/KEY gets KEY)",
                        text(cmd)
                    )))
                }
                _ => Box::new(Memcached::new(&t.path)),
            }
        }
        Scheme::Udp => return Ok(None),
    }))
}

/// Finds `\r\n` from `from`; returns the index of `\r`.
pub(crate) fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_reply_is_named_by_its_first_line() {
        assert_eq!(
            first_line(b"-ERR unknown command 'FOO'\r\n"),
            "-ERR unknown command 'FOO'"
        );
        assert_eq!(
            first_line(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
            "HTTP/1.1 404 Not Found"
        );
        assert_eq!(first_line(b"NOT_STORED\r\n"), "NOT_STORED");
        assert_eq!(first_line(b"no line end"), "no line end");
        let long = first_line(&[b'x'; 300]);
        assert_eq!(long.len(), 123, "cut at 120 characters, marked");
        assert_eq!(first_line(b"\xff\xfe\r\n"), "\u{fffd}\u{fffd}");
    }
}
