//! Latency floor: the fastest request against what the path allows.
//!
//! A request can never be faster than the network round trip plus the server's minimum work. If
//! the fastest of thousands of samples is many times an independently measured floor (a ping,
//! a TCP connect, a "do nothing" server), something adds a fixed cost to every request: a
//! synchronous log write, a lock, a DNS lookup, an in-memory lookup that is not in memory.

use serde::Serialize;

use crate::Distribution;

/// Ratio above which the floor check fires.
pub const FLOOR_RATIO: f64 = 2.0;

/// Result of a floor check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorCheck {
    /// The expected floor, ns.
    pub expected_ns: u64,
    /// Where it came from.
    pub source: String,
    /// Smallest observed value, ns.
    pub min_ns: u64,
    /// Share of samples below twice the floor.
    pub share_near_floor: f64,
    /// `min_ns / expected_ns`.
    pub ratio: f64,
    /// Whether the minimum is far above the floor.
    pub above_floor: bool,
    /// One sentence for people.
    pub message: String,
}

/// Compares the distribution's minimum with an expected floor; `None` when empty.
pub fn check_floor(
    dist: &Distribution,
    expected_ns: u64,
    source: Option<&str>,
) -> Option<FloorCheck> {
    let min = dist.histogram().min()?;
    let expected = expected_ns.max(1);
    let ratio = min as f64 / expected as f64;
    let above = ratio >= FLOOR_RATIO;
    let near = dist.share_at_or_below(expected.saturating_mul(2));
    let fmt = |v: u64| tailhunt_model::format_duration_ns(v as f64);
    let source = source.unwrap_or("the expected floor").to_string();
    let message = if above {
        format!(
            "minimum {} is {:.1}x the expected floor {} ({}): every request pays a fixed cost the path does not explain",
            fmt(min), ratio, fmt(expected), source
        )
    } else {
        format!(
            "minimum {} is {:.1}x the expected floor {} ({}); {:.1}% of samples are within 2x of it",
            fmt(min), ratio, fmt(expected), source, near * 100.0
        )
    };
    Some(FloorCheck {
        expected_ns: expected,
        source,
        min_ns: min,
        share_near_floor: near,
        ratio,
        above_floor: above,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_that_never_goes_below_five_ms_is_flagged() {
        let d = Distribution::from_values((0..1000).map(|i| 5_000_000 + i * 1000).collect());
        let f = check_floor(&d, 450_000, Some("--expect-floor 450us")).unwrap();
        assert!(f.above_floor);
        assert!(
            f.message
                .starts_with("minimum 5.00ms is 11.1x the expected floor 450us"),
            "{}",
            f.message
        );
    }

    #[test]
    fn healthy_minimum_is_not_flagged() {
        let d = Distribution::from_values((0..1000).map(|i| 500_000 + i * 1000).collect());
        assert!(!check_floor(&d, 450_000, None).unwrap().above_floor);
        assert!(check_floor(&Distribution::from_values(vec![]), 1, None).is_none());
    }
}
