//! `tailhunt load`.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use tailhunt_analyze::{quantiles, Distribution};
use tailhunt_load::engine::{self, Live, StepConfig, StepOutcome};
use tailhunt_load::schedule::Arrival;
use tailhunt_load::sweep::{self, Order};
use tailhunt_load::{health, target};
use tailhunt_model::{ClockOrigin, RunStatus, Sample, SeriesMeta, SeriesSink};
use tailhunt_report::doc::{LatencyDoc, LoadDoc, StepDoc};
use tailhunt_store::{RunWriter, Store};

use crate::cli::{ArrivalArg, Cli, LoadArgs, OrderArg};
use crate::output;
use crate::signals::{self, Interrupted};

fn config(a: &LoadArgs) -> Result<(StepConfig, Vec<f64>)> {
    let target = target::parse_target(&a.url)?;
    let rates = match (&a.rate, &a.sweep) {
        (Some(r), _) => sweep::parse_rates(r).map_err(|e| anyhow::anyhow!("--rate: {e}"))?,
        (None, Some(s)) => sweep::parse_rates(s).map_err(|e| anyhow::anyhow!("--sweep: {e}"))?,
        (None, None) => anyhow::bail!("give --rate R or --sweep R1,R2,..."),
    };
    let measured = super::duration_flag("--duration", &a.duration)?;
    if measured.is_zero() {
        anyhow::bail!("--duration must be above 0");
    }
    let warmup = match &a.warmup {
        Some(w) => super::duration_flag("--warmup", w)?,
        None => Duration::from_secs(1).min(measured / 5),
    };
    let timeout = super::duration_flag("--timeout", &a.timeout)?;
    if timeout.is_zero() {
        anyhow::bail!("--timeout must be above 0");
    }
    let cfg = StepConfig {
        target,
        rate: rates[0],
        duration: measured,
        warmup,
        conns: a.conns,
        threads: a.threads,
        max_inflight: a.max_inflight,
        timeout,
        nodelay: a.nodelay,
        split_writes: a.split_writes,
        request_bytes: a.request_bytes,
        arrival: match a.arrival {
            ArrivalArg::Fixed => Arrival::Fixed,
            ArrivalArg::Poisson => Arrival::Poisson,
        },
        seed: a.seed,
        breakdown: a.breakdown,
    };
    Ok((cfg, rates))
}

/// Prints a progress line on a terminal and turns Ctrl-C into the engine's stop flag.
fn watcher(
    live: Arc<Live>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    label: String,
) -> std::thread::JoinHandle<()> {
    let tty = std::io::stderr().is_terminal();
    std::thread::spawn(move || {
        let mut ticks = 0u32;
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
            if signals::requested() {
                stop.store(true, Ordering::Relaxed);
            }
            ticks += 1;
            if tty && ticks.is_multiple_of(25) {
                let line = format!(
                    "\r{label}: sent {}, done {}",
                    live.sent.load(Ordering::Relaxed),
                    live.done.load(Ordering::Relaxed)
                );
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
        }
        if tty {
            let _ = std::io::stderr().write_all(b"\r\x1b[K");
        }
    })
}

fn labels_for(rate: f64, repeat: usize, repeats: usize) -> Vec<(String, String)> {
    let mut l = vec![("rate".to_string(), tailhunt_model::format_rate(rate))];
    if repeats > 1 {
        l.push(("repeat".to_string(), repeat.to_string()));
    }
    l
}

fn write_series(
    w: &mut RunWriter<'_>,
    name: &str,
    labels: &[(String, String)],
    samples: &[Sample],
) -> Result<String> {
    let mut meta = SeriesMeta::latency(name);
    for (k, v) in labels {
        meta.labels.insert(k.clone(), v.clone());
    }
    let display = tailhunt_model::display_name(&meta.name, &meta.labels);
    let h = w.open_series(&meta).map_err(|e| anyhow::anyhow!(e))?;
    w.push_samples(h, samples).map_err(|e| anyhow::anyhow!(e))?;
    Ok(display)
}

/// Stores one step's series and returns its summary row.
fn store_step(
    w: &mut RunWriter<'_>,
    a: &LoadArgs,
    step: sweep::Step,
    out: &StepOutcome,
    h: health::Health,
) -> Result<StepDoc> {
    let split = out
        .samples
        .partition_point(|s| s.intended_ns < out.measure_from_ns);
    let (warm, measured) = out.samples.split_at(split);
    let labels = labels_for(step.rate, step.repeat, a.repeat);
    let series = write_series(w, "latency", &labels, measured)?;
    if !warm.is_empty() {
        let mut wl = labels.clone();
        wl.push(("phase".into(), "warmup".into()));
        write_series(w, "latency", &wl, warm)?;
    }
    if a.breakdown && out.breakdowns.len() == out.samples.len() {
        let parts = &out.breakdowns[split..];
        let as_samples = |f: fn(&tailhunt_load::breakdown::Breakdown) -> i64| -> Vec<Sample> {
            measured
                .iter()
                .zip(parts)
                .map(|(s, b)| Sample::from_latency(s.intended_ns, f(b), s.outcome))
                .collect()
        };
        write_series(w, "server_app", &labels, &as_samples(|b| b.server_app_ns))?;
        write_series(
            w,
            "server_stack",
            &labels,
            &as_samples(|b| b.server_stack_ns),
        )?;
        write_series(w, "network", &labels, &as_samples(|b| b.network_ns))?;
        write_series(
            w,
            "client_stack",
            &labels,
            &as_samples(|b| b.client_stack_ns),
        )?;
    }
    w.flush()?;
    let facts = sweep::facts(step.rate, measured, out, h);
    let dist = Distribution::from_samples(measured, false);
    let s = quantiles::summarize(&dist, &[0.5, 0.9, 0.99, 0.999], 0.95);
    let latency_ns = (s.count > 0).then(|| LatencyDoc {
        p50: s.quantiles[0].value_ns,
        p90: s.quantiles[1].value_ns,
        p99: s.quantiles[2].value_ns,
        p999: s.quantiles[3].value_ns,
        max: s.max_ns.unwrap_or(0),
    });
    Ok(StepDoc {
        rate: step.rate,
        repeat: step.repeat,
        series,
        scheduled: facts.scheduled,
        sent: facts.sent,
        unsent: facts.unsent,
        ok: facts.ok,
        errors: facts.errors,
        timeouts: facts.timeouts,
        achieved_rate: facts.achieved_rate,
        warmup_samples: warm.len() as u64,
        latency_ns,
        send_lag_p99_ns: facts.send_lag_p99_ns,
        cpu_busy: facts.health.cpu_busy,
        steal: facts.health.steal,
        tcp_retransmits: facts.health.tcp_retransmits,
        interrupted: out.interrupted,
        warnings: sweep::warnings(&facts, a.conns, a.max_inflight),
    })
}

pub fn run(cli: &Cli, a: &LoadArgs) -> Result<()> {
    let (base, rates) = config(a)?;
    let order = match a.order {
        OrderArg::Asc => Order::Asc,
        OrderArg::Desc => Order::Desc,
        OrderArg::Random => Order::Random,
    };
    let plan = sweep::plan(&rates, order, a.repeat, a.seed);
    signals::install();
    let mut store = Store::open(&cli.db)?;
    let params = json!({
        "target": a.url, "rates": rates, "duration": a.duration, "warmup_ns": base.warmup.as_nanos() as u64,
        "conns": a.conns, "threads": a.threads, "max_inflight": a.max_inflight, "timeout": a.timeout,
        "nodelay": a.nodelay, "split_writes": a.split_writes, "request_bytes": a.request_bytes,
        "arrival": format!("{:?}", a.arrival).to_lowercase(), "order": format!("{:?}", a.order).to_lowercase(),
        "repeat": a.repeat, "seed": a.seed, "breakdown": a.breakdown,
    });
    let mut writer = store.begin_run("load", params, ClockOrigin::now())?;
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
    let mut steps = Vec::new();
    let mut first_error = None;
    let mut failure: Option<anyhow::Error> = None;
    for (i, step) in plan.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let cfg = StepConfig {
            rate: step.rate,
            seed: base.seed.wrapping_add(i as u64 * 1000),
            ..base.clone()
        };
        let before = health::snapshot();
        let out = match engine::run_step(&cfg, &live, &stop) {
            Ok(o) => o,
            Err(e) => {
                failure = Some(e.into());
                break;
            }
        };
        let h = health::between(before, health::snapshot());
        first_error = first_error.or(out.first_error.clone());
        steps.push(store_step(&mut writer, a, *step, &out, h)?);
    }
    done.store(true, Ordering::Relaxed);
    let _ = watch.join();
    let interrupted = stop.load(Ordering::Relaxed);
    let step_params = serde_json::to_value(&steps)?;
    if steps.is_empty() {
        drop(writer);
        store.delete_run(&run_id).ok();
        return Err(failure.unwrap_or_else(|| Interrupted.into()));
    }
    let status = if failure.is_some() || interrupted {
        writer.flush()?;
        drop(writer);
        RunStatus::Partial
    } else {
        writer.finish(json!({ "steps": step_params }))?;
        RunStatus::Complete
    };
    let findings = super::diagnose::diagnose_run(&mut store, &run_id)?;
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
        (None, false) => Ok(()),
    }
}
