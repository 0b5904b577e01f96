//! A zstd level-1 compressor kept with its output buffer, for data compressed a batch at a
//! time (sample blocks, flow rows).
//!
//! Made once and reused: a context per batch costs its tables again (a tenth of a load
//! recorder's block encoding), and an output buffer made and freed per batch (sized for the
//! worst case: 130 kB for a block of 8,192 samples, 600 kB for 256 flow rows) made glibc raise
//! its mmap threshold to that size, after which the memory a capture's pass freed stayed
//! resident (`bench/pcap.sh`'s 100,000-connection capture).

/// The compressor and its last output.
pub(crate) struct Level1 {
    zstd: Option<zstd::bulk::Compressor<'static>>,
    out: Vec<u8>,
}

impl Level1 {
    /// Nothing made yet (the context comes with the first batch).
    pub(crate) const fn new() -> Level1 {
        Level1 {
            zstd: None,
            out: Vec::new(),
        }
    }

    /// `raw` compressed, valid until the next call.
    pub(crate) fn compress(&mut self, raw: &[u8]) -> std::io::Result<&[u8]> {
        let zstd = match &mut self.zstd {
            Some(z) => z,
            empty => empty.insert(zstd::bulk::Compressor::new(1)?),
        };
        self.out.clear();
        self.out.reserve(zstd::zstd_safe::compress_bound(raw.len()));
        zstd.compress_to_buffer(raw, &mut self.out)?;
        Ok(&self.out)
    }
}
