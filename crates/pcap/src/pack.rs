//! Packing numbers that a long pass keeps: LEB128 varints (prost's, the protobuf encoding)
//! with zigzag for signed values.
//!
//! In: `i64` pairs, appended. Out: the same pairs, in the same order, from a byte vector of
//! a few bytes a pair instead of 16 (32 in a growing `Vec` just after it doubled), and in the
//! pass's scratch file a chunk at a time ([`SpilledPairs`]). Used for the upstream delays a
//! retired connection leaves per host ([`crate::retired::HostDelays`]), and to sort the
//! pass's upstream delays through the scratch file ([`SortedPairs`]);
//! [`crate::bins::PackedBins`] packs channels' bins the same way.

use prost::encoding::{decode_varint, encode_varint};

use crate::spill::{Spill, Spilled};

/// Packed bytes a [`SpilledPairs`] holds in memory before it writes them out as a chunk
/// (about 85 pairs): bench/pcap.sh's 100,000-connection capture has 250 hosts, each with
/// a chunk in the making.
const CHUNK_BYTES: usize = 512;

/// Zigzag: small negative and positive numbers as small unsigned ones.
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A list of `(a, b)` pairs packed as the step of `a` from the previous pair's and `b`
/// itself: small when `a` is a time that mostly moves forward a little and `b` a short
/// duration.
#[derive(Debug, Clone, Default)]
pub struct PackedPairs {
    data: Vec<u8>,
    len: usize,
    last_a: i64,
}

impl PackedPairs {
    /// Appends a pair.
    pub fn push(&mut self, a: i64, b: i64) {
        encode_varint(zigzag(a.wrapping_sub(self.last_a)), &mut self.data);
        encode_varint(zigzag(b), &mut self.data);
        self.last_a = a;
        self.len += 1;
    }

    /// Appends every pair of `other`, in its order.
    pub fn append(&mut self, other: &PackedPairs) {
        for (a, b) in other.iter() {
            self.push(a, b);
        }
    }

    /// Pairs held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.data.capacity()
    }

    /// The pairs in the order they were pushed.
    pub fn iter(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        let mut data: &[u8] = &self.data;
        let mut a = 0i64;
        // Written by `push`: every varint is whole.
        std::iter::from_fn(move || {
            if data.is_empty() {
                return None;
            }
            a = a.wrapping_add(unzigzag(decode_varint(&mut data).unwrap_or(0)));
            let b = unzigzag(decode_varint(&mut data).unwrap_or(0));
            Some((a, b))
        })
    }
}

/// Pairs kept to the end of the pass: packed, and written to the pass's [`Spill`] a chunk of
/// `CHUNK_BYTES` at a time, so that memory holds only the chunk in the making. The same
/// `spill` must be passed to every call (a sharded pass's threads share one).
#[derive(Debug, Default)]
pub struct SpilledPairs {
    chunks: Vec<Spilled>,
    tail: PackedPairs,
    spilled: usize,
}

impl SpilledPairs {
    /// Appends `pairs`, in their order.
    pub fn extend(&mut self, pairs: impl IntoIterator<Item = (i64, i64)>, spill: &Spill) {
        for (a, b) in pairs {
            if self.tail.data.capacity() == 0 {
                // Full chunks are cut just past the limit: one allocation a host.
                self.tail.data.reserve_exact(CHUNK_BYTES + 20);
            }
            self.tail.push(a, b);
            if self.tail.data.len() >= CHUNK_BYTES {
                self.seal(spill);
            }
        }
    }

    /// Writes the chunk in the making out (its buffer is kept for the next).
    fn seal(&mut self, spill: &Spill) {
        self.chunks.push(spill.put(&self.tail.data));
        self.spilled += self.tail.len;
        self.tail.data.clear();
        (self.tail.len, self.tail.last_a) = (0, 0);
    }

    /// Appends every pair of `other` (kept in the same scratch file).
    pub fn append(&mut self, other: SpilledPairs, spill: &Spill) {
        // Its chunks stay where they are; only the pairs in the making are copied, after the
        // last of `self`'s own chunks so that the order holds.
        if !self.tail.is_empty() {
            self.seal(spill);
        }
        self.chunks.extend(other.chunks);
        self.spilled += other.spilled;
        self.extend(other.tail.iter(), spill);
    }

    /// Pairs held.
    pub fn len(&self) -> usize {
        self.spilled + self.tail.len
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pairs in the order they were appended, read back a chunk at a time.
    pub fn iter<'a>(&'a self, spill: &'a Spill) -> impl Iterator<Item = (i64, i64)> + 'a {
        self.chunks
            .iter()
            .flat_map(move |c| {
                let chunk = PackedPairs {
                    data: spill.get(c),
                    ..PackedPairs::default()
                };
                chunk.iter().collect::<Vec<_>>()
            })
            .chain(self.tail.iter())
    }
}

/// Pairs sorted in runs of [`RUN_PAIRS`]: the pairs of a run are sorted in memory and
/// written to the pass's [`Spill`] packed, in blocks of `RUN_BLOCK_PAIRS`; reading merges
/// the runs a block of each at a time. Memory: one run in the making (up to 4 MiB) and, when
/// read, one block per run. A 30-minute stream's 3.6 million upstream delays, sorted as one list
/// at the end of the pass, were 58 MB of its 85 MiB peak (bench/pcap.sh).
#[derive(Debug, Default)]
pub struct SortedPairs {
    run: Vec<(i64, i64)>,
    runs: Vec<Vec<Spilled>>,
}

/// Pairs sorted in memory at once.
pub const RUN_PAIRS: usize = 1 << 18;
/// Pairs packed into one piece of the scratch file, read back at once.
const RUN_BLOCK_PAIRS: usize = 4096;

impl SortedPairs {
    /// Adds a pair.
    pub fn push(&mut self, pair: (i64, i64), spill: &Spill) {
        self.run.push(pair);
        if self.run.len() >= RUN_PAIRS {
            self.seal(spill);
        }
    }

    /// Sorts the run in the making and writes it out.
    fn seal(&mut self, spill: &Spill) {
        self.run.sort_unstable();
        let blocks = self
            .run
            .chunks(RUN_BLOCK_PAIRS)
            .map(|block| {
                let mut packed = PackedPairs::default();
                // The second of a pair as its distance from the first (a delay's end from its
                // start): a few bytes, where the time itself takes nine.
                packed.extend(block.iter().map(|&(a, b)| (a, b.wrapping_sub(a))));
                spill.put(&packed.data)
            })
            .collect();
        self.runs.push(blocks);
        self.run.clear();
    }

    /// Every pair, in order (the order of `(i64, i64)`).
    pub fn into_sorted(mut self, spill: &Spill) -> impl Iterator<Item = (i64, i64)> + '_ {
        if self.runs.is_empty() {
            // One run: sorted where it is, nothing written.
            self.run.sort_unstable();
            return Merge::Memory(self.run.into_iter());
        }
        if !self.run.is_empty() {
            self.seal(spill);
        }
        self.run = Vec::new();
        let mut runs: Vec<RunReader> = self
            .runs
            .into_iter()
            .map(|blocks| RunReader {
                blocks: blocks.into_iter(),
                block: Vec::new().into_iter(),
            })
            .collect();
        let mut heads = std::collections::BinaryHeap::new();
        for (i, r) in runs.iter_mut().enumerate() {
            if let Some(p) = r.next(spill) {
                heads.push(std::cmp::Reverse((p, i)));
            }
        }
        Merge::Runs { runs, heads, spill }
    }
}

/// A sealed run read back a block at a time.
#[derive(Debug)]
struct RunReader {
    blocks: std::vec::IntoIter<Spilled>,
    block: std::vec::IntoIter<(i64, i64)>,
}

impl RunReader {
    fn next(&mut self, spill: &Spill) -> Option<(i64, i64)> {
        loop {
            if let Some(p) = self.block.next() {
                return Some(p);
            }
            let packed = PackedPairs {
                data: spill.get(&self.blocks.next()?),
                ..PackedPairs::default()
            };
            let pairs: Vec<(i64, i64)> =
                packed.iter().map(|(a, d)| (a, a.wrapping_add(d))).collect();
            self.block = pairs.into_iter();
        }
    }
}

/// What [`SortedPairs::into_sorted`] reads from.
enum Merge<'a> {
    Memory(std::vec::IntoIter<(i64, i64)>),
    Runs {
        runs: Vec<RunReader>,
        /// Each run's smallest pair not yet given, and the run.
        heads: std::collections::BinaryHeap<std::cmp::Reverse<((i64, i64), usize)>>,
        spill: &'a Spill,
    },
}

impl Iterator for Merge<'_> {
    type Item = (i64, i64);

    fn next(&mut self) -> Option<(i64, i64)> {
        match self {
            Merge::Memory(pairs) => pairs.next(),
            Merge::Runs { runs, heads, spill } => {
                let std::cmp::Reverse((pair, i)) = heads.pop()?;
                if let Some(next) = runs[i].next(spill) {
                    heads.push(std::cmp::Reverse((next, i)));
                }
                Some(pair)
            }
        }
    }
}

impl Extend<(i64, i64)> for PackedPairs {
    fn extend<T: IntoIterator<Item = (i64, i64)>>(&mut self, iter: T) {
        for (a, b) in iter {
            self.push(a, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn zigzag_round_trips_the_extremes() {
        for v in [0, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    /// A host's delays: a time a millisecond or so after the last, a delay of some
    /// microseconds; packed in about 6 bytes a pair.
    #[test]
    fn delays_pack_to_a_few_bytes_a_pair() {
        let mut p = PackedPairs::default();
        let mut t = 1_700_000_000_000_000_000i64;
        for i in 0..10_000i64 {
            t += 700_000 + (i * 7919) % 900_000;
            p.push(t, (i * 104_729) % 300_000);
        }
        assert_eq!(p.len(), 10_000);
        let per_pair = p.data.len() as f64 / p.len() as f64;
        assert!(per_pair < 7.0, "{per_pair:.1} bytes a pair");
    }

    proptest! {
        /// Sorted through the scratch file in runs (of any length: one run, several, a
        /// run cut at a block's end) the pairs come back as a sort in memory gives them.
        #[test]
        fn sorted_pairs_are_the_pairs_sorted(
            pairs in proptest::collection::vec(any::<(i64, i64)>(), 0..300),
            near in proptest::collection::vec((0i64..1_000_000, 0i64..1000), 0..300),
            runs in 0usize..4,
        ) {
            let spill = Spill::default();
            let mut sorted = SortedPairs::default();
            let mut all: Vec<(i64, i64)> = pairs.iter().chain(&near).copied().collect();
            // Runs are sealed by hand here (RUN_PAIRS is a quarter of a million).
            let cut = all.len() / (runs + 1);
            for (k, &p) in all.iter().enumerate() {
                sorted.push(p, &spill);
                if cut > 0 && k % cut == cut - 1 {
                    sorted.seal(&spill);
                }
            }
            all.sort_unstable();
            prop_assert_eq!(sorted.into_sorted(&spill).collect::<Vec<_>>(), all);
            prop_assert_eq!(spill.lost(), 0);
        }

        #[test]
        fn packed_pairs_come_back_in_order(pairs in proptest::collection::vec(any::<(i64, i64)>(), 0..300)) {
            let mut p = PackedPairs::default();
            p.extend(pairs.iter().copied());
            let mut q = PackedPairs::default();
            q.push(5, -5);
            q.append(&p);
            prop_assert_eq!(p.iter().collect::<Vec<_>>(), pairs.clone());
            prop_assert_eq!(q.iter().skip(1).collect::<Vec<_>>(), pairs);
            prop_assert_eq!(q.len(), p.len() + 1);
        }

        /// Chunks in the scratch file and the one in the making come back as one list, in
        /// order, also when one list is appended to another.
        #[test]
        fn spilled_pairs_come_back_in_order(
            pairs in proptest::collection::vec(any::<(i64, i64)>(), 0..600),
            small in proptest::collection::vec((0i64..1_000_000, 0i64..1000), 0..600),
        ) {
            let spill = Spill::default();
            let mut p = SpilledPairs::default();
            p.extend(pairs.iter().copied(), &spill);
            p.extend(small.iter().copied(), &spill);
            let all: Vec<(i64, i64)> = pairs.iter().chain(&small).copied().collect();
            prop_assert_eq!(p.iter(&spill).collect::<Vec<_>>(), all.clone());
            prop_assert_eq!(p.len(), all.len());
            let mut q = SpilledPairs::default();
            q.extend([(5, -5)], &spill);
            q.append(p, &spill);
            prop_assert_eq!(q.iter(&spill).skip(1).collect::<Vec<_>>(), all.clone());
            prop_assert_eq!(q.len(), all.len() + 1);
            let mut r = SpilledPairs::default();
            r.append(q, &spill);
            prop_assert_eq!(r.len(), all.len() + 1);
            prop_assert_eq!(spill.lost(), 0);
        }
    }
}
