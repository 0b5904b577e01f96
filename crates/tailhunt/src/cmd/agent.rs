//! `tailhunt agent`: the metrics exporter until Ctrl-C (or --duration). A skeleton: it serves
//! and remote-writes its own state (queues, deliveries, rejections); the prober, run-queue and
//! socket sampling are not wired in yet.

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use tailhunt_agent::config;
use tailhunt_agent::exposition::{ScalarMetric, Snapshot};
use tailhunt_agent::http::{Exported, Server};
use tailhunt_agent::remote_write::{status_metrics, Batch, RemoteWriter};

use crate::cli::AgentArgs;
use crate::signals;

fn snapshot(writer: &RemoteWriter, started: Instant) -> Snapshot {
    let (counters, mut gauges) = status_metrics(&writer.status());
    gauges.push(ScalarMetric {
        name: "tailhunt_agent_uptime_seconds".into(),
        help: "Seconds since the agent started.".into(),
        labels: vec![],
        value: started.elapsed().as_secs_f64(),
    });
    Snapshot {
        counters,
        gauges,
        ..Snapshot::default()
    }
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
    let server = Server::start(&cfg.listen.to_string(), cfg.token.clone(), exported.clone())?;
    let writer = RemoteWriter::start(cfg.remote_write.clone())?;
    eprintln!(
        "tailhunt agent: serving http://{}/metrics{}; remote write to {} endpoint(s); exporting its own state only (no probes yet)",
        server.local_addr(),
        if cfg.token.is_some() { " (bearer token required)" } else { "" },
        cfg.remote_write.len()
    );
    let _ = std::io::stderr().flush();
    let started = Instant::now();
    let extra = vec![("instance".to_string(), cfg.instance.clone())];
    let mut shown = vec![0u64; cfg.remote_write.len()];
    let mut next = Instant::now();
    while !signals::requested() && a.duration.is_none_or(|d| started.elapsed() < d) {
        if Instant::now() >= next {
            next += cfg.interval;
            let snap = snapshot(&writer, started);
            if !cfg.remote_write.is_empty() {
                let ts = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                let batch = Batch::from_snapshot(&snap, ts, &extra)?;
                for e in writer.push(&batch) {
                    eprintln!("tailhunt agent: {e}");
                }
            }
            exported.set(snap);
        }
        // The writer's events (outages, fall backs, a full queue) as they happen.
        for (s, seen) in writer.status().iter().zip(shown.iter_mut()) {
            let new = (s.events_total - *seen).min(s.events.len() as u64) as usize;
            for e in &s.events[s.events.len() - new..] {
                eprintln!("tailhunt agent: {e}");
            }
            *seen = s.events_total;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
    let pending: u64 = writer
        .status()
        .iter()
        .map(|s| s.queue.pending_records)
        .sum();
    drop(writer);
    eprintln!(
        "tailhunt agent: stopped; {pending} batch(es) stay queued on disk for the next start"
    );
    Ok(())
}
