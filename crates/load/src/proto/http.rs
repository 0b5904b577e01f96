//! HTTP/1.1 keep-alive requests: GET by default, or any method with headers and a body.

use super::{find_crlf, ProtoError, RequestError, Response, StreamProtocol};
use crate::wire::{self, decimal, trim};

/// Largest response head accepted.
const MAX_HEAD: usize = 64 << 10;

/// What to send besides the method line's path and the Host header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method (`GET` when empty).
    pub method: String,
    /// Extra headers, in order, as `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// The body (sent with its `Content-Length`; none when empty and the method is GET or
    /// HEAD).
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// A request from what a user wrote: a method (any case), headers as `Name: value`, and
    /// a body. A method that is not a token of letters and dashes, a header without a name
    /// or with a line break in its value is refused, naming the flag (`--method`, `--header`).
    pub fn new(
        method: &str,
        headers: &[String],
        body: Vec<u8>,
    ) -> Result<HttpRequest, RequestError> {
        let upper = method.trim().to_ascii_uppercase();
        if upper.is_empty() || !upper.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
            return Err(RequestError(format!(
                "--method '{method}' is not an HTTP method (e.g. GET, POST, PUT, DELETE)"
            )));
        }
        let mut parsed = Vec::with_capacity(headers.len());
        for h in headers {
            let (name, value) = h
                .split_once(':')
                .filter(|(n, _)| !n.trim().is_empty() && !n.contains(char::is_whitespace))
                .ok_or_else(|| RequestError(format!("--header '{h}' must be 'Name: value'")))?;
            if value.contains(['\r', '\n']) {
                return Err(RequestError(format!(
                    "--header '{h}': a value may not contain a line break"
                )));
            }
            parsed.push((name.trim().to_string(), value.trim().to_string()));
        }
        Ok(HttpRequest {
            method: if upper == "GET" { String::new() } else { upper },
            headers: parsed,
            body,
        })
    }

    /// The method as sent (`GET` when none was given).
    pub fn method_name(&self) -> &str {
        if self.method.is_empty() {
            "GET"
        } else {
            &self.method
        }
    }
}

/// One request, the same every time: the method line, `Host`, the user's headers, padding to
/// the request size with `X-Pad`, then the body.
pub struct Http {
    request: Vec<u8>,
    split: usize,
    /// A HEAD request: the response's Content-Length describes a body that is not sent.
    head_only: bool,
}

impl Http {
    /// A GET of `path` on `host`, padded to at least `request_bytes`.
    pub fn new(host: &str, path: &str, request_bytes: usize) -> Http {
        Http::with(host, path, &HttpRequest::default(), request_bytes)
    }

    /// `req` to `path` on `host`, its head padded so the whole request is at least
    /// `request_bytes`.
    pub fn with(host: &str, path: &str, req: &HttpRequest, request_bytes: usize) -> Http {
        let method = match req.method.as_str() {
            "" => "GET",
            m => m,
        };
        let line = format!("{method} {path} HTTP/1.1\r\n");
        let mut head = format!("{line}Host: {host}\r\n");
        for (name, value) in &req.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let bodiless = req.body.is_empty() && matches!(method, "GET" | "HEAD");
        if !bodiless {
            head.push_str(&format!("Content-Length: {}\r\n", req.body.len()));
        }
        // "X-Pad: " + padding + CRLF, then the blank line's CRLF.
        let fixed = head.len() + "X-Pad: ".len() + 2 + 2 + req.body.len();
        if request_bytes > fixed {
            head.push_str(&format!("X-Pad: {}\r\n", "x".repeat(request_bytes - fixed)));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(&req.body);
        Http {
            split: line.len(),
            request,
            head_only: method == "HEAD",
        }
    }
}

/// The status code of an `HTTP/1.x NNN ...` status line.
fn status_code(line: &[u8]) -> Option<u16> {
    let rest = line.strip_prefix(b"HTTP/1.")?;
    let code = rest.get(2..5)?;
    if !code.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(code.iter().fold(0, |n, d| n * 10 + u16::from(d - b'0')))
}

/// What a response head says about its body and the server's timestamps.
struct Head {
    status: u16,
    /// Offset of the body (just past the blank line).
    body_start: usize,
    content_length: Option<Result<usize, String>>,
    chunked: bool,
    server: Option<wire::ServerTimes>,
    /// The server closes the connection after this response (RFC 9112 section 9.3:
    /// `Connection: close`, or HTTP/1.0 without `keep-alive`).
    closes: bool,
}

/// Reads the head at the start of `buf` in one pass over its lines (this runs once per
/// response, so it avoids building strings); `None` when the blank line has not arrived.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, ProtoError> {
    let Some(first) = memchr::memchr(b'\n', buf) else {
        return Ok(None);
    };
    let status_line = buf[..first].strip_suffix(b"\r").unwrap_or(&buf[..first]);
    let status = status_code(status_line).ok_or_else(|| {
        ProtoError(format!(
            "not an HTTP/1.x status line: '{}'",
            String::from_utf8_lossy(status_line)
        ))
    })?;
    let http10 = status_line.starts_with(b"HTTP/1.0");
    let mut head = Head {
        status,
        body_start: 0,
        content_length: None,
        chunked: false,
        server: None,
        closes: http10,
    };
    let mut pos = first + 1;
    loop {
        let Some(nl) = memchr::memchr(b'\n', &buf[pos..]).map(|k| pos + k) else {
            return Ok(None);
        };
        let line = buf[pos..nl].strip_suffix(b"\r").unwrap_or(&buf[pos..nl]);
        pos = nl + 1;
        if line.is_empty() {
            head.body_start = pos;
            return Ok(Some(head));
        }
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        let (name, value) = (trim(&line[..colon]), trim(&line[colon + 1..]));
        if name.eq_ignore_ascii_case(b"content-length") {
            head.content_length = Some(
                decimal(value)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| String::from_utf8_lossy(value).into_owned()),
            );
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            head.chunked = value.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            // A list of options: `close` ends the connection, `keep-alive` keeps an
            // HTTP/1.0 one.
            for option in value.split(|&b| b == b',').map(trim) {
                if option.eq_ignore_ascii_case(b"close") {
                    head.closes = true;
                } else if option.eq_ignore_ascii_case(b"keep-alive") && http10 {
                    head.closes = false;
                }
            }
        } else if name.eq_ignore_ascii_case(wire::TIMESTAMP_HEADER.as_bytes()) {
            head.server = wire::parse_timestamp_header(value);
        }
    }
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
        let Some(head) = parse_head(buf)? else {
            if buf.len() > MAX_HEAD {
                return Err(ProtoError("response head larger than 64 KiB".into()));
            }
            return Ok(None);
        };
        let (status, body_start) = (head.status, head.body_start);
        let body_len = if self.head_only {
            0
        } else if let Some(cl) = head.content_length {
            cl.map_err(|v| ProtoError(format!("bad Content-Length '{v}'")))?
        } else if head.chunked {
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
            server: head.server,
            closes: head.closes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_from_flags_is_parsed_or_refused_naming_the_flag() {
        let r = HttpRequest::new("post", &["X-A:  1 ".into()], b"x".to_vec()).unwrap();
        assert_eq!(
            (r.method_name(), r.headers[0].clone()),
            ("POST", ("X-A".into(), "1".into()))
        );
        assert_eq!(
            HttpRequest::new(" get ", &[], Vec::new()).unwrap(),
            HttpRequest::default()
        );
        for (method, header, says) in [
            ("PO ST", "A: b", "--method"),
            ("", "A: b", "--method"),
            ("GET", "no colon", "must be 'Name: value'"),
            ("GET", "bad name: x", "must be 'Name: value'"),
            ("GET", "A: b\r\nEvil: 1", "line break"),
        ] {
            let e = HttpRequest::new(method, &[header.into()], Vec::new()).unwrap_err();
            assert!(e.0.contains(says), "{method:?} {header:?}: {e}");
        }
    }

    #[test]
    fn a_method_headers_and_a_body_are_sent_and_a_head_reply_has_no_body() {
        let req = HttpRequest {
            method: "POST".into(),
            headers: vec![("X-Trace".into(), "1".into())],
            body: b"hello".to_vec(),
        };
        let h = Http::with("svc", "/api", &req, 0);
        let mut out = Vec::new();
        h.write_request(&mut out, 0);
        assert_eq!(
            out,
            b"POST /api HTTP/1.1\r\nHost: svc\r\nX-Trace: 1\r\nContent-Length: 5\r\n\r\nhello"
        );
        let padded = Http::with("svc", "/api", &req, 200);
        let mut out = Vec::new();
        padded.write_request(&mut out, 0);
        assert_eq!(out.len(), 200);
        assert!(out.ends_with(b"\r\n\r\nhello"));
        let head = Http::with(
            "svc",
            "/",
            &HttpRequest {
                method: "HEAD".into(),
                ..HttpRequest::default()
            },
            0,
        );
        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nHTTP/1.1 200 OK";
        assert_eq!(head.parse_response(reply).unwrap().unwrap().len, 39);
    }

    /// Whether a response closes its connection: HTTP/1.0 unless it keeps it alive, HTTP/1.1
    /// when it says `close` (among other options too, in any case).
    #[test]
    fn a_response_that_closes_its_connection_says_so() {
        let h = Http::new("h", "/", 0);
        for (head, closes) in [
            ("HTTP/1.0 200 OK\r\n", true),
            ("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n", false),
            (
                "HTTP/1.0 404 Not Found\r\nconnection: Keep-Alive\r\n",
                false,
            ),
            ("HTTP/1.1 200 OK\r\n", false),
            ("HTTP/1.1 200 OK\r\nConnection: close\r\n", true),
            ("HTTP/1.1 503 Busy\r\nConnection: Upgrade, CLOSE\r\n", true),
            ("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n", false),
            ("HTTP/1.1 200 OK\r\nX-Connection: close\r\n", false),
        ] {
            let reply = format!("{head}Content-Length: 2\r\n\r\nok");
            let r = h.parse_response(reply.as_bytes()).unwrap().unwrap();
            assert_eq!((r.closes, r.len), (closes, reply.len()), "{head}");
        }
    }

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

    #[test]
    fn head_split_across_reads_odd_headers_and_bad_lengths() {
        let h = Http::new("h", "/", 0);
        let r = b"HTTP/1.1 200 OK\r\nServer: x:y\r\nx-tailhunt-timestamps:  4, 5 ,6 \r\ncontent-length:\t2 \r\n\r\nok";
        for cut in 0..r.len() {
            assert_eq!(h.parse_response(&r[..cut]).unwrap(), None, "cut at {cut}");
        }
        let p = h.parse_response(r).unwrap().unwrap();
        assert_eq!(p.len, r.len());
        let t = p.server.unwrap();
        assert_eq!((t.rx_kernel_ns, t.app_recv_ns, t.app_send_ns), (4, 5, 6));
        let bad = b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n";
        assert!(h.parse_response(bad).unwrap_err().0.contains("'1x'"));
        let none = b"HTTP/1.1 200 OK\r\nX-Other: 1\r\n\r\n";
        assert!(h.parse_response(none).is_err());
        let empty = b"HTTP/1.1 204 No Content\r\n\r\nHTTP";
        assert_eq!(
            h.parse_response(empty).unwrap().unwrap().len,
            empty.len() - 4
        );
        assert!(h.parse_response(b"HTTP/1.1 2x0 OK\r\n").is_err());
    }
}
