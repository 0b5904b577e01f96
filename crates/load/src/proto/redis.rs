//! Redis commands (RESP2): `GET key` by default, or any command with its arguments.
//!
//! In: the command's words (`["GET", "user:1"]`, `["SET", "k", <value>]`, `["LRANGE", "q",
//! "0", "9"]`). Out: the request as a RESP array, and where each reply ends: simple strings,
//! errors, integers, bulk strings and (nested) arrays are all answers; an error reply is an
//! answer that did not succeed.

use super::{find_crlf, ProtoError, Response, StreamProtocol};

/// Deepest nesting of arrays accepted in a reply.
const MAX_DEPTH: usize = 8;

/// One command, sent the same way every time.
pub struct Redis {
    request: Vec<u8>,
}

impl Redis {
    /// GET of `key`.
    pub fn new(key: &str) -> Redis {
        Redis::command(&[b"GET".as_slice(), key.as_bytes()])
    }

    /// Any command: its name, then its arguments, each sent as a bulk string.
    pub fn command(words: &[&[u8]]) -> Redis {
        let mut request = format!("*{}\r\n", words.len()).into_bytes();
        for w in words {
            request.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
            request.extend_from_slice(w);
            request.extend_from_slice(b"\r\n");
        }
        Redis { request }
    }
}

/// The end of the RESP value starting at `buf[at]` and whether it is no error; `None` when it
/// has not all arrived.
fn value_end(buf: &[u8], at: usize, depth: usize) -> Result<Option<(usize, bool)>, ProtoError> {
    let Some(eol) = find_crlf(buf, at) else {
        return Ok(None);
    };
    let line = &buf[at + 1..eol];
    let number = || -> Result<i64, ProtoError> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ProtoError("bad RESP length".into()))
    };
    match buf[at] {
        b'+' | b':' => Ok(Some((eol + 2, true))),
        b'-' => Ok(Some((eol + 2, false))),
        b'$' => {
            let n = number()?;
            if n < 0 {
                return Ok(Some((eol + 2, true))); // nil: a miss is still an answer
            }
            let end = eol + 2 + n as usize + 2;
            Ok((buf.len() >= end).then_some((end, true)))
        }
        b'*' if depth < MAX_DEPTH => {
            let n = number()?;
            let (mut pos, mut ok) = (eol + 2, true);
            for _ in 0..n.max(0) {
                if pos >= buf.len() {
                    return Ok(None);
                }
                match value_end(buf, pos, depth + 1)? {
                    Some((end, fine)) => (pos, ok) = (end, ok && fine),
                    None => return Ok(None),
                }
            }
            Ok(Some((pos, ok)))
        }
        _ => Err(ProtoError(format!(
            "not a RESP reply: '{}'",
            String::from_utf8_lossy(&buf[at..eol.min(at + 40)])
        ))),
    }
}

impl StreamProtocol for Redis {
    fn write_request(&self, out: &mut Vec<u8>, _seq: u64) -> usize {
        out.extend_from_slice(&self.request);
        4 // after "*N\r\n" (N < 10 for the usual commands; any offset inside is a valid split)
    }

    fn parse_response(&self, buf: &[u8]) -> Result<Option<Response>, ProtoError> {
        if buf.is_empty() {
            return Ok(None);
        }
        Ok(value_end(buf, 0, 0)?.map(|(len, ok)| Response {
            len,
            ok,
            server: None,
            closes: false,
        }))
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

    #[test]
    fn any_command_and_array_replies() {
        let r = Redis::command(&[b"SET", b"k", b"xyz"]);
        let mut out = Vec::new();
        r.write_request(&mut out, 0);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nxyz\r\n");
        let arr = b"*3\r\n$1\r\na\r\n:7\r\n*2\r\n+x\r\n$-1\r\n+next";
        let got = r.parse_response(arr).unwrap().unwrap();
        assert_eq!((got.len, got.ok), (arr.len() - 5, true));
        for cut in 1..arr.len() - 5 {
            assert_eq!(r.parse_response(&arr[..cut]).unwrap(), None, "cut {cut}");
        }
        let with_error = b"*2\r\n+OK\r\n-WRONGTYPE no\r\n";
        assert!(!r.parse_response(with_error).unwrap().unwrap().ok);
        assert_eq!(r.parse_response(b"*0\r\n").unwrap().unwrap().len, 4);
        let deep = "*1\r\n".repeat(20);
        assert!(r.parse_response(deep.as_bytes()).is_err());
    }
}
