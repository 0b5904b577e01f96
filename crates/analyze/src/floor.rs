//! Latency floor: the fastest request against what the path allows.
//!
//! In: a distribution and an expected floor (a ping, a TCP connect, a "do nothing" server's
//! minimum). Out: a [`FloorCheck`] with one of three verdicts and a sentence saying what it
//! means.
//!
//! A request can never be faster than the network round trip plus the server's minimum work. If
//! the fastest of thousands of samples is many times an independently measured floor, something
//! adds a fixed cost to every request: a synchronous log write, a lock, a DNS lookup, an
//! in-memory lookup that is not in memory. If the fastest request is *below* the floor, the
//! floor is not one: it was measured on another path or at another time, or it includes work
//! these requests skip (the path is faster than assumed).

use serde::Serialize;

use crate::Distribution;

/// Ratio of the minimum to the floor at or above which every request pays a fixed cost.
pub const FLOOR_RATIO: f64 = 2.0;

/// Ratio below which the minimum is called below the floor. A floor measured apart from the
/// requests (another tool, another moment) differs from their own best case by a few percent
/// of jitter; 10% below is more than that.
pub const BELOW_FLOOR_RATIO: f64 = 0.9;

/// What the minimum says about the expected floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FloorVerdict {
    /// At least [`FLOOR_RATIO`] times the floor: a fixed cost the path does not explain.
    AboveFloor,
    /// Between [`BELOW_FLOOR_RATIO`] and [`FLOOR_RATIO`] times the floor: the fastest requests
    /// cost what the path costs.
    AtFloor,
    /// Under [`BELOW_FLOOR_RATIO`] times the floor: the expectation is wrong.
    BelowFloor,
}

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
    /// Share of samples below the floor itself.
    pub share_below_floor: f64,
    /// `min_ns / expected_ns`.
    pub ratio: f64,
    /// What the minimum says.
    pub verdict: FloorVerdict,
    /// Whether the minimum is far above the floor (`verdict == above_floor`).
    pub above_floor: bool,
    /// One sentence for people, with the verdict.
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
    let verdict = if ratio >= FLOOR_RATIO {
        FloorVerdict::AboveFloor
    } else if ratio < BELOW_FLOOR_RATIO {
        FloorVerdict::BelowFloor
    } else {
        FloorVerdict::AtFloor
    };
    let near = dist.share_at_or_below(expected.saturating_mul(2));
    let below = dist.share_at_or_below(expected - 1);
    let fmt = |v: u64| tailhunt_model::format_duration_ns(v as f64);
    let source = source.unwrap_or("the expected floor").to_string();
    let (min_s, floor_s) = (fmt(min), fmt(expected));
    let message = match verdict {
        FloorVerdict::AboveFloor => format!(
            "minimum {min_s} is {ratio:.1}x the expected floor {floor_s} ({source}): every \
             request pays a fixed cost the path does not explain"
        ),
        FloorVerdict::AtFloor => format!(
            "minimum {min_s} is at the expected floor {floor_s} ({source}): the fastest \
             requests cost what the path costs; {:.1}% of samples are within 2x of it",
            near * 100.0
        ),
        FloorVerdict::BelowFloor => format!(
            "minimum {min_s} is below the expected floor {floor_s} ({source}), and so are \
             {:.1}% of samples: the expectation is wrong (measured on another path or at \
             another time) or the path is faster than assumed; measure the floor again on \
             the same path",
            below * 100.0
        ),
    };
    Some(FloorCheck {
        expected_ns: expected,
        source,
        min_ns: min,
        share_near_floor: near,
        share_below_floor: below,
        ratio,
        verdict,
        above_floor: verdict == FloorVerdict::AboveFloor,
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
        assert_eq!(f.verdict, FloorVerdict::AboveFloor);
        assert!(
            f.message
                .starts_with("minimum 5.00ms is 11.1x the expected floor 450us"),
            "{}",
            f.message
        );
    }

    #[test]
    fn healthy_minimum_is_at_the_floor() {
        let d = Distribution::from_values((0..1000).map(|i| 500_000 + i * 1000).collect());
        let f = check_floor(&d, 450_000, None).unwrap();
        assert!(!f.above_floor);
        assert_eq!(f.verdict, FloorVerdict::AtFloor);
        assert!(
            f.message.contains("is at the expected floor 450us"),
            "{}",
            f.message
        );
        assert!(check_floor(&Distribution::from_values(vec![]), 1, None).is_none());
    }

    /// A minimum of 315 us against a 450 us floor once read "0.7x the expected floor" with no
    /// verdict: a floor the data goes under is not a floor.
    #[test]
    fn minimum_below_the_floor_says_the_expectation_is_wrong() {
        let d = Distribution::from_values((0..1000).map(|i| 315_000 + i * 1000).collect());
        let f = check_floor(&d, 450_000, Some("--expect-floor 450us")).unwrap();
        assert_eq!(f.verdict, FloorVerdict::BelowFloor);
        assert!(!f.above_floor);
        assert!(
            (f.share_below_floor - 0.135).abs() < 1e-9,
            "{}",
            f.share_below_floor
        );
        assert!(
            f.message.starts_with(
                "minimum 315us is below the expected floor 450us (--expect-floor 450us), and so are 13.5% of samples: the expectation is wrong"
            ),
            "{}",
            f.message
        );
        assert!(!f.message.contains("0.7x"), "{}", f.message);
        // Within the jitter of a separately measured floor it is still at the floor.
        let d = Distribution::from_values(vec![430_000, 900_000]);
        assert_eq!(
            check_floor(&d, 450_000, None).unwrap().verdict,
            FloorVerdict::AtFloor
        );
    }
}
