//! The wire formats of tailhunt's reference ("do nothing") servers, shared by the servers and
//! the load generator.
//!
//! # TCP frames (`serve tcp`, `load tcp://HOST:PORT`)
//!
//! Every message is a 4-byte big-endian length `L` followed by `L` bytes of body.
//!
//! Request body (`L >= REQUEST_MIN_BODY`): `seq: u64 BE`, then padding up to the request size.
//!
//! Response body (`L >= RESPONSE_MIN_BODY`): `seq: u64 BE` (echoed), then three server
//! timestamps (`u64 BE`, ns on the server's CLOCK_REALTIME, 0 when unknown):
//! `rx_kernel_ns` (the kernel's receive timestamp of the request, SO_TIMESTAMPING software RX),
//! `app_recv_ns` (when the server application had the whole request), `app_send_ns` (just before
//! the server wrote the reply), then padding up to the reply size. Responses come back in request
//! order on a connection (requests may be pipelined).
//!
//! With `--split-writes` a side writes the 4-byte length and the body with two `write` calls:
//! the write-write-read pattern that meets Nagle's algorithm and the peer's delayed ACK.
//!
//! # UDP echo (`serve udp`, `load udp://HOST:PORT`)
//!
//! One datagram per request, one per reply, with the same bodies as the TCP frames but without
//! the length prefix. Replies may be lost or reordered; `seq` matches them.
//!
//! # HTTP/1.1 (`serve http`, `load http://HOST:PORT/PATH`)
//!
//! Any request line is accepted; the server answers `200 OK` with `Content-Length` and a body of
//! the reply size, keep-alive, pipelining allowed. It adds the header
//! `X-Tailhunt-Timestamps: RX_KERNEL_NS,APP_RECV_NS,APP_SEND_NS` with the same three timestamps.

/// Bytes of a request body before padding: the sequence number.
pub const REQUEST_MIN_BODY: usize = 8;
/// Bytes of a response body before padding: seq and three timestamps.
pub const RESPONSE_MIN_BODY: usize = 32;
/// Largest body accepted (protects servers and clients from garbage lengths).
pub const MAX_BODY: usize = 16 << 20;
/// Length of the frame header.
pub const FRAME_HEADER: usize = 4;
/// HTTP header carrying the server timestamps.
pub const TIMESTAMP_HEADER: &str = "X-Tailhunt-Timestamps";

/// The server's three timestamps (ns, CLOCK_REALTIME; 0 = unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerTimes {
    /// Kernel receive timestamp of the request.
    pub rx_kernel_ns: u64,
    /// When the server application had the whole request.
    pub app_recv_ns: u64,
    /// Just before the server wrote the reply.
    pub app_send_ns: u64,
}

/// A frame that cannot be valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Length outside `min..=MAX_BODY`.
    #[error("frame length {len} is outside {min}..={max} (not a tailhunt peer?)")]
    BadLength {
        /// Length read.
        len: usize,
        /// Smallest valid.
        min: usize,
        /// Largest valid.
        max: usize,
    },
}

/// Appends a request frame (header + body of `body_len >= REQUEST_MIN_BODY` bytes) to `out`;
/// returns the offset where the body starts (the split point for split writes).
pub fn put_request_frame(out: &mut Vec<u8>, seq: u64, body_len: usize) -> usize {
    let body_len = body_len.max(REQUEST_MIN_BODY);
    out.extend_from_slice(&(body_len as u32).to_be_bytes());
    let split = out.len();
    out.extend_from_slice(&seq.to_be_bytes());
    out.resize(split + body_len, 0);
    split
}

/// Appends a request datagram body (no header).
pub fn put_request_body(out: &mut Vec<u8>, seq: u64, body_len: usize) {
    let start = out.len();
    out.extend_from_slice(&seq.to_be_bytes());
    out.resize(start + body_len.max(REQUEST_MIN_BODY), 0);
}

/// Appends a response body (no header) of `body_len >= RESPONSE_MIN_BODY` bytes.
pub fn put_response_body(out: &mut Vec<u8>, seq: u64, times: ServerTimes, body_len: usize) {
    let start = out.len();
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&times.rx_kernel_ns.to_be_bytes());
    out.extend_from_slice(&times.app_recv_ns.to_be_bytes());
    out.extend_from_slice(&times.app_send_ns.to_be_bytes());
    out.resize(start + body_len.max(RESPONSE_MIN_BODY), 0);
}

/// Appends a response frame (header + body); returns the offset of the body.
pub fn put_response_frame(
    out: &mut Vec<u8>,
    seq: u64,
    times: ServerTimes,
    body_len: usize,
) -> usize {
    let body_len = body_len.max(RESPONSE_MIN_BODY);
    out.extend_from_slice(&(body_len as u32).to_be_bytes());
    let split = out.len();
    put_response_body(out, seq, times, body_len);
    split
}

/// If `buf` starts with a complete frame whose body is at least `min_body` bytes, returns the
/// frame's total length (header included); `Ok(None)` when more bytes are needed.
pub fn frame_len(buf: &[u8], min_body: usize) -> Result<Option<usize>, WireError> {
    let Some(header) = buf.get(..FRAME_HEADER) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len < min_body || len > MAX_BODY {
        return Err(WireError::BadLength {
            len,
            min: min_body,
            max: MAX_BODY,
        });
    }
    Ok((buf.len() >= FRAME_HEADER + len).then_some(FRAME_HEADER + len))
}

/// The sequence number at the start of a body.
pub fn body_seq(body: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(body.get(..8)?.try_into().ok()?))
}

/// Sequence number and server timestamps of a response body.
pub fn parse_response_body(body: &[u8]) -> Option<(u64, ServerTimes)> {
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_be_bytes(
            body.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    Some((
        word(0)?,
        ServerTimes {
            rx_kernel_ns: word(1)?,
            app_recv_ns: word(2)?,
            app_send_ns: word(3)?,
        },
    ))
}

/// `s` without the spaces and tabs at either end (HTTP's optional white space).
pub(crate) fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// A decimal number made of digits only (at most 19, so it fits).
pub(crate) fn decimal(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 19 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(bytes.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
}

/// Formats the HTTP timestamp header value.
pub fn format_timestamp_header(t: ServerTimes) -> String {
    format!("{},{},{}", t.rx_kernel_ns, t.app_recv_ns, t.app_send_ns)
}

/// Parses the HTTP timestamp header value (bytes: the client reads it off every reply, so it
/// is parsed where it lies, without a UTF-8 check or a string).
pub fn parse_timestamp_header(v: impl AsRef<[u8]>) -> Option<ServerTimes> {
    let mut it = v.as_ref().split(|&b| b == b',').map(|x| decimal(trim(x)));
    let t = ServerTimes {
        rx_kernel_ns: it.next()??,
        app_recv_ns: it.next()??,
        app_send_ns: it.next()??,
    };
    it.next().is_none().then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        let split = put_request_frame(&mut buf, 42, 100);
        assert_eq!(split, 4);
        assert_eq!(frame_len(&buf, REQUEST_MIN_BODY), Ok(Some(104)));
        assert_eq!(frame_len(&buf[..50], REQUEST_MIN_BODY), Ok(None));
        assert_eq!(body_seq(&buf[4..]), Some(42));
        let mut r = Vec::new();
        let t = ServerTimes {
            rx_kernel_ns: 1,
            app_recv_ns: 2,
            app_send_ns: 3,
        };
        put_response_frame(&mut r, 42, t, 0);
        assert_eq!(frame_len(&r, RESPONSE_MIN_BODY), Ok(Some(36)));
        assert_eq!(parse_response_body(&r[4..]), Some((42, t)));
        assert!(frame_len(&[0, 0, 0, 1], REQUEST_MIN_BODY).is_err());
        assert!(frame_len(&[0xff, 0, 0, 0], REQUEST_MIN_BODY).is_err());
        assert_eq!(parse_timestamp_header(format_timestamp_header(t)), Some(t));
        assert_eq!(parse_timestamp_header("1,2"), None);
    }
}
