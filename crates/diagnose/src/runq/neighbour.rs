//! The `noisy-neighbor` verdict over a cgroup's elevated intervals.
//!
//! In: the cgroup's timeline, its elevated intervals and its calm ones. Out: a finding naming
//! every neighbour that took its CPU, or nothing.
//!
//! A cgroup is named when, over the elevated intervals,
//! - the cgroup's tasks spent at least [`MIN_OTHERS_SHARE`] of their wait time while *other*
//!   cgroups ran on their CPU (not their own siblings, not an idle CPU), and this one held at
//!   least [`MIN_NEIGHBOUR_SHARE`] of it;
//! - its hold on the CPU rose: the wait time spent while it ran, or its preemptions, per
//!   second, at least [`MIN_TAKE_RISE`] times the calm rate (a sleeper is rarely preempted:
//!   it waits behind whoever runs when it wakes);
//! - its share of the wait did not shrink below [`SHARE_KEPT`] of its calm share: a cgroup
//!   that ran beside the victim all along holds more of a longer wait without causing it, and
//!   then the cgroup that does takes a growing part;
//! - its own demand for CPU rose: on average at least [`MIN_DEMAND_GAIN`] more of its tasks
//!   were runnable (running or waiting to, all CPUs) than in the calm intervals, and at least
//!   [`MIN_DEMAND_RISE`] times as many. A cgroup as busy as ever did not start taking the CPU;
//!   the victim's waits simply overlapped more of it. (Runs recorded before run time was kept
//!   skip this test.)
//! - it was *there* in at least [`MIN_COINCIDENCE`] of the elevated intervals (and in
//!   [`MIN_ELEVATED`] of them): in each, it held [`MIN_STEP_SHARE`] of the wait, at
//!   [`MIN_TAKE_RISE`] times its calm rate or more. Slow intervals from before it existed do not count for it.
//!
//! `system` (the root cgroup: every host process, the tracer too) is named only when it held
//! [`SYSTEM_MIN_SHARE`] of the wait, its hold rose [`SYSTEM_MIN_TAKE_RISE`] times and it was
//! there in [`SYSTEM_MIN_INTERVALS`] intervals (the host's own bursts of work are short), and a
//! finding that names only `system` is at most [`SYSTEM_MAX_CONFIDENCE`] sure. The
//! finding's intervals are the longest unbroken run of elevated intervals in which a named
//! neighbour was there (an earlier slow second of another cause is not part of the story), and
//! it names the neighbours there in most of that run.

use std::collections::BTreeMap;

use tailhunt_model::evidence::runq::{
    CgroupTimeline, RunqStep, Share, WaitCharge, OTHER_CGROUPS, UNATTRIBUTED,
};
use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};

use super::{latency_evidence, secs, span, Activity, Calm, MIN_ELEVATED, NOISY_DETECTOR};

/// Share of the elevated wait that must have been spent while other cgroups ran.
pub const MIN_OTHERS_SHARE: f64 = 0.5;
/// Share of it a neighbour must hold to be named.
pub const MIN_NEIGHBOUR_SHARE: f64 = 0.2;
/// A neighbour's hold on the CPU must rise at least this much over the calm rate.
pub const MIN_TAKE_RISE: f64 = 2.0;
/// `system` must hold this share of the elevated wait ...
pub const SYSTEM_MIN_SHARE: f64 = 0.5;
/// ... and its hold must rise this much.
pub const SYSTEM_MIN_TAKE_RISE: f64 = 3.0;
/// In an elevated interval a neighbour is there when it held at least this share of the wait.
pub const MIN_STEP_SHARE: f64 = 0.1;
/// Share of the elevated intervals a neighbour must be there in.
pub const MIN_COINCIDENCE: f64 = 0.5;
/// A neighbour's share of the elevated wait must be at least this part of its calm share.
pub const SHARE_KEPT: f64 = 0.75;
/// A neighbour's runnable tasks must be at least this many more than in the calm intervals ...
pub const MIN_DEMAND_GAIN: f64 = 0.5;
/// ... and at least this many times as many.
pub const MIN_DEMAND_RISE: f64 = 1.25;
/// `system` must be there in at least this many of the slow intervals ...
pub const SYSTEM_MIN_INTERVALS: usize = 3;
/// ... and a finding naming only it is at most this sure.
pub const SYSTEM_MAX_CONFIDENCE: f64 = 0.8;
/// Calm rates are taken as at least 1 ms of wait per second: a neighbour absent when calm has
/// not risen infinitely by taking a little.
const MIN_CALM_WAIT_RATE: f64 = 1e6;

/// The name `tailhunt runq` gives the root cgroup.
const SYSTEM: &str = "system";

/// Wait time, ns, and preemptions behind each other cgroup over some intervals.
fn totals(steps: &[&RunqStep]) -> BTreeMap<String, Share> {
    let mut out: BTreeMap<String, Share> = BTreeMap::new();
    for s in steps {
        for (k, v) in &s.by {
            let e = out.entry(k.clone()).or_default();
            e.preemptions += v.preemptions;
            e.waits += v.waits;
            e.wait_ns += v.wait_ns;
        }
    }
    out
}

fn wait_total(by: &BTreeMap<String, Share>) -> u64 {
    by.values().map(|s| s.wait_ns).sum()
}

/// The bar a neighbour must clear: (share of the wait, rise of its hold, intervals there).
fn bar(name: &str) -> (f64, f64, usize) {
    if name == SYSTEM {
        (SYSTEM_MIN_SHARE, SYSTEM_MIN_TAKE_RISE, SYSTEM_MIN_INTERVALS)
    } else {
        (MIN_NEIGHBOUR_SHARE, MIN_TAKE_RISE, MIN_ELEVATED)
    }
}

/// A cgroup's own demand in some intervals against the calm ones: its runnable tasks on
/// average in each (None where the runs did not record it).
#[derive(Debug, Clone, Copy)]
struct Demand {
    runnable: Option<f64>,
    calm_runnable: Option<f64>,
}

impl Demand {
    fn of(name: &str, steps: &[&RunqStep], calm: &Calm, activity: &Activity) -> Demand {
        Demand {
            runnable: activity.runnable(name, steps),
            calm_runnable: calm.activity.runnable(name, &calm.steps),
        }
    }

    /// Whether it rose enough, or cannot be told.
    fn rose(&self) -> bool {
        match (self.runnable, self.calm_runnable) {
            (Some(r), Some(calm)) => r >= calm + MIN_DEMAND_GAIN && r >= MIN_DEMAND_RISE * calm,
            _ => true,
        }
    }
}

/// What some intervals say about one other cgroup against the calm ones.
#[derive(Debug, Clone)]
struct Hold {
    /// Its share of the intervals' wait time, and of the calm ones'.
    share: f64,
    calm_share: f64,
    /// The intervals' wait time spent while it ran, and its preemptions.
    took: Share,
    /// Wait time per second while it ran, ns/s, and the calm rate.
    wait_rate: f64,
    calm_wait_rate: f64,
    /// Preemptions per second, and the calm rate.
    preempt_rate: f64,
    calm_preempt_rate: f64,
}

impl Hold {
    fn of(name: &str, steps: &[&RunqStep], calm: &[&RunqStep]) -> Hold {
        let (by, calm_by) = (totals(steps), totals(calm));
        let took = by.get(name).copied().unwrap_or_default();
        let c = calm_by.get(name).copied().unwrap_or_default();
        let (s, cs) = (secs(steps).max(1e-9), secs(calm).max(1e-9));
        Hold {
            share: took.wait_ns as f64 / wait_total(&by).max(1) as f64,
            calm_share: c.wait_ns as f64 / wait_total(&calm_by).max(1) as f64,
            took,
            wait_rate: took.wait_ns as f64 / s,
            calm_wait_rate: c.wait_ns as f64 / cs,
            preempt_rate: took.preemptions as f64 / s,
            calm_preempt_rate: c.preemptions as f64 / cs,
        }
    }

    fn wait_rise(&self) -> f64 {
        self.wait_rate / self.calm_wait_rate.max(MIN_CALM_WAIT_RATE)
    }

    fn preempt_rise(&self) -> f64 {
        self.preempt_rate / self.calm_preempt_rate.max(1.0)
    }

    fn rise(&self) -> f64 {
        self.wait_rise().max(self.preempt_rise())
    }
}

/// Whether `name` was there in one elevated interval: it held a real part of the wait, at
/// [`MIN_TAKE_RISE`] times its calm rate or more (the higher bar of `system` is for the whole).
fn there_in(name: &str, step: &RunqStep, calm: &Hold) -> bool {
    let by = &step.by;
    let took = by.get(name).map_or(0, |s| s.wait_ns) as f64;
    let total = by.values().map(|s| s.wait_ns).sum::<u64>() as f64;
    let secs = ((step.end_ns - step.start_ns).max(1) as f64) / 1e9;
    let rate_bar = calm.calm_wait_rate.max(MIN_CALM_WAIT_RATE) * MIN_TAKE_RISE;
    took >= MIN_STEP_SHARE * total && took / secs >= rate_bar
}

/// A neighbour that cleared the bar, with the elevated intervals it was there in.
struct Named<'a> {
    name: &'a str,
    there: Vec<usize>,
}

/// The finding for cgroup `t` over its elevated intervals, when neighbours explain them.
pub(super) fn finding(
    t: &CgroupTimeline,
    elevated: &[&RunqStep],
    calm: &Calm,
    activity: &Activity,
) -> Option<Finding> {
    let is_other = |name: &str| name != t.cgroup && name != "idle" && name != UNATTRIBUTED;
    let by = totals(elevated);
    let all = wait_total(&by);
    let others: u64 = by
        .iter()
        .filter(|(k, _)| is_other(k))
        .map(|(_, s)| s.wait_ns)
        .sum();
    if (others as f64) < MIN_OTHERS_SHARE * all.max(1) as f64 {
        return None;
    }
    let named: Vec<Named> = by
        .keys()
        .filter(|k| is_other(k) && k.as_str() != OTHER_CGROUPS)
        .filter_map(|name| {
            let hold = Hold::of(name, elevated, &calm.steps);
            let there: Vec<usize> = (0..elevated.len())
                .filter(|&i| there_in(name, elevated[i], &hold))
                .collect();
            let (min_share, min_rise, min_there) = bar(name);
            let coincide = there.len() as f64 >= MIN_COINCIDENCE * elevated.len() as f64;
            (hold.share >= min_share
                && hold.share >= SHARE_KEPT * hold.calm_share
                && hold.rise() >= min_rise
                && Demand::of(name, elevated, calm, activity).rose()
                && there.len() >= min_there
                && coincide)
                .then_some(Named { name, there })
        })
        .collect();
    let run = longest_run(elevated, |i| named.iter().any(|n| n.there.contains(&i)));
    if run.len() < MIN_ELEVATED {
        return None;
    }
    // The neighbours of that run: there in most of it (and `system` in enough of it).
    let named: Vec<Named> = named
        .into_iter()
        .filter(|n| {
            let inside = run.iter().filter(|i| n.there.contains(i)).count();
            inside as f64 >= MIN_COINCIDENCE * run.len() as f64 && inside >= bar(n.name).2
        })
        .collect();
    if named.is_empty() {
        return None;
    }
    let bad: Vec<&RunqStep> = run.iter().map(|&i| elevated[i]).collect();
    Some(write(t, &bad, elevated.len(), &named, calm, activity))
}

/// The longest run of adjacent intervals (each starting where the previous ended, within half
/// an interval) among those for which `keep` holds: their indexes in `steps`.
fn longest_run(steps: &[&RunqStep], keep: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut best: Vec<usize> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    for i in (0..steps.len()).filter(|&i| keep(i)) {
        let adjacent = cur.last().is_some_and(|&j| {
            let (a, b) = (steps[j], steps[i]);
            b.start_ns - a.end_ns <= (a.end_ns - a.start_ns) / 2
        });
        if !adjacent {
            cur.clear();
        }
        cur.push(i);
        if cur.len() > best.len() {
            best = cur.clone();
        }
    }
    best
}

/// People's name for a cgroup in a sentence.
fn who(name: &str) -> String {
    if name == SYSTEM {
        "system services (processes outside any container)".into()
    } else {
        name.to_string()
    }
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The finding over the intervals `bad` (the elevated ones a named neighbour was there in).
fn write(
    t: &CgroupTimeline,
    bad: &[&RunqStep],
    elevated: usize,
    named: &[Named],
    calm: &Calm,
    activity: &Activity,
) -> Finding {
    let (lat, bad_p99, calm_p99) = latency_evidence(t, bad, Some(calm));
    let calm_p99 = calm_p99.unwrap_or(0);
    let by = totals(bad);
    let all = wait_total(&by).max(1) as f64;
    let others: u64 = by
        .iter()
        .filter(|(k, _)| k.as_str() != t.cgroup && *k != "idle" && *k != UNATTRIBUTED)
        .map(|(_, s)| s.wait_ns)
        .sum();
    let ran = match t.wait_charge {
        WaitCharge::RanDuring => "was spent while",
        WaitCharge::LastRunner => "ended right after",
    };
    let ran_tail = match t.wait_charge {
        WaitCharge::RanDuring => " ran on its CPU",
        WaitCharge::LastRunner => " ran (this run charged each wait to the task that held the CPU just before; runs recorded since split it among those that ran during it)",
    };
    let mut evidence = vec![lat];
    let mut named_share = 0.0;
    for n in named {
        let h = Hold::of(n.name, bad, &calm.steps);
        let demand = Demand::of(n.name, bad, calm, activity);
        named_share += h.share;
        let threads: Vec<String> = t
            .blockers
            .iter()
            .filter(|b| b.by == n.name)
            .take(3)
            .map(|b| format!("{} (tid {}, {} outlier(s))", b.comm, b.pid, b.count))
            .collect();
        evidence.push(Evidence {
            series: format!("runq_wait_ns{{by={},cgroup={}}}", n.name, t.cgroup),
            range_ns: span(bad),
            values: BTreeMap::from([
                ("others_share_of_wait".to_string(), others as f64 / all),
                ("neighbour_share_of_wait".to_string(), h.share),
                ("neighbour_wait_ns".to_string(), h.took.wait_ns as f64),
                ("neighbour_preemptions".to_string(), h.took.preemptions as f64),
                ("wait_behind_neighbour_rise".to_string(), h.wait_rise()),
                ("preemptions_per_s".to_string(), h.preempt_rate),
                ("baseline_preemptions_per_s".to_string(), h.calm_preempt_rate),
                ("intervals_there".to_string(), n.there.len() as f64),
                ("elevated_intervals".to_string(), elevated as f64),
            ])
            .into_iter()
            .chain(demand.runnable.map(|r| ("neighbour_runnable_tasks".to_string(), r)))
            .chain(
                demand
                    .calm_runnable
                    .map(|r| ("baseline_neighbour_runnable_tasks".to_string(), r)),
            )
            .collect(),
            note: format!(
                "{:.0}% of its wait time in those intervals {ran} {}{ran_tail} ({:.0}% while any other cgroup did): {}/s against {}/s {}; {} preemption(s) of it, {:.0}/s against {:.0}/s; there in {} of its {elevated} slow interval(s){}{}",
                h.share * 100.0,
                n.name,
                others as f64 / all * 100.0,
                format_duration_ns(h.wait_rate),
                format_duration_ns(h.calm_wait_rate),
                calm.source,
                h.took.preemptions,
                h.preempt_rate,
                h.calm_preempt_rate,
                n.there.len(),
                match (demand.runnable, demand.calm_runnable) {
                    (Some(r), Some(b)) => format!("; {r:.1} of its tasks runnable on average against {b:.1}"),
                    _ => String::new(),
                },
                if threads.is_empty() { String::new() } else { format!("; threads: {}", threads.join(", ")) }
            ),
        });
    }
    evidence.push(not_throttled(t, bad));
    let rise = bad_p99 as f64 / calm_p99.max(1) as f64;
    let names: Vec<String> = named.iter().map(|n| who(n.name)).collect();
    let whom = and_list(&names);
    // "Rose" only when the calm came first (or from an earlier run).
    let rose = !calm.own
        || calm
            .steps
            .first()
            .is_some_and(|c| c.start_ns <= bad[0].start_ns);
    let change = if rose {
        format!(
            "run-queue p99 rose {rise:.0}x ({} -> {})",
            format_duration_ns(calm_p99 as f64),
            format_duration_ns(bad_p99 as f64)
        )
    } else {
        format!(
            "run-queue p99 was {rise:.0}x higher ({} against {} when calm later)",
            format_duration_ns(bad_p99 as f64),
            format_duration_ns(calm_p99 as f64)
        )
    };
    let strength = ((bad.len() - 1) as f64 / 3.0).min(1.0);
    let cap = if named.iter().all(|n| n.name == SYSTEM) {
        SYSTEM_MAX_CONFIDENCE
    } else {
        0.95
    };
    Finding {
        detector: NOISY_DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence: (0.35
            + 0.3 * named_share.min(1.0)
            + 0.15 * (rise / 20.0).min(1.0)
            + 0.15 * strength)
            .min(cap),
        summary: format!("{}: {change} while {whom} took its CPU", t.cgroup),
        evidence,
        fix: Some(format!(
            "isolate {}: give it CPUs of its own (cpuset.cpus) or move {whom} to other CPUs (or lower {} cpu.weight / cpu.shares); re-run `tailhunt runq` to see p99 back near {}",
            t.cgroup,
            if named.len() == 1 { "its" } else { "their" },
            format_duration_ns(calm_p99 as f64)
        )),
    }
}

fn not_throttled(t: &CgroupTimeline, bad: &[&RunqStep]) -> Evidence {
    Evidence {
        series: format!("cpu_throttled_periods{{cgroup={}}}", t.cgroup),
        range_ns: span(bad),
        values: BTreeMap::from([(
            "throttled_periods".to_string(),
            bad.iter().filter_map(|s| s.throttled_periods).sum::<u64>() as f64,
        )]),
        note: if bad.iter().any(|s| s.throttled_periods.is_some()) {
            "not throttled by its own CPU quota while slow".into()
        } else {
            "no CPU-quota counters readable for it (no quota controller): throttling not ruled out by counters".into()
        },
    }
}
