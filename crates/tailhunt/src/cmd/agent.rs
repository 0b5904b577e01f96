//! `tailhunt agent`: until Ctrl-C (or --duration), the configured probes run continuously into
//! a rolling store (one run per window, the detectors on each closed window), and their
//! latency histograms, outcome counters, findings and the agent's own state are served on
//! /metrics and remote-written; run-queue tracing (eBPF, its windows stored as runq runs with
//! the detectors on each) and the socket sampler run beside it when the host allows, and
//! `tailhunt_agent_part_running{part}` says which parts run (a part that cannot run is
//! switched off with its reason printed). The agent itself is `tailhunt_agent::runner`; this
//! reads the configuration, prints its lines and stops it on a signal.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use tailhunt_agent::config;
use tailhunt_agent::runner::{Agent, TICK};

use crate::cli::AgentArgs;
use crate::signals;

/// A status line on stderr. The agent runs for days: a stderr that went away (a closed pipe,
/// a rotated log reader) must not stop it (`tell!`).
fn say(line: &str) {
    tell!("tailhunt agent: {line}");
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
    let mut agent = Agent::start(cfg)?;
    say(&agent.banner());
    let _ = std::io::stderr().flush();
    let started = Instant::now();
    let mut ticked = Ok(());
    while ticked.is_ok()
        && !signals::requested()
        && a.duration.is_none_or(|d| started.elapsed() < d)
        && !agent.prober_ended()
    {
        ticked = agent.tick(&mut say);
        std::thread::sleep(TICK);
    }
    // Stopped either way, so what was measured is queued and the threads end cleanly.
    let stopped = agent.stop(&mut say);
    ticked?;
    Ok(stopped?)
}
