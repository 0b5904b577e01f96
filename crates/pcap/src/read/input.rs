//! The one reusable buffer every file reader pulls records from.
//!
//! In: any `Read` (a file, a decompressor, stdin). Out: borrowed windows of at least `n` bytes
//! at the current stream offset. Reads are large (1 MiB) so a plain file costs one syscall per
//! MiB; the buffer only grows when a single record is bigger than it, and never past
//! [`MAX_BUFFER`] (plus one chunk when reading ahead): a record claiming more is corrupt, not
//! an allocation.
//!
//! [`Input::read_ahead`] moves the reading to a thread of its own: it reads and decompresses
//! the next chunks while the caller decodes this one, and hands each over whole (the caller
//! only puts the unread end of the last chunk in the room kept in front of the next). A pass
//! does this for compressed files: decompressing then runs beside the analysis. For a plain
//! file it does not pay: the caller then reads every record header from another core's
//! cache, which cost more CPU than the copy it saved (measured on the 1 GB mix, see
//! docs/captures.md).

use std::io::{ErrorKind, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
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

/// Room kept in front of each read-ahead chunk for the unread end of the one before (the
/// start of a record that the chunk boundary cut): it is put there instead of the chunk being
/// copied after it. A record longer than this that spans a boundary takes the copying path.
const GAP: usize = 64 << 10;

/// Read-ahead chunks waiting for the caller: what the reading thread may be ahead by.
const AHEAD: usize = 2;

/// What the read-ahead thread hands over.
enum Chunk {
    /// A buffer holding `len` bytes of the stream from [`GAP`].
    Data(Vec<u8>, usize),
    /// The stream failed (after the chunks before).
    Failed(std::io::Error),
}

/// The caller's side of the read-ahead thread. The thread stops when this is dropped (at
/// its next chunk; one blocked on a pipe stops when the pipe gives it something or ends).
struct Ahead {
    chunks: Receiver<Chunk>,
    spare: Sender<Vec<u8>>,
}

/// A growing-only-when-needed window over a byte stream.
pub struct Input {
    src: Box<dyn Read + Send>,
    /// Set once [`Input::read_ahead`] has moved `src` to its thread.
    ahead: Option<Ahead>,
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
            ahead: None,
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

    /// Whether the stream is decompressed as it is read.
    pub fn compressed(&self) -> bool {
        self.compressed
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

    /// Reads the rest of the stream on a thread of its own from now on (see the module's
    /// docs). Bytes already buffered are read first, as before. When no thread can be
    /// started, reading simply stays on the caller's thread.
    pub fn read_ahead(&mut self) {
        if self.ahead.is_some() || self.eof {
            return;
        }
        let (chunk_tx, chunks) = sync_channel(AHEAD);
        let (spare, spare_rx) = channel();
        // The stream is handed over only once the thread runs: if it cannot start, the
        // stream is still here.
        let (give, given) = sync_channel::<Box<dyn Read + Send>>(1);
        let started = std::thread::Builder::new()
            .name("pcap-read".into())
            .spawn(move || {
                if let Ok(src) = given.recv() {
                    read_chunks(src, chunk_tx, spare_rx);
                }
            });
        if started.is_err() {
            return;
        }
        let src = std::mem::replace(&mut self.src, Box::new(std::io::empty()));
        match give.send(src) {
            Ok(()) => self.ahead = Some(Ahead { chunks, spare }),
            Err(back) => self.src = back.0,
        }
    }

    fn fill_slow(&mut self, n: usize) -> Result<Fill, ReadError> {
        if n > MAX_BUFFER {
            return Err(self.corrupt(format!(
                "a record of {n} bytes (more than the {MAX_BUFFER}-byte limit)"
            )));
        }
        if self.ahead.is_some() {
            return self.fill_ahead(n);
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
                Err(e) => self.failed(e)?,
            }
        }
        self.filled(n)
    }

    /// `fill_slow` with the read-ahead thread: chunks are taken whole, the unread bytes
    /// before put in their gap.
    fn fill_ahead(&mut self, n: usize) -> Result<Fill, ReadError> {
        while self.end - self.start < n && !self.eof {
            let Some(ahead) = &self.ahead else { break };
            let (chunk, len) = match ahead.chunks.recv() {
                Ok(Chunk::Data(chunk, len)) => (chunk, len),
                // The thread ended: the stream did.
                Err(_) => {
                    self.eof = true;
                    break;
                }
                Ok(Chunk::Failed(e)) => {
                    self.failed(e)?;
                    continue;
                }
            };
            let left = self.end - self.start;
            let old = if left <= GAP {
                let mut chunk = chunk;
                chunk[GAP - left..GAP].copy_from_slice(&self.buf[self.start..self.end]);
                (self.start, self.end) = (GAP - left, GAP + len);
                std::mem::replace(&mut self.buf, chunk)
            } else {
                // A long record spans the boundary: the chunk is copied after it (the buffer
                // then holds up to one chunk more than the record, so at most one chunk more
                // than MAX_BUFFER).
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, left);
                if self.buf.len() < left + len {
                    self.buf.resize(left + len, 0);
                }
                self.buf[left..left + len].copy_from_slice(&chunk[GAP..GAP + len]);
                self.end += len;
                chunk
            };
            if old.len() == GAP + READ_CHUNK {
                let _ = ahead.spare.send(old);
            }
        }
        self.filled_from(self.start, n)
    }

    /// A read failed: a cut compressed file ends the stream here (so the record parser
    /// reports the record that is cut, with its offset); anything else is an error.
    fn failed(&mut self, e: std::io::Error) -> Result<(), ReadError> {
        if self.compressed && e.kind() == ErrorKind::UnexpectedEof {
            self.eof = true;
            self.cut = true;
            return Ok(());
        }
        Err(self.stream_error(e))
    }

    fn filled(&self, n: usize) -> Result<Fill, ReadError> {
        self.filled_from(0, n)
    }

    /// Whether `n` bytes are available, the data starting at `start`.
    fn filled_from(&self, start: usize, n: usize) -> Result<Fill, ReadError> {
        let have = self.end - start;
        if self.cut && have == 0 {
            return Err(self.truncated(self.offset, "compressed stream (the file ends early)"));
        }
        Ok(if have >= n {
            Fill::Ready
        } else if have == 0 {
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

/// The read-ahead thread: reads `src` a chunk at a time into buffers the caller hands back,
/// until the stream ends, fails, or the caller is gone.
fn read_chunks(mut src: Box<dyn Read + Send>, chunks: SyncSender<Chunk>, spare: Receiver<Vec<u8>>) {
    loop {
        let mut buf = spare
            .try_recv()
            .unwrap_or_else(|_| vec![0; GAP + READ_CHUNK]);
        let sent = match src.read(&mut buf[GAP..]) {
            Ok(0) => return,
            Ok(len) => chunks.send(Chunk::Data(buf, len)),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = chunks.send(Chunk::Failed(e));
                return;
            }
        };
        if sent.is_err() {
            return;
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
