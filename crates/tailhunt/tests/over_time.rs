//! End-to-end: `analyze --over-time` and `diagnose` on an imported timestamped CSV with a step
//! planted in it, and on the same data without the step.

mod common;

use common::Env;

/// Four hours at one sample a second (epoch seconds, latency in ms): a log-normal-ish spread
/// around 1 ms drawn from a fixed linear congruential generator, and from `step_at_s` on
/// every latency doubled.
fn csv(step_at_s: Option<u64>) -> String {
    let mut out = String::from("timestamp,latency_ms\n");
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..14_400u64 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let mut ms = (0.6 * (u - 0.5)).exp() * if u > 0.99 { 4.0 } else { 1.0 };
        if step_at_s.is_some_and(|s| i >= s) {
            ms *= 2.0;
        }
        out.push_str(&format!("{}.000,{ms:.4}\n", 1_700_000_000 + i));
    }
    out
}

fn import(env: &Env, name: &str, body: &str) -> String {
    let file = env.path(name);
    std::fs::write(&file, body).unwrap();
    env.ok(&["import", file.to_str().unwrap(), "--quiet"])
        .trim()
        .to_string()
}

#[test]
fn a_planted_step_in_an_imported_csv_is_marked_over_time_and_diagnosed() {
    let env = Env::new();
    let run = import(&env, "step.csv", &csv(Some(9_000)));
    let text = env.ok(&["analyze", &run, "--over-time"]);
    assert!(text.contains("over time (120 intervals of 2m00s"), "{text}");
    for p in ["p50", "p90", "p99"] {
        assert!(text.contains(&format!("    {p}  ")), "{p}: {text}");
    }
    assert!(text.contains("^ change point at 2h30m00s"), "{text}");
    assert!(text.contains("periods: none"), "{text}");

    let doc = env.json(
        "analyze",
        &["analyze", &run, "--over-time", "--interval", "5m"],
    );
    let t = &doc["series"][0]["timeline"];
    assert_eq!(t["over_time"]["interval_ns"], 300_000_000_000i64);
    assert_eq!(t["over_time"]["intervals"].as_array().unwrap().len(), 48);
    let shifts = t["shifts"].as_array().unwrap();
    assert_eq!(shifts.len(), 1, "{shifts:?}");
    let before = shifts[0]["before_ns"][0].as_f64().unwrap();
    let after = shifts[0]["after_ns"][0].as_f64().unwrap();
    assert!((after / before - 2.0).abs() < 0.15, "{before} -> {after}");

    let d = env.json("diagnose", &["diagnose", &run]);
    let steps: Vec<&serde_json::Value> = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["detector"] == "step-change")
        .collect();
    assert_eq!(steps.len(), 1, "{d}");
    // The whole run's p50 sits between the two levels, on a gap the step made: that is the
    // step, not a fragile percentile.
    assert!(
        d["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["detector"] != "fragile-percentile"),
        "{d}"
    );
    let at = steps[0]["evidence"][0]["values"]["at_ns"].as_f64().unwrap();
    let first = 1_700_000_000e9;
    assert!((at - first - 9_000e9).abs() <= 240e9, "{at}");
    assert!(
        steps[0]["summary"].as_str().unwrap().contains("stepped up"),
        "{d}"
    );
}

#[test]
fn the_same_data_without_a_step_has_no_change_point_and_no_finding() {
    let env = Env::new();
    let run = import(&env, "flat.csv", &csv(None));
    let text = env.ok(&["analyze", &run, "--over-time"]);
    assert!(text.contains("change points: none"), "{text}");
    let d = env.json("diagnose", &["diagnose", &run]);
    assert!(
        d["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["detector"] != "step-change" && f["detector"] != "periodic-tail"),
        "{d}"
    );
    // --interval needs --over-time, and a bad width is named.
    env.fails(&["analyze", &run, "--over-time", "--interval", "soon"]);
}
