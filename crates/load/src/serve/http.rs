//! HTTP/1.1 for the reference server: any request in, `200 OK` with a fixed-size body and the
//! server timestamps out.
//!
//! In: bytes of a connection: request heads (request line + headers up to the blank line, at
//! most 64 KiB), optional `Content-Length` bodies (skipped, never buffered), keep-alive and
//! pipelining. Out: per request
//! `HTTP/1.1 200 OK\r\nContent-Length: N\r\nX-Tailhunt-Timestamps: RX,RECV,SEND\r\n\r\n` + N
//! bytes of `x` (`Connection: close` added when the connection then closes). A malformed request
//! gets 400, a head over 64 KiB 431, `Transfer-Encoding` 501, an unknown HTTP version 505; each
//! then closes the connection.

use std::io::Write;

use super::conn::{Request, Step, StreamProto};
use crate::wire::{trim, ServerTimes, TIMESTAMP_HEADER};

/// Largest request head (request line and headers) accepted.
pub(crate) const MAX_HEAD: usize = 64 << 10;

/// Parser state between reads.
#[derive(Debug, Default)]
pub(crate) struct HttpState {
    /// Bytes of the current head already searched for its end.
    scanned: usize,
    /// Request whose body is being skipped, and the body bytes still to come.
    waiting: Option<(Request, u64)>,
}

/// The HTTP/1.1 protocol with a fixed reply body.
pub(crate) struct HttpProto {
    /// `HTTP/1.1 200 OK\r\nContent-Length: N\r\n`
    prefix: Vec<u8>,
    body: Vec<u8>,
}

impl HttpProto {
    pub(crate) fn new(reply_bytes: usize) -> HttpProto {
        HttpProto {
            prefix: format!("HTTP/1.1 200 OK\r\nContent-Length: {reply_bytes}\r\n").into_bytes(),
            body: vec![b'x'; reply_bytes],
        }
    }
}

impl StreamProto for HttpProto {
    type State = HttpState;

    fn next(&self, st: &mut HttpState, buf: &[u8]) -> Step {
        if let Some((req, left)) = st.waiting {
            if buf.is_empty() {
                return Step::More;
            }
            let n = left.min(buf.len() as u64);
            if n == left {
                st.waiting = None;
                return Step::Request {
                    consumed: n as usize,
                    req,
                };
            }
            st.waiting = Some((req, left - n));
            return Step::Skip(n as usize);
        }
        // Blank lines before a request line are ignored (RFC 9112 section 2.2).
        if buf.starts_with(b"\r\n") {
            return Step::Skip(2);
        }
        if buf.starts_with(b"\n") {
            return Step::Skip(1);
        }
        let Some(end) = head_end(buf, st.scanned) else {
            if buf.len() > MAX_HEAD {
                return Step::Bad(431);
            }
            st.scanned = buf.len();
            return Step::More;
        };
        st.scanned = 0;
        if end > MAX_HEAD {
            return Step::Bad(431);
        }
        match parse_head(&buf[..end]) {
            Err(status) => Step::Bad(status),
            Ok((req, 0)) => Step::Request { consumed: end, req },
            Ok((req, body)) => {
                st.waiting = Some((req, body));
                Step::Skip(end)
            }
        }
    }

    fn put_reply(&self, req: &Request, t: ServerTimes, out: &mut Vec<u8>) -> usize {
        out.extend_from_slice(&self.prefix);
        if req.close {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if req.keep_alive {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        // Same text as `wire::format_timestamp_header`, without allocating a String, and with
        // itoa rather than `write!`: the formatting machinery was 1.4% of a saturated server's
        // CPU (`perf`, 230k requests/s on one thread), the digits alone a tenth of that.
        out.extend_from_slice(TIMESTAMP_HEADER.as_bytes());
        out.extend_from_slice(b": ");
        let mut digits = itoa::Buffer::new();
        for (i, ns) in [t.rx_kernel_ns, t.app_recv_ns, t.app_send_ns]
            .into_iter()
            .enumerate()
        {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(digits.format(ns).as_bytes());
        }
        out.extend_from_slice(b"\r\n\r\n");
        let body_at = out.len();
        if !req.head {
            out.extend_from_slice(&self.body);
        }
        body_at
    }

    fn put_error(&self, status: u16, out: &mut Vec<u8>) {
        let (reason, why) = match status {
            431 => (
                "Request Header Fields Too Large",
                "request head larger than 64 KiB\n",
            ),
            501 => (
                "Not Implemented",
                "Transfer-Encoding is not supported; send Content-Length\n",
            ),
            505 => (
                "HTTP Version Not Supported",
                "only HTTP/1.0 and HTTP/1.1 are served\n",
            ),
            _ => ("Bad Request", "malformed HTTP/1.1 request\n"),
        };
        let _ = write!(
            out,
            "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}",
            why.len()
        );
    }

    fn max_buffer(&self) -> usize {
        // Room for one byte more than the largest head, so an oversized head is seen as such.
        MAX_HEAD + 4096
    }
}

/// Offset just past the blank line ending a head (`\n\r\n` or `\n\n`), searching from about
/// `from` (bytes before it were searched already).
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from.saturating_sub(2);
    while let Some(off) = buf.get(i..)?.iter().position(|&b| b == b'\n') {
        let nl = i + off;
        let rest = &buf[nl + 1..];
        if rest.starts_with(b"\n") {
            return Some(nl + 2);
        }
        if rest.starts_with(b"\r\n") {
            return Some(nl + 3);
        }
        i = nl + 1;
    }
    None
}

/// `tchar` of RFC 9110 section 5.6.2: what methods and header names are made of.
fn is_token(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a complete head; returns the request and its body length, or the error status.
fn parse_head(head: &[u8]) -> Result<(Request, u64), u16> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let mut parts = lines.next().ok_or(400u16)?.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    if !is_token(method) || target.is_empty() || target.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(400);
    }
    let http11 = match version {
        b"HTTP/1.1" => true,
        b"HTTP/1.0" => false,
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            return Err(505)
        }
        _ => return Err(400),
    };
    let (mut body, mut close, mut keep_alive) = (None::<u64>, false, false);
    for line in lines.filter(|l| !l.is_empty()) {
        // Obsolete line folding (a line starting with whitespace) is rejected (RFC 9112 5.2).
        let colon = line.iter().position(|&b| b == b':').ok_or(400u16)?;
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if !is_token(name) || value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(400);
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let len = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(400u16)?;
            if body.is_some_and(|b| b != len) {
                return Err(400); // conflicting lengths: request smuggling territory
            }
            body = Some(len);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return Err(501);
        } else if name.eq_ignore_ascii_case(b"connection") {
            for option in value.split(|&b| b == b',').map(trim) {
                close |= option.eq_ignore_ascii_case(b"close");
                keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    // HTTP/1.0 closes after each reply unless the client asked to keep the connection.
    let close = close || (!http11 && !keep_alive);
    let req = Request {
        seq: 0,
        close,
        keep_alive: !http11 && !close,
        head: method == b"HEAD",
    };
    Ok((req, body.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(input: &[u8]) -> Vec<Step> {
        let (p, mut st, mut at, mut out) = (HttpProto::new(3), HttpState::default(), 0, Vec::new());
        loop {
            let step = p.next(&mut st, &input[at..]);
            match step {
                Step::Request { consumed, .. } | Step::Skip(consumed) => at += consumed,
                Step::More | Step::Bad(_) => {
                    out.push(step);
                    return out;
                }
            }
            out.push(step);
        }
    }

    fn ok(close: bool, keep_alive: bool, head: bool, consumed: usize) -> Step {
        Step::Request {
            consumed,
            req: Request {
                seq: 0,
                close,
                keep_alive,
                head,
            },
        }
    }

    #[test]
    fn pipelined_requests_with_bodies_and_connection_options() {
        let input = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n\
            POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello\
            HEAD / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n\
            GET / HTTP/1.1\nConnection: close\n\nGET";
        assert_eq!(
            steps(input),
            vec![
                ok(false, false, false, 27),
                Step::Skip(39),
                ok(false, false, false, 5),
                ok(false, true, true, 43),
                ok(true, false, false, 34),
                Step::More,
            ]
        );
    }

    #[test]
    fn rejects_malformed_heads() {
        for (input, status) in [
            (&b"GET /\r\n\r\n"[..], 400),
            (b"GET  / HTTP/1.1\r\n\r\n", 400),
            (b"G(T / HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/2.0\r\n\r\n", 505),
            (b"GET / FTP\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400),
            (
                b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                400,
            ),
            (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
            (b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400),
        ] {
            assert_eq!(
                steps(input).last(),
                Some(&Step::Bad(status)),
                "{}",
                String::from_utf8_lossy(input)
            );
        }
        let mut huge = b"GET / HTTP/1.1\r\nX: ".to_vec();
        huge.resize(MAX_HEAD + 10, b'a');
        assert_eq!(steps(&huge), vec![Step::Bad(431)]);
    }

    #[test]
    fn finds_the_end_of_a_head_split_across_reads() {
        let p = HttpProto::new(0);
        let mut st = HttpState::default();
        let full = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        for cut in 1..full.len() {
            assert_eq!(p.next(&mut st, &full[..cut]), Step::More, "cut {cut}");
        }
        assert_eq!(p.next(&mut st, full), ok(false, false, false, full.len()));
    }

    #[test]
    fn replies_carry_length_timestamps_and_body() {
        let p = HttpProto::new(3);
        let mut out = Vec::new();
        let t = ServerTimes {
            rx_kernel_ns: 0,
            app_recv_ns: 23,
            app_send_ns: u64::MAX,
        };
        let at = p.put_reply(&Request::default(), t, &mut out);
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Tailhunt-Timestamps: 0,23,18446744073709551615\r\n\r\nxxx"
        );
        assert_eq!(at, text.len() - 3);
        out.clear();
        p.put_error(400, &mut out);
        assert!(out.starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
    }
}
