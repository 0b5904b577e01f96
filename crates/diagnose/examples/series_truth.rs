//! Precision and recall of the over-time and variant detectors on the seeded generator's
//! labelled probe runs (`tailhunt_synth::probe`), run by `bench/series.sh`.
//!
//! Each case is written into a fresh store exactly as a `probe` run would be, diagnosed with
//! `diagnose_run` (which is never told what was planted), and scored: a finding of one of the
//! scored detectors that names a planted probe (and, for a step, its moment within two
//! intervals or 3% of the run; for a period, its length within 15%) is a true positive, any
//! other finding of those detectors a false positive, a planted cause nobody named a false
//! negative. Controls must have no finding at all. `--seeds K` runs the matrix for seeds N to
//! N+K-1 and adds them up.
//!
//! ```text
//! cargo run --release --locked -p tailhunt-diagnose --example series_truth -- [--seed N] [--seeds K] [--markdown FILE] [--assert]
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tailhunt_diagnose::{diagnose_run, Finding};
use tailhunt_model::{parse_display_name, ClockOrigin, RunKind};
use tailhunt_store::Store;
use tailhunt_synth::probe::{cases, Planted, ProbeCase, ORIGIN_MONO_NS};

const SCORED: [&str; 5] = [
    "step-change",
    "periodic-tail",
    "latency-floor",
    "cold-path",
    "fragile-percentile",
];

#[derive(Default, Clone, Copy)]
struct Tally {
    planted: usize,
    tp: usize,
    fp: usize,
    fn_: usize,
}

fn probe_of(f: &Finding) -> String {
    f.evidence
        .first()
        .and_then(|e| parse_display_name(&e.series))
        .and_then(|(_, l)| l.get("probe").cloned())
        .unwrap_or_default()
}

fn matches(f: &Finding, p: &Planted, span_ns: i64) -> bool {
    if f.detector != p.detector || probe_of(f) != p.probe {
        return false;
    }
    let values = |k: &str| -> Vec<f64> {
        f.evidence
            .iter()
            .filter_map(|e| e.values.get(k).copied())
            .collect()
    };
    if let Some(at) = p.at_ns {
        let width = values("interval_ns").first().copied().unwrap_or(0.0);
        let tol = (2.0 * width).max(0.03 * span_ns as f64);
        return values("at_ns")
            .into_iter()
            .any(|x| (x - at as f64).abs() <= tol);
    }
    if let Some(period) = p.period_ns {
        return values("period_ns")
            .into_iter()
            .any(|x| (x / period as f64 - 1.0).abs() <= 0.15);
    }
    true
}

fn run_case(c: &ProbeCase, seed: u64, dir: &std::path::Path) -> Result<Vec<Finding>, String> {
    let path = dir.join(format!("{}.db", c.name));
    let mut store = Store::open(&path).map_err(|e| e.to_string())?;
    let origin = ClockOrigin {
        wall_ns: 1_700_000_000_000_000_000,
        mono_ns: ORIGIN_MONO_NS,
    };
    let mut w = store
        .begin_run(RunKind::Probe, c.params(), origin)
        .map_err(|e| e.to_string())?;
    w.set_commit_interval(None);
    c.write(&mut w, seed).map_err(|e| e.to_string())?;
    let id = w.finish(serde_json::json!({})).map_err(|e| e.to_string())?;
    let d = diagnose_run(&store, &id).map_err(|e| e.to_string())?;
    Ok(d.findings
        .into_iter()
        .filter(|f| SCORED.contains(&f.detector.as_str()))
        .collect())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let seed: u64 = flag("--seed").and_then(|s| s.parse().ok()).unwrap_or(1);
    let seeds: u64 = flag("--seeds")
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1);
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("series_truth: cannot make a temporary directory: {e}");
            std::process::exit(2);
        }
    };
    let mut tally: BTreeMap<&str, Tally> = SCORED.iter().map(|d| (*d, Tally::default())).collect();
    let mut rows = String::new();
    let mut notes = String::new();
    let mut said = String::new();
    let mut controls_failed = 0;
    let first_seed = seed;
    let all = (seed..seed + seeds).flat_map(|s| cases(s).into_iter().map(move |c| (s, c)));
    for (seed, c) in all {
        let found = match run_case(&c, seed, dir.path()) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("series_truth: case {}: {e}", c.name);
                std::process::exit(2);
            }
        };
        let span = c.rounds * c.interval_ns;
        let mut used = vec![false; found.len()];
        for p in &c.planted {
            let t = tally.entry(p.detector).or_default();
            t.planted += 1;
            match (0..found.len()).find(|&i| !used[i] && matches(&found[i], p, span)) {
                Some(i) => {
                    used[i] = true;
                    t.tp += 1;
                }
                None => {
                    t.fn_ += 1;
                    let _ = writeln!(
                        notes,
                        "- seed {seed}, {}: missed {} on {}",
                        c.name, p.detector, p.probe
                    );
                }
            }
        }
        for (i, f) in found.iter().enumerate().filter(|(i, _)| !used[*i]) {
            let _ = i;
            tally
                .entry(
                    SCORED
                        .iter()
                        .find(|d| **d == f.detector)
                        .copied()
                        .unwrap_or("other"),
                )
                .or_default()
                .fp += 1;
            let _ = writeln!(
                notes,
                "- seed {seed}, {}: false {}: {}",
                c.name, f.detector, f.summary
            );
        }
        if c.is_control() && !found.is_empty() {
            controls_failed += 1;
        }
        let names: Vec<String> = found
            .iter()
            .map(|f| format!("{} ({})", f.detector, probe_of(f)))
            .collect();
        let planted: Vec<String> = c
            .planted
            .iter()
            .map(|p| format!("{} ({})", p.detector, p.probe))
            .collect();
        let _ = writeln!(
            rows,
            "| {seed} | {} | {} | {} | {} |",
            c.name,
            c.description,
            if planted.is_empty() {
                "nothing (control)".into()
            } else {
                planted.join(", ")
            },
            if names.is_empty() {
                "-".into()
            } else {
                names.join(", ")
            },
        );
        if seed == first_seed {
            for f in &found {
                let _ = writeln!(said, "- {}: {}", c.name, f.summary);
            }
        }
    }
    let mut md = String::new();
    let last = seed + seeds - 1;
    let _ = writeln!(md, "## Per detector (seeds {seed} to {last})\n");
    let _ = writeln!(
        md,
        "| detector | planted | TP | FP | FN | precision | recall |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    let mut below = false;
    let ratio = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
    for (d, t) in &tally {
        let (p, r) = (ratio(t.tp, t.tp + t.fp), ratio(t.tp, t.tp + t.fn_));
        below |= p < 0.9 || r < 0.9;
        let _ = writeln!(
            md,
            "| {d} | {} | {} | {} | {} | {p:.2} | {r:.2} |",
            t.planted, t.tp, t.fp, t.fn_
        );
    }
    let _ = writeln!(md, "\nControls with a finding: {controls_failed}.\n");
    let none = if notes.is_empty() { "none\n" } else { "" };
    let _ = writeln!(md, "## Misses and false findings\n\n{notes}{none}");
    let _ = writeln!(md, "## Cases\n\n| seed | case | planted (generator's words) | truth | found |\n|---|---|---|---|---|\n{rows}");
    let _ = writeln!(md, "## What the detectors said (seed {seed})\n\n{said}");
    print!("{md}");
    if let Some(path) = flag("--markdown") {
        if let Err(e) = std::fs::write(path, &md) {
            eprintln!("series_truth: cannot write {path}: {e}");
            std::process::exit(2);
        }
    }
    if args.iter().any(|a| a == "--assert") && (below || controls_failed > 0) {
        std::process::exit(1);
    }
}
