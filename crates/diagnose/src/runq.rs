//! `noisy-neighbor` and `cpu-throttled`: a cgroup's run-queue latency jumped, and either other
//! cgroups took its CPU or its own CPU quota held it back.
//!
//! The story (root cause #3): a container's run-queue p99 went from 83 µs to 131 ms with no
//! change of its own; preemption counts showed system services taking its CPU. The same
//! latency appears when a container exhausts its own CPU quota — a different verdict with a
//! different fix, which must not be mistaken for a neighbour.
//!
//! Evidence, per cgroup, is a timeline of intervals ([`CgroupTimeline`]): its run-queue latency
//! histogram, whom its waits ended behind (the task that held the CPU while it was runnable)
//! and who preempted it, and its throttling counters. The *calm* intervals are those whose p99
//! is within [`CALM_SPREAD`] of the lowest interval p99 (and under [`FLOOR_NS`]); their merged
//! p99 is the baseline. Intervals whose p99 is at least [`RISE`] times the baseline and at
//! least [`FLOOR_NS`] are *elevated*.
//!
//! - `cpu-throttled` fires when the cgroup was throttled (`nr_throttled` grew) in at least half
//!   of its elevated intervals — or, when the whole run is slow and there is no calm part to
//!   compare with, in at least half of all intervals with p99 above the floor.
//! - `noisy-neighbor` fires otherwise, when in the elevated intervals at least half of the
//!   cgroup's wait time ended behind *other* cgroups (not itself, not an idle CPU) and the
//!   others took its CPU at least twice as much as when calm: wait time behind them per second,
//!   or their preemptions of it per second. (A task that sleeps most of the time is rarely
//!   preempted; it waits behind whoever is running when it wakes.) It names the cgroup behind
//!   the most wait time (`system` is the host's own processes) and, when the outlier events saw
//!   them, the threads.

use std::collections::BTreeMap;

use tailhunt_histogram::Histogram;
use tailhunt_model::evidence::runq::{CgroupTimeline, RunqStep, Share};
use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};

/// Name of the neighbour detector.
pub const NOISY_DETECTOR: &str = "noisy-neighbor";
/// Name of the throttling detector.
pub const THROTTLED_DETECTOR: &str = "cpu-throttled";
/// Both, in the order they run.
pub const DETECTORS: [&str; 2] = [NOISY_DETECTOR, THROTTLED_DETECTOR];

/// An interval's p99 must be this many times the baseline p99 to count as elevated ...
pub const RISE: f64 = 5.0;
/// ... and at least this long, ns (sub-millisecond jitter is not what users chase).
pub const FLOOR_NS: u64 = 1_000_000;
/// Intervals with fewer waits say little about a p99.
const MIN_WAITS: u64 = 20;
/// Calm intervals have a p99 within this factor of the lowest interval p99.
pub const CALM_SPREAD: f64 = 3.0;
/// Share of the elevated wait time that must end behind other cgroups.
const MIN_OTHERS_SHARE: f64 = 0.5;
/// Others' hold on the CPU (wait time behind them, or preemptions, per second) must rise at
/// least this much over the calm rate.
const MIN_TAKE_RISE: f64 = 2.0;

/// Both detectors over every cgroup's timeline. `baseline` holds the timelines of an earlier run
/// taken when things were fine (`tailhunt runq --baseline RUN`, possibly empty): a cgroup found
/// there is compared with that whole run instead of its own calm intervals, so a run that is
/// slow from its first second can still be judged.
pub fn diagnose(timelines: &[CgroupTimeline], baseline: &[CgroupTimeline]) -> Vec<Finding> {
    timelines
        .iter()
        .filter_map(|t| diagnose_one(t, baseline.iter().find(|b| b.cgroup == t.cgroup)))
        .collect()
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

fn diagnose_one(t: &CgroupTimeline, base: Option<&CgroupTimeline>) -> Option<Finding> {
    let usable = usable_steps(t);
    if usable.is_empty() {
        return None;
    }
    let from_baseline = base.map(usable_steps).unwrap_or_default();
    let (calm, source) = if !from_baseline.is_empty() {
        (from_baseline, "in the baseline run")
    } else {
        let lowest = usable.iter().map(|s| p99(&s.latency)).min().unwrap_or(0);
        let own = usable
            .iter()
            .copied()
            .filter(|s| {
                let p = p99(&s.latency);
                (p as f64) <= lowest as f64 * CALM_SPREAD && p < FLOOR_NS
            })
            .collect();
        (own, "when calm")
    };
    let baseline = p99(&merged(calm.iter().copied()));
    let threshold = ((baseline as f64 * RISE) as u64).max(FLOOR_NS);
    let elevated: Vec<&RunqStep> = usable
        .iter()
        .copied()
        .filter(|s| p99(&s.latency) >= threshold)
        .collect();
    let throttled = |s: &&RunqStep| s.throttled_periods.unwrap_or(0) > 0;
    if !elevated.is_empty() && !calm.is_empty() {
        if elevated.iter().filter(|s| throttled(s)).count() * 2 >= elevated.len() {
            return Some(throttled_finding(t, &elevated, Some((&calm, source))));
        }
        return noisy_finding(t, &elevated, &calm, source);
    }
    // No calm part to compare with: the whole run may be throttled.
    let slow: Vec<&RunqStep> = usable
        .iter()
        .copied()
        .filter(|s| p99(&s.latency) >= FLOOR_NS)
        .collect();
    if !slow.is_empty()
        && slow.len() * 2 >= usable.len()
        && slow.iter().filter(|s| throttled(s)).count() * 2 >= slow.len()
    {
        return Some(throttled_finding(t, &slow, None));
    }
    None
}

fn latency_evidence(
    t: &CgroupTimeline,
    bad: &[&RunqStep],
    calm: Option<(&[&RunqStep], &str)>,
) -> (Evidence, u64, Option<u64>) {
    let bad_p99 = p99(&merged(bad.iter().copied()));
    let calm_p99 = calm.map(|(c, _)| p99(&merged(c.iter().copied())));
    let mut values = BTreeMap::from([
        ("elevated_p99_ns".to_string(), bad_p99 as f64),
        ("elevated_intervals".to_string(), bad.len() as f64),
    ]);
    let note = match calm_p99 {
        Some(c) => {
            values.insert("baseline_p99_ns".into(), c as f64);
            values.insert("rise".into(), bad_p99 as f64 / c.max(1) as f64);
            values.insert(
                "baseline_intervals".into(),
                calm.map_or(0, |(c, _)| c.len()) as f64,
            );
            format!(
                "run-queue p99 {} in {} interval(s) against {} {} ({:.0}x)",
                format_duration_ns(bad_p99 as f64),
                bad.len(),
                format_duration_ns(c as f64),
                calm.map_or("", |(_, source)| source),
                bad_p99 as f64 / c.max(1) as f64
            )
        }
        None => format!(
            "run-queue p99 {} in {} interval(s); no calm interval to compare with (give an earlier run with --baseline)",
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

fn throttled_finding(
    t: &CgroupTimeline,
    bad: &[&RunqStep],
    calm: Option<(&[&RunqStep], &str)>,
) -> Finding {
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

/// Sums of the shares over steps, by other cgroup.
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

fn noisy_finding(
    t: &CgroupTimeline,
    bad: &[&RunqStep],
    calm: &[&RunqStep],
    source: &str,
) -> Option<Finding> {
    let is_other = |name: &str| name != t.cgroup && name != "idle";
    let bad_by = totals(bad);
    let calm_by = totals(calm);
    let all_wait: u64 = bad_by.values().map(|s| s.wait_ns).sum();
    let others_wait: u64 = bad_by
        .iter()
        .filter(|(k, _)| is_other(k))
        .map(|(_, s)| s.wait_ns)
        .sum();
    let share = others_wait as f64 / all_wait.max(1) as f64;
    let taken = |by: &BTreeMap<String, Share>| -> (u64, u64) {
        by.iter()
            .filter(|(k, _)| is_other(k))
            .fold((0, 0), |(w, p), (_, s)| (w + s.wait_ns, p + s.preemptions))
    };
    let ((bad_wait, bad_pre), (calm_wait, calm_pre)) = (taken(&bad_by), taken(&calm_by));
    let (bad_s, calm_s) = (secs(bad).max(1e-9), secs(calm).max(1e-9));
    let bad_rate = bad_pre as f64 / bad_s;
    let calm_rate = calm_pre as f64 / calm_s;
    // Wait behind others per second of wall time, against at least 1 ms/s when calm.
    let wait_rise = (bad_wait as f64 / bad_s) / (calm_wait as f64 / calm_s).max(1e6);
    let preempt_rise = bad_rate / calm_rate.max(1.0);
    if share < MIN_OTHERS_SHARE || (wait_rise < MIN_TAKE_RISE && preempt_rise < MIN_TAKE_RISE) {
        return None;
    }
    let (top, top_share) = bad_by
        .iter()
        .filter(|(k, _)| is_other(k))
        .max_by_key(|(_, s)| s.wait_ns)
        .map(|(k, s)| (k.clone(), *s))?;
    let (lat, bad_p99, calm_p99) = latency_evidence(t, bad, Some((calm, source)));
    let threads: Vec<String> = t
        .blockers
        .iter()
        .filter(|b| b.by == top)
        .take(3)
        .map(|b| format!("{} (tid {}, {} outlier(s))", b.comm, b.pid, b.count))
        .collect();
    let who = if top == "system" {
        "system services (processes outside any container)".to_string()
    } else {
        top.clone()
    };
    let attribution = Evidence {
        series: format!("runq_wait_ns{{by={top},cgroup={}}}", t.cgroup),
        range_ns: span(bad),
        values: BTreeMap::from([
            ("others_share_of_wait".to_string(), share),
            ("neighbour_share_of_wait".to_string(), top_share.wait_ns as f64 / all_wait.max(1) as f64),
            ("neighbour_wait_ns".to_string(), top_share.wait_ns as f64),
            ("neighbour_preemptions".to_string(), top_share.preemptions as f64),
            ("preemptions_by_others_per_s".to_string(), bad_rate),
            ("baseline_preemptions_by_others_per_s".to_string(), calm_rate),
            ("wait_behind_others_rise".to_string(), wait_rise),
        ]),
        note: format!(
            "{:.0}% of its wait time ended behind other cgroups, {:.0}% behind {top}; time waiting behind others {:.0}x the rate {source}; preemptions by others {:.0}/s against {:.0}/s {source}{}",
            share * 100.0,
            top_share.wait_ns as f64 / all_wait.max(1) as f64 * 100.0,
            wait_rise,
            bad_rate,
            calm_rate,
            if threads.is_empty() { String::new() } else { format!("; threads: {}", threads.join(", ")) }
        ),
    };
    let not_throttled = Evidence {
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
    };
    let rise = bad_p99 as f64 / calm_p99.unwrap_or(1).max(1) as f64;
    Some(Finding {
        detector: NOISY_DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence: (0.5 + 0.3 * share + 0.2 * (rise / 20.0).min(1.0)).min(0.95),
        summary: format!(
            "{}: run-queue p99 rose {:.0}x ({} -> {}) while {who} took its CPU",
            t.cgroup,
            rise,
            format_duration_ns(calm_p99.unwrap_or(0) as f64),
            format_duration_ns(bad_p99 as f64),
        ),
        evidence: vec![lat, attribution, not_throttled],
        fix: Some(format!(
            "isolate {}: give it CPUs of its own (cpuset.cpus) or move {who} to other CPUs (or lower its cpu.weight / cpu.shares); re-run `tailhunt runq` to see p99 back near {}",
            t.cgroup,
            format_duration_ns(calm_p99.unwrap_or(0) as f64)
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_histogram::Layout;
    use tailhunt_model::evidence::runq::{Blocker, Quota};

    fn step(i: i64, typical_ns: u64, by: &[(&str, u64, u64)], throttled: Option<u64>) -> RunqStep {
        let mut h = Histogram::with_layout(Layout::new(4).unwrap());
        for k in 0..200u64 {
            // 98% near 20 us, 2% at the typical tail.
            h.record(if k % 50 == 0 {
                typical_ns
            } else {
                20_000 + k * 10
            });
        }
        RunqStep {
            start_ns: i * 1_000_000_000,
            end_ns: (i + 1) * 1_000_000_000,
            latency: h,
            by: by
                .iter()
                .map(|(n, p, w)| {
                    (
                        n.to_string(),
                        Share {
                            preemptions: *p,
                            waits: 100,
                            wait_ns: *w,
                        },
                    )
                })
                .collect(),
            throttled_periods: throttled,
            throttled_ns: throttled.map(|t| t * 50_000_000),
        }
    }

    fn timeline(steps: Vec<RunqStep>) -> CgroupTimeline {
        CgroupTimeline {
            cgroup: "/t/victim".into(),
            steps,
            quota: Some(Quota {
                quota_us: 10_000,
                period_us: 100_000,
            }),
            blockers: vec![Blocker {
                cgroup: "/t/victim".into(),
                by: "/t/neighbour".into(),
                comm: "hog".into(),
                pid: 4242,
                count: 17,
                max_ns: 0,
            }],
        }
    }

    fn calm(i: i64) -> RunqStep {
        step(
            i,
            60_000,
            &[("/t/victim", 2, 1_000_000), ("idle", 0, 3_000_000)],
            Some(0),
        )
    }

    #[test]
    fn a_neighbour_that_takes_the_cpu_is_named() {
        let mut steps: Vec<RunqStep> = (0..4).map(calm).collect();
        steps.extend((4..8).map(|i| {
            step(
                i,
                3_000_000,
                &[("/t/neighbour", 400, 90_000_000), ("idle", 0, 2_000_000)],
                Some(0),
            )
        }));
        let f = diagnose(&[timeline(steps)], &[]);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].detector, NOISY_DETECTOR);
        assert!(f[0].summary.contains("/t/neighbour"), "{}", f[0].summary);
        assert!(
            f[0].evidence[1].note.contains("hog (tid 4242"),
            "{}",
            f[0].evidence[1].note
        );
        assert_eq!(
            f[0].evidence[0].range_ns,
            Some((4_000_000_000, 8_000_000_000))
        );
    }

    #[test]
    fn throttling_wins_over_a_neighbour() {
        let mut steps: Vec<RunqStep> = (0..4).map(calm).collect();
        steps.extend(
            (4..8).map(|i| step(i, 80_000_000, &[("/t/neighbour", 400, 90_000_000)], Some(9))),
        );
        let f = diagnose(&[timeline(steps)], &[]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].detector, THROTTLED_DETECTOR);
        assert!(
            f[0].summary.contains("10.0ms per 100ms (0.10 CPU)"),
            "{}",
            f[0].summary
        );
    }

    #[test]
    fn a_run_throttled_throughout_is_still_throttled() {
        let steps = (0..6)
            .map(|i| step(i, 80_000_000, &[("idle", 30, 500_000_000)], Some(8)))
            .collect();
        let f = diagnose(&[timeline(steps)], &[]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].detector, THROTTLED_DETECTOR);
        assert!(f[0].evidence[0].note.contains("no calm interval"));
    }

    #[test]
    fn silence_when_calm_or_when_the_wait_is_its_own() {
        assert!(diagnose(&[timeline((0..8).map(calm).collect())], &[]).is_empty());
        // Slow, but behind its own threads: not a neighbour.
        let mut steps: Vec<RunqStep> = (0..4).map(calm).collect();
        steps
            .extend((4..8).map(|i| step(i, 3_000_000, &[("/t/victim", 400, 90_000_000)], Some(0))));
        assert!(diagnose(&[timeline(steps)], &[]).is_empty());
        // Too few waits per interval to judge.
        let mut sparse = timeline((0..8).map(calm).collect());
        for s in &mut sparse.steps {
            s.latency = Histogram::with_layout(Layout::new(4).unwrap());
            s.latency.record(5_000_000);
        }
        assert!(diagnose(&[sparse], &[]).is_empty());
    }

    #[test]
    fn a_neighbour_that_takes_as_much_when_calm_is_not_accused() {
        let neighbour = [("/t/neighbour", 400, 90_000_000)];
        let mut steps: Vec<RunqStep> = (0..4)
            .map(|i| step(i, 60_000, &neighbour, Some(0)))
            .collect();
        steps.extend((4..8).map(|i| step(i, 3_000_000, &neighbour, Some(0))));
        assert!(diagnose(&[timeline(steps)], &[]).is_empty());
    }

    #[test]
    fn waiting_behind_a_hog_counts_without_preemptions_even_when_it_ran_most_of_the_run() {
        // A sleeper is rarely preempted: it waits behind whoever runs when it wakes.
        let mut steps: Vec<RunqStep> = (0..2).map(calm).collect();
        steps.extend(
            (2..10).map(|i| step(i, 4_000_000, &[("/t/neighbour", 0, 150_000_000)], Some(0))),
        );
        let f = diagnose(&[timeline(steps)], &[]);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].detector, NOISY_DETECTOR);
        assert!(f[0].evidence[1].values["wait_behind_others_rise"] > 10.0);
    }

    #[test]
    fn a_run_slow_from_the_start_is_judged_against_a_baseline_run() {
        let neighbour = [("/t/neighbour", 0, 150_000_000)];
        let slow: Vec<RunqStep> = (0..6)
            .map(|i| step(i, 4_000_000, &neighbour, Some(0)))
            .collect();
        // On its own: no calm interval, not throttled, so nothing to say.
        assert!(diagnose(&[timeline(slow.clone())], &[]).is_empty());
        let before = timeline((0..5).map(calm).collect());
        let f = diagnose(&[timeline(slow)], &[before]);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].detector, NOISY_DETECTOR);
        assert!(
            f[0].evidence[0].note.contains("in the baseline run"),
            "{}",
            f[0].evidence[0].note
        );
        // A baseline of another cgroup does not count.
        let mut other = timeline((0..5).map(calm).collect());
        other.cgroup = "/t/other".into();
        let slow: Vec<RunqStep> = (0..6)
            .map(|i| step(i, 4_000_000, &neighbour, Some(0)))
            .collect();
        assert!(diagnose(&[timeline(slow)], &[other]).is_empty());
    }
}
