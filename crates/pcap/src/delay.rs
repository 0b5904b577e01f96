//! How long arriving packets waited in queues before the capture point, from their TCP
//! timestamps.
//!
//! A sender stamps every segment with its timestamp clock (TSval, RFC 7323 section 5.4); on
//! Linux (since 4.13), the BSDs and macOS that clock ticks once per millisecond. For one
//! direction of a flow, `capture time - TSval x 1 ms` is a constant (the clocks' offset plus
//! the path's fixed delay) plus whatever the packet waited on the way: in the sender's queue,
//! in a shaper, behind a burst. The lower convex hull of those offsets over the direction's
//! life is the undelayed baseline (it follows a slow drift between the clocks and stays under
//! a saturation that lasts seconds); a packet's height above it is its upstream queueing
//! delay, give or take the 1 ms tick.
//!
//! This is what a capture taken *downstream* of a queue can say about the wait: the requests
//! arrive after they left the queue, so their exchanges look fast, but their timestamps say
//! when they were sent.
//!
//! In: every TCP packet with a timestamp option, per flow direction ([`DelayTrack::add`]).
//! Out: per direction, per bin, the largest delay and when that packet arrived
//! ([`DelayTrack::delays`]); `None` for a direction whose clock does not tick at 1 kHz (the
//! hull rises or falls by more than 1% of the time) or that is too short to tell and whose
//! host has no long direction that passed the check.

use prost::encoding::{decode_varint, encode_varint};

use crate::bins::packed::{block_bins, Block};
use crate::pack::{unzigzag, zigzag};
use crate::spill::Spill;

/// A direction must span this long for its clock rate to be checked.
pub const MIN_CHECK_SPAN_NS: i64 = 1_000_000_000;
/// The baseline may drift by this share of the time (a 1 kHz clock drifts by parts per
/// million; a 250 Hz one would drift by 75%).
const MAX_DRIFT: f64 = 0.01;
/// One TSval tick, ns.
const TICK_NS: i64 = 1_000_000;

/// One bin of a direction's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OffsetBin {
    index: i64,
    /// Smallest `capture time - TSval x tick` in the bin.
    min: i64,
    /// Largest.
    max: i64,
    /// Capture time of the packet with the largest.
    max_at: i64,
}

/// How far behind the newest packet a bin's most delayed packet must be for the bin to be
/// packed (as [`crate::bins::packed::HORIZON_NS`]: a packet later than that is rare).
const HORIZON_NS: i64 = crate::bins::packed::HORIZON_NS;

/// The timestamps of one flow direction, per bin: the newest bins as they are, the older ones
/// packed (a connection that lasts the capture keeps a bin a millisecond each way to the end,
/// since its baseline is the lower hull over its whole life).
#[derive(Debug, Clone, Default)]
pub struct DelayTrack {
    first_tsval: Option<u32>,
    /// In the pass's scratch file (a stream of a day holds 86 million bins each way).
    blocks: Vec<Block>,
    bins: Vec<OffsetBin>,
}

/// Packs `bins` (sorted, at least one): the first bin's smallest offset and its most delayed
/// packet's time, then per bin varints of the index step, the smallest offset's step from the
/// previous bin's, the largest offset above the smallest, and the most delayed packet's
/// time's step from the previous bin's (about 9 bytes a bin instead of 32).
fn pack_block(bins: &[OffsetBin], spill: &Spill) -> Block {
    let mut data = Vec::with_capacity(bins.len() * 10);
    let (mut index, mut min, mut at) = (bins[0].index, bins[0].min, bins[0].max_at);
    encode_varint(zigzag(min), &mut data);
    encode_varint(zigzag(at), &mut data);
    for b in bins {
        encode_varint(b.index.wrapping_sub(index) as u64, &mut data);
        encode_varint(zigzag(b.min.wrapping_sub(min)), &mut data);
        encode_varint(zigzag(b.max.wrapping_sub(b.min)), &mut data);
        encode_varint(zigzag(b.max_at.wrapping_sub(at)), &mut data);
        (index, min, at) = (b.index, b.min, b.max_at);
    }
    Block {
        first: bins[0].index,
        last: index,
        bins: bins.len() as u32,
        data: spill.put(&data),
    }
}

fn unpack_block(block: &Block, spill: &Spill, out: &mut Vec<OffsetBin>) {
    let bytes = spill.get(&block.data);
    let mut data: &[u8] = &bytes;
    // The block was written by `pack_block`: every varint is whole.
    let mut next = || decode_varint(&mut data).unwrap_or(0);
    let mut min = unzigzag(next());
    let mut at = unzigzag(next());
    let mut index = block.first;
    for _ in 0..block.bins {
        index = index.wrapping_add(next() as i64);
        min = min.wrapping_add(unzigzag(next()));
        let max = min.wrapping_add(unzigzag(next()));
        at = at.wrapping_add(unzigzag(next()));
        out.push(OffsetBin {
            index,
            min,
            max,
            max_at: at,
        });
    }
}

/// What a direction's clock check said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockCheck {
    /// Spans long enough and its baseline stays flat: a 1 kHz clock.
    Passed,
    /// Spans long enough and its baseline drifts: another clock rate.
    Failed,
    /// Too short to tell.
    TooShort,
}

impl DelayTrack {
    /// Adds a packet seen at `ts_ns` in bin `index` with this TSval (older bins go to
    /// `spill`, the pass's scratch file, which every other call must be given too).
    pub fn add(&mut self, index: i64, ts_ns: i64, tsval: u32, spill: &Spill) {
        let first = *self.first_tsval.get_or_insert(tsval);
        // Signed: a packet reordered before the first one gives a small negative count.
        let ticks = tsval.wrapping_sub(first) as i32 as i64;
        let off = ts_ns - ticks * TICK_NS;
        let new = OffsetBin {
            index,
            min: off,
            max: off,
            max_at: ts_ns,
        };
        let merge = |b: &mut OffsetBin| {
            b.min = b.min.min(off);
            if off > b.max {
                b.max = off;
                b.max_at = ts_ns;
            }
        };
        if self.blocks.last().is_some_and(|b| index <= b.last) {
            // Late, into a packed block: unpacked, added to and packed again.
            let k = self
                .blocks
                .partition_point(|b| b.first <= index)
                .saturating_sub(1);
            let mut bins = Vec::with_capacity(self.blocks[k].bins as usize + 1);
            unpack_block(&self.blocks[k], spill, &mut bins);
            match bins.binary_search_by_key(&index, |b| b.index) {
                Ok(i) => merge(&mut bins[i]),
                Err(i) => bins.insert(i, new),
            }
            self.blocks[k] = pack_block(&bins, spill);
            return;
        }
        match self.bins.last_mut() {
            Some(last) if last.index == index => merge(last),
            Some(last) if last.index > index => {
                match self.bins.binary_search_by_key(&index, |b| b.index) {
                    Ok(i) => merge(&mut self.bins[i]),
                    Err(i) => self.bins.insert(i, new),
                }
            }
            _ => self.bins.push(new),
        }
        // Blocks grow as the direction's list does (see `block_bins`).
        let n = block_bins(self.blocks.len());
        if self.bins.len() >= 2 * n && self.bins[n - 1].max_at < ts_ns - HORIZON_NS {
            self.blocks.push(pack_block(&self.bins[..n], spill));
            self.bins.drain(..n);
        }
    }

    /// Gives back spare capacity.
    pub fn shrink(&mut self) {
        self.bins.shrink_to_fit();
        self.blocks.shrink_to_fit();
    }

    /// Whether it holds any packet.
    pub fn is_empty(&self) -> bool {
        self.bins.is_empty() && self.blocks.is_empty()
    }

    /// Every bin in index order, unpacked a block at a time.
    fn all<'a>(&'a self, spill: &'a Spill) -> impl Iterator<Item = OffsetBin> + 'a {
        self.blocks
            .iter()
            .flat_map(move |b| {
                let mut bins = Vec::with_capacity(b.bins as usize);
                unpack_block(b, spill, &mut bins);
                bins
            })
            .chain(self.bins.iter().copied())
    }

    /// The first and last bins' indexes.
    fn span(&self) -> Option<(i64, i64)> {
        let first = self.blocks.first().map(|b| b.first);
        let first = first.or_else(|| self.bins.first().map(|b| b.index))?;
        let last = self.bins.last().map(|b| b.index);
        let last = last.or_else(|| self.blocks.last().map(|b| b.last))?;
        Some((first, last))
    }

    /// Checks that the baseline is flat: the time-weighted median slope of the lower hull
    /// within `MAX_DRIFT`, over at least [`MIN_CHECK_SPAN_NS`].
    pub fn clock_check(&self, bin_ns: i64, spill: &Spill) -> ClockCheck {
        let Some((first, last)) = self.span() else {
            return ClockCheck::TooShort;
        };
        if (last - first) * bin_ns < MIN_CHECK_SPAN_NS {
            return ClockCheck::TooShort;
        }
        let hull = self.hull(spill);
        let mut slopes: Vec<(f64, i64)> = hull
            .windows(2)
            .map(|w| {
                let dt = (w[1].0 - w[0].0) * bin_ns;
                ((w[1].1 - w[0].1) as f64 / dt as f64, dt)
            })
            .collect();
        slopes.sort_by(|a, b| a.0.abs().total_cmp(&b.0.abs()));
        let total: i64 = slopes.iter().map(|s| s.1).sum();
        let mut acc = 0;
        let median = slopes
            .iter()
            .find(|s| {
                acc += s.1;
                acc * 2 >= total
            })
            .map_or(0.0, |s| s.0);
        if median.abs() <= MAX_DRIFT {
            ClockCheck::Passed
        } else {
            ClockCheck::Failed
        }
    }

    /// The lower convex hull of the bins' smallest offsets: `(bin index, offset)` points.
    fn hull(&self, spill: &Spill) -> Vec<(i64, i64)> {
        let mut h: Vec<(i64, i64)> = Vec::new();
        for b in self.all(spill) {
            let p = (b.index, b.min);
            while h.len() >= 2 {
                let (a, o) = (h[h.len() - 2], h[h.len() - 1]);
                // Drop the middle point when it lies on or above the line from a to p.
                let cross = (o.0 - a.0) as i128 * (p.1 - a.1) as i128
                    - (o.1 - a.1) as i128 * (p.0 - a.0) as i128;
                if cross <= 0 {
                    h.pop();
                } else {
                    break;
                }
            }
            h.push(p);
        }
        h
    }

    /// Per bin, the largest upstream delay and when that packet arrived: `(arrival ns, delay
    /// ns)`, in time order, made as they are read (a half-hour stream has 1.8 million bins a
    /// direction: a list of them was 29 MB at the end of the pass, on top of the list they
    /// go into).
    pub fn delays<'a>(&'a self, spill: &'a Spill) -> impl Iterator<Item = (i64, i64)> + 'a {
        let hull = self.hull(spill);
        let mut seg = 0;
        self.all(spill).map(move |b| {
            while seg + 1 < hull.len() - 1 && hull[seg + 1].0 <= b.index {
                seg += 1;
            }
            let base = match (hull.get(seg), hull.get(seg + 1)) {
                (Some(&(x0, y0)), Some(&(x1, y1))) if x1 > x0 => {
                    y0 + ((y1 - y0) as i128 * (b.index - x0) as i128 / (x1 - x0) as i128) as i64
                }
                (Some(&(_, y0)), _) => y0,
                _ => b.min,
            };
            (b.max_at, (b.max - base).max(0))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// A sender's clock, a capture 3 s long, packets every 2 ms, and a queue that holds the
    /// 20 packets sent at 1.000-1.038 s and lets them out 1 ms apart from 1.040 s (waits of
    /// 40 down to 21 ms); the sender is quiet while it drains.
    fn track(clock_hz: i64, drift_ppm: i64, spill: &Spill) -> DelayTrack {
        let mut t = DelayTrack::default();
        let start = 1_700_000_000 * 1_000_000_000i64;
        for k in (0..1500i64).filter(|k| !(520..540).contains(k)) {
            let sent = start + k * 2 * MS;
            let queued = if (500..520).contains(&k) {
                (1040 + (k - 500)) * MS - k * 2 * MS
            } else {
                0
            };
            let at = sent + 150_000 + queued + (k * 2 * MS) * drift_ppm / 1_000_000;
            let tsval = (1_000_000 + (k * 2 * MS) * clock_hz / 1_000_000_000) as u32;
            t.add(at.div_euclid(MS), at, tsval, spill);
        }
        t
    }

    #[test]
    fn a_queue_upstream_shows_as_delay_above_the_baseline() {
        let spill = Spill::default();
        let t = track(1000, 0, &spill);
        assert_eq!(t.clock_check(MS, &spill), ClockCheck::Passed);
        let d: Vec<_> = t.delays(&spill).collect();
        let max = d.iter().map(|x| x.1).max().unwrap();
        assert!((39 * MS..=41 * MS).contains(&max), "{max}");
        let late: Vec<i64> = d.iter().filter(|x| x.1 >= 2 * MS).map(|x| x.1).collect();
        assert_eq!(late.len(), 20, "{late:?}");
        assert!(late.iter().all(|&l| l >= 20 * MS), "{late:?}");
        assert!(d.iter().all(|x| x.1 <= 41 * MS));
    }

    #[test]
    fn a_slow_drift_between_the_clocks_is_not_delay() {
        let spill = Spill::default();
        let t = track(1000, 200, &spill);
        assert_eq!(t.clock_check(MS, &spill), ClockCheck::Passed);
        let late = t.delays(&spill).filter(|x| x.1 >= 2 * MS).count();
        assert!(late <= 20, "{late}");
    }

    #[test]
    fn a_clock_that_does_not_tick_at_1khz_is_refused() {
        let s = Spill::default();
        assert_eq!(track(250, 0, &s).clock_check(MS, &s), ClockCheck::Failed);
        assert_eq!(track(10_000, 0, &s).clock_check(MS, &s), ClockCheck::Failed);
        let mut short = DelayTrack::default();
        short.add(0, 0, 5, &s);
        short.add(100, 100 * MS, 105, &s);
        assert_eq!(short.clock_check(MS, &s), ClockCheck::TooShort);
    }

    /// The bins as the track kept them before it packed any: every packet merged into its
    /// bin, in index order.
    fn plain(packets: &[(i64, i64, i64)]) -> Vec<OffsetBin> {
        let mut bins: Vec<OffsetBin> = Vec::new();
        for &(index, ts, off) in packets {
            match bins.binary_search_by_key(&index, |b| b.index) {
                Ok(i) => {
                    let b = &mut bins[i];
                    b.min = b.min.min(off);
                    if off > b.max {
                        b.max = off;
                        b.max_at = ts;
                    }
                }
                Err(i) => bins.insert(
                    i,
                    OffsetBin {
                        index,
                        min: off,
                        max: off,
                        max_at: ts,
                    },
                ),
            }
        }
        bins
    }

    proptest::proptest! {
        /// Whatever the order of the packets (late ones reaching into packed blocks, before the
        /// first, into gaps), the packed track holds exactly the plain track's bins.
        #[test]
        fn packed_bins_are_the_plain_bins(
            steps in proptest::collection::vec((0i64..3, -300i64..3, 0i64..MS, 0u32..40), 1..3000),
        ) {
            let mut t = DelayTrack::default();
            let spill = Spill::default();
            let mut packets = Vec::new();
            let mut newest = 1_700_000_000_000i64;
            let first_tsval = 1_000_000u32;
            for (k, (ahead, back, within, jitter)) in steps.into_iter().enumerate() {
                newest += ahead;
                let index = if back < 0 { newest + back } else { newest };
                let ts = index * MS + within;
                // A 1 kHz clock, a few ticks of queueing now and then.
                let tsval = if k == 0 { first_tsval } else {
                    (first_tsval as i64 + (index - 1_700_000_000_000) - i64::from(jitter % 7)) as u32
                };
                t.add(index, ts, tsval, &spill);
                let first = t.first_tsval.unwrap();
                let off = ts - (tsval.wrapping_sub(first) as i32 as i64) * TICK_NS;
                packets.push((index, ts, off));
            }
            let want = plain(&packets);
            proptest::prop_assert_eq!(t.all(&spill).collect::<Vec<_>>(), want);
        }
    }

    /// A long track packs its older bins into the scratch file, in blocks that grow as the
    /// track does: a few bytes a bin there, under one in memory (with blocks of 32 bins
    /// throughout it was 1.5), and all of them come back, also with late packets reaching
    /// into the large blocks.
    #[test]
    fn a_long_track_packs() {
        let mut t = DelayTrack::default();
        let spill = Spill::default();
        let mut packets = Vec::new();
        let mut add = |t: &mut DelayTrack, at: i64, tsval: u32| {
            t.add(at.div_euclid(MS), at, tsval, &spill);
            let off = at - (tsval.wrapping_sub(1_000) as i32 as i64) * TICK_NS;
            packets.push((at.div_euclid(MS), at, off));
        };
        for k in 0..100_000i64 {
            let at = 1_700_000_000_000 * MS + k * MS + 150_000 + (k * 7919) % 300_000;
            add(&mut t, at, (1_000 + k) as u32);
            if k % 5_000 == 4_999 {
                add(&mut t, at - 3_000 * MS + 7, (1_000 + k - 3_002) as u32);
            }
        }
        t.shrink();
        let held = t.blocks.capacity() * std::mem::size_of::<Block>()
            + t.bins.capacity() * std::mem::size_of::<OffsetBin>();
        let per_bin = held as f64 / 100_000.0;
        assert!(per_bin < 1.0, "{per_bin:.2} bytes a bin in memory");
        assert!(t.blocks.iter().any(|b| b.bins >= 256), "the blocks grew");
        let spilled = spill.bytes() as f64 / 100_000.0;
        assert!(
            spilled < 12.0,
            "{spilled:.1} bytes a bin in the scratch file"
        );
        assert_eq!(t.all(&spill).collect::<Vec<_>>(), plain(&packets));
    }
}
