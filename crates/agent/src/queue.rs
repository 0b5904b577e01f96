//! A bounded on-disk queue of byte records that survives `kill -9`.
//!
//! In: records (opaque bytes) appended by a producer; acknowledgements from the consumer once
//! a record was delivered. Out: the records not yet acknowledged, oldest first, also after a
//! crash and restart.
//!
//! Layout of the directory: segment files `seg-OFFSET.q` (OFFSET: the queue's byte offset of
//! the segment's first record, 20 digits) holding records `[length u32 LE][CRC-32 u32 LE]
//! [payload]`, and a file `acked` with the offset up to which records were delivered (written
//! to a temporary file, synced and renamed, so it is always whole).
//!
//! Durability: [`Queue::append`] writes the record and syncs the segment before returning, so a
//! record it accepted survives `kill -9` and power loss. A record torn by a crash (short, or
//! with a wrong checksum) ends its segment: reopening truncates the tail there and counts the
//! bytes in [`QueueStats::lost_on_open_bytes`]. Delivery is at least once: a record delivered
//! but not yet acknowledged when the process died is delivered again.
//!
//! Bound: at most `max_bytes` of unacknowledged records (headers included). When a new record
//! does not fit, the **oldest** records are dropped to make room (the newest data is kept) and
//! counted in [`QueueStats::dropped_records`] / [`QueueStats::dropped_bytes`]; a record larger
//! than the whole bound is refused with [`QueueError::TooLarge`] (and counted as dropped: it is
//! lost). Segments whose records are all acknowledged or dropped are deleted.
//!
//! One process owns a directory at a time: [`Queue::open`] takes an exclusive lock on it and
//! refuses with [`QueueError::InUse`] while another holds it.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const HEADER: u64 = 8;
const ACK_FILE: &str = "acked";

/// Queue failures; each names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// A file operation failed.
    #[error("queue {path}: {op} failed: {source} (check the directory exists, is writable and the disk is not full)")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The `acked` file holds something other than a number.
    #[error("queue {path}: the acknowledged-offset file holds {content:?}, not a number: delete it to deliver the whole queue again")]
    BadAck {
        /// The file.
        path: PathBuf,
        /// What it holds.
        content: String,
    },
    /// A record larger than the queue's whole bound.
    #[error(
        "a record of {len} bytes cannot fit a queue bounded at {max} bytes: raise the queue size"
    )]
    TooLarge {
        /// Record size with its header.
        len: u64,
        /// The bound.
        max: u64,
    },
    /// The bound is too small to hold anything useful.
    #[error("queue bound {0} bytes is too small: give at least 4096")]
    BoundTooSmall(u64),
    /// Another process holds the queue (two writers would interleave and corrupt it).
    #[error("queue {0}: another tailhunt agent is using this queue directory: give each agent its own queue_dir")]
    InUse(PathBuf),
}

/// Counters of a queue since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Unacknowledged bytes, headers included.
    pub pending_bytes: u64,
    /// Unacknowledged records.
    pub pending_records: u64,
    /// The bound.
    pub max_bytes: u64,
    /// Records dropped (oldest first) because the bound was reached.
    pub dropped_records: u64,
    /// Bytes of those records.
    pub dropped_bytes: u64,
    /// Bytes of torn or corrupt records cut off when the queue was opened.
    pub lost_on_open_bytes: u64,
}

impl QueueStats {
    /// True once the bound was reached and records had to be dropped.
    pub fn has_dropped(&self) -> bool {
        self.dropped_records > 0
    }
}

/// What an append did beside storing the record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Oldest records dropped to make room.
    pub dropped_records: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
}

#[derive(Debug)]
struct Segment {
    start: u64,
    len: u64,
    path: PathBuf,
}

/// The queue (see the module docs).
#[derive(Debug)]
pub struct Queue {
    dir: PathBuf,
    segments: Vec<Segment>,
    writer: Option<File>,
    acked: u64,
    segment_bytes: u64,
    stats: QueueStats,
    /// Sizes of pending records, oldest first.
    pending: std::collections::VecDeque<u64>,
    /// Held open with an exclusive lock for the queue's life (released by the kernel when the
    /// process dies, also by `kill -9`).
    _lock: File,
}

fn io<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(std::io::Error) -> QueueError + 'a {
    move |source| QueueError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

fn segment_name(start: u64) -> String {
    format!("seg-{start:020}.q")
}

fn sync_dir(dir: &Path) -> Result<(), QueueError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir, "sync directory"))
}

/// Reads the records of a segment; returns their sizes (header included) and the length of
/// the valid prefix.
fn scan(path: &Path) -> Result<(Vec<u64>, u64), QueueError> {
    let bytes = fs::read(path).map_err(io(path, "read segment"))?;
    let mut sizes = Vec::new();
    let mut at = 0usize;
    while at + HEADER as usize <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap_or_default());
        let end = at + HEADER as usize + len;
        if end > bytes.len() || crc32fast::hash(&bytes[at + 8..end]) != crc {
            break;
        }
        sizes.push(HEADER + len as u64);
        at = end;
    }
    Ok((sizes, at as u64))
}

impl Queue {
    /// Opens (or creates) the queue in `dir`, bounded at `max_bytes` of pending records.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Queue, QueueError> {
        if max_bytes < 4096 {
            return Err(QueueError::BoundTooSmall(max_bytes));
        }
        fs::create_dir_all(dir).map_err(io(dir, "create directory"))?;
        let lock_path = dir.join("lock");
        let lock = File::create(&lock_path).map_err(io(&lock_path, "create"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(QueueError::InUse(dir.to_path_buf())),
            Err(fs::TryLockError::Error(e)) => return Err(io(&lock_path, "lock")(e)),
        }
        let ack_path = dir.join(ACK_FILE);
        let acked = match fs::read_to_string(&ack_path) {
            Ok(s) => s.trim().parse::<u64>().map_err(|_| QueueError::BadAck {
                path: ack_path.clone(),
                content: s.chars().take(40).collect(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(io(&ack_path, "read")(e)),
        };
        let mut starts: Vec<u64> = fs::read_dir(dir)
            .map_err(io(dir, "list"))?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_prefix("seg-")?.strip_suffix(".q")?.parse().ok()
            })
            .collect();
        starts.sort_unstable();
        let mut q = Queue {
            dir: dir.to_path_buf(),
            segments: Vec::new(),
            writer: None,
            acked,
            segment_bytes: (max_bytes / 8).clamp(4096, 8 << 20),
            stats: QueueStats {
                max_bytes,
                ..QueueStats::default()
            },
            pending: Default::default(),
            _lock: lock,
        };
        for start in starts {
            q.load_segment(start)?;
        }
        q.delete_done_segments()?;
        Ok(q)
    }

    fn load_segment(&mut self, start: u64) -> Result<(), QueueError> {
        let path = self.dir.join(segment_name(start));
        // A gap after a torn segment: later segments start where they say.
        let (sizes, valid) = scan(&path)?;
        let on_disk = fs::metadata(&path).map_err(io(&path, "stat"))?.len();
        if valid < on_disk {
            self.stats.lost_on_open_bytes += on_disk - valid;
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(io(&path, "open"))?;
            f.set_len(valid).map_err(io(&path, "truncate torn tail"))?;
            f.sync_all().map_err(io(&path, "sync"))?;
        }
        let mut at = start;
        for size in sizes {
            if at < self.acked && self.acked < at + size {
                // An acknowledged offset inside a record (a hand-edited file): deliver that
                // record again rather than read from its middle.
                self.acked = at;
            }
            if at >= self.acked {
                self.pending.push_back(size);
                self.stats.pending_bytes += size;
                self.stats.pending_records += 1;
            }
            at += size;
        }
        self.segments.push(Segment {
            start,
            len: valid,
            path,
        });
        Ok(())
    }

    /// The offset one past the last record.
    fn head(&self) -> u64 {
        self.segments
            .last()
            .map_or(self.acked, |s| (s.start + s.len).max(self.acked))
    }

    /// Counters.
    pub fn stats(&self) -> QueueStats {
        self.stats
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Appends a record and syncs it to disk; drops the oldest records if it would not fit.
    pub fn append(&mut self, payload: &[u8]) -> Result<AppendOutcome, QueueError> {
        let size = HEADER + payload.len() as u64;
        if size > self.stats.max_bytes || payload.len() > u32::MAX as usize {
            // Refused, so lost: counted with the records dropped to keep the bound.
            self.stats.dropped_records += 1;
            self.stats.dropped_bytes += size;
            return Err(QueueError::TooLarge {
                len: size,
                max: self.stats.max_bytes,
            });
        }
        let mut outcome = AppendOutcome::default();
        while self.stats.pending_bytes + size > self.stats.max_bytes {
            let Some(oldest) = self.pending.front().copied() else {
                break;
            };
            self.ack_one(oldest)?;
            outcome.dropped_records += 1;
            outcome.dropped_bytes += oldest;
        }
        self.stats.dropped_records += outcome.dropped_records;
        self.stats.dropped_bytes += outcome.dropped_bytes;
        let need_new = match self.segments.last() {
            None => true,
            Some(s) => s.len >= self.segment_bytes || s.start + s.len < self.acked,
        };
        if need_new || self.writer.is_none() {
            self.open_writer(need_new)?;
        }
        let mut record = Vec::with_capacity(size as usize);
        record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        record.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        record.extend_from_slice(payload);
        let seg = self.segments.last_mut().expect("a segment was just opened");
        let w = self.writer.as_mut().expect("a writer was just opened");
        w.write_all(&record).map_err(io(&seg.path, "append"))?;
        w.sync_data().map_err(io(&seg.path, "sync"))?;
        seg.len += size;
        self.pending.push_back(size);
        self.stats.pending_bytes += size;
        self.stats.pending_records += 1;
        Ok(outcome)
    }

    fn open_writer(&mut self, new_segment: bool) -> Result<(), QueueError> {
        if new_segment {
            let start = self.head();
            let path = self.dir.join(segment_name(start));
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(io(&path, "create segment"))?;
            sync_dir(&self.dir)?;
            self.segments.push(Segment {
                start,
                len: 0,
                path,
            });
            self.writer = Some(f);
        } else {
            let seg = self.segments.last().expect("checked by the caller");
            let f = OpenOptions::new()
                .append(true)
                .open(&seg.path)
                .map_err(io(&seg.path, "open segment"))?;
            self.writer = Some(f);
        }
        Ok(())
    }

    /// The oldest pending record, without removing it.
    pub fn peek(&self) -> Result<Option<Vec<u8>>, QueueError> {
        let Some(&size) = self.pending.front() else {
            return Ok(None);
        };
        let Some(seg) = self
            .segments
            .iter()
            .rev()
            .find(|s| s.start <= self.acked && self.acked < s.start + s.len)
        else {
            return Ok(None);
        };
        let mut f = File::open(&seg.path).map_err(io(&seg.path, "open segment"))?;
        f.seek(SeekFrom::Start(self.acked - seg.start + HEADER))
            .map_err(io(&seg.path, "seek"))?;
        let mut payload = vec![0u8; (size - HEADER) as usize];
        f.read_exact(&mut payload).map_err(io(&seg.path, "read"))?;
        Ok(Some(payload))
    }

    /// Acknowledges the oldest pending record (it was delivered): it is not returned again,
    /// also after a restart.
    pub fn ack(&mut self) -> Result<(), QueueError> {
        if let Some(size) = self.pending.front().copied() {
            self.ack_one(size)?;
        }
        Ok(())
    }

    fn ack_one(&mut self, size: u64) -> Result<(), QueueError> {
        self.pending.pop_front();
        self.stats.pending_bytes -= size;
        self.stats.pending_records -= 1;
        self.acked = self.next_record_start(self.acked + size);
        let path = self.dir.join(ACK_FILE);
        let tmp = self.dir.join("acked.tmp");
        let mut f = File::create(&tmp).map_err(io(&tmp, "create"))?;
        writeln!(f, "{}", self.acked).map_err(io(&tmp, "write"))?;
        f.sync_all().map_err(io(&tmp, "sync"))?;
        fs::rename(&tmp, &path).map_err(io(&path, "rename"))?;
        self.delete_done_segments()
    }

    /// Offsets past a segment's valid end jump to the next segment's start.
    fn next_record_start(&self, off: u64) -> u64 {
        for s in &self.segments {
            if off < s.start + s.len {
                return off.max(s.start);
            }
        }
        off
    }

    fn delete_done_segments(&mut self) -> Result<(), QueueError> {
        // The last segment stays (it is the one being written) unless it is empty-ended.
        while self.segments.len() > 1 && self.segments[0].start + self.segments[0].len <= self.acked
        {
            let s = self.segments.remove(0);
            fs::remove_file(&s.path).map_err(io(&s.path, "delete acknowledged segment"))?;
        }
        if let Some(s) = self.segments.first() {
            if self.acked < s.start && !self.pending.is_empty() {
                // The acknowledgement points into the gap a torn (and now deleted) segment
                // left: continue at the first segment.
                self.acked = s.start;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
