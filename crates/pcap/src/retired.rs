//! What is left of a connection once it has closed and gone quiet.
//!
//! In: a finished flow's summary, its bins per direction, its TCP timestamp tracks and window
//! points, handed over by [`Analyzer`](crate::analysis::Analyzer) when the flow retires. Out:
//! only what the end of the pass still reads from it: the [`FlowSummary`] for the report; the
//! bins a burst could still claim (those within [`BURST_REACH_BINS`] of a bin at or above the
//! burst threshold in one of the direction's two channels; none without a link rate); each
//! direction's upstream delays and clock check, for the bystanders' queueing delay; and the
//! window points of the [`MAX_KEPT_POINTS`] largest retired flows (only the largest flows'
//! time-sequence series are stored). The connection's live state (segments in flight, TSvals,
//! ACK replay, most bins) is freed: memory follows the connections open at once.

use std::net::{IpAddr, SocketAddr};

use tailhunt_model::evidence::capture::{CaptureReport, Dir, FlowSummary};

use crate::bins::SparseBins;
use crate::delay::ClockCheck;
use crate::flowkey::FlowKey;
use crate::tcp::WindowPoints;

/// How far (bins) from a bin at or above the threshold a burst episode can reach: gaps of
/// `MAX_GAP_BINS` (2) are bridged and the partial edge bin is looked for up to 3 bins out
/// (see `burst`), so a bin further than 3 from every bin above the threshold is in no episode.
pub const BURST_REACH_BINS: i64 = 3;

/// Retired flows whose window points are kept (the recorder stores the time-sequence series
/// of this many of the largest flows, live or retired).
pub const MAX_KEPT_POINTS: usize = crate::record::MAX_WINDOW_SERIES;

/// A retired flow direction's bins that a burst could still claim.
#[derive(Debug)]
pub struct KeptBins {
    /// Flow id.
    pub id: usize,
    /// Its key.
    pub key: FlowKey,
    /// The flow's display name.
    pub name: String,
    /// Sending side of the key.
    pub side: usize,
    /// The bins kept.
    pub bins: SparseBins,
}

/// A retired flow direction's upstream delays.
#[derive(Debug)]
pub struct KeptDelays {
    /// The flow's display name.
    pub name: String,
    /// The sending endpoint.
    pub sender: SocketAddr,
    /// Its clock check.
    pub check: ClockCheck,
    /// `(arrival ns, delay ns)` per bin, in time order (empty when the check failed: such a
    /// direction is never used, it only marks its host).
    pub delays: Vec<(i64, i64)>,
}

/// The flows a report keeps when every flow is stored as a row as it finishes
/// ([`crate::analysis::AnalysisConfig::store_flows`]): the first
/// [`CaptureReport::FIRST_FLOWS`], every flow a detector may name, and the `largest` largest
/// TCP flows of the rest. Which flows are kept depends on the flows alone, not on the order
/// they finish in (so a sharded pass keeps the same).
#[derive(Debug, Default)]
pub struct KeptFlows {
    /// The first flows and the evidence.
    named: Vec<FlowSummary>,
    /// The largest other TCP flows, largest first (ties: lower id first).
    largest: Vec<FlowSummary>,
    /// How many `largest` holds at most.
    cap: usize,
}

impl KeptFlows {
    /// Keeps at least the `largest` largest TCP flows.
    pub fn new(largest: usize) -> KeptFlows {
        KeptFlows {
            named: Vec::new(),
            largest: Vec::new(),
            cap: largest.max(CaptureReport::LARGEST_FLOWS),
        }
    }

    /// Keeps a copy of `f` if the report needs it.
    pub fn offer(&mut self, f: &FlowSummary) {
        if f.id < CaptureReport::FIRST_FLOWS || f.is_evidence() {
            if self.named.capacity() == 0 {
                // Room for the largest too, so that `into_flows` adds them in place (a second
                // list of about 1 kB a flow would be the end of a many-connection pass's
                // peak).
                self.named
                    .reserve_exact(CaptureReport::FIRST_FLOWS + self.cap);
            }
            self.named.push(f.clone());
            return;
        }
        if f.tcp.is_none() {
            return;
        }
        let rank = |f: &FlowSummary| (std::cmp::Reverse(f.payload_bytes()), f.id);
        let at = self.largest.partition_point(|k| rank(k) < rank(f));
        if at < self.cap {
            self.largest.insert(at, f.clone());
            self.largest.truncate(self.cap);
        }
    }

    /// The kept flows in order of id.
    pub fn into_flows(self) -> Vec<FlowSummary> {
        let mut flows = self.named;
        flows.extend(self.largest);
        // Ids are unique, so the unstable sort orders as the stable one would, without the
        // stable sort's scratch copy of the list.
        flows.sort_unstable_by_key(|f| f.id);
        flows
    }
}

/// A host's retired directions' upstream delays, `(arrival ns, delay ns)` per direction and
/// bin, for the directions that were no burst's source; packed (about 6 bytes a pair, not 16)
/// into the pass's scratch file: a many-connection capture's hosts hold one pair per bin of
/// every connection they sent.
#[derive(Debug, Default)]
pub struct HostDelays {
    /// Of directions whose clock check passed.
    pub passed: crate::pack::SpilledPairs,
    /// Of directions too short to check (used when the host vouches for them).
    pub short: crate::pack::SpilledPairs,
}

/// Everything kept of the retired flows.
#[derive(Debug, Default)]
pub struct Retired {
    /// Their summaries, in order of retirement (none when they are stored as they retire:
    /// then `kept` holds those the report needs).
    pub summaries: Vec<FlowSummary>,
    /// The flows the report keeps, when every flow is stored as it finishes.
    pub kept: Option<KeptFlows>,
    /// TCP flows among those stored as they retired.
    pub tcp_stored: u64,
    /// Bins near bins above the burst threshold.
    pub bins: Vec<KeptBins>,
    /// Upstream delays per direction with TCP timestamps (but those whose clock check
    /// failed).
    pub delays: Vec<KeptDelays>,
    /// Per host: whether a retired direction it sent passed the clock check, and whether one
    /// failed (a failed direction is kept only as this mark).
    pub clock_hosts: std::collections::BTreeMap<IpAddr, (bool, bool)>,
    /// Per host: the delays of its retired directions that no burst can claim.
    pub host_delays: std::collections::BTreeMap<IpAddr, HostDelays>,
    /// The window points of the largest retired flows: `(payload bytes, id, points)`, largest
    /// first (ties: lower id first, as the recorder picks them).
    pub points: Vec<(u64, usize, WindowPoints)>,
}

impl Retired {
    /// Keeps `points` if flow `id` is among the [`MAX_KEPT_POINTS`] largest retired so far.
    pub fn offer_points(&mut self, bytes: u64, id: usize, points: WindowPoints) {
        if points.is_empty() {
            return;
        }
        let rank = |b: u64, i: usize| (std::cmp::Reverse(b), i);
        let at = self
            .points
            .partition_point(|(b, i, _)| rank(*b, *i) < rank(bytes, id));
        if at < MAX_KEPT_POINTS {
            self.points.insert(at, (bytes, id, points));
            self.points.truncate(MAX_KEPT_POINTS);
        }
    }

    /// The kept window points of retired flow `id`.
    pub fn points(&self, id: usize) -> Option<&WindowPoints> {
        self.points
            .iter()
            .find(|(_, i, _)| *i == id)
            .map(|(_, _, p)| p)
    }
}

/// The bins of `flow` within [`BURST_REACH_BINS`] of a bin of `channels` (the direction's
/// two channels) at or above `threshold` bytes.
pub fn near_bursts(
    flow: &SparseBins,
    channels: [Option<&SparseBins>; 2],
    threshold: f64,
) -> SparseBins {
    keep_near(flow, |index| {
        channels.iter().flatten().any(|ch| {
            let all = ch.bins();
            let from = all.partition_point(|c| c.index < index - BURST_REACH_BINS);
            all[from..]
                .iter()
                .take_while(|c| c.index <= index + BURST_REACH_BINS)
                .any(|c| c.bytes as f64 >= threshold)
        })
    })
}

/// The bins of `flow` within [`BURST_REACH_BINS`] of a bin listed in `hot` (the indexes of
/// the direction's two channels' bins at or above the threshold, each sorted): the same
/// choice as [`near_bursts`], made from the list a sharded pass keeps instead of the bins.
pub fn near_hot_bins(flow: &SparseBins, hot: [Option<&Vec<i64>>; 2]) -> SparseBins {
    keep_near(flow, |index| near_hot(index, hot))
}

/// Whether bin `index` of a flow direction is within [`BURST_REACH_BINS`] of a bin listed in
/// `hot` (its two channels' bins at or above the threshold, each sorted).
pub fn near_hot(index: i64, hot: [Option<&Vec<i64>>; 2]) -> bool {
    hot.iter().flatten().any(|h| {
        let from = h.partition_point(|&c| c < index - BURST_REACH_BINS);
        h.get(from).is_some_and(|&c| c <= index + BURST_REACH_BINS)
    })
}

fn keep_near(flow: &SparseBins, near: impl Fn(i64) -> bool) -> SparseBins {
    let mut kept = SparseBins::default();
    for b in flow.bins() {
        if near(b.index) {
            kept.add_bin(b);
        }
    }
    kept.shrink();
    kept
}

/// The bins at or above the burst threshold so far, per channel: what a sharded pass's
/// workers keep (from the lists of bins its reader found hot since the last sweep) so that a
/// retiring flow keeps the bins [`near_bursts`] would keep without each worker holding every
/// channel's bins.
#[derive(Debug, Clone, Default)]
pub struct HotBins {
    /// Sorted bin indexes, per channel.
    pub channels: crate::fxhash::FxHashMap<(Dir, IpAddr), Vec<i64>>,
}

impl HotBins {
    /// Notes that bin `index` of `channel` now holds `bytes`, `added` of them just now;
    /// true when that took it to `threshold` or above.
    pub fn note(
        &mut self,
        channel: (Dir, IpAddr),
        index: i64,
        bytes: u64,
        added: u64,
        threshold: f64,
    ) -> bool {
        let now = bytes as f64 >= threshold;
        let before = (bytes - added) as f64 >= threshold;
        if !now || before {
            return false;
        }
        self.insert(channel, index);
        true
    }

    /// Lists bin `index` of `channel` (not listed yet) as hot.
    pub fn insert(&mut self, channel: (Dir, IpAddr), index: i64) {
        let list = self.channels.entry(channel).or_default();
        let at = list.partition_point(|&c| c < index);
        list.insert(at, index);
    }

    /// The list of `channel`, if any of its bins is hot.
    pub fn of(&self, channel: &(Dir, IpAddr)) -> Option<&Vec<i64>> {
        self.channels.get(channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of choosing keep the same bins, whatever the channel looks like.
    #[test]
    fn hot_bin_lists_keep_what_the_channel_bins_keep() {
        let host: IpAddr = "198.18.0.1".parse().unwrap();
        let channel = (Dir::To, host);
        let threshold = 1000.0;
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for _ in 0..50 {
            let (mut chan, mut flow, mut hot) = (
                SparseBins::default(),
                SparseBins::default(),
                HotBins::default(),
            );
            for _ in 0..300 {
                let index = (next() % 200) as i64;
                let bytes = next() % 400;
                let total = chan.add(index, bytes, index);
                hot.note(channel, index, total, bytes, threshold);
                if next() % 3 == 0 {
                    flow.add(index, bytes, index);
                }
            }
            let a = near_bursts(&flow, [Some(&chan), None], threshold);
            let b = near_hot_bins(&flow, [None, hot.of(&channel)]);
            assert_eq!(a.bins(), b.bins());
            assert!(hot
                .of(&channel)
                .is_some_and(|h| h.windows(2).all(|w| w[0] < w[1])));
        }
    }
}
