//! `tailhunt load`.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;
use tailhunt_analyze::{quantiles, Distribution};
use tailhunt_load::breakdown::Breakdown;
use tailhunt_load::engine::{self, Finished, Live, ServerLost, StepConfig, StepOutcome, StepSink};
use tailhunt_load::schedule::Arrival;
use tailhunt_load::sweep::{self, Order};
use tailhunt_load::tally::Tally;
use tailhunt_load::{health, limits, target};
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::evidence::sweep::{SweepRecord, SweepStep};
use tailhunt_model::units::parse_request_rates;
use tailhunt_model::{ClockOrigin, RunKind, RunStatus, Sample, SeriesMeta, SeriesSink, SinkError};
use tailhunt_report::doc::{LatencyDoc, LoadDoc, StepDoc};
use tailhunt_store::{RunWriter, Store};

use crate::cli::{ArrivalArg, Cli, LoadArgs, OrderArg};
use crate::output;
use crate::signals::{self, Interrupted};

/// `--commit-interval`, within its bounds: more often costs a commit per interval, less often
/// risks more of a killed run.
fn commit_interval(a: &LoadArgs) -> Result<Duration> {
    let d = super::duration_flag("--commit-interval", &a.commit_interval)?;
    if !(Duration::from_millis(10)..=Duration::from_secs(10)).contains(&d) {
        anyhow::bail!(
            "--commit-interval {}: give 10ms to 10s (how much a killed run may lose)",
            a.commit_interval
        );
    }
    Ok(d)
}

fn config(a: &LoadArgs) -> Result<(StepConfig, Vec<f64>)> {
    let target = target::parse_target(&a.url)?;
    let rates = match (&a.rate, &a.sweep) {
        (Some(r), _) => parse_request_rates(r).context("--rate")?,
        (None, Some(s)) => parse_request_rates(s).context("--sweep")?,
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
    // Every flag that sizes memory is checked here, before the store is opened: an absurd
    // value is refused at once and leaves no empty run behind.
    limits::check_sweep(&rates, a.repeat)?;
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
    // The exact rate asked for (`1234`, `0.5`), not a rounded one: two steps must never share
    // a series name.
    let mut l = vec![("rate".to_string(), rate.to_string())];
    if repeats > 1 {
        l.push(("repeat".to_string(), repeat.to_string()));
    }
    l
}

fn open_series(w: &mut RunWriter<'_>, name: &str, labels: &[(String, String)]) -> Result<usize> {
    let mut meta = SeriesMeta::latency(name);
    for (k, v) in labels {
        meta.labels.insert(k.clone(), v.clone());
    }
    w.open_series(&meta).map_err(|e| anyhow::anyhow!(e))
}

/// A breakdown part: its series name and how it is read from a [`Breakdown`].
type Part = (&'static str, fn(&Breakdown) -> i64);

/// Breakdown parts stored as series of their own.
const PARTS: [Part; 4] = [
    ("server_app", |b| b.server_app_ns),
    ("server_stack", |b| b.server_stack_ns),
    ("network", |b| b.network_ns),
    ("client_stack", |b| b.client_stack_ns),
];

/// Stores a step's requests as they finish — measured ones in the step's `latency` series (and
/// the breakdown parts), warm-up ones in their own series — and keeps the measured samples
/// and the counts for the step's summary.
struct StepWriter<'w, 'a> {
    w: &'w mut RunWriter<'a>,
    labels: Vec<(String, String)>,
    latency: Option<usize>,
    warmup: Option<usize>,
    parts: Option<[usize; 4]>,
    measured: Vec<Sample>,
    tally: Tally,
    scratch: Vec<Sample>,
}

impl<'w, 'a> StepWriter<'w, 'a> {
    fn new(w: &'w mut RunWriter<'a>, labels: Vec<(String, String)>) -> Self {
        StepWriter {
            w,
            labels,
            latency: None,
            warmup: None,
            parts: None,
            measured: Vec::new(),
            tally: Tally::default(),
            scratch: Vec::new(),
        }
    }

    /// The step's series, opened with its first request (a step that could not connect
    /// leaves none), before any other of the step's series.
    fn latency_series(&mut self) -> Result<usize, SinkError> {
        if let Some(h) = self.latency {
            return Ok(h);
        }
        let h = open_series(self.w, "latency", &self.labels)?;
        self.latency = Some(h);
        Ok(h)
    }

    fn push(
        &mut self,
        series: usize,
        samples: impl Iterator<Item = Sample>,
    ) -> Result<(), SinkError> {
        self.scratch.clear();
        self.scratch.extend(samples);
        if self.scratch.is_empty() {
            return Ok(());
        }
        self.w.push_samples(series, &self.scratch)
    }

    fn warmup_series(&mut self) -> Result<usize, SinkError> {
        if let Some(h) = self.warmup {
            return Ok(h);
        }
        let mut labels = self.labels.clone();
        labels.push(("phase".into(), "warmup".into()));
        let h = open_series(self.w, "latency", &labels)?;
        self.warmup = Some(h);
        Ok(h)
    }

    fn part_series(&mut self) -> Result<[usize; 4], SinkError> {
        if let Some(p) = self.parts {
            return Ok(p);
        }
        let mut p = [0; 4];
        for (h, (name, _)) in p.iter_mut().zip(PARTS) {
            *h = open_series(self.w, name, &self.labels)?;
        }
        self.parts = Some(p);
        Ok(p)
    }
}

impl StepSink for StepWriter<'_, '_> {
    fn finished(&mut self, batch: &[Finished]) -> Result<(), SinkError> {
        batch.iter().for_each(|f| self.tally.add(f));
        let latency = self.latency_series()?;
        if batch.iter().any(|f| !f.measured) {
            let h = self.warmup_series()?;
            self.push(h, batch.iter().filter(|f| !f.measured).map(|f| f.sample))?;
        }
        let measured = || batch.iter().filter(|f| f.measured);
        self.push(latency, measured().map(|f| f.sample))?;
        self.measured.extend(measured().map(|f| f.sample));
        if measured().any(|f| f.breakdown.is_some()) {
            for (h, (_, part)) in self.part_series()?.into_iter().zip(PARTS) {
                let samples = measured().map(|f| {
                    let ns = f.breakdown.as_ref().map_or(0, part);
                    Sample::from_latency(f.sample.intended_ns, ns, f.sample.outcome)
                });
                self.push(h, samples)?;
            }
        }
        Ok(())
    }

    fn tick(&mut self) -> Result<(), SinkError> {
        Ok(self.w.commit_if_due()?)
    }
}

/// The summary row of a step that ran.
fn step_doc(
    a: &LoadArgs,
    step: sweep::Step,
    sw: &StepWriter<'_, '_>,
    out: &StepOutcome,
    h: health::Health,
) -> StepDoc {
    let facts = sweep::facts(step.rate, &sw.measured, &sw.tally, out, h);
    let dist = Distribution::from_samples(&sw.measured, false);
    let s = quantiles::summarize(&dist, &[0.5, 0.9, 0.99, 0.999], 0.95);
    let latency_ns = (s.count > 0).then(|| LatencyDoc {
        p50: s.quantiles[0].value_ns,
        p90: s.quantiles[1].value_ns,
        p99: s.quantiles[2].value_ns,
        p999: s.quantiles[3].value_ns,
        max: s.max_ns.unwrap_or(0),
    });
    StepDoc {
        rate: step.rate,
        repeat: step.repeat,
        series: tailhunt_model::display_name("latency", &sw.labels.iter().cloned().collect()),
        scheduled: facts.counts.scheduled(),
        sent: facts.counts.sent,
        unsent: facts.counts.unsent,
        ok: facts.counts.ok,
        errors: facts.counts.errors,
        timeouts: facts.counts.timeouts,
        achieved_rate: facts.achieved_rate,
        warmup_samples: facts.counts.warmup,
        latency_ns,
        send_lag_p99_ns: facts.send_lag_p99_ns,
        client_cpu: facts.client_cpu,
        cpu_busy: facts.health.cpu_busy,
        steal: facts.health.steal,
        tcp_retransmits: facts.health.tcp_retransmits,
        silence_ns: facts.silence.map(|s| s.len_ns),
        bottleneck: sweep::bottleneck(&facts).map(|b| b.name().to_string()),
        interrupted: out.interrupted,
        server_lost: out
            .server_lost
            .as_ref()
            .map(|l| lost_message(a, step, out, l)),
        warnings: sweep::warnings(&facts, a.conns, a.max_inflight),
    }
}

/// Names a server that went away as the cause of what followed.
fn lost_message(a: &LoadArgs, step: sweep::Step, out: &StepOutcome, l: &ServerLost) -> String {
    let rate = tailhunt_model::format_rate(step.rate);
    let when = match l.last_response_ns {
        Some(t) if t >= out.measure_from_ns => format!(
            "its last response came {:.2} s into the step",
            (t - out.measure_from_ns) as f64 / 1e9
        ),
        Some(_) => "its last response came during the warm-up".to_string(),
        None => "it never answered".to_string(),
    };
    format!(
        "the server {} went away during the step at {rate}/s: {when}, then {}; the requests after that are errors or never sent",
        a.url, l.reason
    )
}

/// What the steps of a run gave.
struct Ran {
    steps: Vec<StepDoc>,
    first_error: Option<String>,
    /// Why the plan stopped before its end, other than a signal.
    failure: Option<anyhow::Error>,
}

/// Runs the plan's steps until it ends, a signal stops it, or a step fails (the server went
/// away, the store could not write); each step's requests are stored as they finish.
fn run_plan(
    a: &LoadArgs,
    base: &StepConfig,
    plan: &[sweep::Step],
    writer: &mut RunWriter<'_>,
    live: &Arc<Live>,
    stop: &Arc<AtomicBool>,
) -> Result<Ran> {
    let mut ran = Ran {
        steps: Vec::new(),
        first_error: None,
        failure: None,
    };
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
        let mut sw = StepWriter::new(writer, labels_for(step.rate, step.repeat, a.repeat));
        let out = match engine::run_step(&cfg, live, stop, &mut sw) {
            Ok(o) => o,
            Err(e) => {
                ran.failure = Some(e.into());
                break;
            }
        };
        sw.latency_series().map_err(|e| anyhow::anyhow!(e))?;
        let h = health::between(before, health::snapshot());
        ran.first_error = ran.first_error.take().or(out.first_error.clone());
        let doc = step_doc(a, *step, &sw, &out, h);
        writer.flush()?;
        let lost = doc.server_lost.clone();
        ran.steps.push(doc);
        if let Some(why) = lost {
            ran.failure = Some(anyhow::anyhow!(why));
            break;
        }
    }
    Ok(ran)
}

pub fn run(cli: &Cli, a: &LoadArgs) -> Result<()> {
    let (base, rates) = config(a)?;
    let order = match a.order {
        OrderArg::Asc => Order::Asc,
        OrderArg::Desc => Order::Desc,
        OrderArg::Random => Order::Random,
    };
    let plan = sweep::plan(&rates, order, a.repeat, a.seed);
    let interval = commit_interval(a)?;
    signals::install();
    let mut store = Store::open(&cli.db)?;
    let params = json!({
        "target": a.url, "rates": rates, "duration": a.duration, "warmup_ns": base.warmup.as_nanos() as u64,
        "conns": a.conns, "threads": a.threads, "max_inflight": a.max_inflight, "timeout": a.timeout,
        "nodelay": a.nodelay, "split_writes": a.split_writes, "request_bytes": a.request_bytes,
        "arrival": format!("{:?}", a.arrival).to_lowercase(), "order": format!("{:?}", a.order).to_lowercase(),
        "repeat": a.repeat, "seed": a.seed, "breakdown": a.breakdown,
        "commit_interval": a.commit_interval,
    });
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
    let ran = run_plan(a, &base, &plan, &mut writer, &live, &stop);
    done.store(true, Ordering::Relaxed);
    let _ = watch.join();
    let Ran {
        steps,
        first_error,
        failure,
    } = ran?;
    let interrupted = stop.load(Ordering::Relaxed);
    let step_params = serde_json::to_value(&steps)?;
    put_evidence(
        &mut writer,
        &SweepRecord {
            steps: steps
                .iter()
                .map(|s| SweepStep {
                    rate_per_s: s.rate,
                    repeat: s.repeat,
                    series: s.series.clone(),
                })
                .collect(),
        },
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    if steps.is_empty() {
        drop(writer);
        // Nothing measured (no connection): no run to keep.
        if store.run(&run_id).is_ok_and(|r| r.samples == 0) {
            store.delete_run(&run_id).ok();
        }
        return Err(failure.unwrap_or_else(|| Interrupted.into()));
    }
    let status = if failure.is_some() || interrupted {
        // The steps that ran are summarised in the run too; it stays partial.
        writer.finish_partial(json!({ "steps": step_params }))?;
        RunStatus::Partial
    } else {
        writer.finish(json!({ "steps": step_params }))?;
        RunStatus::Complete
    };
    let diagnosis = tailhunt_diagnose::diagnose_run(&store, &run_id)?;
    tailhunt_diagnose::store_findings(&mut store, &run_id, &diagnosis)?;
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
        (None, false) => Ok(()),
    }
}
