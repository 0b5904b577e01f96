//! The whole agent as one value: started from a checked configuration, ticked by its caller,
//! stopped.
//!
//! In: an [`AgentConfig`]. [`Agent::start`] opens the endpoints (`/metrics`, `/findings`,
//! `/healthz`), the remote writers and their queues, the mesh's echo servers, and starts the
//! prober, the run-queue tracer and the socket sampler in threads of their own, each only where
//! the configuration and the host allow (`parts`). Out: [`Agent::banner`], the one line that
//! says what runs and what does not; [`Agent::tick`], called every [`TICK`], takes a snapshot
//! every `interval` (served and queued for remote write) and hands the caller each change worth
//! a line (a part switched off, a window that failed, a probe that started or stopped
//! failing, an outage of a receiver); [`Agent::stop`] stops the threads, queues a last snapshot
//! so nothing measured is left out, waits briefly for its delivery and hands over the summary
//! lines. The library never prints: the lines go to the caller's `say`.

mod parts;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tailhunt_model::format_duration_ns;
use tailhunt_probe::run::Live;

use crate::config::AgentConfig;
use crate::exposition::{ExpositionError, ScalarMetric, Snapshot};
use crate::http::{Exported, HttpError, Server};
use crate::mesh::{EchoServers, MeshError};
use crate::probing::Aggregator;
use crate::remote_write::{status_metrics, Batch, RemoteWriteError, RemoteWriter};
use crate::rolling::{self, RollingError, WindowState};
use parts::Parts;

/// How often the caller should call [`Agent::tick`].
pub const TICK: Duration = Duration::from_millis(50);

/// How long a stop waits for the last snapshot to be delivered (it stays queued otherwise).
const FINAL_DRAIN: Duration = Duration::from_secs(3);

/// Why the agent could not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The endpoints could not be served.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// A remote-write endpoint or its queue could not be set up.
    #[error(transparent)]
    RemoteWrite(#[from] RemoteWriteError),
    /// The mesh's echo servers could not listen.
    #[error(transparent)]
    Mesh(#[from] MeshError),
    /// The prober could not start, or stopped with an error.
    #[error("the prober: {0}")]
    Prober(#[from] RollingError),
    /// The store's directory could not be made.
    #[error("store = \"{path}\": cannot create its directory: {source}")]
    StoreDir {
        /// The store path.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// A thread could not be started.
    #[error("cannot start the {what} thread: {source}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// What failed.
        source: std::io::Error,
    },
    /// The prober thread panicked.
    #[error("the prober thread panicked")]
    ProberPanicked,
    /// A snapshot could not be encoded for remote write.
    #[error("a snapshot could not be encoded: {0}")]
    Snapshot(#[from] ExpositionError),
}

/// What the prober thread shares with the exporting loop.
struct Probing {
    aggregator: Aggregator,
    windows: WindowState,
    live: Arc<Live>,
}

/// The prober thread.
type ProberThread = std::thread::JoinHandle<Result<(), RollingError>>;

/// Which changes have already been told, so each is told once.
#[derive(Default)]
struct Told {
    writer_events: Vec<u64>,
    window_error: Option<String>,
    failing: Vec<(String, String)>,
    parts: [Option<String>; 3],
}

/// A running agent.
pub struct Agent {
    cfg: AgentConfig,
    stop: Arc<AtomicBool>,
    exported: Exported,
    server: Server,
    writer: RemoteWriter,
    echo: Option<EchoServers>,
    probing: Option<Probing>,
    prober: Option<ProberThread>,
    parts: Parts,
    started: Instant,
    next_snapshot: Instant,
    extra: Vec<(String, String)>,
    told: Told,
}

impl Agent {
    /// Starts everything `cfg` asks for that the host allows.
    pub fn start(cfg: AgentConfig) -> Result<Agent, AgentError> {
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
        let (probing, prober) = start_probing(&cfg, &stop)?.unzip();
        let parts = Parts::start(&cfg, &stop)?;
        let mut told = Told {
            writer_events: vec![0; cfg.remote_write.len()],
            ..Told::default()
        };
        // What the banner says about the parts is not told again.
        parts.changes(&mut told.parts);
        let now = Instant::now();
        Ok(Agent {
            extra: vec![("instance".to_string(), cfg.instance.clone())],
            cfg,
            stop,
            exported,
            server,
            writer,
            echo,
            probing,
            prober,
            parts,
            started: now,
            next_snapshot: now,
            told,
        })
    }

    /// One line: where the endpoints are, where samples go, which parts run and which not.
    pub fn banner(&self) -> String {
        let cfg = &self.cfg;
        let mut probing = match &cfg.probes {
            Some(p) => format!(
                "{} probe(s) every {} into {} (a run per {}, kept for {} and at most {})",
                p.probes.len(),
                show(p.interval),
                cfg.retention.store.display(),
                show(cfg.retention.window),
                show_long(cfg.retention.max_age),
                tailhunt_model::units::Bytes(cfg.retention.max_bytes)
            ),
            None => "no probes configured".to_string(),
        };
        if let Some(addr) = self.echo.as_ref().and_then(EchoServers::local_addr) {
            probing.push_str(&format!("; mesh echo (tcp, udp) on {addr}"));
        }
        format!(
            "serving {}://{}/metrics{}; remote write to {} endpoint(s); {probing}; {}",
            self.server.scheme(),
            self.server.local_addr(),
            if cfg.token.is_some() {
                " (bearer token required)"
            } else {
                ""
            },
            cfg.remote_write.len(),
            self.parts.describe()
        )
    }

    /// Whether the prober has stopped by itself (its error comes from [`Agent::stop`]).
    pub fn prober_ended(&self) -> bool {
        self.prober.as_ref().is_some_and(|h| h.is_finished())
    }

    /// Takes and publishes a snapshot when one is due, and tells `say` every change since the
    /// last tick.
    pub fn tick(&mut self, say: &mut dyn FnMut(&str)) -> Result<(), AgentError> {
        if let Some(p) = &self.probing {
            let e = p.windows.lock().last_error.clone();
            if e.is_some() && e != self.told.window_error {
                say(e.as_deref().unwrap_or(""));
            }
            self.told.window_error = e;
            for change in p.live.failing_changes(&mut self.told.failing) {
                say(&change.to_string());
            }
        }
        for line in self.parts.changes(&mut self.told.parts) {
            say(&line);
        }
        if Instant::now() >= self.next_snapshot {
            self.next_snapshot += self.cfg.interval;
            let snap = self.snapshot();
            self.push(&snap, say)?;
            self.exported.set(snap);
        }
        // The writer's events (outages, fall backs, a full queue) as they happen.
        for (s, seen) in self
            .writer
            .status()
            .iter()
            .zip(self.told.writer_events.iter_mut())
        {
            let new = (s.events_total - *seen).min(s.events.len() as u64) as usize;
            for e in &s.events[s.events.len() - new..] {
                say(e);
            }
            *seen = s.events_total;
        }
        Ok(())
    }

    /// Stops every part, queues a last snapshot (delivered within a few seconds when the
    /// receivers are up, kept on disk otherwise) and tells `say` what was measured and what
    /// stays queued.
    pub fn stop(mut self, say: &mut dyn FnMut(&str)) -> Result<(), AgentError> {
        self.stop.store(true, Ordering::Relaxed);
        let mut failure = None;
        if let (Some(p), Some(h)) = (&self.probing, self.prober.take()) {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failure = Some(AgentError::Prober(e)),
                Err(_) => failure = Some(AgentError::ProberPanicked),
            }
            let w = p.windows.lock();
            say(&format!(
                "probe samples measured {}, exported {}; {} window(s) stored, {} failed, {} deleted by retention",
                p.live.samples.load(Ordering::Relaxed),
                p.aggregator.samples(),
                w.windows,
                w.failed_windows,
                w.deleted_runs
            ));
        }
        // A last snapshot after the prober stopped, so what was measured since the last
        // interval is queued too rather than lost with the stop; a receiver that is down gets
        // it from the queue on the next start.
        if !self.cfg.remote_write.is_empty() {
            let snap = self.snapshot();
            self.push(&snap, say)?;
            if self.writer.status().iter().all(|s| s.last_error.is_none()) {
                self.writer.wait_drained(FINAL_DRAIN);
            }
        }
        for line in self.parts.join() {
            say(&line);
        }
        drop(self.echo.take());
        let pending: u64 = self
            .writer
            .status()
            .iter()
            .map(|s| s.queue.pending_records)
            .sum();
        say(&format!(
            "stopped; {pending} batch(es) stay queued on disk for the next start"
        ));
        failure.map_or(Ok(()), Err)
    }

    /// Everything the agent exports now.
    fn snapshot(&self) -> Snapshot {
        let (counters, mut gauges) = status_metrics(&self.writer.status());
        gauges.push(scalar(
            "tailhunt_agent_uptime_seconds",
            "Seconds since the agent started.",
            self.started.elapsed().as_secs_f64(),
        ));
        let mut snap = Snapshot {
            counters,
            gauges,
            ..Snapshot::default()
        };
        if let Some(p) = &self.probing {
            // The prober's own count first: a sample it measured after this read is in
            // neither number, so the exported counters are never behind it at the same moment.
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
        self.parts.fill(&mut snap, self.probing.is_some());
        snap
    }

    /// Queues `snap` for every remote-write endpoint.
    fn push(&self, snap: &Snapshot, say: &mut dyn FnMut(&str)) -> Result<(), AgentError> {
        if self.cfg.remote_write.is_empty() {
            return Ok(());
        }
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        for e in self
            .writer
            .push(&Batch::from_snapshot(snap, ts, &self.extra)?)
        {
            say(&e.to_string());
        }
        Ok(())
    }
}

fn show(d: Duration) -> String {
    format_duration_ns(d.as_nanos() as f64)
}

/// A retention age as written in a config: whole days or hours as such (`24h`, not `86400s`).
fn show_long(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => show(d),
        _ if s.is_multiple_of(86_400) && d.subsec_nanos() == 0 => format!("{}d", s / 86_400),
        _ if s.is_multiple_of(3_600) && d.subsec_nanos() == 0 => format!("{}h", s / 3_600),
        _ => show(d),
    }
}

fn scalar(name: &str, help: &str, value: f64) -> ScalarMetric {
    ScalarMetric {
        name: name.into(),
        help: help.into(),
        labels: vec![],
        value,
    }
}

/// Starts the prober thread when the configuration has probes.
fn start_probing(
    cfg: &AgentConfig,
    stop: &Arc<AtomicBool>,
) -> Result<Option<(Probing, ProberThread)>, AgentError> {
    let Some(probes) = cfg.probes.clone() else {
        return Ok(None);
    };
    rolling::check_probes(&probes)?;
    if let Some(dir) = cfg.retention.store.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).map_err(|source| AgentError::StoreDir {
                path: cfg.retention.store.display().to_string(),
                source,
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
        .map_err(|source| AgentError::Thread {
            what: "prober",
            source,
        })?;
    Ok(Some((probing, handle)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_reads_as_written() {
        assert_eq!(show_long(Duration::from_secs(86_400)), "1d");
        assert_eq!(show_long(Duration::from_secs(7_200)), "2h");
        assert_eq!(
            show_long(Duration::from_secs(90)),
            show(Duration::from_secs(90))
        );
    }
}
