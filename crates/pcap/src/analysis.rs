//! The one pass: decoded packets in, flows, channels, bursts and events out.
//!
//! [`Analyzer::push`] takes each decoded packet once: it adds the frame to the bins of its two
//! channels (to its destination host, from its source host), finds or creates its flow (a new
//! SYN on a closed connection's ports starts a new flow: port reuse) and advances the flow's
//! state. Events (RTT samples, exchanges, Nagle stalls) collect in [`Analyzer::events`] for the
//! caller to drain into series after each packet; a connection that closed and went quiet
//! is retired (its summary to [`Analyzer::finished`] when flows are stored as they finish).
//! [`Analyzer::finish`] ends every flow and builds the
//! [`CaptureReport`](tailhunt_model::evidence::capture::CaptureReport) (`end`);
//! [`Analyzer::bystander_delays`] then gives the upstream queueing delay of the packets that
//! were no burst's source, from their TCP timestamps (`delays`). A sharded pass's halves and
//! their join are in `shard`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use tailhunt_model::evidence::capture::{
    Dir, FlowName, FlowSummary, NagleStall, Proto, SideSummary, Traffic,
};

use crate::bins::{bin_capacity_bytes, Bin, PackedBins, SparseBins};
use crate::decode::{Decoded, Skip, Transport};
use crate::delay::DelayTrack;
use crate::flowkey::FlowKey;
use crate::fxhash::FxHashMap;
use crate::retired::{HotBins, KeptBins, Retired, BURST_REACH_BINS};
use crate::spill::Spill;
use crate::tcp::{FlowEvents, TcpFlow, WindowPoint, WindowPoints};

mod delays;
pub use delays::queue_delay_sample;
mod end;
mod shard;

pub(crate) use shard::{FlowIds, NewHot};

/// Packets between sweeps that free closed connections' live state, at most.
const COMPACT_EVERY: u64 = 1 << 16;
/// A sweep is also due once this much capture time has passed since the last one, after at
/// least [`SWEEP_MIN_FRAMES`] packets: at 10,000 new connections a second, 65,536 packets
/// are most of a second, so the connections waiting for the next sweep had outnumbered those
/// held for their quiet second; and with a sweep every 100 ms, a cleanly closed connection
/// waited up to 100 ms past its own quiet time (then 100 ms; bench/pcap.sh's
/// 100,000-connection capture: 2.8 MiB more peak memory than with 10 ms, for no less CPU).
const SWEEP_AFTER_NS: i64 = 10_000_000;
/// Packets between sweeps, at least (a sweep visits every flow held).
pub(crate) const SWEEP_MIN_FRAMES: u64 = 1 << 10;

/// Why a frame counted in the channels' bins is in no flow: a segment of a TCP connection
/// retired before it came (see [`crate::tcp::QUIET_AFTER_CLEAN_CLOSE_NS`]).
pub const AFTER_CLOSE: &str = "after-close";

/// Nagle stalls kept in the report (all are counted per flow).
const MAX_STALLS_KEPT: usize = 1000;

/// Settings of the analysis.
#[derive(Debug, Clone, Copy)]
pub struct AnalysisConfig {
    /// Bin width, ns (default 1 ms).
    pub bin_ns: i64,
    /// Link rate, bits per second, when known (`--link-rate`).
    pub link_rate_bps: Option<u64>,
    /// Share of the link rate a bin must reach to be part of a burst.
    pub burst_threshold: f64,
    /// Keep every flow's bins to the end (for `--bins-csv`); otherwise a closed connection
    /// keeps only the bins a burst could still claim ([`crate::retired`]).
    pub keep_flow_bins: bool,
    /// Hand every flow's summary to the caller as it finishes ([`Analyzer::finished`]) for
    /// storing as a row, and keep in the report only the flows it needs
    /// ([`crate::retired::KeptFlows`]): memory then follows the connections open at once,
    /// not all the capture's. Otherwise the report holds every flow.
    pub store_flows: bool,
    /// With `store_flows`, the report keeps at least this many of the largest TCP flows
    /// (what is printed).
    pub largest_flows: usize,
}

/// An [`AnalysisConfig`] the analysis cannot run with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The bin width is outside 10 µs ..= 1 s (0 would divide by zero; finer bins than the
    /// capture clock say nothing; coarser ones hide the bursts).
    #[error("bin width {0} ns is out of range: give 10 µs to 1 s (e.g. 1 ms)")]
    BinWidth(i64),
    /// The burst threshold is not a share of the link rate.
    #[error("burst threshold {0} must be a share of the link rate in (0, 1], e.g. 0.8")]
    BurstThreshold(f64),
    /// A link rate below 1 kbit/s.
    #[error("link rate {0} bit/s is below 1 kbit/s: give the interface's rate")]
    LinkRate(u64),
}

impl AnalysisConfig {
    /// Bin widths the analysis accepts, ns.
    pub const BIN_RANGE_NS: std::ops::RangeInclusive<i64> = 10_000..=1_000_000_000;

    /// Bytes a bin must hold to be part of a burst (none without a link rate).
    fn threshold_bytes(&self) -> Option<f64> {
        self.link_rate_bps
            .map(|r| bin_capacity_bytes(r, self.bin_ns) * self.burst_threshold)
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !Self::BIN_RANGE_NS.contains(&self.bin_ns) {
            return Err(ConfigError::BinWidth(self.bin_ns));
        }
        if !(self.burst_threshold > 0.0 && self.burst_threshold <= 1.0) {
            return Err(ConfigError::BurstThreshold(self.burst_threshold));
        }
        match self.link_rate_bps {
            Some(r) if r < 1000 => Err(ConfigError::LinkRate(r)),
            _ => Ok(()),
        }
    }
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            bin_ns: 1_000_000,
            link_rate_bps: None,
            burst_threshold: 0.8,
            keep_flow_bins: false,
            store_flows: false,
            largest_flows: 0,
        }
    }
}

/// A UDP flow: counts and bins only.
#[derive(Debug)]
struct UdpFlow {
    key: FlowKey,
    first_ns: i64,
    last_ns: i64,
    packets: [u64; 2],
    ip_bytes: [u64; 2],
    payload: [u64; 2],
    bins: [SparseBins; 2],
}

#[derive(Debug)]
enum Flow {
    Tcp(Box<TcpFlow>),
    Udp(UdpFlow),
}

impl Flow {
    fn key(&self) -> &FlowKey {
        match self {
            Flow::Tcp(f) => &f.key,
            Flow::Udp(f) => &f.key,
        }
    }

    fn bins(&self) -> &[SparseBins; 2] {
        match self {
            Flow::Tcp(f) => &f.bins,
            Flow::Udp(f) => &f.bins,
        }
    }

    fn bins_mut(&mut self) -> &mut [SparseBins; 2] {
        match self {
            Flow::Tcp(f) => &mut f.bins,
            Flow::Udp(f) => &mut f.bins,
        }
    }

    /// Client side: the TCP opener, or for UDP the side with the higher port.
    fn client(&self) -> usize {
        match self {
            Flow::Tcp(f) => f.client(),
            Flow::Udp(f) => usize::from(f.key.a.port() <= f.key.b.port()),
        }
    }

    fn name(&self) -> FlowName {
        self.key().name(self.client())
    }
}

/// The streaming analysis.
pub struct Analyzer {
    cfg: AnalysisConfig,
    packets: u64,
    wire_bytes: u64,
    first_ns: Option<i64>,
    last_ns: i64,
    out_of_order: u64,
    skipped: BTreeMap<String, u64>,
    /// Each channel's place in `channel_bins`.
    channels: FxHashMap<(Dir, IpAddr), usize>,
    /// Each channel's bins, the older ones packed ([`PackedBins`]) into `spill`.
    channel_bins: Vec<PackedBins>,
    /// What the pass keeps to its end but no longer changes ([`crate::spill`]): the channels'
    /// older bins, the bystanders' delays per host, the TCP directions' older timestamp bins
    /// and time-sequence points. A sharded pass's threads share it.
    spill: std::sync::Arc<Spill>,
    /// The channel of each direction (to, from) that the last frame went to: consecutive
    /// frames mostly share their hosts, so most find theirs without hashing (the two lookups
    /// were about 4% of a pass over a 1 GB capture).
    last_channel: [Option<(IpAddr, usize)>; 2],
    /// The channels' bins at or above the burst threshold so far (with a link rate, unless
    /// every flow keeps its bins): what a retiring connection's bins are kept near.
    hot_bins: HotBins,
    /// The reader of a sharded pass: the bins that became hot since it last handed them to
    /// its workers (`None` elsewhere).
    hot_new: Option<Vec<((Dir, IpAddr), i64)>>,
    /// Bytes that take a bin to the burst threshold, when `hot_bins` is kept: none without a
    /// link rate, or when every flow keeps all its bins (fixed for the pass; read per frame).
    hot_threshold: Option<f64>,
    /// The flows not yet retired, by id (ids count up in order of first packet).
    flows: FxHashMap<usize, Flow>,
    /// The live flows' bins before this index are decided ([`Analyzer::prune_live_bins`]).
    pruned_until: i64,
    next_id: usize,
    /// Each live flow's id by key.
    index: FxHashMap<FlowKey, usize>,
    /// The keys and flow ids of the last two connections that had TCP segments, the latest
    /// first, each as in `index`: a capture's segments mostly follow one of them (transfers'
    /// trains and their ACKs: 94% of the segments of bench/pcap.sh's 1 GB mix, 84% with the
    /// last one alone), and comparing keys is cheaper than hashing one and probing the index
    /// (the one-thread command took 2-3% less CPU). Emptied when a key leaves the index.
    last_tcp: [Option<(FlowKey, usize)>; 2],
    /// The retired TCP flows' keys, for a second after their last packet: [`grave_of`] of the
    /// key -> until. A packet on such a key before `until` is late for a connection already
    /// summarised: it is counted (`after-close`), not made into a new flow, unless it opens a
    /// new connection (a SYN). By a 64-bit hash rather than the key: 16 bytes a grave instead
    /// of about 90 in the index and a list, and bench/pcap.sh's 100,000-connection capture
    /// holds ten thousand graves at a time (3.5 MiB of its 27 MiB peak heap). Two keys whose
    /// hashes collide would make a new flow's packets count as late, about one chance in
    /// 10^9 for ten thousand graves and a million new keys.
    graves: FxHashMap<u64, i64>,
    stalls: Vec<NagleStall>,
    /// Each live TCP flow's two directions' timestamps (by flow id).
    delays: FxHashMap<usize, [DelayTrack; 2]>,
    /// What is kept of the flows that closed and went quiet.
    retired: Retired,
    /// Last packet of the flows retired during the current packet (their final exchange
    /// events may still be waiting to be drained).
    retired_last: Vec<(usize, i64)>,
    /// Events of the packets pushed since the caller last drained them.
    pub events: FlowEvents,
    /// With [`AnalysisConfig::store_flows`]: the summaries of the flows finished since the
    /// caller last took them (it stores them as rows).
    pub finished: Vec<FlowSummary>,
    /// The ordinal (frame number in the pass) of the packet being analysed.
    ordinal: u64,
    /// The ordinal of the packet of each kept stall.
    stall_at: Vec<u64>,
    /// The frame count and capture time of the last sweep (the first frame's time before
    /// the first).
    last_sweep: (u64, Option<i64>),
    /// A shard of a sharded pass: the ordinals of the packets that started a flow since the
    /// caller last took them (its flows' ids).
    pub(crate) created: Vec<u64>,
}

impl Analyzer {
    /// A new analysis.
    pub fn new(cfg: AnalysisConfig) -> Result<Analyzer, ConfigError> {
        cfg.validate()?;
        Ok(Analyzer {
            cfg,
            packets: 0,
            wire_bytes: 0,
            first_ns: None,
            last_ns: i64::MIN,
            out_of_order: 0,
            skipped: BTreeMap::new(),
            channels: FxHashMap::default(),
            channel_bins: Vec::new(),
            spill: Default::default(),
            last_channel: [None; 2],
            hot_bins: HotBins::default(),
            hot_new: None,
            hot_threshold: if cfg.keep_flow_bins {
                None
            } else {
                cfg.threshold_bytes()
            },
            flows: FxHashMap::default(),
            pruned_until: i64::MIN,
            next_id: 0,
            index: FxHashMap::default(),
            last_tcp: [None, None],
            graves: FxHashMap::default(),
            stalls: Vec::new(),
            delays: FxHashMap::default(),
            retired: Retired {
                kept: cfg
                    .store_flows
                    .then(|| crate::retired::KeptFlows::new(cfg.largest_flows)),
                ..Retired::default()
            },
            retired_last: Vec::new(),
            events: FlowEvents::default(),
            finished: Vec::new(),
            ordinal: 0,
            stall_at: Vec::new(),
            created: Vec::new(),
            last_sweep: (0, None),
        })
    }

    /// Counts a frame that did not decode.
    pub fn skip(&mut self, ts_ns: i64, wire_len: u32, why: Skip) {
        self.count_frame(ts_ns, wire_len);
        *self.skipped.entry(why.name().to_string()).or_default() += 1;
    }

    fn count_frame(&mut self, ts: i64, wire_len: u32) {
        self.packets += 1;
        self.wire_bytes += wire_len as u64;
        self.first_ns.get_or_insert(ts);
        if ts < self.last_ns {
            self.out_of_order += 1;
        }
        self.last_ns = self.last_ns.max(ts);
    }

    /// Frames seen so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flows whose state is held whole: the open ones and those closed less than 20 ms (a
    /// second when they did not end cleanly) and one sweep ago; the others are retired
    /// ([`crate::retired`]).
    pub fn open_flows(&self) -> usize {
        self.flows.len()
    }

    /// Analyses one decoded frame.
    pub fn push(&mut self, p: &Decoded<'_>) {
        self.count_frame(p.ts_ns, p.wire_len);
        self.ordinal = self.packets - 1;
        self.retired_last.clear();
        if self.sweep_due(p.ts_ns) {
            self.compact_closed(p.ts_ns);
        }
        let bin = self.bin_of(p.ts_ns);
        self.add_to_channels(p, bin);
        self.push_flow(p, bin);
    }

    /// The index of the bin that holds capture time `ts`. A frame's bin is worked out once
    /// and handed to every step that bins it: a 64-bit division is the one costly
    /// instruction there, and each TCP segment was divided up to seven times (its channels,
    /// its flow, each sender's window point and the point before it).
    pub(crate) fn bin_of(&self, ts: i64) -> i64 {
        ts.div_euclid(self.cfg.bin_ns)
    }

    /// Whether the sweep that retires closed, quiet connections is due before the frame
    /// just counted, at capture time `ts`: every [`COMPACT_EVERY`] frames, or every
    /// [`SWEEP_MIN_FRAMES`] once [`SWEEP_AFTER_NS`] has passed since the last sweep.
    fn sweep_due(&mut self, ts: i64) -> bool {
        let since = self.packets - self.last_sweep.0;
        // The first frame starts the clock.
        let last_ns = *self.last_sweep.1.get_or_insert(ts);
        let due = since >= COMPACT_EVERY
            || (since >= SWEEP_MIN_FRAMES && ts.saturating_sub(last_ns) >= SWEEP_AFTER_NS);
        if due {
            self.last_sweep = (self.packets, Some(ts));
        }
        due
    }

    /// Adds the frame to the bins of its two channels, and notes a bin it takes to the burst
    /// threshold. `bin` is the frame's ([`Analyzer::bin_of`]).
    fn add_to_channels(&mut self, p: &Decoded<'_>, bin: i64) {
        let bin_ns = self.cfg.bin_ns;
        let bytes = p.wire_len as u64;
        let threshold = self.hot_threshold;
        for (side, ch) in [(Dir::To, p.dst), (Dir::From, p.src)]
            .into_iter()
            .enumerate()
        {
            let at = match self.last_channel[side] {
                Some((host, at)) if host == ch.1 => at,
                _ => {
                    let next = self.channel_bins.len();
                    let at = *self.channels.entry(ch).or_insert(next);
                    if at == next {
                        self.channel_bins.push(PackedBins::new(bin_ns));
                    }
                    self.last_channel[side] = Some((ch.1, at));
                    at
                }
            };
            let total = self.channel_bins[at].add(bin, bytes, p.ts_ns, &self.spill);
            if let Some(thr) = threshold {
                if self.hot_bins.note(ch, bin, total, bytes, thr) {
                    if let Some(new) = &mut self.hot_new {
                        new.push((ch, bin));
                    }
                }
            }
        }
    }

    /// The flow part of [`Analyzer::push`]: finds or creates the frame's flow (a new one
    /// takes `next_id`) and advances it.
    fn push_flow(&mut self, p: &Decoded<'_>, bin: i64) {
        let bytes = p.wire_len as u64;
        match &p.transport {
            Transport::Tcp(tcp) => {
                let src = SocketAddr::new(p.src, tcp.src_port);
                let dst = SocketAddr::new(p.dst, tcp.dst_port);
                let (key, side) = FlowKey::of(Proto::Tcp, src, dst);
                let Some(i) = self.tcp_flow(key, side, p.ts_ns, tcp) else {
                    *self.skipped.entry(AFTER_CLOSE.to_string()).or_default() += 1;
                    return;
                };
                let before = self.events.stalls.len();
                if let Some(Flow::Tcp(f)) = self.flows.get_mut(&i) {
                    f.on_packet(p, bin, side, tcp, &mut self.events);
                }
                let new = &self.events.stalls[before..];
                let room = MAX_STALLS_KEPT.saturating_sub(self.stalls.len());
                let kept = room.min(new.len());
                self.stalls.extend_from_slice(&new[..kept]);
                self.stall_at
                    .extend(std::iter::repeat_n(self.ordinal, kept));
                if let Some((tsval, _)) = tcp.options.timestamps {
                    self.delays.entry(i).or_default()[side].add(bin, p.ts_ns, tsval, &self.spill);
                }
            }
            Transport::Udp(udp) => {
                let src = SocketAddr::new(p.src, udp.src_port);
                let dst = SocketAddr::new(p.dst, udp.dst_port);
                let (key, side) = FlowKey::of(Proto::Udp, src, dst);
                let n = self.next_id;
                let i = *self.index.entry(key).or_insert(n);
                if i == n {
                    self.next_id += 1;
                    self.flows.insert(
                        i,
                        Flow::Udp(UdpFlow {
                            key,
                            first_ns: p.ts_ns,
                            last_ns: p.ts_ns,
                            packets: [0; 2],
                            ip_bytes: [0; 2],
                            payload: [0; 2],
                            bins: Default::default(),
                        }),
                    );
                }
                if let Some(Flow::Udp(f)) = self.flows.get_mut(&i) {
                    f.last_ns = f.last_ns.max(p.ts_ns);
                    f.packets[side] += 1;
                    f.ip_bytes[side] += p.ip_len as u64;
                    f.payload[side] += udp.payload_len as u64;
                    f.bins[side].add(bin, bytes, p.ts_ns);
                }
            }
            Transport::Other(_) => {}
        }
    }

    /// The id of the TCP flow the segment belongs to, a new one if it opens one; `None`
    /// for a late segment of a retired connection (see [`Analyzer::graves`]).
    fn tcp_flow(
        &mut self,
        key: FlowKey,
        side: usize,
        ts: i64,
        tcp: &crate::Tcp<'_>,
    ) -> Option<usize> {
        let known = match self.last_tcp {
            [Some((last, i)), _] if last == key => Some(i),
            [_, Some((last, i))] if last == key => Some(i),
            _ => self.index.get(&key).copied(),
        };
        debug_assert_eq!(known, self.index.get(&key).copied());
        if let Some(i) = known {
            self.note_last_tcp(key, i);
            match self.flows.get_mut(&i) {
                Some(Flow::Tcp(old)) if old.is_reuse(side, tcp) => {
                    old.reused = true;
                    old.finish(&mut self.events);
                }
                _ => return Some(i),
            }
        } else if !self.graves.is_empty() {
            let grave = grave_of(&key);
            if self.graves.contains_key(&grave) {
                // Retired: only a SYN opening a new connection on the same ports is news.
                if tcp.flags & crate::decode::flags::SYN == 0
                    || tcp.flags & crate::decode::flags::ACK != 0
                {
                    return None;
                }
                self.graves.remove(&grave);
            }
        }
        let i = self.next_id;
        self.next_id += 1;
        self.flows.insert(
            i,
            Flow::Tcp(Box::new(TcpFlow::new(key, i, ts, self.cfg.bin_ns))),
        );
        self.index.insert(key, i);
        self.note_last_tcp(key, i);
        Some(i)
    }

    /// Puts `key`'s flow `i` first in [`Analyzer::last_tcp`] (the two keys stay distinct).
    fn note_last_tcp(&mut self, key: FlowKey, i: usize) {
        let before = self.last_tcp[0].replace((key, i));
        if !matches!(before, Some((k, _)) if k == key) {
            self.last_tcp[1] = before;
        }
    }

    /// Forgets the retired connections' keys a second after their last packet, and retires
    /// the connections that closed and have been quiet long enough ([`TcpFlow::can_compact`]):
    /// their live state is freed and what the end of the pass needs is kept
    /// ([`crate::retired`]). The open ones' older bins and time-sequence points go too.
    fn compact_closed(&mut self, now: i64) {
        self.graves.retain(|_, until| *until > now);
        let mut done: Vec<usize> = self
            .flows
            .iter()
            .filter(|(_, f)| matches!(f, Flow::Tcp(t) if t.can_compact(now)))
            .map(|(&i, _)| i)
            .collect();
        done.sort_unstable();
        for i in done {
            self.retire(i);
        }
        self.prune_live_bins(now);
        // A long connection's time-sequence points go to the scratch file as they age.
        for f in self.flows.values_mut() {
            if let Flow::Tcp(t) = f {
                t.window_points
                    .iter_mut()
                    .for_each(|p| p.spill_old(&self.spill));
            }
        }
    }

    /// Drops the live flows' bins that no burst can claim, once they are old enough for their
    /// channels' bins to be final ([`PackedBins`]'s horizon, and [`BURST_REACH_BINS`] more):
    /// those not within reach of a bin at or above the threshold, or every old bin when there
    /// is no link rate (no bursts). A long flow's bins are otherwise kept from its first
    /// packet to the end of the pass: 40 bytes a millisecond each way, 168 MiB for one UDP
    /// stream of half an hour. Each sweep decides the bins since the last one's cut.
    fn prune_live_bins(&mut self, now: i64) {
        if self.cfg.keep_flow_bins {
            return;
        }
        let cut = now.div_euclid(self.cfg.bin_ns)
            - crate::bins::packed::HORIZON_NS / self.cfg.bin_ns.max(1)
            - BURST_REACH_BINS;
        let from = self.pruned_until;
        if cut <= from {
            return;
        }
        self.pruned_until = cut;
        // A shard's list is made from its reader's; a whole pass keeps its own.
        let hot = &self.hot_bins;
        let rated = self.hot_threshold.is_some();
        for f in self.flows.values_mut() {
            let key = *f.key();
            for (side, bins) in f.bins_mut().iter_mut().enumerate() {
                let (src, dst) = (key.endpoint(side).ip(), key.endpoint(1 - side).ip());
                let lists = [hot.of(&(Dir::To, dst)), hot.of(&(Dir::From, src))];
                bins.prune(from, cut, |index| {
                    rated && crate::retired::near_hot(index, lists)
                });
            }
        }
    }

    /// Ends flow `i` and keeps only its summary, the bins a burst could claim, its upstream
    /// delays and (for the largest) its window points.
    fn retire(&mut self, i: usize) {
        let Some(Flow::Tcp(mut t)) = self.flows.remove(&i) else {
            return;
        };
        t.finish(&mut self.events);
        self.retired_last.push((i, t.last_ns));
        // The key leads to the retired flow's grave until a second after its last packet, so
        // that late segments are recognised as such.
        if self.index.get(&t.key) == Some(&i) {
            self.index.remove(&t.key);
            self.last_tcp = [None, None];
            let until = t.last_ns + crate::tcp::QUIET_AFTER_CLOSE_NS;
            self.graves.insert(grave_of(&t.key), until);
        }
        let mut flow = Flow::Tcp(t);
        // Summarised before its live state is freed: compacting drops a small flow's window
        // points, and its mean window (what the window detector weighs) was then missing or
        // not depending on whether the flow retired before the end of the pass.
        let summary = summarise(i, &flow);
        if let Flow::Tcp(t) = &mut flow {
            t.compact();
        }
        // Formatted only for what keeps it (a direction that may be a burst's source).
        let name = || summary.name.to_string();
        let key = *flow.key();
        // A shard's list is made from its reader's; a whole pass keeps its own.
        let hot = &self.hot_bins;
        // Which directions kept bins a burst could claim: only those can be its sources.
        let mut may_be_source = [false; 2];
        for (side, bins) in flow.bins().iter().enumerate() {
            let kept = if self.cfg.keep_flow_bins {
                bins.clone()
            } else if self.hot_threshold.is_some() {
                let (src, dst) = (key.endpoint(side).ip(), key.endpoint(1 - side).ip());
                crate::retired::near_hot_bins(
                    bins,
                    [hot.of(&(Dir::To, dst)), hot.of(&(Dir::From, src))],
                )
            } else {
                continue;
            };
            if !kept.bins().is_empty() {
                may_be_source[side] = true;
                self.retired.bins.push(KeptBins {
                    id: i,
                    key,
                    name: name(),
                    side,
                    bins: kept,
                });
            }
        }
        self.retire_delays(i, &key, &name, may_be_source);
        if let Flow::Tcp(mut t) = flow {
            let bytes = t.halves[0].payload_bytes + t.halves[1].payload_bytes;
            let main = main_sender(&t);
            let points = std::mem::take(&mut t.window_points[main]);
            self.retired.offer_points(bytes, i, points);
        }
        self.finish_summary(summary);
    }

    /// Hands a finished flow's summary on: stored as a row (and kept if the report needs it)
    /// with [`AnalysisConfig::store_flows`], otherwise kept for the report.
    fn finish_summary(&mut self, summary: FlowSummary) {
        if !self.cfg.store_flows {
            self.retired.summaries.push(summary);
            return;
        }
        // A shard of a sharded pass has no selection: its reader's thread keeps it.
        if let Some(kept) = &mut self.retired.kept {
            kept.offer(&summary);
        }
        self.retired.tcp_stored += u64::from(summary.tcp.is_some());
        self.finished.push(summary);
    }

    /// The live flows in order of id.
    fn live_ids(&self) -> Vec<usize> {
        let mut ids: Vec<usize> = self.flows.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// The bins of a channel (for storing as a series), in time order, read back from the
    /// scratch file a block at a time.
    pub fn channel_bins(&self, dir: Dir, host: IpAddr) -> Option<impl Iterator<Item = Bin> + '_> {
        self.channels
            .get(&(dir, host))
            .map(|&at| self.channel_bins[at].iter(&self.spill))
    }

    /// Heap bytes the channels' bins hold (for tests of the memory bound).
    pub fn channel_heap_bytes(&self) -> usize {
        self.channel_bins.iter().map(PackedBins::heap_bytes).sum()
    }

    /// Bytes in the pass's scratch file (for tests of the memory bound).
    pub fn spilled_bytes(&self) -> u64 {
        self.spill.bytes()
    }

    /// Pieces of the scratch file that could not be read back so far.
    pub fn scratch_lost(&self) -> u64 {
        self.spill.lost()
    }

    /// Why the scratch file could not be created or written, when it could not.
    pub fn scratch_unwritable(&self) -> Option<String> {
        self.spill.unwritable()
    }

    /// The file system of the scratch file, when that one keeps its files in memory.
    pub fn scratch_in_memory(&self) -> Option<&'static str> {
        self.spill.in_memory()
    }

    /// Each flow direction's bins: `(flow id, sending endpoint, receiving endpoint, bins)`.
    /// A connection that closed and went quiet keeps only the bins a burst could claim,
    /// unless the analysis was set up with [`AnalysisConfig::keep_flow_bins`].
    pub fn flow_bins(&self) -> impl Iterator<Item = (usize, SocketAddr, SocketAddr, &SparseBins)> {
        self.flow_directions()
            .into_iter()
            .map(|(i, _, k, side, bins)| (i, k.endpoint(side), k.endpoint(1 - side), bins))
    }

    /// The time-sequence points (sequence, ACK, bytes in flight, window) of a TCP flow's main
    /// sender, at most one per bin (a retired flow keeps them only when it is among the
    /// largest).
    pub fn window_points(&self, flow: usize) -> Option<Points<'_>> {
        let points = match self.flows.get(&flow) {
            Some(Flow::Tcp(f)) => Some(&f.window_points[main_sender(f)]),
            Some(Flow::Udp(_)) => None,
            None => self.retired.points(flow),
        }?;
        Some(Points {
            points,
            spill: &self.spill,
        })
    }

    /// Last packet of flow `i` (epoch ns).
    pub fn flow_last_ns(&self, i: usize) -> i64 {
        match self.flows.get(&i) {
            Some(Flow::Tcp(f)) => f.last_ns,
            Some(Flow::Udp(f)) => f.last_ns,
            None => self
                .retired_last
                .iter()
                .find(|(id, _)| *id == i)
                .map_or(0, |(_, t)| *t),
        }
    }
}

/// A flow's time-sequence points as [`Analyzer::window_points`] gives them: the older ones are
/// read back from the pass's scratch file as they are iterated.
#[derive(Clone, Copy)]
pub struct Points<'a> {
    points: &'a WindowPoints,
    spill: &'a Spill,
}

impl<'a> Points<'a> {
    /// Points held.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Every point, in order.
    pub fn iter(&self) -> impl Iterator<Item = WindowPoint> + 'a {
        self.points.iter(self.spill)
    }

    /// Every point, in order, at once.
    pub fn to_vec(&self) -> Vec<WindowPoint> {
        self.iter().collect()
    }
}

/// A retired flow's key as [`Analyzer::graves`] holds it: SipHash with fixed keys (well
/// mixed, unlike the index's FxHash, and the same in every run).
fn grave_of(key: &FlowKey) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(key)
}

/// The side of a TCP flow that sent the most payload (the server's on a tie).
fn main_sender(f: &TcpFlow) -> usize {
    let c = f.client();
    if f.halves[1 - c].payload_bytes >= f.halves[c].payload_bytes {
        1 - c
    } else {
        c
    }
}

fn summarise(id: usize, f: &Flow) -> FlowSummary {
    let name = f.name();
    let c = f.client();
    match f {
        Flow::Tcp(t) => {
            let tcp = t.summary();
            let traffic = |s: &SideSummary| Traffic {
                packets: s.packets,
                ip_bytes: s.ip_bytes,
                payload_bytes: s.payload_bytes,
            };
            FlowSummary {
                id,
                name,
                first_ns: t.first_ns,
                last_ns: t.last_ns,
                client_to_server: traffic(&tcp.client),
                server_to_client: traffic(&tcp.server),
                tcp: Some(tcp),
            }
        }
        Flow::Udp(u) => {
            let traffic = |s: usize| Traffic {
                packets: u.packets[s],
                ip_bytes: u.ip_bytes[s],
                payload_bytes: u.payload[s],
            };
            FlowSummary {
                id,
                name,
                first_ns: u.first_ns,
                last_ns: u.last_ns,
                client_to_server: traffic(c),
                server_to_client: traffic(1 - c),
                tcp: None,
            }
        }
    }
}
