//! Sequence-number arithmetic modulo 2^32 (RFC 9293 section 3.4).

/// `a` is after `b`.
#[inline]
pub fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// `a` is at or after `b`.
#[inline]
pub fn at_or_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// Bytes from `b` up to `a` (0 when `a` is not after `b`).
#[inline]
pub fn distance(a: u32, b: u32) -> u32 {
    if after(a, b) {
        a.wrapping_sub(b)
    } else {
        0
    }
}

/// The later of two sequence numbers.
#[inline]
pub fn later(a: u32, b: u32) -> u32 {
    if after(b, a) {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_around() {
        assert!(after(5, u32::MAX - 5));
        assert!(!after(u32::MAX - 5, 5));
        assert_eq!(distance(5, u32::MAX - 5), 11);
        assert!(at_or_after(7, 7));
        assert_eq!(later(5, u32::MAX - 5), 5);
    }
}
