//! When requests are due: a fixed-rate or Poisson timetable, independent of responses (open
//! loop). Latency is measured from these intended times.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

/// Arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Arrival {
    /// Evenly spaced.
    Fixed,
    /// Exponential gaps (a Poisson process), as independent users produce.
    Poisson,
}

/// Intended send times of one worker.
pub struct Schedule {
    next_ns: f64,
    gap_ns: f64,
    poisson: Option<(Exp<f64>, StdRng)>,
}

impl Schedule {
    /// `rate` requests/s starting at `start_ns` (the first one `phase_ns` later).
    pub fn new(arrival: Arrival, rate: f64, start_ns: i64, phase_ns: f64, seed: u64) -> Schedule {
        let gap_ns = 1e9 / rate;
        let poisson = match arrival {
            Arrival::Fixed => None,
            Arrival::Poisson => Exp::new(1.0 / gap_ns)
                .ok()
                .map(|e| (e, StdRng::seed_from_u64(seed))),
        };
        let mut s = Schedule {
            next_ns: start_ns as f64 + phase_ns,
            gap_ns,
            poisson,
        };
        if s.poisson.is_some() {
            s.next_ns = start_ns as f64;
            s.advance();
        }
        s
    }

    /// The next intended time, ns.
    pub fn peek(&self) -> i64 {
        self.next_ns as i64
    }

    /// Moves to the following request.
    pub fn advance(&mut self) {
        self.next_ns += match &mut self.poisson {
            Some((exp, rng)) => exp.sample(rng),
            None => self.gap_ns,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_is_evenly_spaced() {
        let mut s = Schedule::new(Arrival::Fixed, 1000.0, 0, 500_000.0, 1);
        let times: Vec<i64> = (0..3)
            .map(|_| {
                let t = s.peek();
                s.advance();
                t
            })
            .collect();
        assert_eq!(times, [500_000, 1_500_000, 2_500_000]);
    }

    #[test]
    fn poisson_has_the_right_mean_rate() {
        let mut s = Schedule::new(Arrival::Poisson, 10_000.0, 0, 0.0, 7);
        for _ in 0..100_000 {
            s.advance();
        }
        let secs = s.peek() as f64 / 1e9;
        assert!((secs - 10.0).abs() < 0.2, "{secs}");
    }
}
