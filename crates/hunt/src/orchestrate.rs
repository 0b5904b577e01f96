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
    // The floor first: a refusing or unreachable target ends the hunt here, in seconds,
    // before a run is stored.
    let floor = if udp {
        None
    } else {
        progress.phase("network floor: TCP connects to the target");
        let f = floor::measure(target.addr, FLOOR_CONNECTS, FLOOR_GAP, stop).map_err(|e| {
            HuntError::Unreachable {
                target: cfg.url.clone(),
                reason: connect_hint(&e),
            }
        })?;
        Some(f)
    };
    progress.planned(&plan);
    let mut store = Store::open(&cfg.store)?;
    let hunt_id = format!("{:010x}", rand::random::<u64>() >> 24);
    let tags = json!({ "hunt": hunt_id, "target": cfg.url });
    let mut evidence = Vec::new();
    let mut runs = Vec::new();
    if let Some(f) = &floor {
        let id = store_floor(&mut store, f, &tags)?;
        runs.push((Source::Floor, id.clone()));
        evidence.push(EvidenceReport::of(
            Source::Floor,
            Ok(Collected {
                run_id: id,
                partial: false,
                note: format!(
                    "{} connects, fastest {:.3} ms, median {:.3} ms",
                    f.connects,
                    f.min_ns as f64 / 1e6,
                    f.p50_ns as f64 / 1e6
                ),
            }),
        ));
    } else {
        evidence.push(missing(&plan, Source::Floor));
    }
    // A relay: the sweep's own flag rises on the caller's stop or when the budget is spent.
    let halt = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let deadline = started + cfg.budget;
    let relay = relay(stop, &halt, &done, deadline);
    let setup = WatchSetup {
        store: &cfg.store,
        addr: target.addr,
        transport: if udp { "udp" } else { "tcp" },
        interface: host.interface.clone(),
        root: host.root,
        tags: tags.clone(),
        stop: Arc::clone(&halt),
    };
    let watchers = plan.has(Source::Capture) || plan.has(Source::Sockets);
    let watchers = watchers.then(|| Watchers::start(&setup));
    let tracer = match (&host.local, plan.has(Source::Runq)) {
        (Some(l), true) => Some(runq::start(l, &cfg.store, &tags, &halt)),
        _ => None,
    };
    // Let the capture and the tracer come up before the first request.
    std::thread::sleep(Duration::from_millis(300));
    progress.phase("rate sweep");
    let sweep_end = deadline - plan::reserve(cfg.budget);
    let swept = sweep(
        cfg, &target, &plan, &mut store, &tags, &halt, progress, sweep_end,
    );
    progress.phase("stopping the capture, the socket sampler and the tracer");
    let mut gathered = watchers.map(Watchers::finish).unwrap_or_default();
    if let Some(t) = tracer {
        gathered.push((Source::Runq, t.finish()));
    }
    done.store(true, Ordering::Relaxed);
    let _ = relay.join();
    let (swept, sweep_id) = swept?;
    // A source neither run nor refused by the watchers is one the plan left out: say why.
    for s in [Source::Capture, Source::Sockets, Source::Runq] {
        if !gathered.iter().any(|(g, _)| *g == s) {
            evidence.push(missing(&plan, s));
        }
    }
    let Some(sweep_id) = sweep_id else {
        // Not one step ran: the target stopped answering after the floor.
        for (_, r) in &gathered {
            if let Ok(c) = r {
                let _ = store.delete_run(&c.run_id);
            }
        }
        return Err(HuntError::Unreachable {
            target: cfg.url.clone(),
            reason: swept
                .failure
                .unwrap_or_else(|| "no sweep step could run".into()),
        });
    };
    runs.push((Source::Sweep, sweep_id.clone()));
    evidence.push(EvidenceReport::of(
        Source::Sweep,
        Ok(Collected {
            run_id: sweep_id,
            partial: swept.failure.is_some() || stop.load(Ordering::Relaxed),
            note: format!("{} steps; {}", swept.steps.len(), swept.ramp_stop),
        }),
    ));
    for (source, r) in gathered {
        if let Ok(c) = &r {
            runs.push((source, c.run_id.clone()));
        }
        evidence.push(EvidenceReport::of(source, r));
    }
    evidence.sort_by_key(|e| e.source);
    progress.phase("running every detector");
    let findings = verdict::diagnose_all(&mut store, &runs)?;
    let interrupted = stop.load(Ordering::Relaxed);
    let partial = interrupted || swept.failure.is_some();
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
        evidence,
        findings,
        first_error: swept.first_error,
        failure: swept.failure,
        interrupted,
    })
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

fn missing(plan: &Plan, source: Source) -> EvidenceReport {
    let why = plan
        .sources
        .iter()
        .find(|s| s.source == source)
        .map_or_else(|| "not planned".to_string(), |s| s.note.clone());
    EvidenceReport::of(source, Err(why))
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

fn store_floor(store: &mut Store, f: &Floor, tags: &Value) -> Result<String, HuntError> {
    let mut params = json!({ "probe": f.probe });
    merge(&mut params, tags, "floor");
    let mut w = store.begin_run(RunKind::Other("floor".into()), params, ClockOrigin::now())?;
    f.record(&mut w)?;
    Ok(w.finish(json!({}))?)
}

/// Runs the sweep into a `load` run; returns what it gave and the run (none when no step
/// ran, and then the empty run is deleted).
#[allow(clippy::too_many_arguments)]
fn sweep(
    cfg: &HuntConfig,
    target: &Target,
    plan: &Plan,
    store: &mut Store,
    tags: &Value,
    halt: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
    deadline: Instant,
) -> Result<(Swept, Option<String>), HuntError> {
    let base = StepConfig {
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
        request_bytes: 64,
        arrival: Arrival::Fixed,
        seed: cfg.seed,
        breakdown: false,
    };
    let mut params = json!({
        "target": cfg.url, "rates": plan.rates, "duration_ns": plan.step_ns,
        "warmup_ns": plan.warmup_ns, "conns": plan.conns, "threads": 1, "max_inflight": 1000,
        "timeout_ns": 2_000_000_000u64, "nodelay": true, "split_writes": false,
        "request_bytes": 64, "arrival": "fixed", "order": "ramp-then-random",
        "repeat": ramp::MAX_ROUNDS, "seed": cfg.seed, "breakdown": false,
    });
    merge(&mut params, tags, "sweep");
    let mut writer = store.begin_run(RunKind::Load, params, ClockOrigin::now())?;
    writer.set_commit_interval(Some(Duration::from_millis(500)));
    let sp = SweepPlan {
        base: &base,
        rates: &plan.rates,
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
