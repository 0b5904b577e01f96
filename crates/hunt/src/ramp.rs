//! The rate sweep of a hunt: low rates first, ramping up only until latency or errors climb
//! (never past `--max-rate`), then the rates reached again in random order, as often as the
//! budget allows, so drift over time is not mistaken for an effect of the rate.
//!
//! In: the step configuration every step shares, the candidate rates, a sink (the sweep run's
//! writer), the stop flag and a progress callback. Out: the [`SweepStep`] of every step that
//! ran, in the order it ran (the rows of the hunt's table and the `sweep` document the
//! `latency-rises-as-load-falls` detector reads), and why the ramp stopped where it did.
//! Each step is one call of `tailhunt_load::record::run_sweep`, the same code `tailhunt load
//! --sweep` runs, so the series and the summaries are the ones `load` stores.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::SeedableRng;
use tailhunt_load::engine::{Live, StepConfig};
use tailhunt_load::record::{run_sweep, SweepRun};
use tailhunt_load::sweep::Step;
use tailhunt_model::evidence::sweep::SweepStep;
use tailhunt_model::{SeriesSink, SinkError};

use crate::Progress;

/// Errors, timeouts and never-sent requests above this share of a step's scheduled requests
/// count as errors climbing.
pub const ERROR_SHARE: f64 = 0.01;
/// A step's p50 (or p99) above this many times the best so far, and [`CLIMB_P50_NS`]
/// ([`CLIMB_P99_NS`]) above it, counts as latency climbing.
pub const CLIMB_FACTOR: f64 = 4.0;
/// ... by at least this much at the median, so microsecond jitter on a fast path is not a
/// climb.
pub const CLIMB_P50_NS: u64 = 1_000_000;
/// ... and at p99 by at least this much: on a shared 2-core host a loopback p99 wanders
/// between 0.2 and 3 ms from step to step with no load on the server at all (seen on the
/// first hunts here), so only a larger rise there means the target is saturating.
pub const CLIMB_P99_NS: u64 = 10_000_000;
/// Rounds of the sweep at most: the ramp and two randomised repeats.
pub const MAX_ROUNDS: usize = 3;
/// The repeat label of a ramp step run again to confirm a climb (after the rounds' labels, so
/// no two steps share a series).
pub const CONFIRM: usize = MAX_ROUNDS + 1;

/// The rates a hunt tries, lowest first: 50, 200, 1k, 4k, 16k, ... up to `max_rate`
/// (which is added when the last candidate falls short of it by more than a fifth).
pub fn candidate_rates(max_rate: f64) -> Vec<f64> {
    let mut out: Vec<f64> = [50.0, 200.0]
        .into_iter()
        .chain((0..12).map(|k| 1000.0 * 4f64.powi(k)))
        .filter(|&r| r <= max_rate)
        .collect();
    match out.last() {
        Some(&last) if last >= max_rate * 0.8 => {}
        _ => out.push(max_rate),
    }
    out
}

/// What the sweep gave.
#[derive(Debug, Default)]
pub struct Swept {
    /// Every step that ran, in order.
    pub steps: Vec<SweepStep>,
    /// The highest rate the ramp reached.
    pub top_rate: Option<f64>,
    /// Why the ramp stopped where it did.
    pub ramp_stop: String,
    /// First request error seen.
    pub first_error: Option<String>,
    /// Why the sweep ended early (a step that could not run, the server gone).
    pub failure: Option<String>,
}

/// The sweep's inputs.
pub struct SweepPlan<'a> {
    /// What every step shares (rate and seed are set per step).
    pub base: &'a StepConfig,
    /// Candidate rates, lowest first.
    pub rates: &'a [f64],
    /// Measured time of each rate's step (same order).
    pub durations: &'a [Duration],
    /// The target as written, for messages.
    pub url: &'a str,
    /// No step starts after this.
    pub deadline: Instant,
}

/// Runs the ramp, then randomised repeats of the rates reached while time allows.
pub fn run(
    plan: &SweepPlan<'_>,
    sink: &mut dyn SeriesSink,
    stop: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> Result<Swept, SinkError> {
    let live = Arc::new(Live::default());
    let mut out = Swept {
        ramp_stop: format!(
            "reached the highest rate allowed ({}/s, --max-rate)",
            tailhunt_model::format_rate(*plan.rates.last().unwrap_or(&0.0))
        ),
        ..Swept::default()
    };
    let step_time = |rate: f64| duration_of(plan, rate) + plan.base.warmup;
    let mut best = Best::default();
    let mut reached = Vec::new();
    for &rate in plan.rates {
        if !time_for(plan, stop, step_time(rate)) {
            out.ramp_stop = "the budget ran out during the ramp".into();
            break;
        }
        let Some(s) = one_step(plan, sink, &live, stop, rate, 1, &mut out, progress)? else {
            break;
        };
        reached.push(rate);
        if let Some(why) = climbed(&s, &best) {
            // One step can climb for a reason that is not the target's (a stall of a busy
            // host read as the server's silence stopped a Nagle hunt at 200/s): the same rate
            // again decides.
            if !time_for(plan, stop, step_time(rate)) {
                out.ramp_stop = why;
                break;
            }
            let again = one_step(plan, sink, &live, stop, rate, CONFIRM, &mut out, progress)?;
            match again.as_ref().map(|a| climbed(a, &best)) {
                Some(None) => {}
                Some(Some(_)) => {
                    out.ramp_stop = format!("{why}, and again when the step was repeated");
                    break;
                }
                None => break,
            }
        }
        if let Some(l) = &s.latency_ns {
            best.p50 = best.p50.min(l.p50);
            best.p99 = best.p99.min(l.p99);
        }
    }
    out.top_rate = reached.last().copied();
    let mut rng = rand::rngs::StdRng::seed_from_u64(plan.base.seed);
    for round in 2..=MAX_ROUNDS {
        let need = reached.iter().map(|r| step_time(*r)).sum();
        if reached.is_empty() || out.failure.is_some() || !time_for(plan, stop, need) {
            break;
        }
        let mut order = reached.clone();
        order.shuffle(&mut rng);
        for rate in order {
            if one_step(plan, sink, &live, stop, rate, round, &mut out, progress)?.is_none() {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// The measured time of `rate`'s step.
fn duration_of(plan: &SweepPlan<'_>, rate: f64) -> Duration {
    plan.rates
        .iter()
        .position(|r| *r == rate)
        .and_then(|i| plan.durations.get(i).copied())
        .unwrap_or(plan.base.duration)
}

/// Whether a stretch of `need` still fits before the deadline and no stop was asked for.
fn time_for(plan: &SweepPlan<'_>, stop: &AtomicBool, need: Duration) -> bool {
    !stop.load(Ordering::Relaxed) && Instant::now() + need <= plan.deadline
}

/// Runs one step through `run_sweep`; `None` when the sweep must end (no step, a failure, a
/// stop).
#[allow(clippy::too_many_arguments)]
fn one_step(
    plan: &SweepPlan<'_>,
    sink: &mut dyn SeriesSink,
    live: &Arc<Live>,
    stop: &Arc<AtomicBool>,
    rate: f64,
    repeat: usize,
    out: &mut Swept,
    progress: &mut dyn Progress,
) -> Result<Option<SweepStep>, SinkError> {
    progress.step_started(rate, repeat);
    let run = SweepRun {
        base: StepConfig {
            seed: plan.base.seed.wrapping_add((out.steps.len() as u64) * 1000),
            duration: duration_of(plan, rate),
            ..plan.base.clone()
        },
        plan: vec![Step { rate, repeat }],
        // Every step carries its repeat label, so a rate run again is a series of its own.
        repeats: CONFIRM,
        url: plan.url.to_string(),
    };
    let ran = run_sweep(&run, sink, live, stop)?;
    out.first_error = out.first_error.take().or(ran.first_error);
    if let Some(why) = ran.failure {
        out.failure = Some(why);
    }
    let step = ran.steps.into_iter().next();
    if let Some(s) = &step {
        progress.step_done(s);
        out.steps.push(s.clone());
    }
    let go_on = step.is_some() && out.failure.is_none() && !stop.load(Ordering::Relaxed);
    Ok(if go_on { step } else { None })
}

/// The lowest p50 and p99 of the steps so far, ns.
#[derive(Debug, Clone, Copy)]
struct Best {
    p50: u64,
    p99: u64,
}

impl Default for Best {
    fn default() -> Self {
        Best {
            p50: u64::MAX,
            p99: u64::MAX,
        }
    }
}

/// Whether `now` rose from `best` by [`CLIMB_FACTOR`] and at least `by` ns.
fn rose(now: u64, best: u64, by: u64) -> bool {
    best != u64::MAX && now as f64 > CLIMB_FACTOR * best as f64 && now > best.saturating_add(by)
}

/// Why a step counts as climbing: its errors, a bottleneck the load generator named, or a
/// p50 or p99 well above the best so far.
fn climbed(s: &SweepStep, best: &Best) -> Option<String> {
    let rate = tailhunt_model::format_rate(s.rate_per_s);
    let bad = s.errors + s.timeouts + s.unsent;
    let scheduled = s.scheduled.max(1);
    if bad as f64 > ERROR_SHARE * scheduled as f64 {
        return Some(format!(
            "errors climbed at {rate}/s: {bad} of {scheduled} requests failed, timed out or were never sent"
        ));
    }
    // `host-late` (a busy or virtualised host sent late) says nothing about the target; the
    // others say the target, the pool or the client cannot go faster.
    if let Some(b) = s.bottleneck.as_deref().filter(|b| *b != "host-late") {
        return Some(format!(
            "the load generator named a bottleneck at {rate}/s: {b}"
        ));
    }
    let l = s.latency_ns.as_ref()?;
    let ms = |ns: u64| ns as f64 / 1e6;
    if rose(l.p50, best.p50, CLIMB_P50_NS) {
        return Some(format!(
            "latency climbed at {rate}/s: p50 {:.2} ms against {:.2} ms at lower rates",
            ms(l.p50),
            ms(best.p50)
        ));
    }
    if rose(l.p99, best.p99, CLIMB_P99_NS) {
        return Some(format!(
            "latency climbed at {rate}/s: p99 {:.2} ms against {:.2} ms at lower rates",
            ms(l.p99),
            ms(best.p99)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_start_low_and_never_pass_the_maximum() {
        assert_eq!(
            candidate_rates(20_000.0),
            vec![50.0, 200.0, 1000.0, 4000.0, 16000.0]
        );
        assert_eq!(candidate_rates(30_000.0).last(), Some(&30000.0));
        assert_eq!(candidate_rates(30.0), vec![30.0]);
        assert!(candidate_rates(1e6).iter().all(|&r| r <= 1e6));
    }

    #[test]
    fn a_climb_needs_a_large_rise_not_jitter() {
        let best = Best {
            p50: 100_000,
            p99: 200_000,
        };
        // 0.2 ms -> 1.4 ms at p99: jitter on a shared host, not saturation.
        assert!(!rose(1_400_000, best.p99, CLIMB_P99_NS));
        // p50 0.1 ms -> 2 ms: the median moved, the target is queueing.
        assert!(rose(2_000_000, best.p50, CLIMB_P50_NS));
        assert!(!rose(2_000_000, u64::MAX, CLIMB_P50_NS));
    }
}
