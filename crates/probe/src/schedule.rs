//! The round plan: when each probe's slot is due.
//!
//! In: the run's origin (monotonic ns), the interval, the slots one round holds (probe and
//! [`Op`]) and a seed. Out: for round `k`, every slot once, in a fresh random order, at
//! `origin + k * interval + jitter + position * spacing`, where the round's start-up jitter
//! is drawn uniformly from the first [`JITTER`] of the interval and the slots are spaced
//! evenly over [`crate::config::SPREAD`] of it. The plan is open loop: it depends on the
//! clock only, never on how long probes took, so a slow probe shows up as its own latency and
//! lateness, not as a shifted schedule. Every intended time of round `k` lies in
//! `[origin + k * interval, origin + (k + 1) * interval)`, so the round of a sample is
//! `(intended_ns - origin) / interval_ns`, and the order of a round is the order of its
//! samples' intended times (the order is recorded by the times themselves).

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::config::SPREAD;
use crate::kind::Op;

/// The share of the interval the round's start may be jittered by (so probes of many hosts on
/// the same cadence do not fire in lockstep).
pub const JITTER: f64 = 0.1;

/// One probe's slot in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Index of the probe (configuration order).
    pub probe: usize,
    /// What it does in this slot.
    pub op: Op,
    /// The round.
    pub round: u64,
    /// Position in the round's random order (0 = first).
    pub position: usize,
    /// When it is due, monotonic ns.
    pub intended_ns: i64,
}

/// Plans rounds.
pub struct Planner {
    origin_ns: i64,
    interval_ns: i64,
    slots: Vec<(usize, Op)>,
    rng: SmallRng,
}

impl Planner {
    /// A plan for `slots` every `interval_ns` from `origin_ns`.
    pub fn new(origin_ns: i64, interval_ns: i64, slots: Vec<(usize, Op)>, seed: u64) -> Planner {
        Planner {
            origin_ns,
            interval_ns: interval_ns.max(1),
            slots,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// When round `k` begins (before its jitter).
    pub fn round_start_ns(&self, k: u64) -> i64 {
        self.origin_ns
            .saturating_add((k as i64).saturating_mul(self.interval_ns))
    }

    /// Round `k`'s slots, in their (random) order.
    pub fn round(&mut self, k: u64) -> Vec<Slot> {
        self.slots.shuffle(&mut self.rng);
        let i = self.interval_ns as f64;
        let jitter = (self.rng.random::<f64>() * JITTER * i) as i64;
        let spacing = SPREAD * i / self.slots.len().max(1) as f64;
        let start = self.round_start_ns(k) + jitter;
        self.slots
            .iter()
            .enumerate()
            .map(|(position, &(probe, op))| Slot {
                probe,
                op,
                round: k,
                position,
                intended_ns: start + (position as f64 * spacing) as i64,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_runs_once_per_round_inside_its_round_in_varying_order() {
        let slots: Vec<(usize, Op)> = (0..7).map(|p| (p, Op::Default)).collect();
        let (origin, interval) = (1_000_000, 10_000_000);
        let mut plan = Planner::new(origin, interval, slots, 42);
        let mut orders = std::collections::HashSet::new();
        for k in 0..50 {
            let r = plan.round(k);
            let mut probes: Vec<usize> = r.iter().map(|s| s.probe).collect();
            orders.insert(probes.clone());
            probes.sort_unstable();
            assert_eq!(probes, (0..7).collect::<Vec<_>>());
            for (pos, s) in r.iter().enumerate() {
                assert_eq!(s.position, pos);
                assert_eq!((s.intended_ns - origin) / interval, k as i64, "{s:?}");
            }
            // The order is the order of the intended times.
            assert!(r.windows(2).all(|w| w[0].intended_ns < w[1].intended_ns));
        }
        assert!(orders.len() > 40, "orders should vary: {}", orders.len());
    }

    #[test]
    fn the_same_seed_plans_the_same_rounds() {
        let slots: Vec<(usize, Op)> = (0..4).map(|p| (p, Op::Default)).collect();
        let mut a = Planner::new(0, 1_000, slots.clone(), 7);
        let mut b = Planner::new(0, 1_000, slots, 7);
        assert_eq!(a.round(3), b.round(3));
    }
}
