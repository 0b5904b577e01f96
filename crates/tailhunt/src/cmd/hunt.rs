//! `tailhunt hunt TARGET`: reads the flags, shows the plan and the progress on stderr, prints
//! the ranked verdict (or `--json`). The method itself lives in `tailhunt_hunt`.

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Result;
use tailhunt_hunt::{Hunt, HuntConfig, Plan, Progress};
use tailhunt_model::evidence::sweep::SweepStep;
use tailhunt_model::{format_duration_ns, format_rate};

use crate::cli::{Cli, HuntArgs};
use crate::output;
use crate::signals::{self, Interrupted};

/// Progress lines on stderr, one per event (also when stderr is not a terminal: a hunt takes
/// minutes and a log should show where it was). The plan goes to stdout before the hunt
/// runs, or to stderr with `--json` (stdout is then one JSON document).
struct Stderr {
    json: bool,
}

impl Progress for Stderr {
    fn planned(&mut self, plan: &Plan) {
        let text = render_plan(plan);
        let _ = if self.json {
            std::io::stderr().write_all(text.as_bytes())
        } else {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|_| out.flush())
        };
    }

    fn phase(&mut self, what: &str) {
        eprintln!("hunt: {what}");
    }

    fn step_started(&mut self, rate: f64, repeat: usize) {
        let round = match repeat {
            tailhunt_hunt::ramp::CONFIRM => " (again, to confirm a climb)",
            1 => "",
            _ => " (again)",
        };
        eprintln!("hunt: step {}/s{round}", format_rate(rate));
    }

    fn step_done(&mut self, s: &SweepStep) {
        let ms = |ns: u64| format_duration_ns(ns as f64);
        match &s.latency_ns {
            Some(l) => eprintln!(
                "hunt:   {}/s: p50 {}, p99 {}, {} ok, {} errors, {} timeouts",
                format_rate(s.rate_per_s),
                ms(l.p50),
                ms(l.p99),
                s.ok,
                s.errors,
                s.timeouts
            ),
            None => eprintln!(
                "hunt:   {}/s: no request finished",
                format_rate(s.rate_per_s)
            ),
        }
    }
}

pub fn run(cli: &Cli, a: &HuntArgs) -> Result<()> {
    let cfg = HuntConfig {
        url: a.target.clone(),
        budget: a.budget,
        max_rate: a.max_rate,
        conns: a.conns,
        store: a.store.clone().unwrap_or_else(|| cli.db.clone()),
        seed: a.seed,
    };
    signals::install();
    let hunt = tailhunt_hunt::run(&cfg, signals::flag(), &mut Stderr { json: cli.json })?;
    output::print(cli.json, &hunt, render)?;
    if hunt.interrupted {
        return Err(anyhow::Error::new(Interrupted).context(format!(
            "kept what was measured as the runs of hunt {}",
            hunt.hunt_id
        )));
    }
    // The target went away mid-sweep: the verdict is printed, the exit status says so (as
    // `load` does).
    if let Some(why) = &hunt.failure {
        anyhow::bail!(
            "{why}; kept what was measured as the partial runs of hunt {}",
            hunt.hunt_id
        );
    }
    Ok(())
}

fn render_plan(p: &Plan) -> String {
    let mut o = String::new();
    let rates: Vec<String> = p.rates.iter().map(|r| format_rate(*r)).collect();
    let _ = writeln!(
        o,
        "plan: budget {}; rates {} /s (ramp up until latency or errors climb, then again in random order); {} + {} warm-up per step (longer at low rates, for at least {} requests), {} connection(s)",
        format_duration_ns(p.budget_ns as f64),
        rates.join(", "),
        format_duration_ns(p.step_ns as f64),
        format_duration_ns(p.warmup_ns as f64),
        tailhunt_hunt::plan::MIN_REQUESTS,
        p.conns
    );
    for s in &p.sources {
        let mark = if s.planned { "yes" } else { "no " };
        let _ = writeln!(o, "  {mark} {:<8} {}", s.source.name(), s.note);
    }
    o
}

fn render(h: &Hunt) -> String {
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
        let lat = |f: fn(&tailhunt_model::evidence::sweep::StepLatency) -> u64| {
            s.latency_ns
                .as_ref()
                .map_or("-".to_string(), |l| format_duration_ns(f(l) as f64))
        };
        let _ = writeln!(
            o,
            "{:>10} {:>6} {:>8} {:>7} {:>10} {:>10} {:>10}",
            format_rate(s.rate_per_s),
            match s.repeat {
                tailhunt_hunt::ramp::CONFIRM => "check".to_string(),
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
    if tailhunt_hunt::verdict::named(&h.findings).next().is_none() {
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
    o
}
