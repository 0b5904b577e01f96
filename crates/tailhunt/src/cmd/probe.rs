//! `tailhunt probe`: flags in, the prober's rounds into a run, status lines out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::json;
use tailhunt_model::evidence::probe::{ProbeStatus, ScheduleDrift};
use tailhunt_model::{format_duration_ns, ClockOrigin, Finding, RunKind, RunStatus};
use tailhunt_probe::config::{self, Config, Overrides};
use tailhunt_probe::kind;
use tailhunt_probe::run::{self, Length, Live};

use crate::cli::{Cli, ProbeArgs};
use crate::progress::Line;
use crate::signals::{self, Interrupted};
use crate::{flags, output};

/// What `tailhunt probe --json` prints (schema/probe.schema.json).
#[derive(Debug, Serialize)]
struct ProbeDoc {
    run_id: String,
    status: RunStatus,
    interval_ns: u64,
    rounds: u64,
    drift: ScheduleDrift,
    probes: Vec<ProbeStatus>,
    /// What the detectors found in the run (as `tailhunt diagnose RUN` shows it).
    findings: Vec<Finding>,
}

fn config(a: &ProbeArgs) -> Result<Config> {
    let over = Overrides {
        interval: a.interval,
        timeout: a.timeout,
        seed: a.seed,
    };
    Ok(match &a.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --config '{}'", path.display()))?;
            config::parse_file(&text, &over)
                .with_context(|| format!("--config '{}'", path.display()))?
        }
        None => config::from_urls(&a.urls, &over)?,
    })
}

/// Prints a progress line on a terminal and turns a stopping signal into the prober's stop
/// flag.
fn watcher(
    live: Arc<Live>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut line = Line::new();
        let mut failing: Vec<(String, String)> = Vec::new();
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
            if signals::requested() {
                stop.store(true, Ordering::Relaxed);
            }
            // A probe that starts or stops failing gets a line of its own, on a terminal or
            // in a log: a long run must not hide it until the end.
            for change in live.failing_changes(&mut failing) {
                line.note(&change.to_string());
            }
            line.show(|| {
                let names: Vec<&str> = failing.iter().map(|(n, _)| n.as_str()).collect();
                format!(
                    "probe: round {}, {} samples, {} errors, {} timeouts{}",
                    live.rounds.load(Ordering::Relaxed),
                    live.samples.load(Ordering::Relaxed),
                    live.errors.load(Ordering::Relaxed),
                    live.timeouts.load(Ordering::Relaxed),
                    if names.is_empty() {
                        String::new()
                    } else {
                        format!("; failing: {}", names.join(", "))
                    }
                )
            });
        }
    })
}

pub fn run(cli: &Cli, a: &ProbeArgs) -> Result<()> {
    let cfg = config(a)?;
    let interval = a.commit_interval;
    let length = match (a.once, a.duration) {
        (true, _) => Length::Once,
        (false, Some(d)) => Length::For(d),
        (false, None) => Length::Forever,
    };
    // Every probe starts (sockets, devices) before the run exists: a probe that cannot is
    // refused with nothing stored.
    let probes = cfg
        .probes
        .iter()
        .map(kind::build)
        .collect::<Result<Vec<_>, _>>()?;
    signals::install();
    let mut store = crate::cmd::open_tagged(cli)?;
    let params = json!({
        "interval_ns": cfg.interval.as_nanos() as u64,
        "timeout_ns": cfg.probes.iter().map(|p| p.timeout.as_nanos() as u64).max().unwrap_or(0),
        "probes": cfg.probes, "seed": cfg.seed, "once": a.once,
        "duration_ns": a.duration.map(|d| d.as_nanos() as u64),
        "commit_interval_ns": interval.as_nanos() as u64,
    });
    let mut writer = store.begin_run(RunKind::Probe, params, ClockOrigin::now())?;
    writer.set_commit_interval(Some(interval));
    let run_id = writer.id().to_string();
    tell!(
        "probing {} probe(s) every {} as run {run_id} (Ctrl-C to stop)",
        cfg.probes.len(),
        flags::show(cfg.interval)
    );
    let (live, stop, done) = (
        Arc::new(Live::default()),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let watch = watcher(Arc::clone(&live), Arc::clone(&stop), Arc::clone(&done));
    // The first round is due at the origin: take it now, not before the store was opened.
    let origin = ClockOrigin::now();
    writer.set_origin(origin)?;
    let ran = run::run(
        &cfg,
        probes,
        origin.mono_ns,
        length,
        &mut writer,
        &live,
        &stop,
    );
    done.store(true, Ordering::Relaxed);
    let _ = watch.join();
    let finished = ran.with_context(|| format!("run {run_id}"))?;
    let (_, status) = writer.finish_as(finished.interrupted, json!({}))?;
    // The detectors read the run back from the store, as `tailhunt diagnose` would.
    let diagnosis = tailhunt_diagnose::diagnose_and_store(&mut store, &run_id)?;
    let r = finished.record;
    let doc = ProbeDoc {
        run_id: run_id.clone(),
        status,
        interval_ns: r.interval_ns,
        rounds: r.rounds,
        drift: r.drift,
        probes: r.probes,
        findings: diagnosis.findings,
    };
    output::print(cli.json, &doc, render)?;
    if finished.interrupted {
        return Err(anyhow::Error::new(Interrupted)
            .context(format!("kept what was measured as partial run {run_id}")));
    }
    Ok(())
}

/// The text: one status line per probe, then the schedule's drift.
fn render(d: &ProbeDoc) -> String {
    let ns = |v: u64| format_duration_ns(v as f64);
    let mut out = format!(
        "run {} ({}): {} round(s) every {}\n\n",
        d.run_id,
        d.status.name(),
        d.rounds,
        ns(d.interval_ns)
    );
    let width = d
        .probes
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(5)
        .max(5);
    out.push_str(&format!(
        "{:<width$}  {:<11}  {:>7}  {:>7}  {:>7}  {:>8}  status\n",
        "probe", "kind", "samples", "ok", "errors", "timeouts"
    ));
    for p in &d.probes {
        let status = match (&p.last_error, p.keeps_failing(), p.ok) {
            (_, true, _) => format!(
                "FAILING ({} in a row): {}",
                p.failing_now,
                p.last_error.as_deref().unwrap_or("")
            ),
            (Some(e), false, _) => format!("ok; last error: {e}"),
            (None, false, 0) => "no samples".to_string(),
            (None, false, _) => "ok".to_string(),
        };
        out.push_str(&format!(
            "{:<width$}  {:<11}  {:>7}  {:>7}  {:>7}  {:>8}  {status}\n",
            p.name, p.kind, p.samples, p.ok, p.errors, p.timeouts
        ));
    }
    out.push_str(&format!(
        "\nschedule drift (how late probes started): p50 {}, p99 {}, max {} over {} slots; {} round(s) started late (over a tenth of the interval)\n",
        ns(d.drift.p50_ns),
        ns(d.drift.p99_ns),
        ns(d.drift.max_ns),
        d.drift.started,
        d.drift.late_rounds
    ));
    if d.findings.is_empty() {
        out.push_str(&format!(
            "\nfindings: none ({} found nothing in this run)\n",
            tailhunt_diagnose::probe::DETECTORS.join(", ")
        ));
    }
    tailhunt_report::terminal::render_findings(&d.findings, &mut out);
    out
}
