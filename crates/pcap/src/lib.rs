//! Capture analysis: what the packets say about tail latency.
//!
//! # Brief overview
//!
//! One streaming pass over one or more captures:
//!
//! - [`read`] turns pcap/pcapng files (plain, gzip, zstd) into [`RawPacket`]s;
//! - [`mod@decode`] turns those into addresses, lengths and TCP headers, without copying;
//! - [`live`] captures from an interface through libpcap, as another [`PacketSource`];
//! - [`mod@write`] writes classic nanosecond pcap files ([`PcapWriter`]);
//! - [`matching`] pairs the flows of two captures of the same traffic (delay, loss per hop);
//! - [`analysis`] is the one pass over decoded packets: [`bins`] of bytes per channel and
//!   [`burst`] episodes, connections named by [`flowkey`], [`tcp`] state per connection
//!   (RTT, windows as the sender saw them, retransmissions, closes, sender states, request /
//!   response turns, Nagle stalls), and [`delay`], the upstream queueing delay of each packet
//!   from its TCP timestamp;
//! - [`record`] turns its events and bins into series, and [`run`] drives a set of sources
//!   through it into a [`SeriesSink`](tailhunt_model::SeriesSink), recording in [`inputs`] what
//!   became of each source; [`pipeline`] runs the same pass on two threads (one reads, decodes
//!   and stores, the other analyses) and [`shard`] on more (one reads and decodes, the others
//!   keep the flows their key hashes to), with the same result.
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use tailhunt_pcap::analysis::AnalysisConfig;
//!
//! let mut sources = tailhunt_pcap::FileSet::new(vec!["cache.pcap".into()]);
//! let mut series: Vec<tailhunt_model::Series> = Vec::new();
//! let cfg = AnalysisConfig { link_rate_bps: Some(10_000_000_000), ..AnalysisConfig::default() };
//! let (outcome, _) = tailhunt_pcap::run::analyse(&mut sources, cfg, &mut series, &AtomicBool::new(false), &mut |_| {})?;
//! println!("{} bursts, {} flows", outcome.report.bursts.len(), outcome.report.flows.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod analysis;
pub mod bins;
pub mod bins_csv;
pub mod burst;
pub mod decode;
pub mod delay;
pub mod flowkey;
pub mod fxhash;
pub mod inputs;
pub mod live;
pub mod matching;
pub mod pack;
pub mod packet;
pub mod pipeline;
pub mod read;
pub mod record;
pub mod retired;
pub mod run;
pub mod shard;
pub mod spill;
pub mod tcp;
pub mod write;

pub use decode::{decode, Decoded, Skip, Tcp, Transport, Udp};
pub use live::{LiveCapture, LiveError, StopHandle};
pub use packet::{LinkType, RawPacket};
pub use read::{
    is_stdin, open, open_file, open_reader, FileReader, FileSet, PacketSource, ReadError, SourceSet,
};
pub use write::{PcapWriter, Tee};
