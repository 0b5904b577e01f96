//! memcached text protocol: `get key`, or `set key` with a value of a given size.

use super::{find_crlf, ProtoError, Response, StreamProtocol};

/// One command, sent the same way every time.
pub struct Memcached {
    request: Vec<u8>,
}

impl Memcached {
    /// get of `key`.
    pub fn new(key: &str) -> Memcached {
        Memcached {
            request: format!("get {key}\r\n").into_bytes(),
        }
    }

    /// set of `key` to `value_bytes` bytes (flags 0, no expiry).
    pub fn set(key: &str, value_bytes: usize) -> Memcached {
        let mut request = format!("set {key} 0 0 {value_bytes}\r\n").into_bytes();
        request.resize(request.len() + value_bytes, b'x');
        request.extend_from_slice(b"\r\n");
        Memcached { request }
    }
}

impl StreamProtocol for Memcached {
    fn write_request(&self, out: &mut Vec<u8>, _seq: u64) -> usize {
        out.extend_from_slice(&self.request);
        4 // after "get "
    }

    fn parse_response(&self, buf: &[u8]) -> Result<Option<Response>, ProtoError> {
        let mut pos = 0;
        loop {
            let Some(eol) = find_crlf(buf, pos) else {
                return Ok(None);
            };
            let line = &buf[pos..eol];
            let next = eol + 2;
            if line == b"END" || line == b"STORED" {
                return Ok(Some(Response {
                    len: next,
                    ok: true,
                    server: None,
                    closes: false,
                }));
            }
            if line == b"ERROR"
                || line == b"NOT_STORED"
                || line == b"EXISTS"
                || line == b"NOT_FOUND"
                || line.starts_with(b"CLIENT_ERROR")
                || line.starts_with(b"SERVER_ERROR")
            {
                return Ok(Some(Response {
                    len: next,
                    ok: false,
                    server: None,
                    closes: false,
                }));
            }
            if let Some(rest) = line.strip_prefix(b"VALUE ") {
                let text =
                    std::str::from_utf8(rest).map_err(|_| ProtoError("bad VALUE line".into()))?;
                let bytes: usize = text
                    .split_whitespace()
                    .nth(2)
                    .and_then(|b| b.parse().ok())
                    .ok_or_else(|| ProtoError(format!("bad VALUE line '{text}'")))?;
                pos = next + bytes + 2;
                if pos > buf.len() {
                    return Ok(None);
                }
                continue;
            }
            return Err(ProtoError(format!(
                "not a memcached reply: '{}'",
                String::from_utf8_lossy(&line[..line.len().min(40)])
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hits_misses_and_errors() {
        let m = Memcached::new("k");
        let hit = b"VALUE k 0 3\r\nabc\r\nEND\r\n";
        assert_eq!(m.parse_response(hit).unwrap().unwrap().len, hit.len());
        assert_eq!(m.parse_response(&hit[..15]).unwrap(), None);
        assert_eq!(m.parse_response(b"END\r\n").unwrap().unwrap().len, 5);
        assert!(
            !m.parse_response(b"SERVER_ERROR out of memory\r\n")
                .unwrap()
                .unwrap()
                .ok
        );
        assert!(m.parse_response(b"+OK\r\n").is_err());
    }

    #[test]
    fn a_set_sends_its_value_and_reads_stored() {
        let m = Memcached::set("k", 5);
        let mut out = Vec::new();
        m.write_request(&mut out, 0);
        assert_eq!(out, b"set k 0 0 5\r\nxxxxx\r\n");
        assert!(m.parse_response(b"STORED\r\n").unwrap().unwrap().ok);
        assert!(!m.parse_response(b"NOT_STORED\r\n").unwrap().unwrap().ok);
    }
}
