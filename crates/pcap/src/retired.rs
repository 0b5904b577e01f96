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

use std::net::SocketAddr;

use tailhunt_model::evidence::capture::FlowSummary;

use crate::bins::SparseBins;
use crate::delay::ClockCheck;
use crate::flowkey::FlowKey;
use crate::tcp::WindowPoint;

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

/// Everything kept of the retired flows.
#[derive(Debug, Default)]
pub struct Retired {
    /// Their summaries, in order of retirement.
    pub summaries: Vec<FlowSummary>,
    /// Bins near bins above the burst threshold.
    pub bins: Vec<KeptBins>,
    /// Upstream delays per direction with TCP timestamps.
    pub delays: Vec<KeptDelays>,
    /// The window points of the largest retired flows: `(payload bytes, id, points)`, largest
    /// first (ties: lower id first, as the recorder picks them).
    pub points: Vec<(u64, usize, Vec<WindowPoint>)>,
}

impl Retired {
    /// Keeps `points` if flow `id` is among the [`MAX_KEPT_POINTS`] largest retired so far.
    pub fn offer_points(&mut self, bytes: u64, id: usize, points: Vec<WindowPoint>) {
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
    pub fn points(&self, id: usize) -> Option<&[WindowPoint]> {
        self.points
            .iter()
            .find(|(_, i, _)| *i == id)
            .map(|(_, _, p)| p.as_slice())
    }
}

/// The bins of `flow` within [`BURST_REACH_BINS`] of a bin of `channels` (the direction's
/// two channels) at or above `threshold` bytes.
pub fn near_bursts(
    flow: &SparseBins,
    channels: [Option<&SparseBins>; 2],
    threshold: f64,
) -> SparseBins {
    let mut kept = SparseBins::default();
    for b in flow.bins() {
        let near = channels.iter().flatten().any(|ch| {
            let all = ch.bins();
            let from = all.partition_point(|c| c.index < b.index - BURST_REACH_BINS);
            all[from..]
                .iter()
                .take_while(|c| c.index <= b.index + BURST_REACH_BINS)
                .any(|c| c.bytes as f64 >= threshold)
        });
        if near {
            kept.add_bin(b);
        }
    }
    kept.shrink();
    kept
}
