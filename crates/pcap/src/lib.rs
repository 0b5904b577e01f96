//! Capture analysis: what the packets say about tail latency.
//!
//! # Brief overview
//!
//! One streaming pass over one or more captures:
//!
//! - [`read`] turns pcap/pcapng files (plain, gzip, zstd) into [`RawPacket`]s;
//! - [`decode`] turns those into addresses, lengths and TCP headers, without copying;
//! - [`live`] captures from an interface through libpcap, as another [`PacketSource`];
//! - [`write`] writes classic nanosecond pcap files ([`PcapWriter`]);
//! - [`matching`] pairs the flows of two captures of the same traffic (delay, loss per hop);
//! - the analysis stages consume decoded packets.
#![deny(missing_docs)]

pub mod bins;
pub mod analysis;
pub mod burst;
pub mod decode;
pub mod flowkey;
pub mod live;
pub mod matching;
pub mod packet;
pub mod read;
pub mod record;
pub mod run;
pub mod tcp;
pub mod write;

pub use decode::{decode, Decoded, Skip, Tcp, Transport, Udp};
pub use packet::{LinkType, RawPacket};
pub use live::{LiveCapture, LiveError, StopHandle};
pub use read::{open, open_file, open_reader, FileReader, PacketSource, ReadError};
pub use write::PcapWriter;
