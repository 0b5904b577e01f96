//! Unsigned LEB128 varints: 7 bits per byte, high bit set on all but the last. Used by the
//! histogram codec and the store's sample blocks.

/// Appends `v`.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads one value, advancing `r`; `None` when the bytes end early or the value is longer
/// than 64 bits.
pub fn get(r: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = r.split_first()?;
        *r = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_and_rejects_truncation() {
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            let mut b = Vec::new();
            super::put(&mut b, v);
            let mut r = b.as_slice();
            assert_eq!(super::get(&mut r), Some(v));
            assert!(r.is_empty());
            let mut short = &b[..b.len() - 1];
            assert_eq!(super::get(&mut short), None);
        }
        assert_eq!(super::get(&mut [0xffu8; 11].as_slice()), None);
    }
}
