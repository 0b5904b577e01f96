//! The probe detectors through `diagnose_run` on generated probe runs written into a real
//! store: every planted cause is named on its probe, the controls stay silent.

use tailhunt_diagnose::diagnose_run;
use tailhunt_model::{parse_display_name, ClockOrigin, RunKind};
use tailhunt_store::Store;
use tailhunt_synth::probe::{cases, ProbeCase, ORIGIN_MONO_NS};

fn diagnose(c: &ProbeCase, seed: u64) -> Vec<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("p.db")).unwrap();
    let origin = ClockOrigin {
        wall_ns: 1_700_000_000_000_000_000,
        mono_ns: ORIGIN_MONO_NS,
    };
    let mut w = store.begin_run(RunKind::Probe, c.params(), origin).unwrap();
    c.write(&mut w, seed).unwrap();
    let id = w.finish(serde_json::json!({})).unwrap();
    let d = diagnose_run(&store, &id).unwrap();
    assert_eq!(
        d.detectors,
        tailhunt_diagnose::detectors_for(&RunKind::Probe)
    );
    d.findings
        .iter()
        .map(|f| {
            let probe = parse_display_name(&f.evidence[0].series)
                .and_then(|(_, l)| l.get("probe").cloned())
                .unwrap_or_default();
            (f.detector.clone(), probe)
        })
        .collect()
}

#[test]
fn each_planted_cause_is_named_on_its_probe_and_controls_are_silent() {
    for c in cases(3) {
        let found = diagnose(&c, 3);
        let want: Vec<(String, String)> = c
            .planted
            .iter()
            .map(|p| (p.detector.to_string(), p.probe.clone()))
            .collect();
        assert_eq!(found, want, "case {}: {}", c.name, c.description);
    }
}

#[test]
fn a_cold_path_finding_carries_its_interval_and_rounds() {
    let c = cases(1).into_iter().find(|c| c.name == "cold-dns").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("p.db")).unwrap();
    let origin = ClockOrigin {
        wall_ns: 0,
        mono_ns: ORIGIN_MONO_NS,
    };
    let mut w = store.begin_run(RunKind::Probe, c.params(), origin).unwrap();
    c.write(&mut w, 1).unwrap();
    let id = w.finish(serde_json::json!({})).unwrap();
    let f = &diagnose_run(&store, &id).unwrap().findings[0];
    assert!(f.summary.contains("a DNS lookup adds"), "{}", f.summary);
    assert!(f.summary.contains("(95% CI, 60 rounds)"), "{}", f.summary);
    let v = &f.evidence[0].values;
    assert!(v["median_diff_low_ns"] > 0.0 && v["median_diff_low_ns"] < v["median_diff_ns"]);
    assert!(v["median_diff_high_ns"] > v["median_diff_ns"]);
}
