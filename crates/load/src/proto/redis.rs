//! Redis `GET key` (RESP2).

use super::{find_crlf, ProtoError, Response, StreamProtocol};

/// `GET key` as a RESP array.
pub struct Redis {
    request: Vec<u8>,
}

impl Redis {
    /// GET of `key`.
    pub fn new(key: &str) -> Redis {
        let request = format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).into_bytes();
        Redis { request }
    }
}

impl StreamProtocol for Redis {
    fn write_request(&self, out: &mut Vec<u8>, _seq: u64) -> usize {
        out.extend_from_slice(&self.request);
        4 // after "*2\r\n"
    }

    fn parse_response(&self, buf: &[u8]) -> Result<Option<Response>, ProtoError> {
        let Some(eol) = find_crlf(buf, 0) else {
            return Ok(None);
        };
        let line = &buf[1..eol];
        let done = |len: usize, ok: bool| {
            Ok(Some(Response {
                len,
                ok,
                server: None,
            }))
        };
        match buf.first() {
            Some(b'+') | Some(b':') => done(eol + 2, true),
            Some(b'-') => done(eol + 2, false),
            Some(b'$') => {
                let n: i64 = std::str::from_utf8(line)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| ProtoError("bad RESP bulk length".into()))?;
                if n < 0 {
                    return done(eol + 2, true); // nil: a miss is still an answer
                }
                let len = eol + 2 + n as usize + 2;
                if buf.len() < len {
                    Ok(None)
                } else {
                    done(len, true)
                }
            }
            _ => Err(ProtoError(format!(
                "not a RESP reply: '{}'",
                String::from_utf8_lossy(&buf[..eol.min(40)])
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_replies() {
        let r = Redis::new("k");
        assert_eq!(r.parse_response(b"$3\r\nabc\r\n").unwrap().unwrap().len, 9);
        assert_eq!(r.parse_response(b"$3\r\nab").unwrap(), None);
        assert_eq!(r.parse_response(b"$-1\r\n").unwrap().unwrap().len, 5);
        assert!(!r.parse_response(b"-ERR x\r\n").unwrap().unwrap().ok);
        assert!(r.parse_response(b"HTTP/1.1\r\n").is_err());
        let mut out = Vec::new();
        r.write_request(&mut out, 0);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }
}
