//! tailhunt frames (see [`crate::wire`]).

use super::{ProtoError, Response, StreamProtocol};
use crate::wire;

/// Length-prefixed frames with sequence numbers and server timestamps.
pub struct Frames {
    /// Request body size (at least `wire::REQUEST_MIN_BODY`).
    pub request_bytes: usize,
}

impl StreamProtocol for Frames {
    fn write_request(&self, out: &mut Vec<u8>, seq: u64) -> usize {
        let start = out.len();
        wire::put_request_frame(out, seq, self.request_bytes) - start
    }

    fn parse_response(&self, buf: &[u8]) -> Result<Option<Response>, ProtoError> {
        let len =
            wire::frame_len(buf, wire::RESPONSE_MIN_BODY).map_err(|e| ProtoError(e.to_string()))?;
        Ok(len.map(|len| Response {
            len,
            ok: true,
            server: wire::parse_response_body(&buf[wire::FRAME_HEADER..len]).map(|(_, t)| t),
            closes: false,
        }))
    }
}
