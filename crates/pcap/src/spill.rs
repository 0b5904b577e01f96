//! A scratch file for what a pass keeps to its end but no longer changes: the channels'
//! packed bins, the bystanders' upstream delays, a TCP direction's older timestamp bins and
//! time-sequence points, written once and read back once at the end of the pass, so that they
//! cost disk rather than memory.
//!
//! In: byte strings ([`Spill::put`]). Out: a [`Spilled`] handle for each, and its bytes again
//! ([`Spill::get`]). The file is created unnamed in the temporary directory (`TMPDIR`, else
//! `/tmp`) on the first write and vanishes with the process, on Ctrl-C as on a crash. When it
//! cannot be created or written, the bytes stay in memory: the results are the same, only the
//! memory is not bounded. A read that fails (the disk failed under the pass) is counted
//! ([`Spill::lost`]) and the pass says so.
//!
//! bench/pcap.sh's 100,000-connection capture held 7 MiB of such bytes at its peak, most of
//! what its peak heap had more than the 1,000-connection capture's.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Bytes buffered before a write: writes of a few hundred bytes each would be a system call
/// each.
const WRITE_BUFFER: usize = 64 << 10;

/// Where a byte string went.
#[derive(Debug, Clone)]
pub enum Spilled {
    /// In the file, at `offset`.
    File {
        /// Byte offset.
        offset: u64,
        /// Length.
        len: u32,
    },
    /// Kept in memory (no file could be written).
    Mem(Box<[u8]>),
}

/// The scratch file of one pass, shared by a sharded pass's threads (behind a lock: they
/// write a piece at a sweep or a few hundred bytes of bins, not per packet), so that what a
/// worker spilled is read back after the workers are joined.
#[derive(Debug, Default)]
pub struct Spill {
    file: Mutex<Writer>,
    /// Reads that failed.
    lost: AtomicU64,
}

#[derive(Debug, Default)]
struct Writer {
    file: Option<File>,
    /// Bytes not yet written; they start at `written`.
    buf: Vec<u8>,
    written: u64,
    /// Why writing failed, once it did: everything since stays in memory.
    failed: Option<String>,
    /// The file system the file is on, when it keeps its files in memory (tmpfs, ramfs):
    /// then the file bounds nothing.
    in_memory: Option<&'static str>,
}

/// The name of the file system `file` is on when that file system keeps its files in memory.
fn memory_file_system(file: &File) -> Option<&'static str> {
    // statfs(2) magic numbers (linux/magic.h).
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;
    let kind = rustix::fs::fstatfs(file).ok()?.f_type as u64;
    match kind {
        TMPFS_MAGIC => Some("tmpfs"),
        RAMFS_MAGIC => Some("ramfs"),
        _ => None,
    }
}

impl Spill {
    /// Keeps `data` until the end of the pass.
    pub fn put(&self, data: &[u8]) -> Spilled {
        let mut w = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if w.failed.is_some() || data.len() > u32::MAX as usize {
            return Spilled::Mem(data.into());
        }
        if w.buf.len() + data.len() > WRITE_BUFFER {
            if let Err(e) = w.flush() {
                w.failed = Some(e.to_string());
                return Spilled::Mem(data.into());
            }
        }
        if w.buf.capacity() == 0 {
            w.buf.reserve_exact(WRITE_BUFFER);
        }
        let offset = w.written + w.buf.len() as u64;
        w.buf.extend_from_slice(data);
        Spilled::File {
            offset,
            len: data.len() as u32,
        }
    }

    /// The bytes of `at`; empty when reading them back failed (counted in [`Spill::lost`]).
    pub fn get(&self, at: &Spilled) -> Vec<u8> {
        let (offset, len) = match at {
            Spilled::Mem(b) => return b.to_vec(),
            Spilled::File { offset, len } => (*offset, *len as usize),
        };
        let w = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if offset >= w.written {
            let from = (offset - w.written) as usize;
            if let Some(b) = w.buf.get(from..from + len) {
                return b.to_vec();
            }
        }
        let mut out = vec![0; len];
        match &w.file {
            Some(f) if f.read_exact_at(&mut out, offset).is_ok() => out,
            _ => {
                self.lost.fetch_add(1, Ordering::Relaxed);
                Vec::new()
            }
        }
    }

    /// Byte strings that could not be read back.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Why the file could not be created or written, when it could not (what came after
    /// stayed in memory).
    pub fn unwritable(&self) -> Option<String> {
        let w = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        w.failed.clone()
    }

    /// The file system the file went to, when that one keeps its files in memory (a `/tmp`
    /// on tmpfs): what the file holds then counts against memory after all.
    pub fn in_memory(&self) -> Option<&'static str> {
        let w = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        w.in_memory
    }

    /// Bytes written to the file or waiting to be.
    pub fn bytes(&self) -> u64 {
        let w = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        w.written + w.buf.len() as u64
    }
}

impl Writer {
    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.file.is_none() {
            let file = tempfile::tempfile()?;
            self.in_memory = memory_file_system(&file);
            self.file = Some(file);
        }
        if let Some(f) = &mut self.file {
            f.write_all(&self.buf)?;
        }
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings come back the same whether they are still buffered or in the file, and the
    /// file is written in buffer-sized pieces.
    #[test]
    fn what_goes_in_comes_back() {
        let s = Spill::default();
        let strings: Vec<Vec<u8>> = (0..2_000u32)
            .map(|i| (0..(i % 700)).map(|j| (i ^ j) as u8).collect())
            .collect();
        let at: Vec<Spilled> = strings.iter().map(|b| s.put(b)).collect();
        assert!(
            s.file.lock().unwrap().file.is_some(),
            "{} bytes went to a file",
            s.bytes()
        );
        assert!(at.iter().all(|a| matches!(a, Spilled::File { .. })));
        for (b, a) in strings.iter().zip(&at) {
            assert_eq!(s.get(a), *b);
        }
        assert_eq!(s.lost(), 0);
    }

    /// A piece the file no longer gives back is counted, not made up; once writing has
    /// failed, pieces stay in memory and come back from there.
    #[test]
    fn what_cannot_be_read_back_is_counted() {
        let s = Spill::default();
        let big = vec![7u8; WRITE_BUFFER];
        let first = s.put(&big);
        let second = s.put(&big);
        assert!(s.file.lock().unwrap().file.is_some());
        // The file replaced by an empty one: the written piece is gone, the buffered one not.
        s.file.lock().unwrap().file = Some(File::open("/dev/null").unwrap());
        assert!(s.get(&first).is_empty());
        assert_eq!(s.get(&second), big);
        assert_eq!(s.lost(), 1);
        s.file.lock().unwrap().failed = Some("disk full".into());
        let kept = s.put(b"abc");
        assert!(matches!(kept, Spilled::Mem(_)));
        assert_eq!(s.get(&kept), b"abc");
        assert_eq!(s.unwritable().as_deref(), Some("disk full"));
    }
}
