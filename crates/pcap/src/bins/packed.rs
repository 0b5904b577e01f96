//! A channel's bins, packed once they are too old to change in practice.
//!
//! In: packets as `(bin index, bytes, timestamp)`, nearly in time order, as
//! [`SparseBins::add`] takes them. Out: exactly the bins a [`SparseBins`] fed the same packets
//! would hold, unpacked on demand ([`PackedBins::unpack`]: the end of the pass unpacks one
//! channel at a time).
//!
//! A channel lives as long as the capture, so its bins are what grows with the capture's
//! length and its number of hosts: 40 bytes a bin in a `SparseBins`, and up to twice that in
//! a growing `Vec` (bench/pcap.sh's 100,000-connection capture: 17 MiB of its 57 MiB peak,
//! for 250 client hosts' half a million non-empty bins). Here a bin more than [`HORIZON_NS`]
//! (and a block's bins) behind its channel's newest is packed into a block of
//! [`BLOCK_BINS`] (more once the channel has many blocks, `block_bins`): varints
//! ([`crate::pack`]) of the step from the
//! previous bin's index, the bytes, the packets and the first and last packets' offsets,
//! about 8 to 10 bytes a bin on short-connection traffic. A packet for a bin already packed
//! (a capture whose timestamps go back further than the horizon) unpacks its block, adds to
//! it and packs it again: slower, never different.

use prost::encoding::{decode_varint, encode_varint};

use super::{Bin, SparseBins};
use crate::pack::{unzigzag, zigzag};
use crate::spill::{Spill, Spilled};

/// Bins per packed block at first (a late packet unpacks one block).
pub const BLOCK_BINS: usize = 32;

/// The blocks of a list that grow [`block_bins`] by one doubling.
const GROW_EVERY: usize = 256;
/// Doublings at most: blocks of 4,096 bins.
const MAX_GROWTH: usize = 7;

/// Bins in the next block of a list that has `blocks` already: [`BLOCK_BINS`], doubled every
/// [`GROW_EVERY`] blocks up to 4,096. The list's index holds a [`Block`] (48 bytes) a block,
/// so with blocks of 32 the index grew with the bins: 12.6 MB for the four channels of a
/// 30-minute one-stream capture (bench/pcap.sh), a third of its peak, and a day's
/// 86 million bins a channel would need 130 MB each. Growing blocks cost a longer list of
/// recent bins (up to 4,096 and the horizon) once a channel has a few million bins; a
/// channel with fewer than 8,192 packed bins (every channel of a capture of a few minutes)
/// is packed as before.
pub(crate) fn block_bins(blocks: usize) -> usize {
    BLOCK_BINS << (blocks / GROW_EVERY).min(MAX_GROWTH)
}

/// How far behind its channel's newest bin a bin must be to be packed: captures of `-i any`
/// interleave per-CPU buffers by a few milliseconds, so a packet this late is rare.
pub const HORIZON_NS: i64 = 100_000_000;

/// A run of packed bins, `first..=last` by index, in index order, in the pass's scratch file
/// ([`Spill`]); also the blocks of a [`crate::delay::DelayTrack`], whose records are its own.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) bins: u32,
    pub(crate) data: Spilled,
}

/// The bins of one channel: the newest as a [`SparseBins`], the older ones packed into the
/// pass's scratch file (a few bytes a bin there, and 48 bytes a block of [`BLOCK_BINS`] in
/// memory).
#[derive(Debug, Clone)]
pub struct PackedBins {
    recent: SparseBins,
    blocks: Vec<Block>,
    bin_ns: i64,
    /// [`HORIZON_NS`] in bins.
    horizon: i64,
}

impl PackedBins {
    /// No bins yet, of `bin_ns` each.
    pub fn new(bin_ns: i64) -> PackedBins {
        PackedBins {
            recent: SparseBins::default(),
            blocks: Vec::new(),
            bin_ns,
            horizon: (HORIZON_NS / bin_ns.max(1)).max(2),
        }
    }

    /// Adds a packet of `bytes` seen at `ts_ns` to bin `index` (`ts_ns / bin width`); returns
    /// the bin's bytes with it, as [`SparseBins::add`].
    /// Blocks packed go to `spill`.
    #[inline]
    pub fn add(&mut self, index: i64, bytes: u64, ts_ns: i64, spill: &Spill) -> u64 {
        if index < self.packed_end() {
            return self.add_late(index, bytes, ts_ns, spill);
        }
        let before = self.recent.len();
        let total = self.recent.add(index, bytes, ts_ns);
        if self.recent.len() > before && self.recent.len() > block_bins(self.blocks.len()) {
            self.pack_old(spill);
        }
        total
    }

    /// Non-empty bins.
    pub fn len(&self) -> usize {
        self.recent.len() + self.blocks.iter().map(|b| b.bins as usize).sum::<usize>()
    }

    /// Whether no packet was added.
    pub fn is_empty(&self) -> bool {
        self.recent.is_empty() && self.blocks.is_empty()
    }

    /// Every bin, in time order, read back from `spill` a block at a time as it is read: what
    /// the end of the pass reads a channel with (its memory is one block, however long the
    /// capture).
    pub fn iter<'a>(&'a self, spill: &'a Spill) -> impl Iterator<Item = Bin> + 'a {
        let bin_ns = self.bin_ns;
        self.blocks
            .iter()
            .flat_map(move |b| {
                let mut bins = Vec::with_capacity(b.bins as usize);
                unpack_block(b, &spill.get(&b.data), bin_ns, &mut bins);
                bins
            })
            .chain(self.recent.bins().iter().copied())
    }

    /// Every bin, in time order, at once.
    pub fn unpack(&self, spill: &Spill) -> SparseBins {
        SparseBins::from_sorted(self.iter(spill).collect())
    }

    /// Heap bytes held (the blocks' records, any block kept in memory and the recent bins'
    /// capacity).
    pub fn heap_bytes(&self) -> usize {
        let kept = |b: &Block| match &b.data {
            Spilled::Mem(d) => d.len(),
            Spilled::File { .. } => 0,
        };
        self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.blocks.iter().map(kept).sum::<usize>()
            + self.recent.capacity() * std::mem::size_of::<Bin>()
    }

    /// The first index a new bin may have without going into a block.
    fn packed_end(&self) -> i64 {
        self.blocks.last().map_or(i64::MIN, |b| b.last + 1)
    }

    /// Packs the oldest recent bins into a block ([`block_bins`] of them) when that many are
    /// past the horizon.
    fn pack_old(&mut self, spill: &Spill) {
        let newest = self.recent.bins().last().map_or(i64::MIN, |b| b.index);
        let old = self
            .recent
            .bins()
            .partition_point(|b| b.index < newest.saturating_sub(self.horizon));
        let n = block_bins(self.blocks.len());
        if old >= n {
            let block = pack_block(&self.recent.bins()[..n], self.bin_ns, spill);
            self.blocks.push(block);
            self.recent.drain_front(n);
        }
    }

    /// A packet for a bin at or before the last packed one: into the block that holds (or
    /// would hold) its index.
    /// The block is read back and written anew (its old bytes stay in the file, unused).
    #[cold]
    fn add_late(&mut self, index: i64, bytes: u64, ts_ns: i64, spill: &Spill) -> u64 {
        let k = self
            .blocks
            .partition_point(|b| b.first <= index)
            .saturating_sub(1);
        let block = &self.blocks[k];
        let mut bins = Vec::with_capacity(block.bins as usize + 1);
        unpack_block(block, &spill.get(&block.data), self.bin_ns, &mut bins);
        let mut sparse = SparseBins::from_sorted(bins);
        let total = sparse.add(index, bytes, ts_ns);
        self.blocks[k] = pack_block(sparse.bins(), self.bin_ns, spill);
        total
    }
}

/// Packs `bins` (sorted, at least one) into a block in `spill`. Offsets use wrapping
/// arithmetic, so any bin (even one whose times lie outside its index's interval) comes back
/// exactly.
fn pack_block(bins: &[Bin], bin_ns: i64, spill: &Spill) -> Block {
    let mut data = Vec::with_capacity(bins.len() * 10);
    let first = bins[0].index;
    let mut prev = first;
    for b in bins {
        encode_varint(b.index.wrapping_sub(prev) as u64, &mut data);
        encode_varint(b.bytes, &mut data);
        encode_varint(u64::from(b.packets), &mut data);
        let start = b.index.wrapping_mul(bin_ns);
        encode_varint(zigzag(b.first_ns.wrapping_sub(start)), &mut data);
        encode_varint(zigzag(b.last_ns.wrapping_sub(b.first_ns)), &mut data);
        prev = b.index;
    }
    Block {
        first,
        last: prev,
        bins: bins.len() as u32,
        data: spill.put(&data),
    }
}

/// Unpacks `data`, the bytes of `block`, onto `out`.
fn unpack_block(block: &Block, mut data: &[u8], bin_ns: i64, out: &mut Vec<Bin>) {
    let mut index = block.first;
    // The block was written by `pack_block`: every varint is whole.
    let mut next = || decode_varint(&mut data).unwrap_or(0);
    for _ in 0..block.bins {
        index = index.wrapping_add(next() as i64);
        let bytes = next();
        let packets = next() as u32;
        let first_ns = index.wrapping_mul(bin_ns).wrapping_add(unzigzag(next()));
        let last_ns = first_ns.wrapping_add(unzigzag(next()));
        out.push(Bin {
            index,
            bytes,
            packets,
            first_ns,
            last_ns,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: i64 = 1_000_000;

    /// A short-connection host's channel: a packet or three every few milliseconds for ten
    /// seconds. Packed, it takes a fraction of the 40 bytes a bin of a `SparseBins`.
    #[test]
    fn a_sparse_channel_packs_to_a_fraction_of_its_bins() {
        let mut p = PackedBins::new(MS);
        let spill = Spill::default();
        let mut plain = SparseBins::default();
        let mut t = 1_700_000_000_000 * MS;
        let mut seed = 3u64;
        for _ in 0..20_000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            t += ((seed >> 40) % 2_000_000) as i64;
            let bytes = 66 + (seed >> 20) % 1500;
            p.add(t / MS, bytes, t, &spill);
            plain.add(t / MS, bytes, t);
        }
        assert_eq!(p.unpack(&spill).bins(), plain.bins());
        let per_bin = p.heap_bytes() as f64 / p.len() as f64;
        assert!(per_bin < 3.0, "{per_bin:.1} bytes a bin in memory");
        let spilled = spill.bytes() as f64 / p.len() as f64;
        assert!(
            spilled < 12.0,
            "{spilled:.1} bytes a bin in the scratch file"
        );
    }

    /// A channel busy for minutes packs into blocks that grow: its index stays small, and
    /// late packets into the large blocks still land in their bins.
    #[test]
    fn a_long_channel_packs_into_growing_blocks() {
        let mut p = PackedBins::new(MS);
        let spill = Spill::default();
        let mut plain = SparseBins::default();
        let t0 = 1_700_000_000_000 * MS;
        for k in 0..200_000i64 {
            let t = t0 + k * MS + (k * 7919) % MS;
            assert_eq!(p.add(t / MS, 100, t, &spill), plain.add(t / MS, 100, t));
            if k % 10_000 == 9_999 {
                let late = t - 5_000 * MS;
                assert_eq!(
                    p.add(late / MS, 60, late, &spill),
                    plain.add(late / MS, 60, late)
                );
            }
        }
        assert_eq!(p.unpack(&spill).bins(), plain.bins());
        // 6,250 blocks of 32 bins; growing, under 1,400.
        assert!(p.blocks.len() < 1_400, "{} blocks", p.blocks.len());
        assert!(p.blocks.iter().any(|b| b.bins >= 512));
    }

    proptest! {
        /// Whatever the order of the packets (late ones reaching into packed blocks, before the
        /// first block, into gaps), the bins are those of a `SparseBins` fed the same.
        #[test]
        fn packed_bins_are_the_plain_bins(
            steps in proptest::collection::vec((0i64..40, -400i64..4, 1u64..2000, 0i64..MS), 1..1500),
            bin_ms in 1i64..3,
        ) {
            let bin_ns = bin_ms * MS;
            let mut p = PackedBins::new(bin_ns);
            let spill = Spill::default();
            let mut plain = SparseBins::default();
            let mut newest = 1_000_000i64;
            for (ahead, back, bytes, within) in steps {
                // Mostly forward, sometimes far back (beyond the horizon of 100 or 50 bins).
                newest += ahead;
                let index = if back < 0 { newest + back } else { newest };
                let ts = index * bin_ns + within % bin_ns;
                prop_assert_eq!(p.add(index, bytes, ts, &spill), plain.add(index, bytes, ts));
            }
            let unpacked = p.unpack(&spill);
            prop_assert_eq!(unpacked.bins(), plain.bins());
            prop_assert_eq!(p.iter(&spill).collect::<Vec<_>>(), plain.bins());
            prop_assert_eq!(p.len(), plain.len());
        }
    }
}
