//! The hunt as text: the plan, a line per step, and the whole hunt with its ranked verdict
//! (what `tailhunt hunt` prints without `--json`).

use std::fmt::Write as _;

use tailhunt_model::evidence::sweep::{StepLatency, SweepStep};
use tailhunt_model::{format_duration_ns, format_rate};

use crate::{Hunt, Plan};

/// The line announcing a step at `rate` in round `repeat`.
pub fn step_started(rate: f64, repeat: usize) -> String {
    let round = match repeat {
        crate::ramp::CONFIRM => " (again, to confirm a climb)",
        1 => "",
        _ => " (again)",
    };
    format!("step {}/s{round}", format_rate(rate))
}

/// The line of a finished step.
pub fn step_done(s: &SweepStep) -> String {
    let ms = |ns: u64| format_duration_ns(ns as f64);
    match &s.latency_ns {
        Some(l) => format!(
            "  {}/s: p50 {}, p99 {}, {} ok, {} errors, {} timeouts",
            format_rate(s.rate_per_s),
            ms(l.p50),
            ms(l.p99),
            s.ok,
            s.errors,
            s.timeouts
        ),
        None => format!("  {}/s: no request finished", format_rate(s.rate_per_s)),
    }
}

/// The plan: budget, rates, step length, and which sources run (and why not).
pub fn plan(p: &Plan) -> String {
    let mut o = String::new();
    let rates: Vec<String> = p.rates.iter().map(|r| format_rate(*r)).collect();
    let _ = writeln!(
        o,
        "plan: budget {}; rates {} /s (ramp up until latency or errors climb, then again in random order); {} + {} warm-up per step (longer at low rates, for at least {} requests), {} connection(s)",
        format_duration_ns(p.budget_ns as f64),
        rates.join(", "),
        format_duration_ns(p.step_ns as f64),
        format_duration_ns(p.warmup_ns as f64),
        crate::plan::MIN_REQUESTS,
        p.conns
    );
    for s in &p.sources {
        let mark = if s.planned { "yes" } else { "no " };
        let _ = writeln!(o, "  {mark} {:<8} {}", s.source.name(), s.note);
    }
    o
}

/// The whole hunt: the floor, the steps, the evidence and the ranked verdict.
pub fn hunt(h: &Hunt) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "hunt {} of {} ({})",
        h.hunt_id,
        h.target,
        h.status.name()
    );
    if let Some(f) = &h.floor {
        let _ = writeln!(
            o,
            "network floor: TCP connect fastest {}, median {} ({} connects)",
            format_duration_ns(f.min_ns as f64),
            format_duration_ns(f.p50_ns as f64),
            f.connects
        );
    }
    let _ = writeln!(
        o,
        "\n{:>10} {:>6} {:>8} {:>7} {:>10} {:>10} {:>10}",
        "rate/s", "round", "ok", "errors", "p50", "p99", "max"
    );
    for s in &h.steps {
        let lat = |f: fn(&StepLatency) -> u64| {
            s.latency_ns
                .as_ref()
                .map_or("-".to_string(), |l| format_duration_ns(f(l) as f64))
        };
        let _ = writeln!(
            o,
            "{:>10} {:>6} {:>8} {:>7} {:>10} {:>10} {:>10}",
            format_rate(s.rate_per_s),
            match s.repeat {
                crate::ramp::CONFIRM => "check".to_string(),
                r => r.to_string(),
            },
            s.ok,
            s.errors + s.timeouts + s.unsent,
            lat(|l| l.p50),
            lat(|l| l.p99),
            lat(|l| l.max)
        );
    }
    let _ = writeln!(o, "ramp: {}", h.ramp_stop);
    let _ = writeln!(o, "\nevidence:");
    for e in &h.evidence {
        let run = e
            .run_id
            .as_deref()
            .map(|r| format!(" run {r}:"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  {:<8} {:<9}{run} {}",
            e.source.name(),
            e.status,
            e.note
        );
    }
    let _ = writeln!(o, "\nverdict:");
    if crate::verdict::named(&h.findings).next().is_none() {
        let _ = writeln!(
            o,
            "  no root cause found at medium confidence or above by the detectors that looked"
        );
    }
    for r in &h.findings {
        let _ = write!(
            o,
            "\n{}. from the {} run {}:",
            r.rank,
            r.source.name(),
            r.run_id
        );
        tailhunt_report::terminal::render_finding(&r.finding, &mut o);
    }
    if let Some(why) = &h.failure {
        let _ = writeln!(o, "\nthe sweep stopped early: {why}");
    }
    if let Some(path) = &h.report {
        let _ = writeln!(
            o,
            "\nreport: {path} (open it in a browser: findings first, then the charts)"
        );
    }
    if let Some(why) = &h.report_error {
        let _ = writeln!(o, "\nno HTML report: {why}");
    }
    o
}
