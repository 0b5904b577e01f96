//! Compact binary form of a histogram, used by the store.
//!
//! Layout (all integers LEB128 varints unless noted):
//! `b"TH"`, version `1` (byte), `sub_bits` (byte), `min`, `max`, `sum` low 64 bits, `sum` high
//! 64 bits, number of non-empty buckets, then per bucket the gap in index since the previous
//! non-empty bucket and its count. A typical latency histogram takes a few hundred bytes.

use thiserror::Error;

use crate::{Histogram, Layout};

/// Why bytes did not decode into a histogram.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Not a tailhunt histogram, or a version this build does not know.
    #[error("not a tailhunt histogram (bad magic or version)")]
    BadHeader,
    /// Sub-bucket bits out of range.
    #[error("invalid layout: {0} sub-bucket bits")]
    BadLayout(u8),
    /// Ran out of bytes.
    #[error("truncated histogram encoding")]
    Truncated,
    /// A bucket index beyond the layout, a zero count, or counts that overflow.
    #[error("corrupt histogram encoding: {0}")]
    Corrupt(&'static str),
}

impl Histogram {
    /// Encodes to the compact form described in the module docs.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(b"TH");
        out.push(1);
        out.push(self.layout().sub_bits() as u8);
        put_varint(&mut out, self.min().unwrap_or(0));
        put_varint(&mut out, self.max().unwrap_or(0));
        put_varint(&mut out, self.sum() as u64);
        put_varint(&mut out, (self.sum() >> 64) as u64);
        let buckets: Vec<_> = self.buckets().collect();
        put_varint(&mut out, buckets.len() as u64);
        let mut next = 0usize;
        for b in buckets {
            put_varint(&mut out, (b.index - next) as u64);
            put_varint(&mut out, b.count);
            next = b.index + 1;
        }
        out
    }

    /// Decodes the compact form; never panics on arbitrary input.
    pub fn decode(bytes: &[u8]) -> Result<Histogram, DecodeError> {
        if bytes.len() < 4 || &bytes[..2] != b"TH" || bytes[2] != 1 {
            return Err(DecodeError::BadHeader);
        }
        let layout = Layout::new(u32::from(bytes[3])).ok_or(DecodeError::BadLayout(bytes[3]))?;
        let mut r = &bytes[4..];
        let min = get_varint(&mut r)?;
        let max = get_varint(&mut r)?;
        let sum = u128::from(get_varint(&mut r)?) | (u128::from(get_varint(&mut r)?) << 64);
        let n = get_varint(&mut r)?;
        if n > layout.bucket_count() as u64 {
            return Err(DecodeError::Corrupt("more buckets than the layout has"));
        }
        let mut counts = Vec::new();
        let mut next = 0u64;
        let mut total = 0u64;
        for _ in 0..n {
            let index = next
                .checked_add(get_varint(&mut r)?)
                .filter(|&i| i < layout.bucket_count() as u64)
                .ok_or(DecodeError::Corrupt("bucket index beyond the layout"))?;
            let count = get_varint(&mut r)?;
            if count == 0 {
                return Err(DecodeError::Corrupt("empty bucket listed"));
            }
            total = total
                .checked_add(count)
                .ok_or(DecodeError::Corrupt("counts overflow"))?;
            counts.resize(index as usize + 1, 0);
            counts[index as usize] = count;
            next = index + 1;
        }
        if !r.is_empty() {
            return Err(DecodeError::Corrupt("trailing bytes"));
        }
        if total > 0 && (min > max || layout.index(min) >= counts.len()) {
            return Err(DecodeError::Corrupt("min/max inconsistent with buckets"));
        }
        Ok(Histogram::from_parts(layout, counts, min, max, sum))
    }
}

fn put_varint(out: &mut Vec<u8>, v: u64) {
    crate::varint::put(out, v);
}

fn get_varint(r: &mut &[u8]) -> Result<u64, DecodeError> {
    crate::varint::get(r).ok_or(DecodeError::Truncated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trips() {
        let mut h = Histogram::new();
        for v in [0u64, 1, 999, 1_000_000, u64::MAX] {
            h.record_n(v, 3);
        }
        assert_eq!(Histogram::decode(&h.encode()), Ok(h));
        let empty = Histogram::new();
        assert_eq!(Histogram::decode(&empty.encode()), Ok(empty));
    }

    proptest! {
        #[test]
        fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Histogram::decode(&bytes);
            let mut with_header = b"TH\x01\x07".to_vec();
            with_header.extend_from_slice(&bytes);
            let _ = Histogram::decode(&with_header);
        }

        #[test]
        fn any_histogram_round_trips(values in proptest::collection::vec(any::<u64>(), 0..200)) {
            let mut h = Histogram::new();
            for v in values { h.record(v); }
            prop_assert_eq!(Histogram::decode(&h.encode()), Ok(h));
        }
    }
}
