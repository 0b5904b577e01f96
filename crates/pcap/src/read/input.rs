//! The one reusable buffer every file reader pulls records from.
//!
//! In: any `Read` (a file, a decompressor, stdin). Out: borrowed windows of at least `n` bytes
//! at the current stream offset. Reads are large (1 MiB) so a plain file costs one syscall per
//! MiB; the buffer only grows when a single record is bigger than it, and never past
//! [`MAX_BUFFER`]: a record claiming more is corrupt, not an allocation.

use std::io::{ErrorKind, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::ReadError;

/// Size of one read from the underlying stream.
pub const READ_CHUNK: usize = 1 << 20;

/// The buffer never grows beyond this: no capture record is legitimately larger (libpcap's
/// largest snap length is 256 KiB; 16 MiB leaves room for pcapng blocks with options).
pub const MAX_BUFFER: usize = 16 << 20;

/// Counts bytes read from the underlying file, for [`super::PacketSource::position`].
pub struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R> Counting<R> {
    /// Wraps `inner`; `count` is shared with whoever reports progress.
    pub fn new(inner: R, count: Arc<AtomicU64>) -> Self {
        Counting { inner, count }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Result of asking for `n` bytes.
pub enum Fill {
    /// At least `n` bytes are available.
    Ready,
    /// The stream ended with no byte left: a clean end between records.
    End,
    /// The stream ended with fewer than `n` bytes (but at least one).
    Short,
}

/// A growing-only-when-needed window over a byte stream.
pub struct Input {
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Stream offset of `buf[start]`.
    offset: u64,
    eof: bool,
    /// The decompressor reported that the compressed file ends early.
    cut: bool,
    /// Whether `src` is a decompressor (its errors mean a damaged compressed stream).
    compressed: bool,
    /// The file name, for errors.
    pub path: PathBuf,
    count: Arc<AtomicU64>,
}

impl Input {
    /// Wraps a stream; `count` counts bytes of the underlying file.
    pub fn new(
        src: Box<dyn Read + Send>,
        path: PathBuf,
        compressed: bool,
        count: Arc<AtomicU64>,
    ) -> Self {
        Input {
            src,
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            offset: 0,
            eof: false,
            cut: false,
            compressed,
            path,
            count,
        }
    }

    /// Stream offset of the next unconsumed byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes read from the underlying file.
    pub fn file_position(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Current buffer size in bytes (for tests of the memory bound).
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// The unconsumed bytes in the buffer.
    #[inline]
    pub fn available(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Makes at least `n` bytes available if the stream has them.
    #[inline]
    pub fn fill(&mut self, n: usize) -> Result<Fill, ReadError> {
        if self.end - self.start >= n {
            return Ok(Fill::Ready);
        }
        self.fill_slow(n)
    }

    fn fill_slow(&mut self, n: usize) -> Result<Fill, ReadError> {
        if n > MAX_BUFFER {
            return Err(self.corrupt(format!(
                "a record of {n} bytes (more than the {MAX_BUFFER}-byte limit)"
            )));
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < n {
            self.buf.resize(n.next_power_of_two().min(MAX_BUFFER), 0);
        }
        while self.end < n && !self.eof {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A cut compressed file: end the stream here, so the record parser reports
                // the record that is cut, with its offset.
                Err(e) if self.compressed && e.kind() == ErrorKind::UnexpectedEof => {
                    self.eof = true;
                    self.cut = true;
                }
                Err(e) => return Err(self.stream_error(e)),
            }
        }
        if self.cut && self.end == 0 {
            return Err(self.truncated(self.offset, "compressed stream (the file ends early)"));
        }
        Ok(if self.end >= n {
            Fill::Ready
        } else if self.end == 0 {
            Fill::End
        } else {
            Fill::Short
        })
    }

    /// Marks `n` available bytes as consumed.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start += n;
        self.offset += n as u64;
    }

    /// The last `n` bytes consumed (valid until the next `fill`).
    #[inline]
    pub fn consumed(&self, n: usize) -> &[u8] {
        &self.buf[self.start - n..self.start]
    }

    /// Consumes `n` bytes that may not be buffered (skipping a block nobody reads), without
    /// growing the buffer. `Ok(false)` when the stream ends first.
    pub fn skip(&mut self, mut n: u64) -> Result<bool, ReadError> {
        loop {
            let have = (self.end - self.start) as u64;
            if have >= n {
                self.consume(n as usize);
                return Ok(true);
            }
            self.consume(have as usize);
            n -= have;
            match self.fill(1)? {
                Fill::Ready => {}
                Fill::End | Fill::Short => return Ok(false),
            }
        }
    }

    /// A [`ReadError::Truncated`] at `offset`.
    pub fn truncated(&self, offset: u64, what: &str) -> ReadError {
        ReadError::Truncated {
            path: self.path.clone(),
            offset,
            what: what.to_string(),
        }
    }

    /// A [`ReadError::Corrupt`] at the current offset.
    pub fn corrupt(&self, what: String) -> ReadError {
        ReadError::Corrupt {
            path: self.path.clone(),
            offset: self.offset,
            what,
        }
    }

    fn stream_error(&self, e: std::io::Error) -> ReadError {
        if !self.compressed {
            return ReadError::Io {
                path: self.path.clone(),
                source: e,
            };
        }
        ReadError::Corrupt {
            path: self.path.clone(),
            offset: self.offset + (self.end - self.start) as u64,
            what: format!("compressed stream cannot be decompressed ({e})"),
        }
    }
}

/// The 16-bit field at `at`, in the file's byte order.
#[inline]
pub fn u16_at(b: &[u8], at: usize, big: bool) -> u16 {
    let a = [b[at], b[at + 1]];
    if big {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

/// The 32-bit field at `at`, in the file's byte order.
#[inline]
pub fn u32_at(b: &[u8], at: usize, big: bool) -> u32 {
    let a = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}
