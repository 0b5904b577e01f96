//! The hunt from start to end: floor, plan, sweep with the watchers beside it, verdict.
//!
//! In: a [`HuntConfig`], the caller's stop flag and a [`Progress`]. Out: a [`Hunt`], or a
//! [`HuntError`] when the target cannot be reached (before anything is stored) or the store
//! fails. A stop (a signal) ends the sweep early; what was measured is kept, diagnosed and
//! marked partial.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tailhunt_load::engine::{connect_hint, StepConfig};
use tailhunt_load::schedule::Arrival;
use tailhunt_load::target::{parse_target, Scheme, Target};
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::evidence::sweep::SweepRecord;
use tailhunt_model::{ClockOrigin, RunKind, RunStatus};
use tailhunt_report::html::{build, write, ReportRequest, ReportRun};
use tailhunt_store::Store;

use crate::floor::{self, Floor};
use crate::plan::{self, Host, Plan, FLOOR_CONNECTS, FLOOR_GAP};
use crate::ramp::{self, SweepPlan, Swept};
use crate::watch::{merge, WatchSetup, Watchers};
use crate::{
    runq, verdict, Collected, EvidenceReport, Hunt, HuntConfig, HuntError, Progress, Source,
};

/// Runs a hunt.
pub fn run(
    cfg: &HuntConfig,
    stop: &'static AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Hunt, HuntError> {
    let started = Instant::now();
    let target = parse_target(&cfg.url)?;
    let udp = target.scheme == Scheme::Udp;
    let host = host_facts(&target, udp);
    let plan = Plan::new(cfg, &host, udp)?;
    // The request is checked against the target before anything connects: a body for a
    // redis:// target or an unreadable --ca-file is refused here, as `load` refuses it.
    let base = base_step(cfg, &target, &plan);
    tailhunt_load::limits::check_step(&base).map_err(|e| HuntError::Flag(e.to_string()))?;
    // The floor first: a refusing or unreachable target ends the hunt here, in seconds,
    // before a run is stored.
    let floor = measure_floor(cfg, &target, udp, stop, progress)?;
    progress.planned(&plan);
    let mut store = Store::open(&cfg.store)?;
    let hunt_id = format!("{:010x}", rand::random::<u64>() >> 24);
    let tags = json!({ "hunt": hunt_id, "target": cfg.url });
    let mut ledger = Ledger::default();
    match &floor {
        Some(f) => ledger.add(Source::Floor, Ok(store_floor(&mut store, f, &tags)?)),
        None => ledger.missing(&plan, Source::Floor),
    }
    // The sweep's own flag rises on the caller's stop or when the budget is spent.
    let halt = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let deadline = started + cfg.budget;
    let relay = relay(stop, &halt, &done, deadline);
    let beside = Beside::start(cfg, &target, &host, &plan, &tags, &halt);
    progress.phase("rate sweep");
    let sweep_end = deadline - plan::reserve(cfg.budget);
    let swept = sweep(
        cfg, &base, &plan, &mut store, &tags, &halt, progress, sweep_end,
    );
    progress.phase("stopping the capture, the socket sampler and the tracer");
    let gathered = beside.finish();
    done.store(true, Ordering::Relaxed);
    let _ = relay.join();
    let (swept, sweep_id) = swept?;
    let Some(sweep_id) = sweep_id else {
        // Not one step ran. Stopped by the user: what the other sources measured is kept;
        // the target stopped answering after the floor: their runs go.
        let interrupted = stop.load(Ordering::Relaxed);
        let mut kept: Vec<String> = ledger.runs.iter().map(|(_, id)| id.clone()).collect();
        for c in gathered.iter().filter_map(|(_, r)| r.as_ref().ok()) {
            match store.run(&c.run_id) {
                Ok(run) if interrupted && run.samples > 0 => kept.push(c.run_id.clone()),
                _ => {
                    let _ = store.delete_run(&c.run_id);
                }
            }
        }
        if interrupted {
            return Err(HuntError::Interrupted { hunt_id, kept });
        }
        let reason = swept
            .failure
            .unwrap_or_else(|| "no sweep step could run".into());
        return Err(HuntError::Unreachable {
            target: cfg.url.clone(),
            reason,
        });
    };
    let interrupted = stop.load(Ordering::Relaxed);
    let partial = interrupted || swept.failure.is_some();
    ledger.add(
        Source::Sweep,
        Ok(Collected {
            run_id: sweep_id,
            partial,
            note: format!("{} steps; {}", swept.steps.len(), swept.ramp_stop),
        }),
    );
    ledger.gathered(&plan, gathered);
    progress.phase("running every detector");
    let findings = verdict::diagnose_all(&mut store, &ledger.runs)?;
    let written = cfg
        .report
        .as_deref()
        .map(|path| write_report(&store, &cfg.url, &hunt_id, &ledger.runs, &findings, path));
    let (report, report_error) = match written {
        Some(Ok(path)) => (Some(path), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    Ok(Hunt {
        hunt_id,
        target: cfg.url.clone(),
        status: if partial {
            RunStatus::Partial
        } else {
            RunStatus::Complete
        },
        plan,
        floor,
        steps: swept.steps,
        ramp_stop: swept.ramp_stop,
        evidence: ledger.evidence,
        findings,
        first_error: swept.first_error,
        failure: swept.failure,
        interrupted,
        report,
        report_error,
    })
}

/// The HTML report of the hunt's runs (each labelled by its source, with its findings) at
/// `path`, or in it as `tailhunt-hunt-<id>.html` when it is a directory; the file's path, or
/// why it could not be written.
fn write_report(
    store: &Store,
    target: &str,
    hunt_id: &str,
    runs: &[(Source, String)],
    findings: &[verdict::Ranked],
    path: &std::path::Path,
) -> Result<String, String> {
    let request = ReportRequest {
        runs: runs
            .iter()
            .map(|(source, id)| ReportRun {
                id: id.clone(),
                label: Some(source.name().to_string()),
                findings: findings
                    .iter()
                    .filter(|r| r.run_id == *id)
                    .map(|r| r.finding.clone())
                    .collect(),
                group: None,
            })
            .collect(),
        title: Some(format!("tailhunt hunt {target}")),
    };
    let report = build(store, &request).map_err(|e| format!("reading the runs back: {e}"))?;
    let path = if path.is_dir() {
        path.join(format!("tailhunt-hunt-{hunt_id}.html"))
    } else {
        path.to_path_buf()
    };
    write(&path, &report).map_err(|e| format!("writing '{}': {e}", path.display()))?;
    Ok(path.display().to_string())
}

/// The connect times, or the error that ends the hunt; none for UDP targets.
fn measure_floor(
    cfg: &HuntConfig,
    target: &Target,
    udp: bool,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Option<Floor>, HuntError> {
    if udp {
        return Ok(None);
    }
    progress.phase("network floor: TCP connects to the target");
    floor::measure(target.addr, FLOOR_CONNECTS, FLOOR_GAP, stop)
        .map(Some)
        .map_err(|e| HuntError::Unreachable {
            target: cfg.url.clone(),
            reason: connect_hint(&e),
        })
}

/// Each source's line in the evidence list, and the runs the detectors read.
#[derive(Default)]
struct Ledger {
    evidence: Vec<EvidenceReport>,
    runs: Vec<(Source, String)>,
}

impl Ledger {
    fn add(&mut self, source: Source, r: Result<Collected, String>) {
        if let Ok(c) = &r {
            self.runs.push((source, c.run_id.clone()));
        }
        self.evidence.push(EvidenceReport::of(source, r));
        self.evidence.sort_by_key(|e| e.source);
    }

    /// A source the plan left out, with the plan's reason.
    fn missing(&mut self, plan: &Plan, source: Source) {
        let why = plan
            .sources
            .iter()
            .find(|s| s.source == source)
            .map_or_else(|| "not planned".to_string(), |s| s.note.clone());
        self.add(source, Err(why));
    }

    /// What ran beside the sweep, and a line for each source that did not even start.
    fn gathered(&mut self, plan: &Plan, gathered: Vec<(Source, Result<Collected, String>)>) {
        for s in [Source::Capture, Source::Sockets, Source::Runq] {
            if !gathered.iter().any(|(g, _)| *g == s) {
                self.missing(plan, s);
            }
        }
        for (source, r) in gathered {
            self.add(source, r);
        }
    }
}

/// The sources that run beside the sweep: the watchers (capture, sockets) and the tracer.
struct Beside {
    watchers: Option<Watchers>,
    tracer: Option<runq::Runq>,
}

impl Beside {
    fn start(
        cfg: &HuntConfig,
        target: &Target,
        host: &Host,
        plan: &Plan,
        tags: &Value,
        halt: &Arc<AtomicBool>,
    ) -> Beside {
        let setup = WatchSetup {
            store: &cfg.store,
            addr: target.addr,
            transport: if target.scheme == Scheme::Udp {
                "udp"
            } else {
                "tcp"
            },
            interface: host.interface.clone(),
            root: host.root,
            tags: tags.clone(),
            stop: Arc::clone(halt),
        };
        let watch = plan.has(Source::Capture) || plan.has(Source::Sockets);
        let watchers = watch.then(|| Watchers::start(&setup));
        let tracer = match (&host.local, plan.has(Source::Runq)) {
            (Some(l), true) => Some(runq::start(l, &cfg.store, tags, halt)),
            _ => None,
        };
        // Let the capture and the tracer come up before the first request.
        std::thread::sleep(Duration::from_millis(300));
        Beside { watchers, tracer }
    }

    fn finish(self) -> Vec<(Source, Result<Collected, String>)> {
        let mut out = self.watchers.map(Watchers::finish).unwrap_or_default();
        if let Some(t) = self.tracer {
            out.push((Source::Runq, t.finish()));
        }
        out
    }
}

fn host_facts(target: &Target, udp: bool) -> Host {
    let interface = plan::route_interface(target.addr.ip());
    let local_route = interface.as_deref().is_ok_and(|i| i == "lo");
    Host {
        root: plan::is_root(),
        interface,
        local_route,
        local: local_route
            .then(|| runq::listener(target.addr.port(), udp))
            .flatten(),
    }
}

/// Raises `halt` when `stop` rises or `deadline` passes; ends when `done` rises.
fn relay(
    stop: &'static AtomicBool,
    halt: &Arc<AtomicBool>,
    done: &Arc<AtomicBool>,
    deadline: Instant,
) -> std::thread::JoinHandle<()> {
    let (halt, done) = (Arc::clone(halt), Arc::clone(done));
    std::thread::spawn(move || {
        while !done.load(Ordering::Relaxed) {
            if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                halt.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

fn store_floor(store: &mut Store, f: &Floor, tags: &Value) -> Result<Collected, HuntError> {
    let mut params = json!({ "probe": f.probe });
    merge(&mut params, tags, "floor");
    let mut w = store.begin_run(RunKind::Other("floor".into()), params, f.origin)?;
    f.record(&mut w)?;
    // Fewer connects than planned: a signal cut the floor short.
    let partial = f.samples.len() < FLOOR_CONNECTS;
    Ok(Collected {
        run_id: w.finish_as(partial, json!({}))?.0,
        partial,
        note: format!(
            "{} connects, fastest {:.3} ms, median {:.3} ms",
            f.connects,
            f.min_ns as f64 / 1e6,
            f.p50_ns as f64 / 1e6
        ),
    })
}

/// The sweep's step, before its rate and length are set per step.
fn base_step(cfg: &HuntConfig, target: &Target, plan: &Plan) -> StepConfig {
    StepConfig {
        target: target.clone(),
        rate: plan.rates[0],
        duration: Duration::from_nanos(plan.step_ns),
        warmup: Duration::from_nanos(plan.warmup_ns),
        conns: plan.conns,
        threads: 1,
        max_inflight: 1000,
        timeout: Duration::from_secs(2),
        // The measuring client sends each request in one write with TCP_NODELAY, so it adds
        // no Nagle stall of its own; the server's behaviour is what is measured.
        nodelay: true,
        split_writes: false,
        request_bytes: cfg.request.bytes,
        arrival: Arrival::Fixed,
        seed: cfg.seed,
        breakdown: false,
        http: cfg.request.http.clone(),
        tls: cfg.request.tls.clone(),
        timing: Default::default(),
    }
}

/// Runs the sweep into a `load` run; returns what it gave and the run (none when no step
/// ran, and then the empty run is deleted).
#[allow(clippy::too_many_arguments)]
fn sweep(
    cfg: &HuntConfig,
    base: &StepConfig,
    plan: &Plan,
    store: &mut Store,
    tags: &Value,
    halt: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
    deadline: Instant,
) -> Result<(Swept, Option<String>), HuntError> {
    let mut params = tailhunt_load::record::run_params(
        &cfg.url,
        base,
        &plan.rates,
        "ramp-then-random",
        ramp::CONFIRM,
    );
    params["durations_ns"] = json!(plan.steps_ns);
    merge(&mut params, tags, "sweep");
    let mut writer = store.begin_run(RunKind::Load, params, ClockOrigin::now())?;
    writer.set_commit_interval(Some(Duration::from_millis(500)));
    let durations: Vec<Duration> = plan
        .steps_ns
        .iter()
        .map(|n| Duration::from_nanos(*n))
        .collect();
    let sp = SweepPlan {
        base,
        rates: &plan.rates,
        durations: &durations,
        url: &cfg.url,
        deadline,
    };
    let swept = ramp::run(&sp, &mut writer, halt, progress)?;
    let id = writer.id().to_string();
    if swept.steps.is_empty() {
        drop(writer);
        store.delete_run(&id)?;
        return Ok((swept, None));
    }
    put_evidence(
        &mut writer,
        &SweepRecord {
            steps: swept.steps.clone(),
        },
    )?;
    if swept.failure.is_some() || halt.load(Ordering::Relaxed) {
        writer.finish_partial(json!({ "ramp_stop": swept.ramp_stop }))?;
    } else {
        writer.finish(json!({ "ramp_stop": swept.ramp_stop }))?;
    }
    Ok((swept, Some(id)))
}
