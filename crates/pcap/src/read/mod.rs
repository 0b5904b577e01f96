//! Capture files in, [`RawPacket`]s out, streaming.
//!
//! [`open`] / [`open_file`] (a path) and [`open_reader`] (any stream, e.g. stdin) detect the
//! format (classic pcap in either byte order, µs or ns; pcapng with several sections and
//! interfaces, each with its own link type, `if_tsresol` and `if_tsoffset`; Enhanced, Simple and
//! obsolete Packet Blocks) and the compression (gzip, zstd) from the content, not the name.
//!
//! The reader keeps one buffer, filled by 1 MiB reads, and returns packets that borrow it: no
//! allocation per packet, and memory does not grow with the file. The buffer grows only for a
//! record larger than itself and never past [`MAX_BUFFER`]; a record claiming more is
//! [`ReadError::Corrupt`]. Unknown pcapng blocks are skipped without being buffered.
//!
//! A file that ends inside a record is [`ReadError::Truncated`] with the byte offset of the
//! record (in the decompressed stream): every packet before it has been returned, so the caller
//! keeps partial results. A file without a single byte is [`ReadError::Empty`]. Several files
//! are read in order as one capture through a [`SourceSet`] ([`FileSet`] opens each file only
//! when its turn comes). Simple Packet Blocks carry no timestamp; they get the last one seen.

mod input;
mod pcap;
mod pcapng;
mod set;
mod stdin;

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use flate2::bufread::MultiGzDecoder;

use crate::packet::RawPacket;
pub use input::MAX_BUFFER;
use input::{Counting, Fill, Input};
pub use set::{is_stdin, FileSet, SourceSet, Unreadable};
pub use stdin::{StopRequested, UntilStopped};

/// A source of captured frames: a file reader or a live capture.
pub trait PacketSource: Send {
    /// The next frame, `Ok(None)` at the end.
    fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, ReadError>;
    /// Bytes consumed from the underlying file so far (compressed bytes for a compressed
    /// file), for progress; 0 for a live source.
    fn position(&self) -> u64;
    /// Reads (and decompresses) ahead on a thread of its own from now on, where the source
    /// can: the caller's thread then only takes the frames. Nothing for a live source.
    fn read_ahead(&mut self) {}
    /// Whether the source is decompressed as it is read.
    fn compressed(&self) -> bool {
        false
    }
}

/// What went wrong reading a capture.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("cannot read '{path}': {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file (or the stream inside a compressed one) has no byte at all: a rotated set's
    /// newest file often is, when the writer was stopped before it wrote the header.
    #[error("'{path}' is empty (0 bytes)")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The first bytes are no known capture format.
    #[error("'{path}' is not a pcap or pcapng capture (first bytes {magic}); expected a file written by tcpdump, tshark/dumpcap or `tailhunt capture -w`, optionally gzip- or zstd-compressed")]
    NotACapture {
        /// The file.
        path: PathBuf,
        /// The first bytes, hex.
        magic: String,
    },
    /// The file ends inside a record: everything before `offset` was read.
    #[error("'{path}' is truncated: {what} at byte {offset}; the packets before it were read")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Byte offset (in the decompressed stream) of the record that is cut.
        offset: u64,
        /// What was cut ("packet record", "block header", ...).
        what: String,
    },
    /// A record whose fields cannot be right.
    #[error("'{path}' is corrupt at byte {offset}: {what}; the packets before it were read")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset (decompressed) of the bad record.
        offset: u64,
        /// What is wrong.
        what: String,
    },
}

impl ReadError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ReadError::Io { path, .. }
            | ReadError::Empty { path }
            | ReadError::NotACapture { path, .. }
            | ReadError::Truncated { path, .. }
            | ReadError::Corrupt { path, .. } => path,
        }
    }

    /// True when packets before the error were good and the caller should keep its results.
    pub fn is_partial(&self) -> bool {
        matches!(
            self,
            ReadError::Truncated { .. } | ReadError::Corrupt { .. }
        )
    }
}

/// Opens a capture file (pcap or pcapng, plain, gzip or zstd).
pub fn open(path: &Path) -> Result<Box<dyn PacketSource>, ReadError> {
    Ok(Box::new(open_file(path)?))
}

/// Opens a capture file as the concrete [`FileReader`] (no dynamic dispatch per packet).
pub fn open_file(path: &Path) -> Result<FileReader, ReadError> {
    let file = File::open(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    open_reader(path, Box::new(file))
}

/// Reads a capture from any stream (stdin, a pipe); `name` is used in errors.
pub fn open_reader(
    name: impl AsRef<Path>,
    reader: Box<dyn Read + Send>,
) -> Result<FileReader, ReadError> {
    let path = name.as_ref().to_path_buf();
    let count = Arc::new(AtomicU64::new(0));
    let mut peek = BufReader::with_capacity(PEEK, Counting::new(reader, count.clone()));
    let head = loop {
        match peek.fill_buf() {
            Ok(b) => break b,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(source) => return Err(ReadError::Io { path, source }),
        }
    };
    let (stream, compressed): (Box<dyn Read + Send>, bool) = if head.starts_with(&GZIP_MAGIC) {
        (Box::new(MultiGzDecoder::new(peek)), true)
    } else if head.starts_with(&ZSTD_MAGIC) {
        let dec = zstd::Decoder::with_buffer(peek).map_err(|source| ReadError::Io {
            path: path.clone(),
            source,
        })?;
        (Box::new(dec), true)
    } else {
        (Box::new(peek), false)
    };
    let mut input = Input::new(stream, path, compressed, count);
    let format = detect(&mut input)?;
    Ok(FileReader { input, format })
}

/// Bytes the detector peeks at; small, because a plain file's large reads then bypass it.
const PEEK: usize = 64 << 10;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fn detect(input: &mut Input) -> Result<Format, ReadError> {
    let head = match input.fill(4)? {
        Fill::Ready => input.available(),
        Fill::End => {
            return Err(ReadError::Empty {
                path: input.path.clone(),
            })
        }
        Fill::Short => return Err(input.truncated(0, "file header")),
    };
    let le = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let known = [pcap::MAGIC_US, pcap::MAGIC_NS];
    if known.contains(&le) || known.contains(&le.swap_bytes()) {
        return Ok(Format::Pcap(pcap::PcapFormat::start(input)?));
    }
    if le == pcapng::SHB {
        return Ok(Format::Pcapng(pcapng::PcapngFormat::new()));
    }
    // The first 8 bytes are enough to recognise a format; the buffer may hold a megabyte.
    let magic = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Err(ReadError::NotACapture {
        path: input.path.clone(),
        magic,
    })
}

enum Format {
    Pcap(pcap::PcapFormat),
    Pcapng(pcapng::PcapngFormat),
}

/// A capture file being read: the format detected by [`open_file`] over one buffer.
pub struct FileReader {
    input: Input,
    format: Format,
}

impl FileReader {
    /// The buffer's current size: at most [`MAX_BUFFER`] whatever the file says.
    pub fn buffer_capacity(&self) -> usize {
        self.input.capacity()
    }

    /// Offset in the (decompressed) stream of the next record.
    pub fn stream_offset(&self) -> u64 {
        self.input.offset()
    }

    /// "pcap" or "pcapng".
    pub fn format_name(&self) -> &'static str {
        match self.format {
            Format::Pcap(_) => "pcap",
            Format::Pcapng(_) => "pcapng",
        }
    }
}

impl PacketSource for FileReader {
    #[inline]
    fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, ReadError> {
        match &mut self.format {
            Format::Pcap(f) => f.next(&mut self.input),
            Format::Pcapng(f) => f.next(&mut self.input),
        }
    }

    fn position(&self) -> u64 {
        self.input.file_position()
    }

    fn read_ahead(&mut self) {
        self.input.read_ahead();
    }

    fn compressed(&self) -> bool {
        self.input.compressed()
    }
}
