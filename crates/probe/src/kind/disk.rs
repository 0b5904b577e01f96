//! disk: one read of a random, aligned block of a file or block device with O_DIRECT (the
//! page cache bypassed, so the device — or the network behind a network block device — is
//! measured, not memory).
//!
//! In: a path and a read size (a multiple of 512; default 4096). Out: one measurement per
//! slot: the `pread` of `bytes` at a random offset aligned to 4096 within the file. A file
//! system that refuses O_DIRECT (tmpfs) is refused when the probe starts, naming the path. A
//! read cannot be abandoned: one slower than the timeout is censored at it afterwards.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

use rand::Rng;

use super::{measure, Failure, Measured, Op, Probe};
use crate::ProbeError;

/// O_DIRECT needs the buffer, offset and length aligned to the logical block size; 4096
/// covers every common device (512-byte and 4K-native).
const ALIGN: usize = 4096;

/// The disk probe.
pub struct DiskProbe {
    file: File,
    size: u64,
    bytes: usize,
    buf: Vec<u8>,
}

impl DiskProbe {
    /// Opens `path` for direct reads of `bytes`.
    pub fn open(path: &Path, bytes: usize) -> Result<DiskProbe, ProbeError> {
        let shown = path.display();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| {
                ProbeError::Start(format!(
                    "disk probe: cannot open '{shown}' with O_DIRECT: {e} (tmpfs refuses O_DIRECT: use a file on a disk-backed file system or a block device)"
                ))
            })?;
        // A block device's metadata length is 0: its size is where a seek to the end lands.
        let size = file
            .seek(SeekFrom::End(0))
            .map_err(|e| ProbeError::Start(format!("disk probe: size of '{shown}': {e}")))?;
        if size < bytes as u64 {
            return Err(ProbeError::Start(format!(
                "disk probe: '{shown}' holds {size} bytes, less than one {bytes}-byte read"
            )));
        }
        Ok(DiskProbe {
            file,
            size,
            bytes,
            buf: vec![0; bytes + ALIGN],
        })
    }

    fn read_one(&mut self) -> Result<(), Failure> {
        let blocks = (self.size - self.bytes as u64) / ALIGN as u64 + 1;
        let offset = rand::rng().random_range(0..blocks) * ALIGN as u64;
        // The first ALIGN-aligned byte of the buffer (safe pointer arithmetic on an address).
        let skip = (ALIGN - self.buf.as_ptr() as usize % ALIGN) % ALIGN;
        let buf = &mut self.buf[skip..skip + self.bytes];
        match self.file.read_at(buf, offset) {
            Ok(n) if n == self.bytes => Ok(()),
            Ok(n) => Err(Failure::error(format!(
                "short read: {n} of {} bytes at offset {offset}",
                self.bytes
            ))),
            Err(e) => Err(Failure::io("read", &e)),
        }
    }
}

impl Probe for DiskProbe {
    fn run(&mut self, _op: Op, _timeout: Duration, out: &mut Vec<Measured>) {
        measure("default", out, || self.read_one());
    }
}
