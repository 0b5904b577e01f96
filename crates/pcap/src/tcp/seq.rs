//! Sequence-number arithmetic modulo 2^32 (RFC 9293 section 3.4), and sequence numbers
//! unwrapped into 64-bit offsets from an origin (for series that climb past 4 GiB).

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

/// A sequence number as a 64-bit offset from an origin (a side's initial sequence number),
/// carried across 2^32 wrap-arounds: each new value is taken as the nearest one, within 2^31
/// either way, to the last (the same rule as [`after`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unwrapped {
    raw: u32,
    offset: i64,
}

impl Unwrapped {
    /// `value` as an offset from `origin`.
    pub fn new(origin: u32, value: u32) -> Unwrapped {
        Unwrapped {
            raw: value,
            offset: value.wrapping_sub(origin) as i32 as i64,
        }
    }

    /// Moves to `value`; returns its offset.
    #[inline]
    pub fn advance(&mut self, value: u32) -> i64 {
        self.offset += value.wrapping_sub(self.raw) as i32 as i64;
        self.raw = value;
        self.offset
    }

    /// The offset of the last value.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// The offset of `value`, taken within 2^31 of the last value (nothing moves).
    #[inline]
    pub fn offset_of(&self, value: u32) -> i64 {
        self.offset + value.wrapping_sub(self.raw) as i32 as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwraps_past_four_gib() {
        let origin = u32::MAX - 999;
        let mut u = Unwrapped::new(origin, origin.wrapping_add(1));
        assert_eq!(u.offset(), 1);
        assert_eq!(u.advance(500), 1500, "across 2^32");
        let mut at = 500u32;
        for _ in 0..3 {
            at = at.wrapping_add(1 << 30);
            u.advance(at);
        }
        at = at.wrapping_add(1 << 30);
        assert_eq!(u.advance(at), 1500 + 4 * (1 << 30), "a second lap");
        assert_eq!(
            u.offset_of(at.wrapping_sub(100)),
            1500 + 4 * (1 << 30) - 100
        );
        assert_eq!(
            u.advance(at.wrapping_sub(10)),
            1490 + 4 * (1 << 30),
            "a step back"
        );
        assert_eq!(Unwrapped::new(10, 5).offset(), -5, "before the origin");
    }

    #[test]
    fn wraps_around() {
        assert!(after(5, u32::MAX - 5));
        assert!(!after(u32::MAX - 5, 5));
        assert_eq!(distance(5, u32::MAX - 5), 11);
        assert!(at_or_after(7, 7));
        assert_eq!(later(5, u32::MAX - 5), 5);
    }
}
