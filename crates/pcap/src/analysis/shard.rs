//! The two halves of a sharded pass, and how they are joined.
//!
//! A sharded pass ([`crate::shard`]) splits [`Analyzer::push`]: its reader keeps one
//! analyzer as the *front* (frame counts, skipped frames, every channel's bins) and each
//! worker one as a *shard* (the flows whose key hashes to it). In: the front's and the
//! shards' analyzers once every packet has gone through. Out: one analyzer holding what a
//! whole pass over the same packets holds, so that [`Analyzer::finish`] and the recorder read
//! it as they read a whole pass's.
//!
//! Three things make the joined analyzer the same as a whole pass's:
//!
//! - a shard numbers a new flow with the ordinal of its first packet (the frame number in the
//!   pass); ids of a whole pass count up in the order of first packets, so ranking the
//!   ordinals gives them back ([`Analyzer::merge`]);
//! - the sweep that retires quiet closed connections runs in every shard before the same
//!   packet as in a whole pass, at the same capture time, and it keeps the same bins: those
//!   near a bin at or above the burst threshold as of that packet, which every shard lists in
//!   its [`HotBins`] from the front's lists of the bins that became hot since the last sweep;
//! - each kept Nagle stall carries the ordinal of its packet, so the first
//!   [`MAX_STALLS_KEPT`] of all shards are those of the whole pass.

use std::net::IpAddr;

use tailhunt_model::evidence::capture::{Dir, NagleStall};

use prost::encoding::{decode_varint, encode_varint};

use super::{Analyzer, Flow, MAX_STALLS_KEPT};
use crate::decode::Decoded;
use crate::spill::{Spill, Spilled};

/// A bin that reached the burst threshold: its channel and index.
pub(crate) type NewHot = ((Dir, IpAddr), i64);

impl Analyzer {
    /// The front's part of [`Analyzer::push`]: counts the frame and adds it to its channels'
    /// bins (noting those it takes to the burst threshold). Returns whether a sweep is due
    /// before it.
    pub(crate) fn push_front(&mut self, p: &Decoded<'_>) -> bool {
        self.count_frame(p.ts_ns, p.wire_len);
        let due = self.sweep_due(p.ts_ns);
        self.add_to_channels(p, self.bin_of(p.ts_ns));
        due
    }

    /// A sharded pass's front: an analyzer that lists the bins that become hot for its
    /// workers ([`Analyzer::take_new_hot`]).
    pub(crate) fn front(cfg: super::AnalysisConfig) -> Result<Analyzer, super::ConfigError> {
        let mut an = Analyzer::new(cfg)?;
        an.hot_new = Some(Vec::new());
        Ok(an)
    }

    /// The front's bins that reached the burst threshold since the last call (a few a
    /// sweep: handing the whole list on at every sweep copied a list that grows with a
    /// saturated link's capture).
    pub(crate) fn take_new_hot(&mut self) -> Vec<NewHot> {
        self.hot_new
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// A shard's sweep before packet `ordinal`, at capture time `now`, once it has listed
    /// `new_hot`, the bins that reached the threshold since the last sweep.
    pub(crate) fn sweep_shard(&mut self, ordinal: u64, now: i64, new_hot: &[NewHot]) {
        self.ordinal = ordinal;
        self.retired_last.clear();
        for &(channel, index) in new_hot {
            self.hot_bins.insert(channel, index);
        }
        self.compact_closed(now);
    }

    /// A shard's part of [`Analyzer::push`] for packet `ordinal`: a new flow is numbered
    /// with it.
    pub(crate) fn push_shard(&mut self, ordinal: u64, p: &Decoded<'_>) {
        self.ordinal = ordinal;
        self.retired_last.clear();
        self.next_id = ordinal as usize;
        self.push_flow(p, self.bin_of(p.ts_ns));
        if self.next_id > ordinal as usize {
            self.created.push(ordinal);
        }
    }

    /// A shard's analyzer: like a whole pass's, but a flow that finishes is handed out
    /// with its ordinal for an id and none is chosen for the report (the reader's side
    /// knows every flow's id and chooses).
    /// It writes to `front`'s scratch file, so that what it spilled is read back after the
    /// join.
    pub(crate) fn shard(
        cfg: super::AnalysisConfig,
        front: &Analyzer,
    ) -> Result<Analyzer, super::ConfigError> {
        let mut an = Analyzer::new(cfg)?;
        an.retired.kept = None;
        an.spill = front.spill.clone();
        Ok(an)
    }

    /// Joins a front and its shards into the analyzer of a whole pass: flows renumbered in
    /// order of first packet, the shards' retired flows, delays and stalls together. `ids`
    /// holds every flow's first ordinal (the flows handed out as they finished included), in
    /// order; `kept` is the report's choice of the flows handed out, when they were.
    pub(crate) fn merge(
        mut front: Analyzer,
        shards: Vec<Analyzer>,
        ids: &FlowIds,
        kept: Option<crate::retired::KeptFlows>,
    ) -> Analyzer {
        let new = |old: usize| ids.id(old as u64);
        front.retired.kept = kept;
        let mut stalls: Vec<(u64, NagleStall)> = Vec::new();
        let mut points = Vec::new();
        for mut s in shards {
            for (id, mut f) in s.flows.drain() {
                if let Flow::Tcp(t) = &mut f {
                    t.renumber(new(id));
                }
                front.flows.insert(new(id), f);
            }
            // Only live flows' keys: a retired flow's grave ends with the pass.
            let live = &front.flows;
            front.index.extend(
                s.index
                    .drain()
                    .map(|(k, id)| (k, new(id)))
                    .filter(|(_, id)| live.contains_key(id)),
            );
            for (why, n) in std::mem::take(&mut s.skipped) {
                *front.skipped.entry(why).or_default() += n;
            }
            front
                .delays
                .extend(s.delays.drain().map(|(id, d)| (new(id), d)));
            for mut f in s.retired.summaries.drain(..) {
                f.id = new(f.id);
                front.retired.summaries.push(f);
            }
            for mut b in s.retired.bins.drain(..) {
                b.id = new(b.id);
                front.retired.bins.push(b);
            }
            front.retired.delays.append(&mut s.retired.delays);
            front.retired.tcp_stored += s.retired.tcp_stored;
            for (host, (passed, failed)) in std::mem::take(&mut s.retired.clock_hosts) {
                let h = front.retired.clock_hosts.entry(host).or_default();
                h.0 |= passed;
                h.1 |= failed;
            }
            for (host, d) in std::mem::take(&mut s.retired.host_delays) {
                let h = front.retired.host_delays.entry(host).or_default();
                h.passed.append(d.passed, &front.spill);
                h.short.append(d.short, &front.spill);
            }
            points.extend(s.retired.points.drain(..).map(|(b, id, p)| (b, new(id), p)));
            for (at, mut stall) in s.stall_at.iter().zip(s.stalls.drain(..)) {
                stall.flow = new(stall.flow);
                stalls.push((*at, stall));
            }
        }
        for (bytes, id, p) in points {
            front.retired.offer_points(bytes, id, p);
        }
        // Stable: a packet's stalls stay in the order its flow found them.
        stalls.sort_by_key(|(at, _)| *at);
        front.stalls = stalls
            .into_iter()
            .take(MAX_STALLS_KEPT)
            .map(|(_, s)| s)
            .collect();
        front.next_id = ids.len();
        front
    }
}

/// The first ordinals of a sharded pass's flows, in order: a flow's id is its rank. When
/// flows are handed over as they finish ([`super::AnalysisConfig::store_flows`]), all but the
/// newest [`IDS_BLOCK`] are packed (varints of the steps, a byte or two a flow) into the
/// pass's scratch file a block at a time, with the block's first ordinal left in memory (a
/// few dozen bytes per block): a list of 8 bytes a flow grew with the connections, 0.8 MB at
/// bench/pcap.sh's 100,000 and 80 MB at ten million. A flow's id is then looked up once, as
/// it finishes (mostly among the newest), and at the end for the few flows still held. A pass
/// that keeps every flow's summary instead looks up each at the end, so its list stays in
/// memory (8 bytes beside a summary of a kilobyte).
#[derive(Debug)]
pub(crate) struct FlowIds {
    blocks: Vec<(u64, Spilled)>,
    tail: Vec<u64>,
    spill: std::sync::Arc<Spill>,
    /// Whether to pack at all.
    pack: bool,
    /// The block read last, by index (the lookups at the end come in no order).
    last: std::cell::RefCell<Option<(usize, Vec<u64>)>>,
}

/// Ordinals per packed block of [`FlowIds`].
const IDS_BLOCK: usize = 4096;

impl Analyzer {
    /// An empty list of flow ids that packs into this analyzer's scratch file.
    pub(crate) fn flow_ids(&self) -> FlowIds {
        FlowIds {
            blocks: Vec::new(),
            tail: Vec::new(),
            spill: self.spill.clone(),
            pack: self.cfg.store_flows,
            last: std::cell::RefCell::new(None),
        }
    }
}

impl FlowIds {
    /// Adds the flows started in the next chunk of frames (ordinals above all so far, in any
    /// order).
    pub(crate) fn add(&mut self, created: &mut Vec<u64>) {
        created.sort_unstable();
        self.tail.append(created);
        while self.pack && self.tail.len() >= 2 * IDS_BLOCK {
            let mut data = Vec::with_capacity(IDS_BLOCK * 2);
            let first = self.tail[0];
            let mut last = first;
            for &o in &self.tail[..IDS_BLOCK] {
                encode_varint(o - last, &mut data);
                last = o;
            }
            self.blocks.push((first, self.spill.put(&data)));
            self.tail.drain(..IDS_BLOCK);
        }
    }

    /// The id of the flow first seen at `ordinal` (where it would be among them if none was).
    pub(crate) fn id(&self, ordinal: u64) -> usize {
        let packed = self.blocks.len() * IDS_BLOCK;
        if self.blocks.is_empty() || self.tail.first().is_some_and(|&t| ordinal >= t) {
            return packed + rank(&self.tail, ordinal);
        }
        let k = self.blocks.partition_point(|(first, _)| *first <= ordinal);
        let Some(k) = k.checked_sub(1) else {
            return 0;
        };
        let mut last = self.last.borrow_mut();
        if last.as_ref().is_none_or(|(at, _)| *at != k) {
            let bytes = self.spill.get(&self.blocks[k].1);
            let mut data: &[u8] = &bytes;
            let mut at = self.blocks[k].0;
            let mut ordinals = Vec::with_capacity(IDS_BLOCK);
            // Written by `add`: every varint is whole.
            while !data.is_empty() {
                at += decode_varint(&mut data).unwrap_or(0);
                ordinals.push(at);
            }
            *last = Some((k, ordinals));
        }
        let ordinals = last.as_ref().map_or(&[][..], |(_, o)| o.as_slice());
        k * IDS_BLOCK + rank(ordinals, ordinal)
    }

    /// Flows so far.
    pub(crate) fn len(&self) -> usize {
        self.blocks.len() * IDS_BLOCK + self.tail.len()
    }
}

/// Where `ordinal` is (or would be) in `sorted`.
fn rank(sorted: &[u64], ordinal: u64) -> usize {
    match sorted.binary_search(&ordinal) {
        Ok(i) | Err(i) => i,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Packed into the scratch file or not, a flow's id is its rank among the ordinals
        /// added, and an ordinal not added gets the place it would have.
        #[test]
        fn flow_ids_are_ranks(
            steps in proptest::collection::vec(1u64..2000, 1..30_000),
            chunk in 1usize..5000,
            probes in proptest::collection::vec(0usize..40_000, 1..50),
        ) {
            let cfg = AnalysisConfig { store_flows: true, ..AnalysisConfig::default() };
            let an = Analyzer::new(cfg).unwrap();
            let mut ids = an.flow_ids();
            let mut all = Vec::new();
            let mut at = 0u64;
            for s in &steps {
                at += s;
                all.push(at);
            }
            for c in all.chunks(chunk) {
                let mut created: Vec<u64> = c.iter().rev().copied().collect();
                ids.add(&mut created);
            }
            proptest::prop_assert_eq!(ids.len(), all.len());
            proptest::prop_assert!(all.len() < 2 * IDS_BLOCK || !ids.blocks.is_empty());
            for p in probes {
                let i = p % all.len();
                proptest::prop_assert_eq!(ids.id(all[i]), i);
                // Between two ordinals, before the first, after the last.
                let before = if i > 0 && all[i - 1] == all[i] - 1 { i - 1 } else { i };
                proptest::prop_assert_eq!(ids.id(all[i] - 1), before);
                proptest::prop_assert_eq!(ids.id(all[i] + 1), i + 1);
            }
            proptest::prop_assert_eq!(ids.id(0), 0);
        }
    }
    use crate::analysis::AnalysisConfig;
    use crate::decode::{decode, flags};
    use crate::packet::{LinkType, RawPacket};

    /// An IPv4+TCP frame (raw IP) with `len` payload bytes.
    fn tcp(src: u8, dst: u8, sport: u16, dport: u16, seq: u32, fl: u8, len: usize) -> Vec<u8> {
        let total = 40 + len;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 0, 0, src]);
        p[16..20].copy_from_slice(&[10, 0, 0, dst]);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = fl;
        p[34..36].copy_from_slice(&1000u16.to_be_bytes());
        p
    }

    /// Connections that open in an order their shards do not keep, each a request and an
    /// answer, some ended and their ports reused.
    fn frames() -> Vec<(i64, Vec<u8>)> {
        let mut out = Vec::new();
        for i in 0..300u16 {
            let t = i64::from(i) * 3_000_000;
            let (c, port) = (1 + (i % 5) as u8, 20_000 + i % 40);
            out.push((t, tcp(c, 9, port, 80, 0, flags::SYN, 0)));
            out.push((t + 10, tcp(9, c, 80, port, 0, flags::SYN | flags::ACK, 0)));
            out.push((t + 20, tcp(c, 9, port, 80, 1, flags::ACK | flags::PSH, 50)));
            out.push((t + 90, tcp(9, c, 80, port, 1, flags::ACK, 900)));
            if i % 3 == 0 {
                out.push((t + 200, tcp(c, 9, port, 80, 51, flags::ACK | flags::FIN, 0)));
            }
        }
        out.sort_by_key(|(t, _)| *t);
        out
    }

    /// Joined shards hold what one analyzer holds: the same report, flow ids in order of
    /// first packet, whatever shard each flow was in.
    #[test]
    fn merged_shards_report_what_one_analyzer_reports() {
        let cfg = AnalysisConfig::default();
        let mut whole = Analyzer::new(cfg).unwrap();
        let mut front = Analyzer::front(cfg).unwrap();
        let mut shards: Vec<Analyzer> = (0..3)
            .map(|_| Analyzer::shard(cfg, &front).unwrap())
            .collect();
        let mut sweeps = 0;
        for (t, data) in frames() {
            let raw = RawPacket {
                ts_ns: t,
                iface: 0,
                link: LinkType::RawIp,
                wire_len: data.len() as u32,
                data: &data,
            };
            let d = decode(&raw).unwrap();
            whole.push(&d);
            let ordinal = front.packets();
            if front.push_front(&d) {
                sweeps += 1;
                let hot = front.take_new_hot();
                for s in &mut shards {
                    s.sweep_shard(ordinal, d.ts_ns, &hot);
                }
            }
            let w = crate::shard::worker_of(&d, shards.len()).unwrap();
            shards[w].push_shard(ordinal, &d);
        }
        assert!(
            shards.iter().all(|s| s.open_flows() > 0),
            "every shard has flows"
        );
        assert!(sweeps > 0, "a sweep ran");
        let mut ids = front.flow_ids();
        let mut created: Vec<u64> = shards
            .iter_mut()
            .flat_map(|s| s.created.drain(..))
            .collect();
        ids.add(&mut created);
        let mut joined = Analyzer::merge(front, shards, &ids, None);
        let (a, b) = (whole.finish(), joined.finish());
        assert!(a.flows.len() > 100, "{} flows", a.flows.len());
        assert!(b.flows.iter().enumerate().all(|(i, f)| f.id == i));
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
    }
}
