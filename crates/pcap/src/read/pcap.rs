//! Classic pcap (libpcap) files.
//!
//! In: the stream after detection, positioned at the 24-byte file header. Out: one
//! [`RawPacket`] per 16-byte record header + captured bytes. Both byte orders, microsecond
//! (magic a1b2c3d4) and nanosecond (a1b23c4d) timestamps.
//! Format: <https://datatracker.ietf.org/doc/draft-ietf-opsawg-pcap/>.

use super::input::{u32_at, Fill, Input, MAX_BUFFER};
use super::ReadError;
use crate::packet::{LinkType, RawPacket};

/// Magic number of a microsecond pcap, as read in the file's own byte order.
pub const MAGIC_US: u32 = 0xa1b2_c3d4;
/// Magic number of a nanosecond pcap.
pub const MAGIC_NS: u32 = 0xa1b2_3c4d;

const FILE_HEADER: usize = 24;
const RECORD_HEADER: usize = 16;

/// A classic pcap stream after its file header.
pub struct PcapFormat {
    big_endian: bool,
    /// Nanoseconds per unit of the fraction field (1000 or 1).
    frac_ns: i64,
    link: LinkType,
}

impl PcapFormat {
    /// Reads the file header. The caller has seen one of the magics in either byte order.
    pub fn start(input: &mut Input) -> Result<PcapFormat, ReadError> {
        match input.fill(FILE_HEADER)? {
            Fill::Ready => {}
            _ => return Err(input.truncated(0, "pcap file header")),
        }
        let h = input.available();
        let le = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let big_endian = !(le == MAGIC_US || le == MAGIC_NS);
        let magic = u32_at(h, 0, big_endian);
        let frac_ns = if magic == MAGIC_NS { 1 } else { 1000 };
        // Only the low 16 bits are the link type; the upper ones carry the FCS length
        // (draft-ietf-opsawg-pcap, "LinkType and additional information").
        let link = LinkType::from_number(u32_at(h, 20, big_endian) & 0xffff);
        input.consume(FILE_HEADER);
        Ok(PcapFormat {
            big_endian,
            frac_ns,
            link,
        })
    }

    /// The next record.
    #[inline]
    pub fn next<'a>(&mut self, input: &'a mut Input) -> Result<Option<RawPacket<'a>>, ReadError> {
        let at = input.offset();
        match input.fill(RECORD_HEADER)? {
            Fill::Ready => {}
            Fill::End => return Ok(None),
            Fill::Short => return Err(input.truncated(at, "packet record header")),
        }
        let h = input.available();
        let big = self.big_endian;
        let sec = u32_at(h, 0, big);
        let frac = u32_at(h, 4, big);
        let caplen = u32_at(h, 8, big) as usize;
        let wire_len = u32_at(h, 12, big);
        if caplen > MAX_BUFFER - RECORD_HEADER {
            return Err(input.corrupt(format!(
                "packet record claims {caplen} captured bytes (a capture's largest is 262144)"
            )));
        }
        let total = RECORD_HEADER + caplen;
        match input.fill(total)? {
            Fill::Ready => {}
            _ => return Err(input.truncated(at, "packet record")),
        }
        input.consume(total);
        // A fraction of a second or more (seen from buggy writers) simply carries over.
        let ts_ns = i64::from(sec) * 1_000_000_000 + i64::from(frac) * self.frac_ns;
        let buf = &input.consumed(total)[RECORD_HEADER..];
        Ok(Some(RawPacket {
            ts_ns,
            iface: 0,
            link: self.link,
            wire_len: wire_len.max(caplen as u32),
            data: buf,
        }))
    }
}
