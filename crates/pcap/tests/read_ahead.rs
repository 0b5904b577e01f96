//! Reading ahead on a thread of its own (what a multi-thread pass does) returns the same
//! frames, the same errors at the same offsets, and the same byte count as reading on the
//! caller's thread: for records that straddle the chunks, for records longer than the room
//! kept in front of a chunk, for streams that return short reads, for compressed streams and
//! for streams that fail.

mod read_support;

use std::io::Read;

use read_support::*;
use tailhunt_pcap::{PacketSource, ReadError};

/// A stream that returns reads of varying sizes (as a pipe does), and can fail after `fail_at`
/// bytes.
struct Uneven {
    data: Vec<u8>,
    at: usize,
    step: usize,
    fail_at: Option<usize>,
}

impl Uneven {
    fn new(data: Vec<u8>, fail_at: Option<usize>) -> Uneven {
        Uneven {
            data,
            at: 0,
            step: 0,
            fail_at,
        }
    }
}

impl Read for Uneven {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.fail_at.is_some_and(|f| self.at >= f) {
            return Err(std::io::Error::other("the disk went away"));
        }
        // 1 byte to 300 KiB, never the same twice in a row.
        self.step = (self.step * 7919 + 104_729) % (300 << 10);
        let limit = self.fail_at.unwrap_or(self.data.len());
        let n = buf.len().min(self.step + 1).min(limit - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Every frame, the error that ended the stream (as text: errors are compared by what they
/// say) and the bytes counted, with or without the read-ahead thread.
fn read(stream: Box<dyn Read + Send>, ahead: bool) -> (Vec<Pkt>, Option<String>, u64) {
    let (pkts, err, position) = read_stream(stream, ahead);
    (pkts, err.map(|e| e.to_string()), position)
}

/// About 6 MiB of frames: mostly small, with records of 100-250 KiB (longer than the room in
/// front of a chunk) among them, so boundaries fall everywhere.
fn mixed_pcap() -> Vec<u8> {
    let small = small_frames(40);
    let mut frames = Vec::new();
    let mut ts = 1_700_000_000_000_000_000i64;
    for i in 0..6_000usize {
        let mut f = small[i % small.len()].2.clone();
        if i % 500 == 250 {
            f.resize(100_000 + (i * 37) % 150_000, b'x');
        } else {
            f.resize(f.len() + (i * 13) % 1400, b'y');
        }
        ts += 100_000;
        frames.push((ts, f.len() as u32, f));
    }
    pcap_file(Order::Little, true, 1, &frames)
}

#[test]
fn reading_ahead_returns_the_same_frames_from_a_file_and_a_pipe() {
    let plain = mixed_pcap();
    let want = read(Box::new(std::io::Cursor::new(plain.clone())), false);
    assert!(want.1.is_none(), "{:?}", want.1);
    assert_eq!(want.0.len(), 6_000);
    assert_eq!(want.2, plain.len() as u64);
    let whole = read(Box::new(std::io::Cursor::new(plain.clone())), true);
    assert!(whole == want, "read ahead from whole reads differs");
    let piped = read(Box::new(Uneven::new(plain.clone(), None)), true);
    assert!(piped == want, "read ahead from short reads differs");
}

#[test]
fn reading_ahead_a_cut_file_keeps_the_same_frames_and_the_same_error() {
    let plain = mixed_pcap();
    let zst = zstd::encode_all(&plain[..], 1).unwrap();
    let mut checked = 0;
    for bytes in [&plain, &zst] {
        // Anywhere in records, long or short, or in their headers.
        let n = bytes.len();
        for cut in [n - 1, n * 9 / 10, n / 2 + 3, n / 3 + 9, n / 7] {
            let part = bytes[..cut].to_vec();
            let want = read(Box::new(std::io::Cursor::new(part.clone())), false);
            let err = want.1.as_deref().unwrap_or_default();
            assert!(err.contains("truncated"), "cut {cut}: {err}");
            let got = read(Box::new(Uneven::new(part, None)), true);
            assert_eq!(got.0.len(), want.0.len(), "cut {cut}");
            assert!(got == want, "cut {cut}: read ahead differs");
            checked += 1;
        }
    }
    assert_eq!(checked, 10);
}

#[test]
fn reading_ahead_reports_a_failing_stream_after_the_same_frames() {
    let plain = mixed_pcap();
    let fail_at = plain.len() / 2;
    let want = read(Box::new(Uneven::new(plain.clone(), Some(fail_at))), false);
    let got = read(Box::new(Uneven::new(plain, Some(fail_at))), true);
    let err = want.1.as_deref().unwrap_or_default();
    assert!(err.contains("the disk went away"), "{err}");
    assert!(!want.0.is_empty());
    assert!(got == want, "read ahead differs on a failing stream");
}

#[test]
fn reading_ahead_a_capture_of_one_chunk_or_less_is_the_same() {
    let frames = small_frames(5);
    let plain = pcap_file(Order::Big, false, 1, &frames);
    let want = read(Box::new(std::io::Cursor::new(plain.clone())), false);
    assert_eq!(want.0.len(), 5);
    assert!(read(Box::new(std::io::Cursor::new(plain)), true) == want);
    let empty_after_header = pcap_file(Order::Little, true, 1, &[]);
    let want = read(
        Box::new(std::io::Cursor::new(empty_after_header.clone())),
        false,
    );
    assert!(want.0.is_empty() && want.1.is_none());
    assert!(read(Box::new(std::io::Cursor::new(empty_after_header)), true) == want);
}

/// The `ReadError` type is what callers match on: a cut file is `Truncated` in both modes.
#[test]
fn reading_ahead_keeps_the_error_kind() {
    let plain = mixed_pcap();
    let cut = plain[..plain.len() - 10].to_vec();
    let mut r = tailhunt_pcap::open_reader("cut", Box::new(Uneven::new(cut, None))).unwrap();
    r.read_ahead();
    let err = loop {
        match r.next_packet() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("a cut file ended cleanly"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, ReadError::Truncated { .. }), "{err:?}");
}
