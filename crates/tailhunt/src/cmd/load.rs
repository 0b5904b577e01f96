//! `tailhunt load`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;
use tailhunt_load::engine::{Live, StepConfig, Timing};
use tailhunt_load::record::{self, run_sweep, Ran, SweepRun};
use tailhunt_load::sweep;
use tailhunt_load::{limits, target};
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::units::parse_request_rates;
use tailhunt_model::{ClockOrigin, RunKind};
use tailhunt_report::doc::LoadDoc;

use crate::cli::{Cli, LoadArgs};
use crate::progress::Line;
use crate::signals::{self, Interrupted};
use crate::{output, request};

fn config(a: &LoadArgs) -> Result<(StepConfig, Vec<f64>)> {
    let target = target::parse_target(&a.url)?;
    let rates = match (&a.rate, &a.sweep) {
        (Some(r), _) => parse_request_rates(r).context("--rate")?,
        (None, Some(s)) => parse_request_rates(s).context("--sweep")?,
        (None, None) => anyhow::bail!("give --rate R or --sweep R1,R2,..."),
    };
    let warmup = a
        .warmup
        .unwrap_or_else(|| tailhunt_load::engine::default_warmup(a.duration));
    // Every flag that sizes memory is checked here, before the store is opened: an absurd
    // value is refused at once and leaves no empty run behind.
    limits::check_sweep(&rates, a.repeat)?;
    let cfg = StepConfig {
        target,
        rate: rates[0],
        duration: a.duration,
        warmup,
        conns: a.conns,
        threads: a.threads,
        max_inflight: a.max_inflight,
        timeout: a.timeout,
        nodelay: a.nodelay,
        split_writes: a.split_writes,
        request_bytes: a.request.request_bytes,
        arrival: a.arrival,
        seed: a.seed,
        breakdown: a.breakdown,
        http: request::http(&a.request)?,
        tls: request::tls(&a.request),
        timing: Timing {
            spin: a.spin,
            pin: a.pin.clone(),
        },
    };
    for &rate in &rates {
        limits::check_step(&StepConfig {
            rate,
            ..cfg.clone()
        })?;
    }
    Ok((cfg, rates))
}

/// Prints a progress line on a terminal and turns a stopping signal into the engine's stop
/// flag.
fn watcher(
    live: Arc<Live>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    label: String,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut line = Line::new();
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
            if signals::requested() {
                stop.store(true, Ordering::Relaxed);
            }
            line.show(|| {
                format!(
                    "{label}: sent {}, done {}",
                    live.sent.load(Ordering::Relaxed),
                    live.done.load(Ordering::Relaxed)
                )
            });
        }
    })
}

pub fn run(cli: &Cli, a: &LoadArgs) -> Result<()> {
    let (base, rates) = config(a)?;
    let order = a.order;
    let plan = sweep::plan(&rates, order, a.repeat, a.seed);
    let interval = a.commit_interval;
    signals::install();
    let mut store = crate::cmd::open_tagged(cli)?;
    let order_name = format!("{order:?}").to_lowercase();
    let mut params = record::run_params(&a.url, &base, &rates, &order_name, a.repeat);
    params["commit_interval_ns"] = json!(a.commit_interval.as_nanos() as u64);
    let mut writer = store.begin_run(RunKind::Load, params, ClockOrigin::now())?;
    writer.set_commit_interval(Some(interval));
    let run_id = writer.id().to_string();
    let (live, stop, done) = (
        Arc::new(Live::default()),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let watch = watcher(
        Arc::clone(&live),
        Arc::clone(&stop),
        Arc::clone(&done),
        format!("load {}", a.url),
    );
    let sweep = SweepRun {
        base,
        plan,
        repeats: a.repeat,
        url: a.url.clone(),
    };
    let ran = run_sweep(&sweep, &mut writer, &live, &stop);
    done.store(true, Ordering::Relaxed);
    let _ = watch.join();
    let ran = ran.map_err(|e| anyhow::anyhow!("storing the run: {e}"))?;
    let interrupted = stop.load(Ordering::Relaxed);
    put_evidence(&mut writer, &ran.record()).map_err(|e| anyhow::anyhow!(e))?;
    let none_ok = ran.nothing_succeeded();
    let Ran {
        steps,
        first_error,
        failure,
    } = ran;
    let failure = failure.map(|why| anyhow::anyhow!(why));
    if steps.is_empty() {
        // No step finished: a run that stored nothing (no connection) is not kept.
        let e = failure.unwrap_or_else(|| Interrupted.into());
        return Err(super::abandoned(writer, e, |id, n| {
            format!("kept the {n} samples measured as partial run {id}")
        }));
    }
    let (_, status) = writer.finish_as(failure.is_some() || interrupted, json!({}))?;
    let diagnosis = tailhunt_diagnose::diagnose_and_store(&mut store, &run_id)?;
    let findings = diagnosis.findings;
    let doc = LoadDoc {
        run_id: run_id.clone(),
        status,
        target: a.url.clone(),
        steps,
        findings,
        first_error,
    };
    output::print(cli.json, &doc, tailhunt_report::terminal::render_load)?;
    match (failure, interrupted) {
        (Some(e), _) => Err(e.context(format!(
            "kept the {} finished step(s) as partial run {run_id}",
            doc.steps.len()
        ))),
        (None, true) => Err(anyhow::Error::new(Interrupted)
            .context(format!("kept what was measured as partial run {run_id}"))),
        (None, false) => {
            // A warning, not a failure: a server that times out or refuses every request is
            // what a run may be measuring (the lab's timeout scenarios are). But its
            // latencies are the failures', not the service's, so a reader is told.
            if let Some(why) = none_ok {
                tell!(
                    "tailhunt: warning: {why}: these latencies are the failures', not the \
                     service's; check the target and the request (path, --method, --header, \
                     --body, or the command) unless failures are what you measure"
                );
            }
            Ok(())
        }
    }
}
