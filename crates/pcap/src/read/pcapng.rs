//! pcapng files (what Wireshark, dumpcap and `tshark -w` write).
//!
//! In: the stream after detection, positioned at a Section Header Block. Out: one
//! [`RawPacket`] per Enhanced, Simple or (obsolete) Packet Block. Each section has its own byte
//! order and interfaces; each interface its own link type, `if_tsresol` (a power of 10 or of 2)
//! and `if_tsoffset`. Unknown blocks are skipped without being buffered.
//! Format: <https://datatracker.ietf.org/doc/draft-ietf-opsawg-pcapng/>.

use super::input::{u16_at, u32_at, Fill, Input};
use super::ReadError;
use crate::packet::{LinkType, RawPacket};

/// Block type of a Section Header Block (also the file's first four bytes).
pub const SHB: u32 = 0x0A0D_0D0A;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const IDB: u32 = 1;
const PB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
/// More interfaces than this in one section is a corrupt file, not a capture.
const MAX_INTERFACES: usize = 1 << 16;

/// How an interface's timestamp units become nanoseconds.
#[derive(Debug, Clone, Copy)]
enum TsScale {
    /// `units * n`.
    Mul(u64),
    /// `units / n`.
    Div(u128),
    /// `units * 1e9 >> n`.
    Pow2(u32),
}

#[derive(Debug, Clone, Copy)]
struct Iface {
    link: LinkType,
    snaplen: u32,
    scale: TsScale,
    offset_ns: i64,
}

/// A pcapng stream: the current section's byte order and interfaces.
pub struct PcapngFormat {
    big_endian: bool,
    ifaces: Vec<Iface>,
    /// Simple Packet Blocks carry no time: they get the last timestamp seen.
    last_ts_ns: i64,
}

/// A packet block found, located in the block just consumed.
struct Found {
    total: usize,
    data_at: usize,
    caplen: usize,
    ts_ns: i64,
    iface: u32,
    wire_len: u32,
}

impl PcapngFormat {
    /// A reader before its first block (the caller has seen the SHB type).
    pub fn new() -> PcapngFormat {
        PcapngFormat {
            big_endian: false,
            ifaces: Vec::new(),
            last_ts_ns: 0,
        }
    }

    /// The next packet, skipping non-packet blocks.
    pub fn next<'a>(&mut self, input: &'a mut Input) -> Result<Option<RawPacket<'a>>, ReadError> {
        let Some(f) = self.next_packet_block(input)? else {
            return Ok(None);
        };
        let link = self.ifaces[f.iface as usize].link;
        let block = input.consumed(f.total);
        Ok(Some(RawPacket {
            ts_ns: f.ts_ns,
            iface: f.iface,
            link,
            wire_len: f.wire_len,
            data: &block[f.data_at..f.data_at + f.caplen],
        }))
    }

    fn next_packet_block(&mut self, input: &mut Input) -> Result<Option<Found>, ReadError> {
        loop {
            let at = input.offset();
            match input.fill(12)? {
                Fill::Ready => {}
                Fill::End => return Ok(None),
                Fill::Short => return Err(input.truncated(at, "block header")),
            }
            let h = input.available();
            let kind = u32_at(h, 0, self.big_endian);
            if kind == SHB {
                match u32_at(h, 8, false) {
                    BYTE_ORDER_MAGIC => self.big_endian = false,
                    m if m.swap_bytes() == BYTE_ORDER_MAGIC => self.big_endian = true,
                    m => {
                        return Err(input.corrupt(format!(
                            "section header byte-order magic {m:08x} (expected 1a2b3c4d)"
                        )))
                    }
                }
            }
            let len = u32_at(input.available(), 4, self.big_endian) as usize;
            if len < 12 || !len.is_multiple_of(4) {
                return Err(input.corrupt(format!(
                    "block length {len} (must be a multiple of 4, at least 12)"
                )));
            }
            if !matches!(kind, SHB | IDB | PB | SPB | EPB) {
                if !input.skip(len as u64)? {
                    return Err(input.truncated(at, "block"));
                }
                continue;
            }
            match input.fill(len)? {
                Fill::Ready => {}
                _ => return Err(input.truncated(at, "block")),
            }
            let b = &input.available()[..len];
            if u32_at(b, len - 4, self.big_endian) as usize != len {
                return Err(input.corrupt(format!(
                    "block length {len} does not match its trailing copy"
                )));
            }
            let found = match kind {
                SHB => self.section(b).map(|()| None),
                IDB => self.interface(b).map(|()| None),
                EPB => self.enhanced(b).map(Some),
                SPB => self.simple(b).map(Some),
                _ => self.obsolete(b).map(Some),
            };
            let found = found.map_err(|what| input.corrupt(what))?;
            input.consume(len);
            if let Some(f) = found {
                return Ok(Some(f));
            }
        }
    }

    fn section(&mut self, b: &[u8]) -> Result<(), String> {
        if b.len() < 28 {
            return Err(format!("section header block of {} bytes", b.len()));
        }
        let major = u16_at(b, 12, self.big_endian);
        if major != 1 {
            return Err(format!("pcapng major version {major} (only 1 exists)"));
        }
        self.ifaces.clear();
        Ok(())
    }

    fn interface(&mut self, b: &[u8]) -> Result<(), String> {
        let big = self.big_endian;
        if b.len() < 20 {
            return Err(format!("interface description block of {} bytes", b.len()));
        }
        if self.ifaces.len() >= MAX_INTERFACES {
            return Err(format!(
                "more than {MAX_INTERFACES} interfaces in one section"
            ));
        }
        let mut iface = Iface {
            link: LinkType::from_number(u32::from(u16_at(b, 8, big))),
            snaplen: u32_at(b, 12, big),
            scale: TsScale::Mul(1000),
            offset_ns: 0,
        };
        let mut opts = &b[16..b.len() - 4];
        while opts.len() >= 4 {
            let code = u16_at(opts, 0, big);
            let olen = usize::from(u16_at(opts, 2, big));
            if code == 0 || 4 + olen > opts.len() {
                break;
            }
            let v = &opts[4..4 + olen];
            match (code, olen) {
                (9, 1) => iface.scale = ts_scale(v[0])?,
                (14, 8) => {
                    let a = [v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]];
                    let secs = if big {
                        i64::from_be_bytes(a)
                    } else {
                        i64::from_le_bytes(a)
                    };
                    iface.offset_ns = secs.saturating_mul(1_000_000_000);
                }
                _ => {}
            }
            opts = &opts[(4 + olen).next_multiple_of(4).min(opts.len())..];
        }
        self.ifaces.push(iface);
        Ok(())
    }

    fn iface(&self, id: u32) -> Result<&Iface, String> {
        self.ifaces.get(id as usize).ok_or_else(|| {
            format!(
                "packet for interface {id}, but the section describes {}",
                self.ifaces.len()
            )
        })
    }

    fn timestamp(&mut self, iface: &Iface, hi: u32, lo: u32) -> i64 {
        let units = (u64::from(hi) << 32) | u64::from(lo);
        let ns: i128 = match iface.scale {
            TsScale::Mul(1000) => i128::from(units) * 1000,
            TsScale::Mul(n) => i128::from(units) * i128::from(n),
            TsScale::Div(n) => (u128::from(units) / n) as i128,
            TsScale::Pow2(s) => ((u128::from(units) * 1_000_000_000) >> s) as i128,
        };
        let ns = (ns + i128::from(iface.offset_ns)).clamp(i64::MIN.into(), i64::MAX.into());
        self.last_ts_ns = ns as i64;
        ns as i64
    }

    fn enhanced(&mut self, b: &[u8]) -> Result<Found, String> {
        if b.len() < 32 {
            return Err(format!("enhanced packet block of {} bytes", b.len()));
        }
        let id = u32_at(b, 8, self.big_endian);
        self.timestamped(b, id)
    }

    /// The layout Enhanced and obsolete Packet Blocks share after the interface id: timestamp
    /// high and low at 12 and 16, captured and original length at 20 and 24, data at 28.
    fn timestamped(&mut self, b: &[u8], id: u32) -> Result<Found, String> {
        let big = self.big_endian;
        let iface = *self.iface(id)?;
        let caplen = u32_at(b, 20, big) as usize;
        if 28 + caplen + 4 > b.len() {
            return Err(format!(
                "captured length {caplen} does not fit its {}-byte block",
                b.len()
            ));
        }
        let ts_ns = self.timestamp(&iface, u32_at(b, 12, big), u32_at(b, 16, big));
        Ok(Found {
            total: b.len(),
            data_at: 28,
            caplen,
            ts_ns,
            iface: id,
            wire_len: u32_at(b, 24, big).max(caplen as u32),
        })
    }

    fn simple(&mut self, b: &[u8]) -> Result<Found, String> {
        if b.len() < 16 {
            return Err(format!("simple packet block of {} bytes", b.len()));
        }
        let iface = *self.iface(0)?;
        let wire_len = u32_at(b, 8, self.big_endian);
        let mut caplen = (wire_len as usize).min(b.len() - 16);
        if iface.snaplen != 0 {
            caplen = caplen.min(iface.snaplen as usize);
        }
        Ok(Found {
            total: b.len(),
            data_at: 12,
            caplen,
            ts_ns: self.last_ts_ns,
            iface: 0,
            wire_len: wire_len.max(caplen as u32),
        })
    }

    fn obsolete(&mut self, b: &[u8]) -> Result<Found, String> {
        if b.len() < 32 {
            return Err(format!("packet block of {} bytes", b.len()));
        }
        // The obsolete block's interface id is 16 bits (then 16 bits of drop count).
        let id = u32::from(u16_at(b, 8, self.big_endian));
        self.timestamped(b, id)
    }
}

impl Default for PcapngFormat {
    fn default() -> Self {
        PcapngFormat::new()
    }
}

/// `if_tsresol`: high bit clear -> 10^-v s per unit, set -> 2^-v s per unit.
fn ts_scale(v: u8) -> Result<TsScale, String> {
    let exp = u32::from(v & 0x7f);
    if v & 0x80 != 0 {
        if exp > 64 {
            return Err(format!("if_tsresol 2^-{exp} (at most 2^-64 is meaningful)"));
        }
        return Ok(TsScale::Pow2(exp));
    }
    match exp {
        0..=9 => Ok(TsScale::Mul(10u64.pow(9 - exp))),
        10..=38 => Ok(TsScale::Div(10u128.pow(exp - 9))),
        _ => Err(format!(
            "if_tsresol 10^-{exp} (at most 10^-38 is meaningful)"
        )),
    }
}
