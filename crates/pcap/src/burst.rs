//! Millisecond bandwidth per channel and the burst episodes in it.
//!
//! A *channel* is the traffic towards one host, or from one host: on a host's interface these
//! are the two directions of its full-duplex link, which fill up independently. In: the sparse
//! bins of each channel and of each flow direction. Out: a [`ChannelSummary`] per channel (peak
//! bin, time above the threshold, the busiest second's average) and [`Burst`] episodes: runs of
//! bins at or above `threshold` x link rate (gaps of two bins are bridged), each with its
//! *sources*: the flow directions whose bytes in the burst's bins made it (the largest that
//! together carry 90% of them, and any other with 10% or more). The small requests and ACKs
//! that crossed the link meanwhile are counted apart (`other_bytes`): they waited behind the
//! burst, they did not make it.
//!
//! Without `--link-rate` the capacity is unknown: channels still get their peaks and
//! busiest seconds in bytes, but no bursts are reported (a capture cannot tell a 1 Gbit/s link
//! from a 10 Gbit/s one), and the summary's `threshold_basis` says `none`.

use std::collections::VecDeque;
use std::net::IpAddr;

use tailhunt_model::evidence::capture::{Burst, BurstFlow, ChannelSummary, Dir};

use crate::bins::{bin_capacity_bytes, Bin, SparseBins};

/// Bins below the threshold that still join two parts into one episode: a receive path
/// delivers packets in batches (NAPI), so a saturated link shows the odd short bin.
const MAX_GAP_BINS: i64 = 2;
/// A bin next to an episode that holds this share of the threshold is its partial first or
/// last bin.
const EDGE_SHARE: f64 = 0.25;

/// Settings of burst detection.
#[derive(Debug, Clone, Copy)]
pub struct BurstConfig {
    /// Bin width, ns.
    pub bin_ns: i64,
    /// Link rate, bits per second, when known.
    pub link_rate_bps: Option<u64>,
    /// Share of capacity (or of the channel's peak) a bin must reach, 0..1.
    pub threshold: f64,
}

/// One direction of a flow: its bytes per bin.
pub struct FlowBins<'a> {
    /// The flow's display name.
    pub name: String,
    /// The sending endpoint (`ip:port`).
    pub sender: String,
    /// Sending host of this direction.
    pub src: IpAddr,
    /// Receiving host.
    pub dst: IpAddr,
    /// Its bins.
    pub bins: &'a SparseBins,
}

/// Bins on either side of a bin at or above the threshold that an episode may take in: the
/// gaps it bridges, and a partial first or last bin just outside it.
const REACH: i64 = MAX_GAP_BINS + 1;

/// What one pass over a channel's bins keeps: totals, the peak bin, the busiest second, each
/// second's bytes, and the bins at or above the threshold with those within [`REACH`] of them
/// (all that an episode's edges and bytes are read from). Its memory is the hot bins and a
/// number per second, not the channel's bins: a day-long capture's busiest channel has 86
/// million 1 ms bins, which the end of the pass used to unpack whole (3.5 GB) to read.
struct Scan {
    threshold: f64,
    bins_per_second: i64,
    bytes: u64,
    packets: u64,
    /// The largest bin, the earliest of equals.
    peak: Option<Bin>,
    /// The bins of the last second, and their bytes.
    window: VecDeque<(i64, u64)>,
    window_bytes: u64,
    busiest_second: u64,
    /// `(first bin index of the second, bytes)`, in order.
    seconds: Vec<(i64, u64)>,
    above: Vec<Bin>,
    /// The bins above the threshold and every bin within [`REACH`] of one, in order.
    near: Vec<Bin>,
    /// The last few bins not in `near`: the ones a bin above the threshold may reach back to.
    behind: VecDeque<Bin>,
    /// Bins up to this index join `near` (they follow a bin above the threshold).
    ahead_until: i64,
}

impl Scan {
    fn new(threshold: f64, bins_per_second: i64) -> Scan {
        Scan {
            threshold,
            bins_per_second,
            bytes: 0,
            packets: 0,
            peak: None,
            window: VecDeque::new(),
            window_bytes: 0,
            busiest_second: 0,
            seconds: Vec::new(),
            above: Vec::new(),
            near: Vec::new(),
            behind: VecDeque::new(),
            ahead_until: i64::MIN,
        }
    }

    /// The next bin (indexes strictly increasing).
    fn add(&mut self, b: Bin) {
        self.bytes += b.bytes;
        self.packets += b.packets as u64;
        if self
            .peak
            .is_none_or(|p| (b.bytes, -b.index) > (p.bytes, -p.index))
        {
            self.peak = Some(b);
        }
        self.window.push_back((b.index, b.bytes));
        self.window_bytes += b.bytes;
        while let Some(&(index, bytes)) = self.window.front() {
            if index > b.index - self.bins_per_second {
                break;
            }
            self.window_bytes -= bytes;
            self.window.pop_front();
        }
        self.busiest_second = self.busiest_second.max(self.window_bytes);
        let second = b.index.div_euclid(self.bins_per_second) * self.bins_per_second;
        match self.seconds.last_mut() {
            Some((s, bytes)) if *s == second => *bytes += b.bytes,
            _ => self.seconds.push((second, b.bytes)),
        }
        if b.bytes as f64 >= self.threshold {
            self.above.push(b);
            let reach = b.index - REACH;
            self.near
                .extend(self.behind.drain(..).filter(|x| x.index >= reach));
            self.near.push(b);
            self.ahead_until = b.index + REACH;
        } else if b.index <= self.ahead_until {
            self.near.push(b);
        } else {
            self.behind.push_back(b);
            if self.behind.len() > REACH as usize {
                self.behind.pop_front();
            }
        }
    }

    /// Bytes of the second that starts at bin `from`.
    fn second_bytes(&self, from: i64) -> u64 {
        self.seconds
            .binary_search_by_key(&from, |s| s.0)
            .map_or(0, |k| self.seconds[k].1)
    }
}

/// Summarises one channel and finds its bursts, from its bins in time order (read once).
pub fn analyse_channel(
    dir: Dir,
    host: IpAddr,
    bins: impl IntoIterator<Item = Bin>,
    flows: &[FlowBins<'_>],
    cfg: &BurstConfig,
) -> (ChannelSummary, Vec<Burst>) {
    let capacity = cfg.link_rate_bps.map(|r| bin_capacity_bytes(r, cfg.bin_ns));
    let bins_per_second = (1_000_000_000 / cfg.bin_ns.max(1)).max(1);
    let (threshold, basis) = match capacity {
        Some(c) => (c * cfg.threshold, "link-rate"),
        // Without the link's rate "near link rate" cannot be judged: no bursts, only peaks.
        None => (f64::INFINITY, "none"),
    };
    let mut scan = Scan::new(threshold, bins_per_second);
    for b in bins {
        scan.add(b);
    }
    let utilisation = |b: u64| capacity.map(|c| b as f64 / c);
    let second_util = |start_index: i64| {
        capacity.map(|c| {
            let from = start_index.div_euclid(bins_per_second) * bins_per_second;
            scan.second_bytes(from) as f64 / (c * bins_per_second as f64)
        })
    };
    let max_second_utilisation =
        capacity.map(|_| utilisation(scan.busiest_second).unwrap_or(0.0) / bins_per_second as f64);
    let above = &scan.above;
    let mut bursts = Vec::new();
    let mut i = 0;
    while i < above.len() {
        let mut j = i;
        while j + 1 < above.len() && above[j + 1].index - above[j].index <= REACH {
            j += 1;
        }
        // A burst rarely starts or ends on a bin edge: a busy bin just before or after (a
        // quarter of the threshold or more) holds its first or last packets.
        let edge = |index: i64| {
            let k = scan.near.binary_search_by_key(&index, |b| b.index).ok()?;
            let b = scan.near[k];
            (b.bytes as f64 >= threshold * EDGE_SHARE).then_some(b)
        };
        // Looked for across a gap as short as those bridged inside an episode.
        let head = (1..=REACH)
            .find_map(|k| edge(above[i].index - k))
            .unwrap_or(above[i]);
        let tail = (1..=REACH)
            .find_map(|k| edge(above[j].index + k))
            .unwrap_or(above[j]);
        let (first, last) = (head.index, tail.index);
        let peak_bin = above[i..=j].iter().map(|b| b.bytes).max().unwrap_or(0);
        bursts.push(Burst {
            dir,
            host: host.to_string(),
            start_ns: head.first_ns,
            end_ns: tail.last_ns,
            peak_bin_bytes: peak_bin,
            peak_utilisation: utilisation(peak_bin),
            // Every bin of the episode is within REACH of one above the threshold.
            bytes: crate::bins::bytes_between(&scan.near, first, last),
            second_utilisation: second_util(first),
            flows: Vec::new(),
            other_bytes: 0,
            other_flows: 0,
        });
        let b = bursts.last_mut().expect("just pushed");
        attribute(b, dir, host, flows, first, last);
        i = j + 1;
    }
    let peak = scan.peak;
    let summary = ChannelSummary {
        dir,
        host: host.to_string(),
        bytes: scan.bytes,
        packets: scan.packets,
        peak_bin_bytes: peak.map_or(0, |p| p.bytes),
        peak_t_ns: peak.map_or(0, |p| p.index * cfg.bin_ns),
        peak_utilisation: peak.and_then(|p| utilisation(p.bytes)),
        time_above_ns: above.len() as i64 * cfg.bin_ns,
        max_second_utilisation,
        threshold_basis: basis.to_string(),
    };
    (summary, bursts)
}

/// Share of a burst's bytes its largest flow directions must reach together to be its
/// sources.
const SOURCES_COVER: f64 = 0.9;
/// A flow direction with this share of a burst's bytes is a source however many larger ones
/// there are.
const SOURCE_SHARE: f64 = 0.1;

/// Splits the bytes of a burst's bins among the flow directions that crossed the channel:
/// the largest that together carry [`SOURCES_COVER`] of them, and any other carrying
/// [`SOURCE_SHARE`], are its sources (never one under [`BurstFlow::MIN_SOURCE_SHARE`]); the
/// rest (small requests, ACKs) are counted as others. A flow's two directions are apart: the
/// ACKs of a bulk flow in the other direction are not a source.
fn attribute(b: &mut Burst, dir: Dir, host: IpAddr, flows: &[FlowBins<'_>], first: i64, last: i64) {
    let mut all: Vec<BurstFlow> = flows
        .iter()
        .filter(|f| match dir {
            Dir::To => f.dst == host,
            Dir::From => f.src == host,
        })
        .filter_map(|f| {
            let bytes = f.bins.bytes_between(first, last);
            (bytes > 0).then(|| BurstFlow {
                flow: f.name.clone(),
                sender: f.sender.clone(),
                bytes,
                share: bytes as f64 / b.bytes.max(1) as f64,
            })
        })
        .collect();
    all.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.flow.cmp(&b.flow))
            .then_with(|| a.sender.cmp(&b.sender))
    });
    let mut covered = 0.0;
    let mut sources = Vec::new();
    for f in all {
        let needed = covered < SOURCES_COVER;
        let source = f.share >= BurstFlow::MIN_SOURCE_SHARE
            && (needed || f.share >= SOURCE_SHARE)
            && sources.len() < Burst::MAX_SOURCES;
        covered += f.share;
        if source {
            sources.push(f);
        } else {
            b.other_bytes += f.bytes;
            b.other_flows += 1;
        }
    }
    b.flows = sources;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The analysis as it was before it read the bins in one pass (every bin at hand, searched
    /// where needed): the reference the one-pass analysis must match exactly.
    fn reference(
        dir: Dir,
        host: IpAddr,
        bins: &SparseBins,
        flows: &[FlowBins<'_>],
        cfg: &BurstConfig,
    ) -> (ChannelSummary, Vec<Burst>) {
        let all = bins.bins();
        let bytes: u64 = all.iter().map(|b| b.bytes).sum();
        let packets: u64 = all.iter().map(|b| b.packets as u64).sum();
        let peak = all.iter().max_by_key(|b| (b.bytes, -b.index)).copied();
        let capacity = cfg.link_rate_bps.map(|r| bin_capacity_bytes(r, cfg.bin_ns));
        let bins_per_second = (1_000_000_000 / cfg.bin_ns.max(1)).max(1);
        let (threshold, basis) = match capacity {
            Some(c) => (c * cfg.threshold, "link-rate"),
            // Without the link's rate "near link rate" cannot be judged: no bursts, only peaks.
            None => (f64::INFINITY, "none"),
        };
        let utilisation = |b: u64| capacity.map(|c| b as f64 / c);
        let second_util = |start_index: i64| {
            capacity.map(|c| {
                let from = start_index.div_euclid(bins_per_second) * bins_per_second;
                bins.bytes_between(from, from + bins_per_second - 1) as f64
                    / (c * bins_per_second as f64)
            })
        };
        let max_second_utilisation = capacity.map(|_| {
            let mut best = 0u64;
            let (mut lo, mut sum) = (0usize, 0u64);
            for b in all {
                sum += b.bytes;
                while all[lo].index <= b.index - bins_per_second {
                    sum -= all[lo].bytes;
                    lo += 1;
                }
                best = best.max(sum);
            }
            utilisation(best).unwrap_or(0.0) / bins_per_second as f64
        });
        let above: Vec<&Bin> = all.iter().filter(|b| b.bytes as f64 >= threshold).collect();
        let mut bursts = Vec::new();
        let mut i = 0;
        while i < above.len() {
            let mut j = i;
            while j + 1 < above.len() && above[j + 1].index - above[j].index <= MAX_GAP_BINS + 1 {
                j += 1;
            }
            // A burst rarely starts or ends on a bin edge: a busy bin just before or after (a
            // quarter of the threshold or more) holds its first or last packets.
            let edge = |index: i64| {
                let k = all.binary_search_by_key(&index, |b| b.index).ok()?;
                (all[k].bytes as f64 >= threshold * EDGE_SHARE).then_some(all[k])
            };
            // Looked for across a gap as short as those bridged inside an episode.
            let reach = 1..=MAX_GAP_BINS + 1;
            let head = reach
                .clone()
                .find_map(|k| edge(above[i].index - k))
                .unwrap_or(*above[i]);
            let tail = reach
                .clone()
                .find_map(|k| edge(above[j].index + k))
                .unwrap_or(*above[j]);
            let (first, last) = (head.index, tail.index);
            let episode_bytes = bins.bytes_between(first, last);
            let peak_bin = above[i..=j].iter().map(|b| b.bytes).max().unwrap_or(0);
            bursts.push(Burst {
                dir,
                host: host.to_string(),
                start_ns: head.first_ns,
                end_ns: tail.last_ns,
                peak_bin_bytes: peak_bin,
                peak_utilisation: utilisation(peak_bin),
                bytes: episode_bytes,
                second_utilisation: second_util(first),
                flows: Vec::new(),
                other_bytes: 0,
                other_flows: 0,
            });
            let b = bursts.last_mut().expect("just pushed");
            attribute(b, dir, host, flows, first, last);
            i = j + 1;
        }
        let summary = ChannelSummary {
            dir,
            host: host.to_string(),
            bytes,
            packets,
            peak_bin_bytes: peak.map_or(0, |p| p.bytes),
            peak_t_ns: peak.map_or(0, |p| p.index * cfg.bin_ns),
            peak_utilisation: peak.and_then(|p| utilisation(p.bytes)),
            time_above_ns: above.len() as i64 * cfg.bin_ns,
            max_second_utilisation,
            threshold_basis: basis.to_string(),
        };
        (summary, bursts)
    }

    /// A 100 Mbit/s link (12,500 bytes per ms) idling at 5% with one 10 ms burst at 95% made by
    /// two flows: one episode, the right flows, and a 1 s average that hides it.
    #[test]
    fn a_ten_millisecond_burst_is_one_episode_with_its_flows() {
        let host: IpAddr = "198.18.0.1".parse().unwrap();
        let (db1, db2, api): (IpAddr, IpAddr, IpAddr) = (
            "198.18.0.11".parse().unwrap(),
            "198.18.0.12".parse().unwrap(),
            "198.18.0.20".parse().unwrap(),
        );
        let (mut chan, mut f1, mut f2, mut f3) = Default::default();
        for i in 0..2000i64 {
            let (a, b) = if (1000..1010).contains(&i) {
                (6000, 5875)
            } else {
                (0, 0)
            };
            let background = 625;
            SparseBins::add(&mut f3, i, background, i * 1_000_000);
            SparseBins::add(&mut chan, i, background, i * 1_000_000);
            if a > 0 {
                SparseBins::add(&mut f1, i, a, i * 1_000_000 + 10);
                SparseBins::add(&mut f2, i, b, i * 1_000_000 + 20);
                SparseBins::add(&mut chan, i, a + b, i * 1_000_000 + 999_000);
            }
        }
        let flows = [
            FlowBins {
                name: "db1".into(),
                sender: "198.18.0.11:7100".into(),
                src: db1,
                dst: host,
                bins: &f1,
            },
            FlowBins {
                name: "db2".into(),
                sender: "198.18.0.12:7100".into(),
                src: db2,
                dst: host,
                bins: &f2,
            },
            FlowBins {
                name: "api".into(),
                sender: "198.18.0.20:40000".into(),
                src: api,
                dst: host,
                bins: &f3,
            },
        ];
        let cfg = BurstConfig {
            bin_ns: 1_000_000,
            link_rate_bps: Some(100_000_000),
            threshold: 0.8,
        };
        let (summary, bursts) =
            analyse_channel(Dir::To, host, chan.bins().iter().copied(), &flows, &cfg);
        assert_eq!(bursts.len(), 1, "{bursts:?}");
        let b = &bursts[0];
        assert_eq!((b.start_ns, b.end_ns), (1_000_000_000, 1_009_999_000));
        assert!(b.peak_utilisation.unwrap() > 0.99);
        assert_eq!(b.flows[0].flow, "db1");
        assert_eq!(b.flows[0].sender, "198.18.0.11:7100");
        assert_eq!(b.flows[1].flow, "db2");
        // The background flow (5% of the burst) crossed the link, it did not fill it.
        assert_eq!(b.flows.len(), 2, "{b:?}");
        assert_eq!((b.other_flows, b.other_bytes), (1, 6250));
        assert!(b.second_utilisation.unwrap() < 0.2, "{b:?}");
        assert_eq!(summary.time_above_ns, 10_000_000);
        assert!(summary.max_second_utilisation.unwrap() < 0.2);
    }

    /// Regression (issue 13): a request flow and the ACKs of a bulk flow going the other way
    /// were listed among a burst's flows at 0-1% of its bytes. Only the directions that carry
    /// the burst are its sources; a flow's ACK direction is not, even when its data direction
    /// is a source elsewhere.
    #[test]
    fn requests_and_acks_inside_a_burst_are_not_its_sources() {
        let host: IpAddr = "198.18.0.1".parse().unwrap();
        let (db, far, api): (IpAddr, IpAddr, IpAddr) = (
            "198.18.0.11".parse().unwrap(),
            "198.18.0.2".parse().unwrap(),
            "198.18.0.20".parse().unwrap(),
        );
        let (mut chan, mut data, mut acks, mut req) = Default::default();
        for i in 0..20i64 {
            let t = i * 1_000_000;
            SparseBins::add(&mut data, i, 12_000, t + 10);
            SparseBins::add(&mut acks, i, 130, t + 20);
            SparseBins::add(&mut req, i, 70, t + 30);
            SparseBins::add(&mut chan, i, 12_200, t + 10);
        }
        let flows = [
            FlowBins {
                name: "tcp 198.18.0.1:5000 -> 198.18.0.11:7100".into(),
                sender: "198.18.0.11:7100".into(),
                src: db,
                dst: host,
                bins: &data,
            },
            FlowBins {
                name: "tcp 198.18.0.2:6000 -> 198.18.0.1:7001".into(),
                sender: "198.18.0.2:6000".into(),
                src: far,
                dst: host,
                bins: &acks,
            },
            FlowBins {
                name: "tcp 198.18.0.20:4000 -> 198.18.0.1:7000".into(),
                sender: "198.18.0.20:4000".into(),
                src: api,
                dst: host,
                bins: &req,
            },
        ];
        let cfg = BurstConfig {
            bin_ns: 1_000_000,
            link_rate_bps: Some(100_000_000),
            threshold: 0.8,
        };
        let (_, bursts) = analyse_channel(Dir::To, host, chan.bins().iter().copied(), &flows, &cfg);
        assert_eq!(bursts.len(), 1, "{bursts:?}");
        let b = &bursts[0];
        let named: Vec<&str> = b.flows.iter().map(|f| f.sender.as_str()).collect();
        assert_eq!(named, ["198.18.0.11:7100"], "{b:?}");
        assert_eq!((b.other_flows, b.other_bytes), (2, 20 * 200));
    }

    #[test]
    fn without_a_link_rate_there_are_no_bursts() {
        let host: IpAddr = "198.18.0.1".parse().unwrap();
        let mut chan = SparseBins::default();
        for i in 0..5000 {
            chan.add(i, 1000 + (i as u64 % 7) * 10, i * 1_000_000);
        }
        let cfg = BurstConfig {
            bin_ns: 1_000_000,
            link_rate_bps: None,
            threshold: 0.8,
        };
        let (summary, bursts) =
            analyse_channel(Dir::To, host, chan.bins().iter().copied(), &[], &cfg);
        assert!(bursts.is_empty());
        assert_eq!(summary.threshold_basis, "none");
    }

    proptest! {
        /// On any channel (episodes with gaps, partial edges, bursts across seconds, bins far
        /// apart), the one-pass analysis gives exactly what the analysis with every bin at
        /// hand gave: the same summary, the same bursts, the same sources.
        #[test]
        fn one_pass_is_the_whole_analysis(
            steps in proptest::collection::vec((1i64..6, 0u8..4, 0u64..13_000, 0u64..13_000), 1..3000),
            far in 0i64..3000,
            rated in any::<bool>(),
        ) {
            let host: IpAddr = "198.18.0.1".parse().unwrap();
            let (a, b): (IpAddr, IpAddr) =
                ("198.18.0.11".parse().unwrap(), "198.18.0.12".parse().unwrap());
            let (mut chan, mut fa, mut fb) = (SparseBins::default(), SparseBins::default(), SparseBins::default());
            let mut index = 1_700_000_000_000i64;
            for (k, (gap, kind, x, y)) in steps.into_iter().enumerate() {
                // Mostly dense, now and then far ahead (into another second or minute).
                index += if k % 500 == 499 { gap * far } else { gap };
                let (x, y) = match kind {
                    0 => (x % 300, y % 300),
                    1 => (x % 2000, y % 2000),
                    _ => (x, y),
                };
                let t = index * 1_000_000;
                if x > 0 {
                    fa.add(index, x, t + 10);
                }
                if y > 0 {
                    fb.add(index, y, t + 500_000);
                }
                if x + y > 0 {
                    chan.add(index, x, t + 10);
                    if y > 0 {
                        chan.add(index, y, t + 500_000);
                    }
                }
            }
            let flows = [
                FlowBins { name: "a".into(), sender: "198.18.0.11:1".into(), src: a, dst: host, bins: &fa },
                FlowBins { name: "b".into(), sender: "198.18.0.12:1".into(), src: b, dst: host, bins: &fb },
            ];
            let cfg = BurstConfig {
                bin_ns: 1_000_000,
                link_rate_bps: rated.then_some(100_000_000),
                threshold: 0.8,
            };
            let want = reference(Dir::To, host, &chan, &flows, &cfg);
            let got = analyse_channel(Dir::To, host, chan.bins().iter().copied(), &flows, &cfg);
            prop_assert_eq!(got, want);
        }
    }
}
