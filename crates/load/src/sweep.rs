//! Sweeps: which rates, in which order, how often; and the sanity checks that say when a step's
//! numbers describe the client rather than the server.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use tailhunt_model::Sample;

use crate::engine::StepOutcome;
use crate::health::Health;

/// Order of the steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Lowest rate first.
    Asc,
    /// Highest first.
    Desc,
    /// Shuffled (default), so drift over time is not mistaken for an effect of the rate.
    Random,
}

/// One planned step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// Offered rate, requests/s.
    pub rate: f64,
    /// Which repetition (1-based).
    pub repeat: usize,
}

/// The steps of a sweep: every rate `repeat` times, each round in `order`.
pub fn plan(rates: &[f64], order: Order, repeat: usize, seed: u64) -> Vec<Step> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for k in 1..=repeat.max(1) {
        let mut round: Vec<f64> = rates.to_vec();
        match order {
            Order::Asc => round.sort_by(f64::total_cmp),
            Order::Desc => round.sort_by(|a, b| b.total_cmp(a)),
            Order::Random => round.shuffle(&mut rng),
        }
        out.extend(round.into_iter().map(|rate| Step { rate, repeat: k }));
    }
    out
}

/// The numbers of one step that the sanity checks and the summary table need.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFacts {
    /// Offered rate.
    pub rate: f64,
    /// Requests scheduled in the measured window.
    pub scheduled: u64,
    /// Completed ok in the window.
    pub ok: u64,
    /// Errors.
    pub errors: u64,
    /// Timeouts.
    pub timeouts: u64,
    /// Requests written.
    pub sent: u64,
    /// Never written.
    pub unsent: u64,
    /// Completions per second of measured time (ok only).
    pub achieved_rate: f64,
    /// 99th percentile of send lag, ns.
    pub send_lag_p99_ns: i64,
    /// Most requests waiting in the client for a connection.
    pub max_backlog: u64,
    /// Host health during the step.
    pub health: Health,
}

/// Computes the facts of a step from its measured samples.
pub fn facts(rate: f64, measured: &[Sample], out: &StepOutcome, health: Health) -> StepFacts {
    let count = |o| measured.iter().filter(|s| s.outcome == o).count() as u64;
    let mut lags: Vec<i64> = measured.iter().map(Sample::send_lag_ns).collect();
    lags.sort_unstable();
    let p99 = tailhunt_model::quantile::of_sorted(&lags, 0.99).unwrap_or(0);
    // Completions per second until the last one finished: a client that falls behind its
    // timetable finishes late, so this drops below the offered rate instead of hiding it.
    let last_end = measured
        .iter()
        .filter(|s| s.outcome == tailhunt_model::Outcome::Ok)
        .map(|s| s.end_ns)
        .max()
        .unwrap_or(out.end_ns);
    let secs = (last_end.max(out.end_ns) - out.measure_from_ns).max(1) as f64 / 1e9;
    let ok = count(tailhunt_model::Outcome::Ok);
    StepFacts {
        rate,
        scheduled: measured.len() as u64,
        ok,
        errors: count(tailhunt_model::Outcome::Error),
        timeouts: count(tailhunt_model::Outcome::Timeout),
        sent: out.counters.sent,
        unsent: out.counters.unsent,
        achieved_rate: ok as f64 / secs,
        send_lag_p99_ns: p99,
        max_backlog: out.counters.max_backlog,
        health,
    }
}

/// Send lag p99 above which the client is called saturated.
pub const SATURATED_LAG_NS: i64 = 1_000_000;
/// Host CPU share above which late sends are blamed on a busy client.
pub const BUSY_CPU: f64 = 0.8;
/// Steal share above which a run is untrustworthy.
pub const STEAL_LIMIT: f64 = 0.05;

/// Warnings about the measurement itself, each naming what to change.
pub fn warnings(f: &StepFacts, conns: usize, max_inflight: usize) -> Vec<String> {
    let mut w = Vec::new();
    let rate = tailhunt_model::format_rate(f.rate);
    if f.send_lag_p99_ns > SATURATED_LAG_NS {
        let lag = f.send_lag_p99_ns as f64 / 1e6;
        if f.max_backlog > 0 || f.health.cpu_busy > BUSY_CPU {
            w.push(format!(
                "at {rate}/s send lag p99 {lag:.1} ms: the client is saturated (requests went out late; the latency includes that wait). Use more --threads, fewer --conns per thread, or a lower rate"
            ));
        } else {
            w.push(format!(
                "at {rate}/s send lag p99 {lag:.1} ms although the client was mostly idle (host CPU {:.0}% busy): the host woke it late (virtualisation, power saving or another busy process); the latency includes that wait, so compare with the service time (tailhunt export: end_ns - start_ns)",
                f.health.cpu_busy * 100.0
            ));
        }
    }
    if f.scheduled > 0 && f.achieved_rate < 0.9 * f.rate && f.max_backlog > 0 {
        w.push(format!(
            "at {rate}/s only {}/s completed and up to {} requests waited for a connection: the pool ({conns} connections x {max_inflight} in flight) cannot carry the offered rate; raise --conns or --max-inflight",
            tailhunt_model::format_rate(f.achieved_rate),
            f.max_backlog
        ));
    }
    if f.health.steal > STEAL_LIMIT {
        w.push(format!(
            "at {rate}/s the hypervisor stole {:.0}% of CPU time: timings from this run are untrustworthy; repeat it (--repeat) or use a quieter machine",
            f.health.steal * 100.0
        ));
    }
    if f.health.tcp_retransmits > 0 {
        w.push(format!(
            "at {rate}/s this host retransmitted {} TCP segments during the step",
            f.health.tcp_retransmits
        ));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_format_for_people() {
        assert_eq!(tailhunt_model::format_rate(1500.0), "1.5k");
        assert_eq!(tailhunt_model::format_rate(50.0), "50");
    }

    #[test]
    fn plans_cover_every_rate_each_round() {
        let p = plan(&[50.0, 500.0, 5000.0], Order::Random, 2, 3);
        assert_eq!(p.len(), 6);
        for k in 1..=2 {
            let mut round: Vec<f64> = p.iter().filter(|s| s.repeat == k).map(|s| s.rate).collect();
            round.sort_by(f64::total_cmp);
            assert_eq!(round, [50.0, 500.0, 5000.0]);
        }
        let asc: Vec<f64> = plan(&[5.0, 1.0], Order::Asc, 1, 0)
            .iter()
            .map(|s| s.rate)
            .collect();
        assert_eq!(asc, [1.0, 5.0]);
    }
}
