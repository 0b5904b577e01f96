use super::*;
use tailhunt_histogram::Layout;
use tailhunt_model::evidence::runq::{Blocker, Quota, Share, WaitCharge};

/// An interval `i` (one second) of `waits` waits near 20 µs, `tail` of them at `tail_ns`, whose
/// wait time went to the others in `by` (name, preemptions, wait ns).
fn interval(
    i: i64,
    waits: u64,
    tail: u64,
    tail_ns: u64,
    by: &[(&str, u64, u64)],
    throttled: Option<u64>,
) -> RunqStep {
    let mut h = Histogram::with_layout(Layout::new(4).unwrap());
    for k in 0..waits {
        h.record(if k < tail { tail_ns } else { 20_000 + k * 10 });
    }
    RunqStep {
        start_ns: i * 1_000_000_000,
        end_ns: (i + 1) * 1_000_000_000,
        latency: h,
        run_ns: None,
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

/// 200 waits, 5% of them at `tail_ns` (so the p99 is there, with confidence).
fn step(i: i64, tail_ns: u64, by: &[(&str, u64, u64)], throttled: Option<u64>) -> RunqStep {
    interval(i, 200, 10, tail_ns, by, throttled)
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
        wait_charge: WaitCharge::RanDuring,
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

/// `name`'s own activity: CPUs' worth of run time in each interval `0..cpus.len()`.
fn ran(name: &str, cpus: &[f64]) -> CgroupTimeline {
    let steps = cpus
        .iter()
        .enumerate()
        .map(|(i, c)| RunqStep {
            start_ns: i as i64 * 1_000_000_000,
            run_ns: Some((c * 1e9) as u64),
            ..RunqStep::empty((i as i64 + 1) * 1_000_000_000)
        })
        .collect();
    CgroupTimeline {
        cgroup: name.into(),
        steps,
        quota: None,
        blockers: Vec::new(),
        wait_charge: WaitCharge::RanDuring,
    }
}

/// `name` idle until interval `from`, then running a CPU, over `n` intervals.
fn starts(name: &str, from: usize, n: usize) -> CgroupTimeline {
    let cpus: Vec<f64> = (0..n).map(|i| if i >= from { 1.0 } else { 0.0 }).collect();
    ran(name, &cpus)
}

/// Four calm intervals, then `hot` ones from 4 on.
fn calm_then(hot: impl Fn(i64) -> RunqStep) -> Vec<RunqStep> {
    (0..4).map(calm).chain((4..8).map(hot)).collect()
}

fn noisy(f: &[Finding]) -> Vec<&Finding> {
    f.iter().filter(|f| f.detector == NOISY_DETECTOR).collect()
}

/// The neighbours a finding's attribution series name.
fn blamed(f: &Finding) -> Vec<String> {
    f.evidence
        .iter()
        .filter_map(|e| e.series.strip_prefix("runq_wait_ns{by="))
        .map(|s| s.split(",cgroup=").next().unwrap_or(s).to_string())
        .collect()
}

#[test]
fn a_neighbour_that_takes_the_cpu_is_named() {
    let steps = calm_then(|i| {
        step(
            i,
            3_000_000,
            &[("/t/neighbour", 400, 90_000_000), ("idle", 0, 2_000_000)],
            Some(0),
        )
    });
    let f = diagnose(&[timeline(steps), starts("/t/neighbour", 4, 8)], &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].detector, NOISY_DETECTOR);
    assert!(f[0].summary.contains("rose") && f[0].summary.contains("/t/neighbour took"));
    assert_eq!(blamed(&f[0]), ["/t/neighbour"]);
    let note = &f[0].evidence[1].note;
    assert!(
        note.contains("hog (tid 4242") && note.contains("was spent while"),
        "{note}"
    );
    assert_eq!(
        f[0].evidence[0].range_ns,
        Some((4_000_000_000, 8_000_000_000))
    );
}

#[test]
fn throttling_wins_over_a_neighbour() {
    let steps = calm_then(|i| step(i, 80_000_000, &[("/t/neighbour", 400, 90_000_000)], Some(9)));
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
    let steps = calm_then(|i| step(i, 3_000_000, &[("/t/victim", 400, 90_000_000)], Some(0)));
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
    steps.extend((2..10).map(|i| step(i, 4_000_000, &[("/t/neighbour", 0, 150_000_000)], Some(0))));
    let f = diagnose(&[timeline(steps), starts("/t/neighbour", 2, 10)], &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].detector, NOISY_DETECTOR);
    assert!(f[0].evidence[1].values["wait_behind_neighbour_rise"] > 10.0);
}

#[test]
fn a_run_slow_from_the_start_is_judged_against_a_baseline_run() {
    let neighbour = [("/t/neighbour", 0, 150_000_000)];
    let slow = || -> Vec<RunqStep> {
        (0..6)
            .map(|i| step(i, 4_000_000, &neighbour, Some(0)))
            .collect()
    };
    // On its own: no calm interval, not throttled, so nothing to say.
    assert!(diagnose(&[timeline(slow())], &[]).is_empty());
    let before = timeline((0..5).map(calm).collect());
    let f = diagnose(&[timeline(slow()), starts("/t/neighbour", 0, 6)], &[before]);
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
    assert!(diagnose(&[timeline(slow()), starts("/t/neighbour", 0, 6)], &[other]).is_empty());
}

// Issue 13: the verdicts the truth harness found wrong.

#[test]
fn one_slow_wait_in_a_small_interval_does_not_make_it_slow() {
    // The equal-shares control: intervals of 31-255 waits, the p99 of the small ones is their
    // largest wait, spent while a neighbour ran that never preempted it.
    let steps: Vec<RunqStep> = (0..10)
        .map(|i| {
            let waits = [31, 255, 40, 31, 120, 255, 33, 31, 90, 60][i as usize];
            let one_slow = [0, 0, 1, 1, 0, 0, 1, 1, 0, 1][i as usize];
            let by = [
                ("/t/neighbour", 0, 1_000_000 + one_slow * 8_000_000),
                ("system", 0, 1_000_000),
                ("/t/victim", 0, 2_000_000),
            ];
            interval(i, waits, one_slow, 4_000_000, &by, Some(0))
        })
        .collect();
    let t = timeline(steps);
    // Each interval's own p99 says "slow" in five of them ...
    let slow = t
        .steps
        .iter()
        .filter(|s| p99(&s.latency) >= FLOOR_NS)
        .count();
    assert_eq!(slow, 5);
    // ... but none of them is slow with confidence.
    assert!(diagnose(&[t], &[]).is_empty());
}

#[test]
fn slow_intervals_from_before_the_neighbour_existed_are_not_its() {
    // Slow behind itself from interval 4; the neighbour arrives at `arrives`.
    let run = |arrives: i64| -> Vec<RunqStep> {
        let own = [("/t/victim", 0, 20_000_000), ("idle", 0, 1_000_000)];
        let with = [
            ("/t/neighbour", 300, 90_000_000),
            ("/t/victim", 0, 5_000_000),
        ];
        (0..4)
            .map(calm)
            .chain((4..arrives).map(|i| step(i, 3_000_000, &own, Some(0))))
            .chain((arrives..10).map(|i| step(i, 3_000_000, &with, Some(0))))
            .collect()
    };
    let f = diagnose(&[timeline(run(6)), starts("/t/neighbour", 6, 10)], &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(blamed(&f[0]), ["/t/neighbour"]);
    // The finding's intervals are the neighbour's.
    assert_eq!(
        f[0].evidence[0].range_ns,
        Some((6_000_000_000, 10_000_000_000))
    );
    assert!(f[0].evidence[1].note.contains("there in 4 of its 6 slow"));
    // There in only a third of the slow intervals: it does not explain them.
    let f = diagnose(&[timeline(run(8)), starts("/t/neighbour", 8, 10)], &[]);
    assert!(noisy(&f).is_empty(), "{f:#?}");
}

#[test]
fn two_equal_neighbours_are_both_named() {
    let steps = calm_then(|i| {
        step(
            i,
            3_400_000,
            &[
                ("/t/n1", 150, 60_000_000),
                ("/t/n2", 140, 55_000_000),
                ("/t/victim", 0, 2_000_000),
            ],
            Some(0),
        )
    });
    let f = diagnose(
        &[
            timeline(steps),
            starts("/t/n1", 4, 8),
            starts("/t/n2", 4, 8),
        ],
        &[],
    );
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(blamed(&f[0]), ["/t/n1", "/t/n2"]);
    assert!(
        f[0].summary.contains("/t/n1 and /t/n2 took its CPU"),
        "{}",
        f[0].summary
    );
}

#[test]
fn system_needs_a_higher_bar_than_a_container() {
    // Held 77% of the slow wait, two and a half times its calm rate: enough for a container ...
    let hot = |name: &'static str| {
        move |i| {
            step(
                i,
                3_000_000,
                &[(name, 20, 50_000_000), ("/t/victim", 0, 15_000_000)],
                Some(0),
            )
        }
    };
    let calm_with = |name: &'static str| {
        move |i| {
            step(
                i,
                60_000,
                &[(name, 10, 20_000_000), ("/t/victim", 0, 2_000_000)],
                Some(0),
            )
        }
    };
    let run = |name: &'static str| -> Vec<RunqStep> {
        (0..4)
            .map(calm_with(name))
            .chain((4..8).map(hot(name)))
            .collect()
    };
    let f = diagnose(
        &[timeline(run("/t/neighbour")), starts("/t/neighbour", 4, 8)],
        &[],
    );
    assert_eq!(noisy(&f).len(), 1, "{f:#?}");
    // ... not for the host's own processes, which hold the tracer and everything else.
    let f = diagnose(&[timeline(run("system")), starts("system", 4, 8)], &[]);
    assert!(noisy(&f).is_empty(), "{f:#?}");
    // Five times its calm rate and most of the wait: named, in people's words.
    let steps = calm_then(|i| step(i, 3_000_000, &[("system", 40, 120_000_000)], Some(0)));
    let f = diagnose(&[timeline(steps), starts("system", 4, 8)], &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].summary.contains("system services"), "{}", f[0].summary);
}

#[test]
fn on_a_busy_host_the_neighbour_that_started_is_named_not_the_host() {
    // As measured on the busy-host case: the host's half-duty load ran during more of the long
    // waits than the neighbour did, but held all of the short ones before.
    let mut steps: Vec<RunqStep> = (0..4)
        .map(|i| {
            step(
                i,
                3_300_000,
                &[("system", 1, 102_000_000), ("idle", 0, 1_000_000)],
                Some(0),
            )
        })
        .collect();
    steps.extend((4..10).map(|i| {
        step(
            i,
            43_000_000,
            &[("system", 3, 547_000_000), ("/t/neighbour", 0, 409_000_000)],
            Some(0),
        )
    }));
    let f = diagnose(
        &[
            timeline(steps),
            ran("system", &[1.0; 10]),
            starts("/t/neighbour", 4, 10),
        ],
        &[],
    );
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(blamed(&f[0]), ["/t/neighbour"]);
}

#[test]
fn a_co_runner_whose_share_of_longer_waits_shrank_is_not_a_cause() {
    // The host's load ran beside the victim all along and held all of its short waits; the
    // neighbour's arrival made the waits long, and the host's load ran during part of them.
    let steps = (0..4)
        .map(|i| step(i, 60_000, &[("system", 5, 100_000_000)], Some(0)))
        .chain((4..8).map(|i| {
            step(
                i,
                5_000_000,
                &[("system", 5, 550_000_000), ("/t/neighbour", 0, 420_000_000)],
                Some(0),
            )
        }))
        .collect();
    let f = diagnose(
        &[
            timeline(steps),
            ran("system", &[1.0; 8]),
            starts("/t/neighbour", 4, 8),
        ],
        &[],
    );
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(blamed(&f[0]), ["/t/neighbour"]);
}

#[test]
fn a_slow_second_long_before_the_episode_is_not_part_of_it() {
    // The host stirred once in the first second; the neighbour came at 5.
    let by = [("/t/neighbour", 200, 300_000_000)];
    let mut steps: Vec<RunqStep> = (0..10).map(calm).collect();
    steps[0] = step(0, 3_000_000, &by, Some(0));
    for i in 5..10 {
        steps[i as usize] = step(i, 12_000_000, &by, Some(0));
    }
    let neighbour = ran(
        "/t/neighbour",
        &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    );
    let f = diagnose(&[timeline(steps), neighbour], &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        f[0].evidence[0].range_ns,
        Some((5_000_000_000, 10_000_000_000))
    );
    assert!(f[0].summary.contains("rose"), "{}", f[0].summary);
}

#[test]
fn one_slow_second_is_not_a_verdict() {
    let slow = |i| {
        step(
            i,
            20_000_000,
            &[("/t/neighbour", 300, 400_000_000)],
            Some(0),
        )
    };
    let neighbour = || ran("/t/neighbour", &[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]);
    let mut steps: Vec<RunqStep> = (0..8).map(calm).collect();
    steps[5] = slow(5);
    assert!(diagnose(&[timeline(steps.clone()), neighbour()], &[]).is_empty());
    steps[6] = slow(6);
    let f = diagnose(&[timeline(steps), neighbour()], &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].confidence < 0.95, "{}", f[0].confidence);
}

#[test]
fn the_host_needs_three_slow_seconds() {
    // Two seconds of the host's own work: short, as its bursts are.
    let slow = |i| step(i, 20_000_000, &[("system", 300, 400_000_000)], Some(0));
    let host = ran(
        "system",
        &[0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 1.0, 0.1, 0.1],
    );
    let mut steps: Vec<RunqStep> = (0..10).map(calm).collect();
    steps[5] = slow(5);
    steps[6] = slow(6);
    assert!(diagnose(&[timeline(steps.clone()), host.clone()], &[]).is_empty());
    steps[7] = slow(7);
    let f = diagnose(&[timeline(steps), host], &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].confidence <= 0.8, "{}", f[0].confidence);
}

#[test]
fn a_co_runner_running_as_much_as_ever_is_not_named() {
    // The host's half-duty load all along; the sleeper's luck with it varies from second to
    // second, and its slow seconds are spent behind that load alone.
    let steps: Vec<RunqStep> = (0..10)
        .map(|i| {
            if [0, 1, 5].contains(&i) {
                step(i, 40_000, &[("system", 0, 20_000_000)], Some(0))
            } else {
                step(i, 2_700_000, &[("system", 0, 150_000_000)], Some(0))
            }
        })
        .collect();
    let steady = ran("system", &[1.0; 10]);
    assert!(diagnose(&[timeline(steps.clone()), steady], &[]).is_empty());
    // Had the host's own work grown in those seconds, it would be named.
    let growing: Vec<f64> = (0..10)
        .map(|i| if [0, 1, 5].contains(&i) { 0.2 } else { 1.0 })
        .collect();
    let f = diagnose(&[timeline(steps), ran("system", &growing)], &[]);
    assert_eq!(noisy(&f).len(), 1, "{f:#?}");
}

#[test]
fn a_slowdown_before_the_calm_is_not_called_a_rise() {
    let mut steps: Vec<RunqStep> = (0..4)
        .map(|i| step(i, 3_000_000, &[("/t/neighbour", 400, 90_000_000)], Some(0)))
        .collect();
    steps.extend((4..8).map(calm));
    let f = diagnose(
        &[
            timeline(steps),
            ran("/t/neighbour", &[1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]),
        ],
        &[],
    );
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        f[0].summary.contains("was") && !f[0].summary.contains("rose"),
        "{}",
        f[0].summary
    );
}

#[test]
fn an_old_run_says_how_it_charged_the_waits() {
    let steps = calm_then(|i| step(i, 3_000_000, &[("/t/neighbour", 400, 90_000_000)], Some(0)));
    let mut t = timeline(steps);
    t.wait_charge = WaitCharge::LastRunner;
    let f = diagnose(&[t], &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        f[0].evidence[1]
            .note
            .contains("ended right after /t/neighbour ran"),
        "{}",
        f[0].evidence[1].note
    );
}
