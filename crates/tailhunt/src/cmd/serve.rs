//! `tailhunt serve`: a reference server until Ctrl-C (or --duration).

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tailhunt_load::serve::{Injected, ServeConfig, Server, TailWave, ThinkTime};
use tailhunt_report::doc::ServeDoc;

use crate::cli::{Cli, ServeArgs};
use crate::output;
use crate::{flags, signals};

/// `AT+DUR` of `--pause` and `--step`.
fn at_plus(flag: &str, text: &str, example: &str) -> Result<(Duration, Duration)> {
    let (at, dur) = text
        .split_once('+')
        .with_context(|| format!("{flag} '{text}' must be AT+DURATION, e.g. {example}"))?;
    let part = |t: &str| flags::duration(t).map_err(|e| anyhow::anyhow!("{flag} '{text}': {e}"));
    Ok((part(at)?, part(dur)?))
}

pub fn run(cli: &Cli, a: &ServeArgs) -> Result<()> {
    let listen: SocketAddr = a.listen.parse().with_context(|| {
        format!(
            "--listen '{}' is not an address (write e.g. 127.0.0.1:7000 or [::1]:7000)",
            a.listen
        )
    })?;
    let mut cfg = ServeConfig::new(a.proto, listen);
    cfg.nodelay = a.nodelay;
    cfg.reply_bytes = a.reply_bytes;
    cfg.think = match a.floor {
        Some(d) => ThinkTime::Fixed(d),
        None => ThinkTime::parse(&a.think_time)
            .with_context(|| format!("--think-time '{}'", a.think_time))?,
    };
    cfg.split_writes = a.split_writes;
    cfg.threads = a.threads;
    cfg.timestamps = a.timestamps;
    cfg.pause = a
        .pause
        .as_deref()
        .map(|t| at_plus("--pause", t, "5s+1s"))
        .transpose()?;
    cfg.inject = Injected {
        first_request: a.first_request,
        step: a
            .step
            .as_deref()
            .map(|t| at_plus("--step", t, "90s+3ms"))
            .transpose()?,
        wave: a
            .tail_wave
            .as_deref()
            .map(TailWave::parse)
            .transpose()
            .context("--tail-wave")?,
    };
    let until = a.duration;
    signals::install();
    let server = Server::start(cfg)?;
    let addr = server.local_addr();
    // The address goes to stderr at once so scripts and tests can connect (port 0 picks one).
    tell!("serving {} on {addr} (Ctrl-C to stop)", a.proto.as_str());
    let _ = std::io::stderr().flush();
    let started = Instant::now();
    while !signals::requested() && until.is_none_or(|u| started.elapsed() < u) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = server.stop();
    let doc = ServeDoc {
        listen: addr.to_string(),
        proto: a.proto.as_str().to_string(),
        connections: stats.connections,
        requests: stats.requests,
        replies: stats.replies,
        bad_requests: stats.bad_requests,
    };
    output::print(cli.json, &doc, |d| {
        format!(
            "stopped: {} connections, {} requests, {} replies, {} bad requests\n",
            d.connections, d.requests, d.replies, d.bad_requests
        )
    })
}
