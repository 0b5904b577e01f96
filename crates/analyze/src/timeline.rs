//! Everything the analysis says about one series over time.
//!
//! In: a series' timestamped samples and [`TimeOptions`] (the interval width, or none to choose
//! one, and the clock origin intervals count from). Out: a [`TimeAnalysis`]: the per-interval
//! percentiles and mode shares ([`crate::over_time`]), the periods found in each percentile
//! ([`crate::period`]; a period in p99 but not p50 is an oscillation of the tail only), and the
//! change points found in all percentiles at once ([`crate::changepoint`]), after any period
//! was removed so that an oscillation is not read as a run of steps.

use serde::Serialize;
use tailhunt_model::Sample;

pub use tailhunt_model::evidence::timeline::{Oscillation, Shift};

use crate::changepoint::{change_points, ChangePoint};
use crate::over_time::{auto_interval, over_time, OverTime};
use crate::period::{deseasonalize, find_period, Period};
use crate::{modes, percentile_label, Distribution};

/// Shortest period reported, ns (a minute).
pub const MIN_PERIOD_NS: i64 = 60_000_000_000;
/// The search starts this share below [`MIN_PERIOD_NS`]: the autocorrelation peak of a period
/// read over a few cycles wanders by a lag or two (the lab's minute-long tail wave peaked at
/// 56 s in 2 s intervals), and a period exactly at the bound must not be lost to it.
pub const PERIOD_SLACK: f64 = 0.1;
/// Longest period searched, ns (a day and a bit, so a daily cycle's peak is inside the range).
pub const MAX_PERIOD_NS: i64 = 90_000_000_000_000;
/// Smallest noise assumed of a percentile's log10 level (0.005 decade is 1.2%): a level that
/// moves less than that is not a change however quiet the series.
pub const MIN_NOISE_DECADES: f64 = 0.005;
/// Fewest intervals in a segment between change points.
pub const MIN_SEGMENT: usize = 5;

/// What to compute.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeOptions {
    /// Interval width, ns; `None` chooses one ([`auto_interval`]).
    pub interval_ns: Option<i64>,
    /// Where intervals start counting, ns on the run's clock.
    pub origin_ns: i64,
    /// Percentiles per interval.
    pub quantiles: Vec<f64>,
    /// Seed of the permutation tests.
    pub seed: u64,
}

impl Default for TimeOptions {
    fn default() -> Self {
        TimeOptions {
            interval_ns: None,
            origin_ns: 0,
            quantiles: vec![0.5, 0.9, 0.99],
            seed: 0x7a11,
        }
    }
}

/// One series over time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeAnalysis {
    /// Per-interval percentiles and mode shares.
    pub over_time: OverTime,
    /// Change points, in time order.
    pub shifts: Vec<Shift>,
    /// Periods found, one per percentile at most.
    pub periods: Vec<Oscillation>,
}

impl TimeAnalysis {
    /// The period of percentile `k`, if it has one.
    pub fn period_of(&self, k: usize) -> Option<&Oscillation> {
        self.periods.iter().find(|p| p.quantile == k)
    }
}

/// Where a series' intervals start counting: a probe run's origin (so intervals line up with
/// its rounds), otherwise the first sample's intended time (an import's clock is its file's).
pub fn interval_origin(run: &tailhunt_model::Run, samples: &[Sample]) -> Option<i64> {
    if run.kind == tailhunt_model::RunKind::Probe {
        return Some(run.origin.mono_ns);
    }
    samples.iter().map(|s| s.intended_ns).min()
}

/// `1h23m20s`: an offset into the run.
pub fn format_offset(ns: i64) -> String {
    let s = (ns.max(0) / 1_000_000_000) as u64;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    let mut out = String::new();
    if d > 0 {
        out += &format!("{d}d");
    }
    if h > 0 || d > 0 {
        out += &format!("{h}h");
    }
    if m > 0 || h > 0 || d > 0 {
        out += &format!("{m:02}m");
    }
    if d == 0 {
        out += &format!("{sec:02}s");
    }
    out.trim_start_matches('0').to_string()
}

/// Analyses `samples` over time; `None` without samples.
pub fn analyze_over_time(samples: &[Sample], opts: &TimeOptions) -> Option<TimeAnalysis> {
    let width = opts.interval_ns.or_else(|| auto_interval(samples))?;
    let dist = Distribution::from_samples(samples, false);
    let found = modes::find_modes(dist.histogram());
    let boundaries: Vec<u64> = found.gaps.iter().map(|g| g.boundary_ns).collect();
    let ot = over_time(samples, opts.origin_ns, width, &opts.quantiles, &boundaries);
    let grid = grid(&ot);
    let columns: Vec<Vec<Option<f64>>> = (0..opts.quantiles.len())
        .map(|k| {
            grid.iter()
                .map(|slot| {
                    slot.and_then(|i| ot.intervals[i].values_ns[k])
                        .map(|v| (v.max(1) as f64).log10())
                })
                .collect()
        })
        .collect();
    let min_lag = (MIN_PERIOD_NS as f64 * (1.0 - PERIOD_SLACK) / width as f64).floor() as usize;
    let max_lag = (MAX_PERIOD_NS as f64 / width as f64).ceil() as usize;
    let found: Vec<(usize, Period)> = columns
        .iter()
        .enumerate()
        .filter_map(|(k, c)| find_period(c, min_lag, max_lag).map(|p| (k, p)))
        .collect();
    let strongest = found.iter().max_by(|a, b| a.1.score.total_cmp(&b.1.score));
    let flat: Vec<Vec<Option<f64>>> = match strongest {
        Some((_, p)) => columns.iter().map(|c| deseasonalize(c, p.lag)).collect(),
        None => columns.clone(),
    };
    // Change points over the intervals that have every percentile.
    let slots: Vec<usize> = (0..grid.len())
        .filter(|&g| flat.iter().all(|c| c[g].is_some()))
        .collect();
    let rows: Vec<Vec<f64>> = slots
        .iter()
        .map(|&g| flat.iter().map(|c| c[g].unwrap_or(0.0)).collect())
        .collect();
    // With a period removed, a segment spans at least one whole period: over less, a phase of
    // the wave that the removal left a little uneven (its fit rings at the edges of a
    // square-ish wave) reads as a level of its own.
    let min_segment =
        strongest.map_or(MIN_SEGMENT, |(_, p)| MIN_SEGMENT.max(p.lag.ceil() as usize));
    let changes = change_points(&rows, min_segment, MIN_NOISE_DECADES, opts.seed);
    // A period must survive the removal of the steps: the trough test keeps a clean step from
    // passing as one, but a step mixed with noise can still leave a bump in the
    // autocorrelation.
    let levelled = remove_levels(&columns, &slots, &changes);
    let periods = found
        .iter()
        .filter(|(k, p)| {
            changes.is_empty()
                || find_period(&levelled[*k], min_lag, max_lag)
                    .is_some_and(|q| (q.lag / p.lag - 1.0).abs() <= 0.15)
        })
        .map(|(k, p)| Oscillation {
            label: percentile_label(opts.quantiles[*k]),
            quantile: *k,
            period_ns: (p.lag * width as f64).round() as i64,
            r: p.r,
            amplitude_ratio: 10f64.powf(p.amplitude),
        })
        .collect();
    let cuts: Vec<usize> = changes.iter().map(|c| c.index).collect();
    let shifts = changes
        .iter()
        .map(|c| shift(&ot, &flat, &grid, &slots, &cuts, c))
        .collect();
    Some(TimeAnalysis {
        over_time: ot,
        shifts,
        periods,
    })
}

/// Every interval slot from the first to the last, with the index of its stats if it has any.
fn grid(ot: &OverTime) -> Vec<Option<usize>> {
    let Some(first) = ot.intervals.first() else {
        return Vec::new();
    };
    let slot = |s: i64| ((s - first.start_ns) / ot.interval_ns) as usize;
    let len = ot.intervals.last().map_or(0, |l| slot(l.start_ns) + 1);
    let mut g = vec![None; len];
    for (i, s) in ot.intervals.iter().enumerate() {
        g[slot(s.start_ns)] = Some(i);
    }
    g
}

fn shift(
    ot: &OverTime,
    flat: &[Vec<Option<f64>>],
    grid: &[Option<usize>],
    slots: &[usize],
    cuts: &[usize],
    c: &ChangePoint,
) -> Shift {
    let interval_at = |row: usize| grid[slots[row.min(slots.len() - 1)]].unwrap_or(0);
    let i = interval_at(c.index);
    // The segments on either side: from the previous change point to the next one.
    let lo = cuts
        .iter()
        .copied()
        .filter(|&x| x < c.index)
        .max()
        .unwrap_or(0);
    let hi = cuts
        .iter()
        .copied()
        .filter(|&x| x > c.index)
        .min()
        .unwrap_or(slots.len());
    let level = |from: usize, to: usize| {
        flat.iter()
            .map(|col| {
                let v = slots[from..to].iter().filter_map(|&g| col[g]).collect();
                10f64.powf(median(v)).round() as u64
            })
            .collect()
    };
    Shift {
        at_ns: ot.intervals[i].start_ns,
        interval: i,
        p_value: c.p_value,
        // Levels are read from the percentiles with any period removed (the same series the
        // change points were found in): a segment of a few intervals at the run's edge that
        // falls in one phase of a wave differs from its neighbour by the wave, not by a step.
        // Without a period these are the percentiles as measured.
        before_ns: level(lo, c.index),
        after_ns: level(c.index, hi),
        segment_start_ns: ot.intervals[interval_at(lo)].start_ns,
        segment_end_ns: ot.intervals[interval_at(hi.saturating_sub(1))].end_ns,
    }
}

/// The columns with each segment's median (between change points) subtracted.
fn remove_levels(
    columns: &[Vec<Option<f64>>],
    slots: &[usize],
    changes: &[ChangePoint],
) -> Vec<Vec<Option<f64>>> {
    let mut cuts: Vec<usize> = changes.iter().map(|c| c.index).collect();
    cuts.sort_unstable();
    let mut bounds = vec![0];
    bounds.extend(cuts);
    bounds.push(slots.len());
    columns
        .iter()
        .map(|c| {
            let mut out = c.clone();
            for w in bounds.windows(2) {
                let seg: Vec<usize> = slots[w[0]..w[1]].to_vec();
                let m = median(seg.iter().filter_map(|&g| c[g]).collect());
                for g in seg {
                    out[g] = c[g].map(|x| x - m);
                }
            }
            out
        })
        .collect()
}

/// The median of a segment's values (the upper one of an even count), 0 without any.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::Outcome;

    /// A probe answering in about 2 ms for an hour, then refused in 0.1 ms for an hour (the
    /// service went away): failures, not a step down of its latency.
    #[test]
    fn a_probe_that_starts_failing_is_no_step() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let samples: Vec<Sample> = (0..7_200i64)
            .map(|i| {
                let (lat, outcome) = match i < 3_600 {
                    true => (2_000_000 + rng.random_range(0..200_000), Outcome::Ok),
                    false => (100_000 + rng.random_range(0..10_000), Outcome::Error),
                };
                Sample::from_latency(i * 1_000_000_000, lat, outcome)
            })
            .collect();
        let a = analyze_over_time(&samples, &TimeOptions::default()).unwrap();
        assert!(a.shifts.is_empty(), "{:?}", a.shifts);
        assert!(a.over_time.intervals.iter().any(|i| i.errors == i.count));
    }

    #[test]
    fn offsets_read_like_durations() {
        assert_eq!(format_offset(5_000_000_000), "5s");
        assert_eq!(format_offset(5_000_000_000_000), "1h23m20s");
        assert_eq!(format_offset(90_061_000_000_000), "1d1h01m");
    }

    /// One sample a second for four hours, log-normal around 1 ms with 3% of samples in a
    /// slow mode 4x above; with `step`, the slow mode moves to 8x after 2h30m (p99 doubles,
    /// p50 does not); with `wave`, everything follows a 20-minute wave (x e^(0.4 sin)).
    fn planted(step: bool, wave: bool) -> Vec<Sample> {
        use rand::{Rng, SeedableRng};
        use rand_distr::{Distribution, LogNormal};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let d = LogNormal::new(0.0, 0.2).unwrap();
        (0..14_400i64)
            .map(|i| {
                let phase = (2.0 * std::f64::consts::PI * i as f64 / 1200.0).sin();
                let mut v = 1e6 * d.sample(&mut rng);
                if wave {
                    v *= (0.4 * phase).exp();
                }
                if rng.random::<f64>() < 0.03 {
                    v *= if step && i >= 9_000 { 8.0 } else { 4.0 };
                }
                Sample::from_latency(i * 1_000_000_000, v as i64, Outcome::Ok)
            })
            .collect()
    }

    #[test]
    fn a_tail_step_is_placed_and_a_median_wave_is_a_period() {
        let a = analyze_over_time(&planted(true, false), &TimeOptions::default()).unwrap();
        assert_eq!(a.over_time.interval_ns, 120_000_000_000);
        assert_eq!(a.shifts.len(), 1, "{:?}", a.shifts);
        assert!((a.shifts[0].at_ns - 9_000_000_000_000).abs() <= 240_000_000_000);
        assert!(a.shifts[0].ratio(2) > 1.8 && (a.shifts[0].ratio(0) - 1.0).abs() < 0.1);
        assert!(a.periods.is_empty(), "{:?}", a.periods);

        let a = analyze_over_time(&planted(false, true), &TimeOptions::default()).unwrap();
        let p50 = a.period_of(0).expect("the median's wave");
        assert!((p50.period_ns as f64 / 1200e9 - 1.0).abs() < 0.1, "{p50:?}");
        assert!(a.shifts.is_empty(), "{:?}", a.shifts);
    }

    /// The lab's `feed` as its prober sees it: a reply every 20 ms for four minutes at about
    /// 2.2 ms, 15% of replies 5 ms late in one half of every minute (at a random phase), 1% of
    /// them 1.5x slow, a two-second stall somewhere; and the same with a 3 ms step at 2m00s.
    /// The wave alone is no step (in 17% of the seeds a segment of a few intervals at the edge,
    /// or one mixing the phases unevenly, read as one before segments spanned a period and
    /// levels were read net of the wave); the step under the wave is found.
    #[test]
    fn a_wave_in_the_tail_is_no_step_and_a_step_under_it_is_found() {
        use rand::{Rng, SeedableRng};
        for step in [false, true] {
            for seed in 0..60u64 {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                let phase_ms = rng.random_range(0..60_000i64);
                let stall = rng.random_range(0..12_000i64);
                let samples: Vec<Sample> = (0..12_000i64)
                    .map(|i| {
                        let t_ms = i * 20;
                        let mut v = 2_200_000.0 * (1.0 + 0.03 * rng.random::<f64>());
                        if (t_ms + phase_ms) % 60_000 < 30_000 && rng.random::<f64>() < 0.15 {
                            v += 5_000_000.0;
                        }
                        if step && t_ms >= 120_000 {
                            v += 3_000_000.0;
                        }
                        if rng.random::<f64>() < 0.01 {
                            v *= 1.5;
                        }
                        if (i - stall).abs() < 50 {
                            v += 50_000_000.0 * rng.random::<f64>();
                        }
                        Sample::from_latency(t_ms * 1_000_000, v as i64, Outcome::Ok)
                    })
                    .collect();
                let a = analyze_over_time(&samples, &TimeOptions::default()).unwrap();
                let steps: Vec<&Shift> = a
                    .shifts
                    .iter()
                    .filter(|s| (0..3).any(|k| s.ratio(k).ln().abs() >= 1.2f64.ln()))
                    .collect();
                if step {
                    let at = steps.iter().map(|s| s.at_ns).collect::<Vec<_>>();
                    assert!(
                        at.iter()
                            .any(|&t| (t - 120_000_000_000).abs() <= 6_000_000_000),
                        "seed {seed}: the step at 2m00s not found: {:?}",
                        a.shifts
                    );
                } else {
                    assert!(steps.is_empty(), "seed {seed}, phase {phase_ms}: {steps:?}");
                }
            }
        }
    }
}
