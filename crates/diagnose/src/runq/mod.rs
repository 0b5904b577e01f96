//! `noisy-neighbor` and `cpu-throttled`: a cgroup's run-queue latency jumped, and either other
//! cgroups took its CPU or its own CPU quota held it back.
//!
//! The story (root cause #3): a container's run-queue p99 went from 83 µs to 131 ms with no
//! change of its own; preemption counts showed system services taking its CPU. The same
//! latency appears when a container exhausts its own CPU quota — a different verdict with a
//! different fix, which must not be mistaken for a neighbour.
//!
//! In: per cgroup, a timeline of intervals ([`CgroupTimeline`]): its run-queue latency
//! histogram, which cgroups ran on its CPU while its tasks waited (and how long: its wait time
//! split among them) and who preempted it, and its throttling counters. Out: at most one
//! finding per cgroup.
//!
//! - *Calm* intervals are those whose p99 is within [`CALM_SPREAD`] of the lowest interval p99,
//!   holding [`MIN_CALM_WAITS`] waits between them; their merged p99 is the baseline (or, with
//!   `--baseline RUN`, the earlier run's).
//! - *Elevated* intervals are those whose p99 is at least [`RISE`] times the baseline and at
//!   least [`FLOOR_NS`] with 99% confidence: the lower confidence bound of the interval's p99
//!   (from order statistics, so the bar is higher the fewer waits it holds) is above that
//!   threshold. A p99 read from 31 waits is their largest; one slow wait does not make an
//!   interval slow. At least [`MIN_ELEVATED`] of them are needed for any verdict: one slow
//!   second can be anything.
//! - `cpu-throttled` fires when the cgroup was throttled (`nr_throttled` grew) in at least half
//!   of its elevated intervals — or, when no interval stands out (the whole run is slow), in
//!   at least half of all intervals with p99 above the floor, which are at least half of them.
//! - `noisy-neighbor` (`neighbour`) fires otherwise, naming every other cgroup that held a
//!   real part of the elevated wait, whose hold on the CPU rose against the calm intervals,
//!   and whose hold coincides with the elevated intervals (it was there in most of them).
//!   `system` — the host's own processes, the tracer among them — must hold half the wait and
//!   have risen twice as much.

use std::collections::BTreeMap;

use tailhunt_analyze::quantiles::{ci_ranks, normal_quantile};
use tailhunt_histogram::Histogram;
use tailhunt_model::evidence::runq::{CgroupTimeline, RunqStep, WaitCharge};
use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};

mod neighbour;
#[cfg(test)]
mod tests;

/// Name of the neighbour detector.
pub const NOISY_DETECTOR: &str = "noisy-neighbor";
/// Name of the throttling detector.
pub const THROTTLED_DETECTOR: &str = "cpu-throttled";
/// Both, in the order they run.
pub const DETECTORS: [&str; 2] = [NOISY_DETECTOR, THROTTLED_DETECTOR];

/// An interval's p99 must be this many times the baseline p99 to count as elevated (the
/// ground-truth cases call a cause felt when the victim's own lateness p99 triples) ...
pub const RISE: f64 = 3.0;
/// ... and at least this long, ns (sub-millisecond jitter is not what users chase).
pub const FLOOR_NS: u64 = 1_000_000;
/// Intervals with fewer waits say nothing about a p99.
const MIN_WAITS: u64 = 20;
/// Calm intervals have a p99 within this factor of the lowest interval p99.
pub const CALM_SPREAD: f64 = 3.0;
/// Waits the calm intervals must hold together for their p99 to be a baseline (the p99 of
/// fewer rests on one or two waits).
pub const MIN_CALM_WAITS: u64 = 200;
/// Confidence with which an elevated interval's p99 is above the threshold (one-sided).
pub const ELEVATED_CONFIDENCE: f64 = 0.99;
/// Elevated intervals needed for a verdict.
pub const MIN_ELEVATED: usize = 2;

/// Both detectors over every cgroup's timeline. `baseline` holds the timelines of an earlier run
/// taken when things were fine (`tailhunt runq --baseline RUN`, possibly empty): a cgroup found
/// there is compared with that whole run instead of its own calm intervals, so a run that is
/// slow from its first second can still be judged.
pub fn diagnose(timelines: &[CgroupTimeline], baseline: &[CgroupTimeline]) -> Vec<Finding> {
    let now = Activity::of(timelines);
    let before = Activity::of(baseline);
    timelines
        .iter()
        .filter_map(|t| {
            let base = baseline.iter().find(|b| b.cgroup == t.cgroup);
            diagnose_one(t, base, &now, &before)
        })
        .collect()
}

/// Each cgroup's own demand for CPU per interval of one run: the time its tasks ran plus the
/// time they waited to run (all CPUs, ns), by interval end. Divided by the interval, it is how
/// many of its tasks were runnable on average: it rises with a new hog even on a saturated host
/// where the hog's CPU time can only come out of others'.
pub(crate) struct Activity<'a> {
    /// Whether the run recorded run time (runs that split waits by who ran do; a missing
    /// interval is then zero).
    known: bool,
    by: BTreeMap<&'a str, BTreeMap<i64, u64>>,
}

impl<'a> Activity<'a> {
    fn of(timelines: &'a [CgroupTimeline]) -> Activity<'a> {
        Activity {
            known: timelines
                .iter()
                .any(|t| t.wait_charge == WaitCharge::RanDuring),
            by: timelines
                .iter()
                .map(|t| {
                    let runnable = t
                        .steps
                        .iter()
                        .map(|s| {
                            let waited = u64::try_from(s.latency.sum()).unwrap_or(u64::MAX);
                            (s.end_ns, s.run_ns.unwrap_or(0).saturating_add(waited))
                        })
                        .collect();
                    (t.cgroup.as_str(), runnable)
                })
                .collect(),
        }
    }

    /// How many of `name`'s tasks were runnable on average over the intervals of `steps`
    /// (which belong to this run); None when the run did not record run time.
    pub(crate) fn runnable(&self, name: &str, steps: &[&RunqStep]) -> Option<f64> {
        if !self.known {
            return None;
        }
        let runs = self.by.get(name);
        let ns: u64 = steps
            .iter()
            .map(|s| runs.and_then(|r| r.get(&s.end_ns)).copied().unwrap_or(0))
            .sum();
        Some(ns as f64 / (secs(steps) * 1e9).max(1.0))
    }
}

/// Intervals with enough waits to say something about a p99.
fn usable_steps(t: &CgroupTimeline) -> Vec<&RunqStep> {
    t.steps
        .iter()
        .filter(|s| s.latency.count() >= MIN_WAITS)
        .collect()
}

fn p99(h: &Histogram) -> u64 {
    h.quantile(0.99).unwrap_or(0)
}

/// The lower bound of a histogram's p99 at [`ELEVATED_CONFIDENCE`]: the value at the rank below
/// which the true p99 lies with that small a chance. None with too few waits for one.
fn p99_lower_bound(h: &Histogram) -> Option<u64> {
    let z = normal_quantile(ELEVATED_CONFIDENCE);
    let (low, _) = ci_ranks(0.99, h.count(), z);
    h.value_at_rank(low?)
}

fn merged<'a>(steps: impl Iterator<Item = &'a RunqStep>) -> Histogram {
    let mut it = steps.peekable();
    let mut h = match it.peek() {
        Some(s) => Histogram::with_layout(s.latency.layout()),
        None => Histogram::new(),
    };
    for s in it {
        h.merge(&s.latency);
    }
    h
}

fn secs(steps: &[&RunqStep]) -> f64 {
    steps
        .iter()
        .map(|s| (s.end_ns - s.start_ns).max(0) as f64)
        .sum::<f64>()
        / 1e9
}

fn span(steps: &[&RunqStep]) -> Option<(i64, i64)> {
    Some((steps.first()?.start_ns, steps.last()?.end_ns))
}

/// The calm intervals a cgroup is compared with, and where they come from.
struct Calm<'a> {
    steps: Vec<&'a RunqStep>,
    source: &'static str,
    /// Whether they are the run's own (so "rose" has a before).
    own: bool,
    /// The activity of the run they come from.
    activity: &'a Activity<'a>,
}

/// The baseline run's usable intervals, else the run's own calm ones; None when they hold too
/// few waits to give a p99.
fn calm_of<'a>(
    usable: &[&'a RunqStep],
    base: Option<&'a CgroupTimeline>,
    now: &'a Activity<'a>,
    before: &'a Activity<'a>,
) -> Option<Calm<'a>> {
    let from_baseline = base.map(usable_steps).unwrap_or_default();
    let calm = if !from_baseline.is_empty() {
        Calm {
            steps: from_baseline,
            source: "in the baseline run",
            own: false,
            activity: before,
        }
    } else {
        let lowest = usable.iter().map(|s| p99(&s.latency)).min().unwrap_or(0);
        let steps = usable
            .iter()
            .copied()
            .filter(|s| p99(&s.latency) as f64 <= lowest as f64 * CALM_SPREAD)
            .collect();
        Calm {
            steps,
            source: "when calm",
            own: true,
            activity: now,
        }
    };
    let waits: u64 = calm.steps.iter().map(|s| s.latency.count()).sum();
    (waits >= MIN_CALM_WAITS).then_some(calm)
}

fn diagnose_one<'a>(
    t: &'a CgroupTimeline,
    base: Option<&'a CgroupTimeline>,
    now: &'a Activity<'a>,
    before: &'a Activity<'a>,
) -> Option<Finding> {
    let usable = usable_steps(t);
    if usable.is_empty() {
        return None;
    }
    let throttled = |s: &&RunqStep| s.throttled_periods.unwrap_or(0) > 0;
    if let Some(calm) = calm_of(&usable, base, now, before) {
        let baseline = p99(&merged(calm.steps.iter().copied()));
        let threshold = ((baseline as f64 * RISE) as u64).max(FLOOR_NS);
        let elevated: Vec<&RunqStep> = usable
            .iter()
            .copied()
            .filter(|s| p99_lower_bound(&s.latency).is_some_and(|low| low >= threshold))
            .collect();
        if elevated.len() >= MIN_ELEVATED {
            if elevated.iter().filter(|s| throttled(s)).count() * 2 >= elevated.len() {
                return Some(throttled_finding(t, &elevated, Some(&calm)));
            }
            return neighbour::finding(t, &elevated, &calm, now);
        }
    }
    // Nothing stands out (or no calm part to compare with): the whole run may be throttled.
    let slow: Vec<&RunqStep> = usable
        .iter()
        .copied()
        .filter(|s| p99(&s.latency) >= FLOOR_NS)
        .collect();
    if slow.len() >= MIN_ELEVATED
        && slow.len() * 2 >= usable.len()
        && slow.iter().filter(|s| throttled(s)).count() * 2 >= slow.len()
    {
        return Some(throttled_finding(t, &slow, None));
    }
    None
}

/// The latency evidence of slow intervals against the calm ones: the evidence, the slow p99 and
/// the calm one.
fn latency_evidence(
    t: &CgroupTimeline,
    bad: &[&RunqStep],
    calm: Option<&Calm>,
) -> (Evidence, u64, Option<u64>) {
    let bad_p99 = p99(&merged(bad.iter().copied()));
    let calm_p99 = calm.map(|c| p99(&merged(c.steps.iter().copied())));
    let waits: u64 = bad.iter().map(|s| s.latency.count()).sum();
    let mut values = BTreeMap::from([
        ("elevated_p99_ns".to_string(), bad_p99 as f64),
        ("elevated_intervals".to_string(), bad.len() as f64),
        ("elevated_waits".to_string(), waits as f64),
    ]);
    let note = match (calm, calm_p99) {
        (Some(c), Some(c99)) => {
            values.insert("baseline_p99_ns".into(), c99 as f64);
            values.insert("rise".into(), bad_p99 as f64 / c99.max(1) as f64);
            values.insert("baseline_intervals".into(), c.steps.len() as f64);
            format!(
                "run-queue p99 {} over {waits} waits in {} interval(s) against {} {} ({:.0}x); each of those intervals' p99 is above {:.0}x the baseline with {:.0}% confidence",
                format_duration_ns(bad_p99 as f64),
                bad.len(),
                format_duration_ns(c99 as f64),
                c.source,
                bad_p99 as f64 / c99.max(1) as f64,
                RISE,
                ELEVATED_CONFIDENCE * 100.0
            )
        }
        _ => format!(
            "run-queue p99 {} over {waits} waits in {} interval(s); no calm interval to compare with (give an earlier run with --baseline)",
            format_duration_ns(bad_p99 as f64),
            bad.len()
        ),
    };
    let e = Evidence {
        series: format!("runq_latency{{cgroup={}}}", t.cgroup),
        range_ns: span(bad),
        values,
        note,
    };
    (e, bad_p99, calm_p99)
}

fn throttled_finding(t: &CgroupTimeline, bad: &[&RunqStep], calm: Option<&Calm>) -> Finding {
    let (lat, bad_p99, _) = latency_evidence(t, bad, calm);
    let periods: u64 = bad.iter().filter_map(|s| s.throttled_periods).sum();
    let throttled_ns: u64 = bad.iter().filter_map(|s| s.throttled_ns).sum();
    let hit = bad
        .iter()
        .filter(|s| s.throttled_periods.unwrap_or(0) > 0)
        .count();
    let quota = t
        .quota
        .map_or_else(|| "a CPU quota".to_string(), |q| q.to_string());
    let th = Evidence {
        series: format!("cpu_throttled_periods{{cgroup={}}}", t.cgroup),
        range_ns: span(bad),
        values: BTreeMap::from([
            ("throttled_periods".to_string(), periods as f64),
            ("throttled_ns".to_string(), throttled_ns as f64),
            (
                "throttled_share_of_intervals".to_string(),
                hit as f64 / bad.len() as f64,
            ),
        ]),
        note: format!(
            "throttled in {hit} of the {} slow interval(s): {periods} period(s), {} in all",
            bad.len(),
            format_duration_ns(throttled_ns as f64)
        ),
    };
    Finding {
        detector: THROTTLED_DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence: (0.6 + 0.4 * hit as f64 / bad.len() as f64).min(0.95),
        summary: format!(
            "{}: run-queue p99 {} because its own CPU quota ({quota}) throttles it, not a neighbour",
            t.cgroup,
            format_duration_ns(bad_p99 as f64)
        ),
        evidence: vec![lat, th],
        fix: Some(format!(
            "raise or remove the CPU quota of {} ({quota}; cpu.max on cgroup2, cpu.cfs_quota_us on v1), or make it use less CPU per period; moving neighbours will not help",
            t.cgroup
        )),
    }
}
