//! Cross-capture matching: the same TCP traffic seen at two points (client side and server
//! side, possibly across a NAT, with the two capturing hosts' clocks apart).
//!
//! In: two [`PacketSource`]s, A and B. Out: a [`MatchReport`] that pairs each TCP flow of A
//! with its flow in B (whatever a NAT did to the addresses and ports) and gives, per hop
//! direction, the one-way delay distribution, the packets lost between the two points, the
//! packets that appeared between them, and where each FIN and RST came from.
//!
//! How: B is read first into an index of flow-agnostic packet signatures (see
//! [`MatchConfig::max_indexed_packets`] for the memory bound; pass the smaller capture as B),
//! then A is streamed and each packet takes the first unmatched B packet with the same
//! signature. Flows are paired by the most matched packets.
//!
//! Clock offset: the capturing hosts' clocks differ by an unknown offset. Per direction the
//! raw difference `t_B - t_A` is `delay + offset` for packets that pass A first and
//! `-(delay) + offset` for packets that pass B first, so the direction of each flow whose raw
//! differences are larger is the A-to-B one, whatever the offset. Assuming the smallest
//! one-way delay is the same both ways, `offset = (min_ab - min_ba) / 2` with
//! `min_ab = min(t_B - t_A)` over A-to-B packets and `min_ba = min(t_A - t_B)` over B-to-A
//! packets; the delays reported have that offset removed. An asymmetric path shows as the
//! difference being split evenly, so compare the two directions' delays with that in mind.

mod index;
mod summary;

use std::collections::HashMap;
use std::net::SocketAddr;

use tailhunt_model::evidence::capture::{
    CloseOrigin, DelayStats, FlowName, FlowPair, HopStats, MatchReport, Proto, Side,
};

use crate::decode::{decode, flags, Transport};
use crate::flowkey::FlowKey;
use crate::read::{PacketSource, ReadError};
use index::{entry, id_sig, seq_sig, Index};

/// Limits of the matcher.
#[derive(Debug, Clone, Copy)]
pub struct MatchConfig {
    /// Packets of capture B held in the index (about 64 bytes each); the rest of B is not
    /// read and the report says so. Also caps the unmatched packets of A that are kept.
    pub max_indexed_packets: usize,
    /// FIN/RST records kept per flow pair.
    pub max_closes_per_flow: usize,
}

impl Default for MatchConfig {
    fn default() -> Self {
        MatchConfig {
            max_indexed_packets: 4_000_000,
            max_closes_per_flow: 16,
        }
    }
}

/// What stopped the matcher.
#[derive(Debug, thiserror::Error)]
pub enum MatchError {
    /// A capture could not be read (not a truncated end: that keeps what was read).
    #[error("reading capture {which}: {source}")]
    Read {
        /// `A` or `B`.
        which: &'static str,
        /// The cause.
        source: ReadError,
    },
    /// Nothing to match.
    #[error(
        "capture {which} has no TCP packets to match; give two captures of the same TCP traffic"
    )]
    NoTcp {
        /// `A` or `B`.
        which: &'static str,
    },
}

/// Flow table of one capture.
#[derive(Default)]
struct Flows {
    ids: HashMap<FlowKey, u32>,
    keys: Vec<FlowKey>,
    /// Side of the key that sent a SYN without ACK.
    client: Vec<Option<u8>>,
}

impl Flows {
    fn id(&mut self, src: SocketAddr, dst: SocketAddr, tcp_flags: u8) -> (u32, u8) {
        let (key, side) = FlowKey::of(Proto::Tcp, src, dst);
        let id = *self.ids.entry(key).or_insert_with(|| {
            self.keys.push(key);
            self.client.push(None);
            (self.keys.len() - 1) as u32
        });
        if tcp_flags & (flags::SYN | flags::ACK) == flags::SYN {
            self.client[id as usize] = Some(side as u8);
        }
        (id, side as u8)
    }

    /// The flow's name; without a SYN, the higher port is taken as the client.
    fn name(&self, id: u32) -> FlowName {
        self.keys[id as usize].name(self.client_side(id) as usize)
    }

    fn client_side(&self, id: u32) -> u8 {
        let k = self.keys[id as usize];
        self.client[id as usize].unwrap_or(u8::from(k.b.port() > k.a.port()))
    }
}

/// A packet of A and the B packet it matched.
#[derive(Clone, Copy)]
struct Matched {
    a_flow: u32,
    a_dir: u8,
    b: u32,
    a_ts: i64,
    flags: u8,
}

/// A packet of A that matched nothing.
#[derive(Clone, Copy)]
struct Unmatched {
    a_flow: u32,
    a_dir: u8,
    a_ts: i64,
    flags: u8,
}

/// What the two passes collected, for [`summary`].
struct Collected {
    flows_a: Flows,
    flows_b: Flows,
    index: Index,
    matched: Vec<Matched>,
    unmatched_a: Vec<Unmatched>,
    span_a: (i64, i64),
    span_b: (i64, i64),
    packets_a: u64,
    /// Unmatched packets of A not kept (past the cap).
    dropped_unmatched: u64,
    notes: Vec<String>,
}

/// Pairs the TCP flows of captures `a` and `b` (see the module docs). `b` is read into memory
/// first (bounded by `cfg`), `a` is streamed.
pub fn match_captures(
    a: &mut dyn PacketSource,
    b: &mut dyn PacketSource,
    cfg: MatchConfig,
) -> Result<MatchReport, MatchError> {
    match_many(&mut [a], b, cfg)
}

/// [`match_captures`] with A given as several sources read in order as one capture (e.g. a
/// capture split into files by `tcpdump -C`).
pub fn match_many(
    a: &mut [&mut dyn PacketSource],
    b: &mut dyn PacketSource,
    cfg: MatchConfig,
) -> Result<MatchReport, MatchError> {
    let mut notes = Vec::new();
    let mut flows_b = Flows::default();
    let mut index = Index::new();
    let mut span_b = (i64::MAX, i64::MIN);
    while let Some(pkt) = next_or_stop(b, "B", &mut notes)? {
        let Ok(d) = decode(&pkt) else { continue };
        let Transport::Tcp(t) = d.transport else {
            continue;
        };
        if index.len() >= cfg.max_indexed_packets {
            notes.push(format!(
                "capture B has more than {} TCP packets: only those were indexed; pass the smaller capture as B or split it",
                cfg.max_indexed_packets
            ));
            break;
        }
        let (flow, dir) = flows_b.id(
            SocketAddr::new(d.src, t.src_port),
            SocketAddr::new(d.dst, t.dst_port),
            t.flags,
        );
        span_b = (span_b.0.min(d.ts_ns), span_b.1.max(d.ts_ns));
        index.insert(
            entry(d.ts_ns, flow, dir, t.flags),
            seq_sig(&t),
            id_sig(&d, &t),
        );
    }
    if index.len() == 0 {
        return Err(MatchError::NoTcp { which: "B" });
    }
    let mut c = Collected {
        flows_a: Flows::default(),
        flows_b,
        index,
        matched: Vec::new(),
        unmatched_a: Vec::new(),
        span_a: (i64::MAX, i64::MIN),
        span_b,
        packets_a: 0,
        dropped_unmatched: 0,
        notes,
    };
    for src in a.iter_mut() {
        stream_a(&mut **src, &mut c, cfg)?;
    }
    if c.dropped_unmatched > 0 {
        c.notes.push(format!(
            "{} unmatched packets of A past the first {} were not kept: losses are undercounted",
            c.dropped_unmatched, cfg.max_indexed_packets
        ));
    }
    if c.packets_a == 0 {
        return Err(MatchError::NoTcp { which: "A" });
    }
    Ok(summary::summarise(c, cfg))
}

fn stream_a(
    a: &mut dyn PacketSource,
    c: &mut Collected,
    cfg: MatchConfig,
) -> Result<(), MatchError> {
    while let Some(pkt) = next_or_stop(a, "A", &mut c.notes)? {
        let Ok(d) = decode(&pkt) else { continue };
        let Transport::Tcp(t) = d.transport else {
            continue;
        };
        c.packets_a += 1;
        c.span_a = (c.span_a.0.min(d.ts_ns), c.span_a.1.max(d.ts_ns));
        let (a_flow, a_dir) = c.flows_a.id(
            SocketAddr::new(d.src, t.src_port),
            SocketAddr::new(d.dst, t.dst_port),
            t.flags,
        );
        let id = id_sig(&d, &t);
        match c.index.take(&seq_sig(&t), id.as_ref()) {
            Some(b) => c.matched.push(Matched {
                a_flow,
                a_dir,
                b,
                a_ts: d.ts_ns,
                flags: t.flags,
            }),
            None if c.unmatched_a.len() < cfg.max_indexed_packets => {
                c.unmatched_a.push(Unmatched {
                    a_flow,
                    a_dir,
                    a_ts: d.ts_ns,
                    flags: t.flags,
                })
            }
            None => c.dropped_unmatched += 1,
        }
    }
    Ok(())
}

/// The next packet; a truncated or corrupt end keeps what was read (with a note) and ends
/// the capture, any other read error fails.
fn next_or_stop<'s>(
    src: &'s mut dyn PacketSource,
    which: &'static str,
    notes: &mut Vec<String>,
) -> Result<Option<crate::packet::RawPacket<'s>>, MatchError> {
    match src.next_packet() {
        Ok(p) => Ok(p),
        Err(e) if e.is_partial() => {
            notes.push(format!("capture {which}: {e}"));
            Ok(None)
        }
        Err(source) => Err(MatchError::Read { which, source }),
    }
}
