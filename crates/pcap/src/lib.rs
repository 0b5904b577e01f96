//! Capture analysis: what the packets say about tail latency.
//!
//! # Brief overview
//!
//! One streaming pass over one or more captures:
//!
//! - [`read`] turns pcap/pcapng files (plain, gzip, zstd) into [`RawPacket`]s;
//! - [`decode`] turns those into addresses, lengths and TCP headers, without copying;
//! - the analysis stages consume decoded packets.
#![deny(missing_docs)]

pub mod decode;
pub mod packet;
pub mod read;

pub use decode::{decode, Decoded, Skip, Tcp, Transport, Udp};
pub use packet::{LinkType, RawPacket};
pub use read::{open, PacketSource, ReadError};
