//! tcp frames (see [`crate::wire`]): length-prefixed requests in, length-prefixed responses
//! echoing the request's `seq` out.
//!
//! In: bytes of a connection. Out: one [`Step`] per frame; a length outside
//! `REQUEST_MIN_BODY..=MAX_BODY` is a bad request that closes the connection (no error reply:
//! the peer is not speaking the protocol).

use super::conn::{Request, Step, StreamProto};
use crate::wire::{self, ServerTimes};

/// The tcp frame protocol with a fixed reply body size.
pub(crate) struct FrameProto {
    reply_bytes: usize,
}

impl FrameProto {
    pub(crate) fn new(reply_bytes: usize) -> FrameProto {
        FrameProto {
            reply_bytes: reply_bytes.max(wire::RESPONSE_MIN_BODY),
        }
    }
}

impl StreamProto for FrameProto {
    type State = ();

    fn next(&self, _: &mut (), buf: &[u8]) -> Step {
        match wire::frame_len(buf, wire::REQUEST_MIN_BODY) {
            Ok(Some(len)) => Step::Request {
                consumed: len,
                req: Request {
                    seq: wire::body_seq(&buf[wire::FRAME_HEADER..len]).unwrap_or(0),
                    ..Request::default()
                },
            },
            Ok(None) => Step::More,
            Err(_) => Step::Bad(0),
        }
    }

    fn put_reply(&self, req: &Request, times: ServerTimes, out: &mut Vec<u8>) -> usize {
        wire::put_response_frame(out, req.seq, times, self.reply_bytes)
    }

    fn put_error(&self, _status: u16, _out: &mut Vec<u8>) {}

    fn max_buffer(&self) -> usize {
        wire::FRAME_HEADER + wire::MAX_BODY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_frames_and_rejects_bad_lengths() {
        let p = FrameProto::new(0);
        let mut buf = Vec::new();
        wire::put_request_frame(&mut buf, 7, 20);
        let req = Request {
            seq: 7,
            ..Request::default()
        };
        assert_eq!(p.next(&mut (), &buf), Step::Request { consumed: 24, req });
        assert_eq!(p.next(&mut (), &buf[..10]), Step::More);
        assert_eq!(p.next(&mut (), &[0, 0, 0, 3, 1, 2, 3]), Step::Bad(0));
        let mut out = Vec::new();
        let split = p.put_reply(&req, ServerTimes::default(), &mut out);
        assert_eq!((split, out.len()), (4, 4 + wire::RESPONSE_MIN_BODY));
    }
}
