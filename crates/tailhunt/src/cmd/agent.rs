//! `tailhunt agent`: until Ctrl-C (or --duration), the configured probes run continuously into
//! a rolling store (one run per window, the detectors on each closed window), and their
//! latency histograms, outcome counters, findings and the agent's own state are served on
//! /metrics and remote-written; run-queue tracing (eBPF, its windows stored as runq runs with
//! the detectors on each) and the socket sampler run beside it when the host allows, and
//! `tailhunt_agent_part_running{part}` says which parts run (a part that cannot run is
//! switched off with its reason printed).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use tailhunt_agent::config;
use tailhunt_agent::exposition::{ScalarMetric, Snapshot};
use tailhunt_agent::http::{Exported, Server};
use tailhunt_agent::mesh::EchoServers;
use tailhunt_agent::probing::Aggregator;
use tailhunt_agent::remote_write::{status_metrics, Batch, RemoteWriter};
use tailhunt_agent::rolling::{self, WindowState};
use tailhunt_agent::runq::{self, RunqState};
use tailhunt_agent::sockets::{self, SocketState};
use tailhunt_probe::run::Live;

use crate::cli::AgentArgs;
use crate::signals;

/// A status line on stderr. The agent runs for days: a stderr that went away (a closed pipe,
/// a rotated log reader) must not stop it, so write errors are ignored where `eprintln!` panics.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// How long a stop waits for the last snapshot to be delivered (it stays queued otherwise).
const FINAL_DRAIN: Duration = Duration::from_secs(3);

/// What the prober thread shares with the exporting loop.
struct Probing {
    aggregator: Aggregator,
    windows: WindowState,
    live: Arc<Live>,
}

fn scalar(name: &str, help: &str, value: f64) -> ScalarMetric {
    ScalarMetric {
        name: name.into(),
        help: help.into(),
        labels: vec![],
        value,
    }
}

/// The run-queue tracer and the socket sampler, each off (with why) or running in a thread.
struct Parts {
    runq: RunqState,
    sockets: SocketState,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Parts {
    /// Starts the parts the configuration and the host allow; says which run and why not.
    fn start(cfg: &config::AgentConfig, stop: &Arc<AtomicBool>) -> Result<(Parts, String)> {
        let mut parts = Parts {
            runq: RunqState::default(),
            sockets: SocketState::default(),
            threads: Vec::new(),
        };
        let why_not = if !cfg.runq.enabled {
            Some("[runq] enabled = false".to_string())
        } else {
            tailhunt_sched::tracing_unavailable()
        };
        let runq_text = match why_not {
            Some(why) => {
                parts.runq.lock().off_reason = Some(why.clone());
                format!("run-queue tracing off: {why}")
            }
            None => {
                let (settings, retention, state, stop) = (
                    cfg.runq.clone(),
                    cfg.retention.clone(),
                    parts.runq.clone(),
                    Arc::clone(stop),
                );
                parts.threads.push(
                    std::thread::Builder::new()
                        .name("runq".into())
                        .spawn(move || {
                            // A failure to start is in the state's off_reason, printed by the loop.
                            let _ = runq::run(&runq::Tracing {
                                settings: &settings,
                                retention: Some(&retention),
                                state: &state,
                                stop: &stop,
                            });
                        })
                        .context("cannot start the run-queue thread")?,
                );
                format!(
                    "run-queue tracing every {}{}",
                    crate::flags::show(cfg.runq.interval),
                    if cfg.runq.store_windows {
                        " (a runq run per window)"
                    } else {
                        ""
                    }
                )
            }
        };
        let sockets_text = if cfg.sockets.enabled {
            let (settings, state, stop) =
                (cfg.sockets.clone(), parts.sockets.clone(), Arc::clone(stop));
            parts.threads.push(
                std::thread::Builder::new()
                    .name("sockets".into())
                    .spawn(move || sockets::run(&settings, &state, &stop))
                    .context("cannot start the socket sampler thread")?,
            );
            format!(
                "TCP sockets sampled every {}",
                crate::flags::show(cfg.sockets.interval)
            )
        } else {
            parts.sockets.lock().off_reason = Some("[sockets] enabled = false".into());
            "socket sampler off: [sockets] enabled = false".to_string()
        };
        Ok((parts, format!("{runq_text}; {sockets_text}")))
    }

    /// Adds both parts' metrics, findings and which parts run.
    fn fill(&self, snap: &mut Snapshot, probing: bool) {
        let r = self.runq.lock();
        r.fill(snap);
        snap.findings.extend(r.findings.iter().cloned());
        let s = self.sockets.lock();
        s.fill(snap);
        for (part, on) in [
            ("probes", probing),
            ("runq", r.running),
            ("sockets", s.running),
        ] {
            snap.gauges.push(ScalarMetric {
                name: "tailhunt_agent_part_running".into(),
                help: "1 while the part runs (probes, runq, sockets); a part that cannot run is switched off and the agent says why.".into(),
                labels: vec![("part".into(), part.into())],
                value: f64::from(u8::from(on)),
            });
        }
    }

    /// Prints a part's reason to be off, or its window error, when it changes (with `print`
    /// false, only notes what is known, e.g. what the first line already said).
    fn report(&self, shown: &mut [Option<String>; 3], print: bool) {
        // One lock at a time: a guard held over the array's end would deadlock the next.
        let (runq_off, runq_error) = {
            let r = self.runq.lock();
            (r.off_reason.clone(), r.last_error.clone())
        };
        let sockets_off = {
            let s = self.sockets.lock();
            s.off_reason.clone().or_else(|| s.last_error.clone())
        };
        let now = [
            runq_off
                .filter(|r| r != "stopped")
                .map(|r| format!("run-queue tracing off: {r}")),
            runq_error.map(|e| format!("run-queue window: {e}")),
            sockets_off
                .filter(|r| r != "stopped")
                .map(|r| format!("socket sampler: {r}")),
        ];
        for (n, s) in now.into_iter().zip(shown.iter_mut()) {
            if print && n.is_some() && n != *s {
                say!("tailhunt agent: {}", n.as_deref().unwrap_or(""));
            }
            *s = n;
        }
    }
}

fn snapshot(writer: &RemoteWriter, started: Instant, probing: Option<&Probing>) -> Snapshot {
    let (counters, mut gauges) = status_metrics(&writer.status());
    gauges.push(scalar(
        "tailhunt_agent_uptime_seconds",
        "Seconds since the agent started.",
        started.elapsed().as_secs_f64(),
    ));
    let mut snap = Snapshot {
        counters,
        gauges,
        ..Snapshot::default()
    };
    if let Some(p) = probing {
        // The prober's own count first: a sample it measured after this read is in neither
        // number, so the exported counters are never behind it at the same moment.
        let measured = p.live.samples.load(Ordering::Relaxed);
        p.aggregator.fill(&mut snap);
        snap.counters.push(scalar(
            "tailhunt_agent_probe_measured",
            "Samples the prober measured (all probes and outcomes); equals the sum of tailhunt_probe_samples_total when none was lost.",
            measured as f64,
        ));
        let w = p.windows.lock();
        snap.findings = w.findings.clone();
        let (counters, gauges) = w.metrics();
        snap.counters.extend(counters);
        snap.gauges.extend(gauges);
    }
    snap
}

/// Prints a line when a probe starts failing (three failures in a row) or answers again; the
/// probe goes on either way.
fn report_failing(live: &Live, shown: &mut Vec<(String, String)>) {
    for change in live.failing_changes(shown) {
        say!("tailhunt agent: {change}");
    }
}

/// The prober thread.
type ProberThread = std::thread::JoinHandle<Result<(), rolling::RollingError>>;

/// Starts the prober thread when the file has probes.
fn start_probing(
    cfg: &config::AgentConfig,
    stop: &Arc<AtomicBool>,
) -> Result<Option<(Probing, ProberThread)>> {
    let Some(probes) = cfg.probes.clone() else {
        return Ok(None);
    };
    rolling::check_probes(&probes)?;
    if let Some(dir) = cfg.retention.store.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).with_context(|| {
                format!(
                    "store = \"{}\": cannot create its directory",
                    cfg.retention.store.display()
                )
            })?;
        }
    }
    let probing = Probing {
        aggregator: Aggregator::new(),
        windows: WindowState::default(),
        live: Arc::new(Live::default()),
    };
    let (agg, windows, live, stop) = (
        probing.aggregator.clone(),
        probing.windows.clone(),
        Arc::clone(&probing.live),
        Arc::clone(stop),
    );
    let retention = cfg.retention.clone();
    let handle = std::thread::Builder::new()
        .name("prober".into())
        .spawn(move || {
            rolling::run(&rolling::Windows {
                cfg: &probes,
                retention: &retention,
                aggregator: &agg,
                state: &windows,
                live: &live,
                stop: &stop,
            })
        })
        .context("cannot start the prober thread")?;
    Ok(Some((probing, handle)))
}

pub fn run(a: &AgentArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.config)
        .with_context(|| format!("--config {}: cannot read it", a.config.display()))?;
    let mut cfg =
        config::parse(&text).with_context(|| format!("--config {}", a.config.display()))?;
    if let Some(listen) = &a.listen {
        cfg.listen = listen.parse().with_context(|| {
            format!("--listen '{listen}' is not an address (write e.g. 127.0.0.1:9465)")
        })?;
    }
    signals::install();
    let exported = Exported::new();
    let server = Server::start_with(
        &cfg.listen.to_string(),
        cfg.token.clone(),
        cfg.tls.as_ref(),
        exported.clone(),
    )?;
    let writer = RemoteWriter::start(cfg.remote_write.clone())?;
    let stop = Arc::new(AtomicBool::new(false));
    // The mesh's echo answers before the probes start, so peers starting together find it.
    let echo = cfg
        .mesh
        .as_ref()
        .map(|m| EchoServers::start(m.listen))
        .transpose()?;
    let mut prober = start_probing(&cfg, &stop)?;
    let (parts, parts_text) = Parts::start(&cfg, &stop)?;
    let probing_text = match &cfg.probes {
        Some(p) => format!(
            "{} probe(s) every {} into {} (a run per {}, kept {} / {} bytes)",
            p.probes.len(),
            crate::flags::show(p.interval),
            cfg.retention.store.display(),
            crate::flags::show(cfg.retention.window),
            crate::flags::show(cfg.retention.max_age),
            cfg.retention.max_bytes
        ),
        None => "no probes configured".to_string(),
    };
    let probing_text = match echo.as_ref().and_then(EchoServers::local_addr) {
        Some(addr) => format!("{probing_text}; mesh echo (tcp, udp) on {addr}"),
        None => probing_text,
    };
    say!(
        "tailhunt agent: serving {}://{}/metrics{}; remote write to {} endpoint(s); {probing_text}; {parts_text}",
        server.scheme(),
        server.local_addr(),
        if cfg.token.is_some() {
            " (bearer token required)"
        } else {
            ""
        },
        cfg.remote_write.len()
    );
    let _ = std::io::stderr().flush();
    let started = Instant::now();
    let extra = vec![("instance".to_string(), cfg.instance.clone())];
    let mut shown = vec![0u64; cfg.remote_write.len()];
    let mut next = Instant::now();
    let mut window_error: Option<String> = None;
    let mut failing: Vec<(String, String)> = Vec::new();
    let mut parts_shown: [Option<String>; 3] = Default::default();
    parts.report(&mut parts_shown, false);
    while !signals::requested() && a.duration.is_none_or(|d| started.elapsed() < d) {
        if let Some((p, h)) = &prober {
            if h.is_finished() {
                break;
            }
            let e = p.windows.lock().last_error.clone();
            if e.is_some() && e != window_error {
                say!("tailhunt agent: {}", e.as_deref().unwrap_or(""));
            }
            window_error = e;
            report_failing(&p.live, &mut failing);
        }
        parts.report(&mut parts_shown, true);
        if Instant::now() >= next {
            next += cfg.interval;
            let mut snap = snapshot(&writer, started, prober.as_ref().map(|(p, _)| p));
            parts.fill(&mut snap, prober.is_some());
            if !cfg.remote_write.is_empty() {
                let ts = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                let batch = Batch::from_snapshot(&snap, ts, &extra)?;
                for e in writer.push(&batch) {
                    say!("tailhunt agent: {e}");
                }
            }
            exported.set(snap);
        }
        // The writer's events (outages, fall backs, a full queue) as they happen.
        for (s, seen) in writer.status().iter().zip(shown.iter_mut()) {
            let new = (s.events_total - *seen).min(s.events.len() as u64) as usize;
            for e in &s.events[s.events.len() - new..] {
                say!("tailhunt agent: {e}");
            }
            *seen = s.events_total;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let mut probing = None;
    if let Some((p, h)) = prober.take() {
        match h.join() {
            Ok(r) => r.context("the prober stopped")?,
            Err(_) => anyhow::bail!("the prober thread panicked"),
        }
        let w = p.windows.lock();
        say!(
            "tailhunt agent: probe samples measured {}, exported {}; {} window(s) stored, {} failed, {} deleted by retention",
            p.live.samples.load(Ordering::Relaxed),
            p.aggregator.samples(),
            w.windows,
            w.failed_windows,
            w.deleted_runs
        );
        drop(w);
        probing = Some(p);
    }
    // A last snapshot after the prober stopped, so what was measured since the last interval
    // is queued too (and, with the receivers up, delivered) rather than lost with the stop; a
    // receiver that is down gets it from the queue on the next start.
    if !cfg.remote_write.is_empty() {
        let snap = snapshot(&writer, started, probing.as_ref());
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        for e in writer.push(&Batch::from_snapshot(&snap, ts, &extra)?) {
            say!("tailhunt agent: {e}");
        }
        if writer.status().iter().all(|s| s.last_error.is_none()) {
            writer.wait_drained(FINAL_DRAIN);
        }
    }
    for t in parts.threads {
        let _ = t.join();
    }
    let r = parts.runq.lock();
    if r.intervals > 0 {
        say!(
            "tailhunt agent: run-queue intervals {}, {} window(s) stored, {} failed; {} cgroup label(s), {} cgroup interval(s) folded into \"other\"",
            r.intervals,
            r.windows,
            r.failed_windows,
            r.exported_cgroups(),
            r.folded
        );
    }
    drop(r);
    drop(echo);
    drop(server);
    let pending: u64 = writer
        .status()
        .iter()
        .map(|s| s.queue.pending_records)
        .sum();
    drop(writer);
    say!("tailhunt agent: stopped; {pending} batch(es) stay queued on disk for the next start");
    Ok(())
}
