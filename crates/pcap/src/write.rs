//! Classic pcap out: what `tailhunt capture -w FILE` writes and tests build fixtures with.
//!
//! In: frames with nanosecond timestamps. Out: a little-endian pcap with the nanosecond magic
//! (a1b23c4d), which tcpdump, tshark and [`crate::read::open`] all read.

use std::io::{self, Write};

use crate::packet::LinkType;

/// Writes a classic nanosecond pcap to any `Write` (wrap a `File` in a `BufWriter`).
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
    packets: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header: link type and snap length (frames longer are cut to it).
    pub fn new(mut out: W, link: LinkType, snaplen: u32) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&link.number().to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            snaplen,
            packets: 0,
        })
    }

    /// Writes one frame. `wire_len` is the length on the wire (at least `data.len()`); data
    /// beyond the snap length is not written. Timestamps before 1970 are written as 0.
    pub fn write_packet(&mut self, ts_ns: i64, wire_len: u32, data: &[u8]) -> io::Result<()> {
        let cap = data.len().min(self.snaplen as usize);
        let ts = ts_ns.max(0);
        let sec = u32::try_from(ts / 1_000_000_000).unwrap_or(u32::MAX);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&sec.to_le_bytes());
        h[4..8].copy_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        h[12..16].copy_from_slice(&wire_len.max(data.len() as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&data[..cap])?;
        self.packets += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A packet source that also writes every packet it gives to a pcap file (`tailhunt capture
/// -w`): the analysis and the file see the same packets.
pub struct Tee<S> {
    inner: S,
    out: PcapWriter<std::io::BufWriter<std::fs::File>>,
    path: std::path::PathBuf,
}

impl<S: crate::PacketSource> Tee<S> {
    /// Creates `path` (pcap, nanosecond timestamps, `link` and `snaplen` in its header) and
    /// writes `inner`'s packets to it as they are read.
    pub fn create(
        inner: S,
        path: &std::path::Path,
        link: LinkType,
        snaplen: u32,
    ) -> io::Result<Tee<S>> {
        let f = std::fs::File::create(path)?;
        Ok(Tee {
            inner,
            out: PcapWriter::new(std::io::BufWriter::new(f), link, snaplen)?,
            path: path.to_path_buf(),
        })
    }
}

impl<S: crate::PacketSource> crate::PacketSource for Tee<S> {
    fn next_packet(&mut self) -> Result<Option<crate::RawPacket<'_>>, crate::ReadError> {
        let p = self.inner.next_packet()?;
        if let Some(p) = &p {
            self.out
                .write_packet(p.ts_ns, p.wire_len, p.data)
                .map_err(|source| crate::ReadError::Io {
                    path: self.path.clone(),
                    source,
                })?;
        }
        Ok(p)
    }

    fn position(&self) -> u64 {
        self.inner.position()
    }
}
