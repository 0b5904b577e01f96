//! HTTP/1.1 keep-alive GET.

use super::{find_crlf, ProtoError, Response, StreamProtocol};
use crate::wire;

/// Largest response head accepted.
const MAX_HEAD: usize = 64 << 10;

/// `GET PATH HTTP/1.1` with a Host header (padded to the request size with `X-Pad`).
pub struct Http {
    request: Vec<u8>,
    split: usize,
}

impl Http {
    /// A GET of `path` on `host`, padded to at least `request_bytes`.
    pub fn new(host: &str, path: &str, request_bytes: usize) -> Http {
        let line = format!("GET {path} HTTP/1.1\r\n");
        let mut head = format!("{line}Host: {host}\r\n");
        // "X-Pad: " + padding + CRLF, then the blank line's CRLF.
        let fixed = head.len() + "X-Pad: ".len() + 2 + 2;
        if request_bytes > fixed {
            head.push_str(&format!("X-Pad: {}\r\n", "x".repeat(request_bytes - fixed)));
        }
        head.push_str("\r\n");
        Http {
            split: line.len(),
            request: head.into_bytes(),
        }
    }
}

fn header_value<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// Length of a chunked body starting at `buf[0]`, or `None` when incomplete.
fn chunked_len(buf: &[u8]) -> Result<Option<usize>, ProtoError> {
    let mut pos = 0;
    loop {
        let Some(eol) = find_crlf(buf, pos) else {
            return Ok(None);
        };
        let size_text =
            std::str::from_utf8(&buf[pos..eol]).map_err(|_| ProtoError("bad chunk size".into()))?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| ProtoError(format!("bad chunk size '{size_text}'")))?;
        pos = eol + 2;
        if size == 0 {
            // Trailers end with an empty line.
            loop {
                let Some(e) = find_crlf(buf, pos) else {
                    return Ok(None);
                };
                let empty = e == pos;
                pos = e + 2;
                if empty {
                    return Ok(Some(pos));
                }
            }
        }
        pos += size + 2;
        if pos > buf.len() {
            return Ok(None);
        }
    }
}

impl StreamProtocol for Http {
    fn write_request(&self, out: &mut Vec<u8>, _seq: u64) -> usize {
        out.extend_from_slice(&self.request);
        self.split
    }

    fn parse_response(&self, buf: &[u8]) -> Result<Option<Response>, ProtoError> {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            if buf.len() > MAX_HEAD {
                return Err(ProtoError("response head larger than 64 KiB".into()));
            }
            return Ok(None);
        };
        let head = std::str::from_utf8(&buf[..end])
            .map_err(|_| ProtoError("response head is not text".into()))?;
        let status: u16 = head
            .strip_prefix("HTTP/1.")
            .and_then(|r| r.get(2..5))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                ProtoError(format!(
                    "not an HTTP/1.x status line: '{}'",
                    head.lines().next().unwrap_or("")
                ))
            })?;
        let body_start = end + 4;
        let body_len = if let Some(cl) = header_value(head, "content-length") {
            cl.parse::<usize>()
                .map_err(|_| ProtoError(format!("bad Content-Length '{cl}'")))?
        } else if header_value(head, "transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            match chunked_len(&buf[body_start..])? {
                Some(n) => n,
                None => return Ok(None),
            }
        } else if status == 204 || status == 304 || (100..200).contains(&status) {
            0
        } else {
            return Err(ProtoError("response without Content-Length or chunked encoding (close-delimited bodies are not supported on keep-alive)".into()));
        };
        let len = body_start + body_len;
        if buf.len() < len {
            return Ok(None);
        }
        Ok(Some(Response {
            len,
            ok: (200..400).contains(&status),
            server: header_value(head, wire::TIMESTAMP_HEADER)
                .and_then(wire::parse_timestamp_header),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_chunked_and_errors() {
        let h = Http::new("h", "/", 0);
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Tailhunt-Timestamps: 1,2,3\r\n\r\nabcHTTP/1.1";
        let p = h.parse_response(r).unwrap().unwrap();
        assert_eq!(p.len, r.len() - 8);
        assert!(p.ok);
        assert_eq!(p.server.unwrap().app_send_ns, 3);
        assert_eq!(h.parse_response(&r[..20]).unwrap(), None);
        let c = b"HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        let p = h.parse_response(c).unwrap().unwrap();
        assert_eq!((p.len, p.ok), (c.len(), false));
        assert!(h.parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        let mut out = Vec::new();
        let split = h.write_request(&mut out, 0);
        assert!(out.starts_with(b"GET / HTTP/1.1\r\n") && split == 16);
        let padded = Http::new("h", "/", 200);
        out.clear();
        padded.write_request(&mut out, 0);
        assert_eq!(out.len(), 200);
    }
}
