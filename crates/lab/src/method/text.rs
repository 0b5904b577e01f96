//! The lab as text: the scenario list, the verdict table, what `lab clean` removed (what
//! `tailhunt lab` prints without `--json`).

use tailhunt_report::terminal::table;

use super::{FindingRef, LabReport, ScenarioInfo, Verdict};
use crate::state::Cleaned;

/// Every scenario: what it plants, measures and fixes, what it needs, how long it takes.
pub fn list(scenarios: &[ScenarioInfo]) -> String {
    let mut out = String::new();
    for s in scenarios {
        out.push_str(&format!(
            "{}\n  plants:   {}\n  measures: {}\n  fix:      {}\n  needs:    {}\n  takes:    ~{} s / ~{} s (quick / full)\n\n",
            s.name,
            s.planted,
            s.measures,
            s.fix,
            s.needs.join(", "),
            s.quick_s,
            s.full_s
        ));
    }
    out.push_str("run: sudo tailhunt lab run NAME|all [--scale quick|full]\n");
    out
}

/// What `lab clean` removed, what it left alone and what it could not remove.
pub fn cleaned(c: &Cleaned) -> String {
    let mut s = format!("{}\n", summary(c));
    if !c.running.is_empty() {
        s.push_str(&format!(
            "left alone: lab runs still running (pids {:?})\n",
            c.running
        ));
    }
    for f in &c.failures {
        s.push_str(&format!("could not remove: {f}\n"));
    }
    s
}

/// One line on what `lab clean` removed.
pub fn summary(c: &Cleaned) -> String {
    if c.runs.is_empty() {
        return "nothing left by earlier lab runs".into();
    }
    format!(
        "removed what {} lab run(s) left: {} process(es), {} namespace(s) (with their veth/TUN devices and qdiscs), {} cgroup(s)",
        c.runs.len(),
        c.processes.len(),
        c.namespaces.len(),
        c.cgroups.len()
    )
}

/// The verdict table, and how many passed.
pub fn verdicts(r: &LabReport) -> String {
    let rows: Vec<Vec<String>> = r
        .scenarios
        .iter()
        .map(|s| {
            let f = |f: &FindingRef| format!("{} ({:.2})", f.detector, f.confidence);
            let planted = match s.planted.is_empty() {
                true => "nothing".into(),
                false => s.planted.join(" + "),
            };
            let figure = match &s.figure {
                None => "-".into(),
                Some(g) => {
                    let v = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
                    format!("{}: {} -> {} {}", g.name, v(g.before), v(g.after), g.unit)
                }
            };
            let name = match s.attempt {
                1 => s.scenario.clone(),
                n => format!("{} (attempt {n})", s.scenario),
            };
            vec![
                name,
                planted,
                s.top.as_ref().map_or("none".into(), f),
                match s.others.is_empty() {
                    true => "-".into(),
                    false => s.others.iter().map(f).collect::<Vec<_>>().join(", "),
                },
                figure,
                s.verdict.to_string(),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "scenario",
            "planted cause",
            "top finding (confidence)",
            "other findings",
            "figure before -> after fix",
            "verdict",
        ],
        &rows,
        "llllll",
    );
    let passed = r
        .scenarios
        .iter()
        .filter(|s| s.verdict == Verdict::Pass)
        .count();
    out.push_str(&format!(
        "\n{passed} of {} passed; runs in {} (tailhunt --db {} runs)\n",
        r.scenarios.len(),
        r.store,
        r.store
    ));
    if r.interrupted {
        out.push_str("interrupted: the scenarios after the last row did not run\n");
    }
    if let Some(path) = &r.report {
        out.push_str(&format!(
            "report: {path} (each scenario's runs before and after its fix, charts and findings)\n"
        ));
    }
    if let Some(why) = &r.report_error {
        out.push_str(&format!("no HTML report: {why}\n"));
    }
    out
}
