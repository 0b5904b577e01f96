//! `diagnose_run` on a store written by the schema-3 code (the binary's compatibility fixture):
//! every kind reads back through the model's evidence types.

use tailhunt_diagnose::{detectors_for, diagnose_run, stored};
use tailhunt_model::RunKind;
use tailhunt_store::Store;

fn fixture() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tailhunt/tests/fixtures/store-schema3.db"
        ),
        &path,
    )
    .unwrap();
    let store = Store::open(&path).unwrap();
    (dir, store)
}

#[test]
fn close_rates_of_an_old_sweep_stay_two_steps_each_with_its_own_samples() {
    let (_dir, store) = fixture();
    let steps = stored::sweep_steps(&store, "f59f01c07f").unwrap();
    let got: Vec<(f64, usize)> = steps
        .iter()
        .map(|s| (s.rate_per_s, s.samples.len()))
        .collect();
    assert_eq!(got, vec![(50.0, 50), (1231.0, 1231), (1234.0, 1234)]);
}

#[test]
fn every_kind_of_old_run_is_diagnosed_by_its_own_detectors() {
    let (_dir, store) = fixture();
    let mut kinds = Vec::new();
    for run in store.runs().unwrap() {
        let d = diagnose_run(&store, &run.id).unwrap();
        assert_eq!(d.detectors, detectors_for(&run.kind));
        kinds.push(run.kind);
    }
    for k in [
        RunKind::Import,
        RunKind::Load,
        RunKind::Pcap,
        RunKind::Capture,
        RunKind::Runq,
        RunKind::Transfer,
        RunKind::Sockets,
    ] {
        assert!(kinds.contains(&k), "the fixture has no {k} run");
    }
    let runq = stored::timelines(&store, "8a9d7eefd7").unwrap();
    assert!(!runq.is_empty() && runq.iter().all(|t| !t.steps.is_empty()));
}

#[test]
fn diagnose_and_store_keeps_with_each_run_what_it_returns() {
    let (_dir, mut store) = fixture();
    let mut found = 0;
    for run in store.runs().unwrap() {
        let d = tailhunt_diagnose::diagnose_and_store(&mut store, &run.id).unwrap();
        assert_eq!(
            store.findings(&run.id).unwrap(),
            d.findings,
            "run {}",
            run.id
        );
        found += d.findings.len();
    }
    // The fixture's runs hold causes the detectors name: an empty comparison proves little.
    assert!(found > 0, "no run of the fixture had a finding");
}
