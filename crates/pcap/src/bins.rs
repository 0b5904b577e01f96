//! Bytes and packets per time bin, sparse, tolerant of out-of-order timestamps.
//!
//! In: `(timestamp, bytes)` per packet. Out: the non-empty bins in time order. A bin is the
//! half-open interval `[i * width, (i + 1) * width)` of epoch nanoseconds, so bins of different
//! channels (and of different captures) line up on the wall clock.
//!
//! Memory is proportional to the number of non-empty bins (the capture's duration), never to
//! the number of packets. Packets arrive nearly in time order: the common case appends to or
//! adds into the last bin; an earlier timestamp (captures from `-i any` interleave per-CPU
//! buffers) is placed by binary search.

use serde::Serialize;

pub mod packed;

pub use packed::PackedBins;

/// One non-empty bin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bin {
    /// Bin index: the bin starts at `index * width_ns` (epoch ns).
    pub index: i64,
    /// Bytes on the wire (frame lengths) in the bin.
    pub bytes: u64,
    /// Packets in the bin.
    pub packets: u32,
    /// Timestamp of the earliest packet in the bin (epoch ns).
    pub first_ns: i64,
    /// Timestamp of the latest packet in the bin.
    pub last_ns: i64,
}

impl Bin {
    fn new(index: i64, bytes: u64, ts: i64) -> Bin {
        Bin {
            index,
            bytes,
            packets: 1,
            first_ns: ts,
            last_ns: ts,
        }
    }

    fn add(&mut self, bytes: u64, ts: i64) {
        self.bytes += bytes;
        self.packets += 1;
        self.first_ns = self.first_ns.min(ts);
        self.last_ns = self.last_ns.max(ts);
    }
}

/// A sparse series of bins of one width.
#[derive(Debug, Clone, Default)]
pub struct SparseBins {
    bins: Vec<Bin>,
}

impl SparseBins {
    /// Bins already in time order (indexes strictly increasing), as [`SparseBins::bins`] gives
    /// them.
    pub fn from_sorted(bins: Vec<Bin>) -> SparseBins {
        debug_assert!(bins.windows(2).all(|w| w[0].index < w[1].index));
        SparseBins { bins }
    }

    /// Non-empty bins.
    pub fn len(&self) -> usize {
        self.bins.len()
    }

    /// Whether no packet was added.
    pub fn is_empty(&self) -> bool {
        self.bins.is_empty()
    }

    /// Bins the allocation has room for.
    pub fn capacity(&self) -> usize {
        self.bins.capacity()
    }

    /// Removes the first `n` bins.
    pub fn drain_front(&mut self, n: usize) {
        self.bins.drain(..n.min(self.bins.len()));
    }

    /// Drops the bins with an index in `from..to` for which `keep` is false; the others stay
    /// where they are. Costs the bins from `from` on, not those before it (a long flow's
    /// bins already decided are not looked at again).
    pub fn prune(&mut self, from: i64, to: i64, keep: impl Fn(i64) -> bool) {
        let start = self.bins.partition_point(|b| b.index < from);
        let end = start + self.bins[start..].partition_point(|b| b.index < to);
        let mut w = start;
        for r in start..end {
            if keep(self.bins[r].index) {
                self.bins[w] = self.bins[r];
                w += 1;
            }
        }
        self.bins.drain(w..end);
    }

    /// Gives back the spare capacity (a finished flow's bins no longer grow).
    pub fn shrink(&mut self) {
        self.bins.shrink_to_fit();
    }

    /// Adds a packet of `bytes` seen at `ts_ns` to bin `index` (`ts_ns / width`); returns
    /// the bin's bytes with it.
    #[inline]
    pub fn add(&mut self, index: i64, bytes: u64, ts_ns: i64) -> u64 {
        match self.bins.last_mut() {
            Some(last) if last.index == index => {
                last.add(bytes, ts_ns);
                last.bytes
            }
            Some(last) if last.index > index => self.add_out_of_order(index, bytes, ts_ns),
            _ => {
                self.bins.push(Bin::new(index, bytes, ts_ns));
                bytes
            }
        }
    }

    fn add_out_of_order(&mut self, index: i64, bytes: u64, ts_ns: i64) -> u64 {
        match self.bins.binary_search_by_key(&index, |b| b.index) {
            Ok(i) => {
                self.bins[i].add(bytes, ts_ns);
                self.bins[i].bytes
            }
            Err(i) => {
                self.bins.insert(i, Bin::new(index, bytes, ts_ns));
                bytes
            }
        }
    }

    /// Adds a whole bin (merging series, e.g. flows into their host pair).
    pub fn add_bin(&mut self, bin: &Bin) {
        match self.bins.binary_search_by_key(&bin.index, |b| b.index) {
            Ok(i) => {
                let b = &mut self.bins[i];
                b.bytes += bin.bytes;
                b.packets += bin.packets;
                b.first_ns = b.first_ns.min(bin.first_ns);
                b.last_ns = b.last_ns.max(bin.last_ns);
            }
            Err(i) => self.bins.insert(i, *bin),
        }
    }

    /// The non-empty bins, in time order.
    pub fn bins(&self) -> &[Bin] {
        &self.bins
    }

    /// Bytes in bins `[from, to]` (inclusive indexes).
    pub fn bytes_between(&self, from: i64, to: i64) -> u64 {
        bytes_between(&self.bins, from, to)
    }
}

/// Bytes in the bins of `bins` (in index order) with an index in `[from, to]`.
pub fn bytes_between(bins: &[Bin], from: i64, to: i64) -> u64 {
    let start = bins.partition_point(|b| b.index < from);
    bins[start..]
        .iter()
        .take_while(|b| b.index <= to)
        .map(|b| b.bytes)
        .sum()
}

/// Bytes per second that fill a bin of `width_ns` at `rate_bps` bits per second.
pub fn bin_capacity_bytes(rate_bps: u64, width_ns: i64) -> f64 {
    rate_bps as f64 / 8.0 * width_ns as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_packets_land_in_their_bins() {
        let mut b = SparseBins::default();
        for (i, bytes) in [(5, 100), (5, 50), (7, 10), (6, 1), (5, 2), (2, 3), (9, 4)] {
            b.add(i, bytes, i * 10 + bytes as i64 % 7);
        }
        let got: Vec<(i64, u64, u32)> = b
            .bins()
            .iter()
            .map(|b| (b.index, b.bytes, b.packets))
            .collect();
        assert_eq!(
            got,
            vec![(2, 3, 1), (5, 152, 3), (6, 1, 1), (7, 10, 1), (9, 4, 1)]
        );
        assert_eq!(b.bytes_between(5, 7), 163);
        assert_eq!((b.bins()[1].first_ns, b.bins()[1].last_ns), (51, 52));
        assert_eq!(b.bytes_between(i64::MIN, i64::MAX), 170);
    }

    #[test]
    fn capacity_of_a_millisecond_at_a_gigabit() {
        assert_eq!(bin_capacity_bytes(1_000_000_000, 1_000_000), 125_000.0);
    }
}
