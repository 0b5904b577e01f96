//! A fast hasher for the flow table and channels.
//!
//! The standard library's SipHash resists hash flooding, which costs ~5% of a capture pass
//! here (profiled by `bench/pcap.sh`): every packet hashes its 5-tuple. A capture is the
//! user's own file, and an adversary shaping a capture to collide buckets only slows this one
//! analysis, so the multiply-rotate hash of Firefox and rustc (FxHash) is used instead.

use std::hash::{BuildHasherDefault, Hasher};

/// FxHash: per word, `rotate_left(5) ^ word`, times a constant.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// `HashMap<K, V, FxBuild>`.
pub type FxBuild = BuildHasherDefault<FxHasher>;

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuild>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    #[test]
    fn different_keys_hash_differently() {
        let h = |v: &(u32, u16)| {
            let mut s = FxHasher::default();
            v.hash(&mut s);
            s.finish()
        };
        assert_ne!(h(&(1, 2)), h(&(2, 1)));
        assert_eq!(h(&(7, 7)), h(&(7, 7)));
    }
}
