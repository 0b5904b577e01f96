use super::*;
use tailhunt_model::evidence::runq::{CgroupKind, CgroupRef, Counters, Throttling};

fn cg(name: &str) -> CgroupRef {
    CgroupRef {
        id: name.len() as u64,
        path: format!("/{name}"),
        name: name.into(),
        kind: CgroupKind::Cgroup,
    }
}

fn row(name: &str, waits_ns: &[u64], by: &[(&str, u64, u64)]) -> CgroupInterval {
    let mut latency = Histogram::new();
    for w in waits_ns {
        latency.record(*w);
    }
    CgroupInterval {
        cgroup: cg(name),
        latency,
        run_ns: None,
        by: by
            .iter()
            .map(|(other, preemptions, wait_ns)| Attribution {
                other: if *other == "idle" {
                    CgroupRef::idle()
                } else {
                    cg(other)
                },
                preemptions: *preemptions,
                waits: 1,
                wait_ns: *wait_ns,
            })
            .collect(),
        throttling: Some(Throttling {
            periods: 10,
            throttled_periods: 2,
            throttled_ns: 5_000_000,
        }),
        quota: None,
        pressure_some_us: None,
        cpu_cgroup: None,
    }
}

fn interval(rows: Vec<CgroupInterval>) -> Interval {
    Interval {
        start_ns: 0,
        end_ns: 1_000_000_000,
        cgroups: rows,
        events: Vec::new(),
        counters: Counters::default(),
        programs: Vec::new(),
    }
}

fn counter(snap: &Snapshot, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    snap.counters
        .iter()
        .find(|c| {
            c.name == name
                && c.labels.len() == labels.len()
                && c.labels
                    .iter()
                    .zip(labels)
                    .all(|(a, b)| a.0 == b.0 && a.1 == b.1)
        })
        .map(|c| c.value)
}

#[test]
fn intervals_add_up_per_cgroup_and_preemptions_name_the_neighbour() {
    let mut s = RunqStatus::default();
    let iv = interval(vec![
        row(
            "victim",
            &[1_000, 2_000_000],
            &[("hog", 3, 1_500_000), ("idle", 0, 10)],
        ),
        row("hog", &[5_000], &[("victim", 1, 1_000)]),
    ]);
    s.fold(&iv, 10);
    s.fold(&iv, 10);
    let mut snap = Snapshot::default();
    s.fill(&mut snap);
    let h = snap
        .histograms
        .iter()
        .find(|h| h.labels == vec![("cgroup".to_string(), "victim".to_string())])
        .unwrap();
    assert_eq!(h.histogram.count(), 4);
    assert_eq!(h.name, LATENCY_METRIC);
    assert_eq!(
        counter(
            &snap,
            PREEMPTED_METRIC,
            &[("cgroup", "victim"), ("by", "hog")]
        ),
        Some(6.0)
    );
    assert_eq!(
        counter(
            &snap,
            "tailhunt_runq_wait_by_seconds",
            &[("cgroup", "victim"), ("by", "hog")]
        ),
        Some(0.003)
    );
    // No preemption by the idle CPU: no series for it.
    assert_eq!(
        counter(
            &snap,
            PREEMPTED_METRIC,
            &[("cgroup", "victim"), ("by", "idle")]
        ),
        None
    );
    assert_eq!(
        counter(
            &snap,
            "tailhunt_runq_throttled_periods",
            &[("cgroup", "hog")]
        ),
        Some(4.0)
    );
    assert_eq!(counter(&snap, "tailhunt_runq_intervals", &[]), Some(2.0));
    crate::exposition::validate(&snap).unwrap();
}

#[test]
fn cgroups_past_the_cap_are_exported_as_other_and_counted() {
    let mut s = RunqStatus::default();
    s.fold(
        &interval(vec![
            row("a", &[1_000], &[("c", 1, 1_000)]),
            row("b", &[1_000], &[("a", 2, 1_000)]),
        ]),
        2,
    );
    // `a` and `c` took the two labels (`c` as a neighbour); `b` is past the cap.
    assert_eq!(s.folded, 1);
    s.fold(&interval(vec![row("d", &[7_000], &[("a", 1, 1)])]), 2);
    assert_eq!(s.folded, 2);
    let mut snap = Snapshot::default();
    s.fill(&mut snap);
    let labels: Vec<&str> = snap
        .histograms
        .iter()
        .map(|h| h.labels[0].1.as_str())
        .collect();
    assert_eq!(labels, ["a", OTHER]);
    assert_eq!(s.exported_cgroups(), 2);
    let other = &snap.histograms[1];
    assert_eq!(other.histogram.count(), 2, "b's and d's waits");
    assert_eq!(
        counter(&snap, PREEMPTED_METRIC, &[("cgroup", OTHER), ("by", "a")]),
        Some(3.0)
    );
    assert_eq!(
        counter(&snap, PREEMPTED_METRIC, &[("cgroup", "a"), ("by", "c")]),
        Some(1.0)
    );
    // A neighbour past the cap is `other` too.
    s.fold(&interval(vec![row("a", &[1], &[("e", 5, 1)])]), 2);
    let mut snap = Snapshot::default();
    s.fill(&mut snap);
    assert_eq!(
        counter(&snap, PREEMPTED_METRIC, &[("cgroup", "a"), ("by", OTHER)]),
        Some(5.0)
    );
}
