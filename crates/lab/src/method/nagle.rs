//! `nagle`: a client writing each request in two pieces without TCP_NODELAY, over a link with
//! a real round trip, swept from a low rate to a high one.
//!
//! ```text
//!  client ── gw ══ emulator (4 ms round trip, 100 Mbit/s) ══ server :7200 (tailhunt serve tcp)
//!    └ capture (tcpdump), then tailhunt pcap
//! ```
//!
//! Before: `tailhunt load --sweep --split-writes --nodelay=false` against `tailhunt serve tcp
//! --nodelay=false`; at low rates each request's second piece waits for the server's delayed
//! ACK. Expected: `latency-rises-as-load-falls` (the load run) and `nagle-stall` (the capture).
//! Fix: `--nodelay=true` on both ends; the p99 at the lowest rate must fall to the network floor
//! (within 3x the round trip, and at most a third of what it was).

use std::time::Duration;

use serde_json::Value;

use super::judge::{self, Evidence};
use super::{Figure, Options, Scale, ScenarioResult};
use crate::truth::tap::Tap;
use crate::truth::tool::{json_of, Ctx};
use crate::truth::window::Path;
use crate::truth::{pause, TruthError};

/// The path's round trip, ms.
const RTT_MS: u64 = 4;
const RATE_BPS: u64 = 100_000_000;

/// What one sweep measured.
pub(crate) struct Sweep {
    /// The lowest rate, req/s.
    pub(crate) low_rate: f64,
    /// Its p50 and p99, ms.
    pub(crate) low_p50_ms: f64,
    pub(crate) low_p99_ms: f64,
}

/// Runs the scenario.
pub(crate) fn run(
    ctx: &Ctx,
    opts: &Options,
    say: &dyn Fn(&str),
) -> Result<ScenarioResult, TruthError> {
    let mut ev = Evidence::default();
    say("sweep with split writes, no TCP_NODELAY");
    let before = measure(ctx, opts, false, "before", &mut ev)?;
    let after = match opts.fix {
        true => {
            say("fix: TCP_NODELAY on both ends, sweep again");
            Some(measure(ctx, opts, true, "after", &mut ev)?)
        }
        false => None,
    };
    let findings = ev.findings(ctx)?;
    // A quick step at 50 req/s has 100 requests: its p99 is their second slowest, so the goal
    // leaves room for one late wake-up on a shared host (measured: 4.6-8.0 ms with
    // TCP_NODELAY, 55-57 ms without).
    let floor = 3.0 * RTT_MS as f64;
    let figure = Figure {
        name: format!("p99 at {} req/s", before.low_rate),
        unit: "ms".into(),
        before: Some(before.low_p99_ms),
        after: after.as_ref().map(|a| a.low_p99_ms),
        goal: format!(
            "at most {floor:.0} ms (3x the {RTT_MS} ms round trip) and a third of before"
        ),
    };
    let check = match &after {
        None => Ok(()),
        Some(a) if a.low_p99_ms <= floor && a.low_p99_ms * 3.0 <= before.low_p99_ms => Ok(()),
        Some(a) => Err(format!(
            "after TCP_NODELAY the low-rate p99 is {:.2} ms (before {:.2} ms)",
            a.low_p99_ms, before.low_p99_ms
        )),
    };
    let notes = vec![format!(
        "before: p50 {:.2} ms at {} req/s",
        before.low_p50_ms, before.low_rate
    )];
    let noise = after.as_ref().and_then(noise);
    Ok(judge::judge(
        "nagle",
        super::planted_of("nagle"),
        findings,
        Some((figure, check)),
        noise,
        ev,
        notes,
    ))
}

/// A sweep with TCP_NODELAY whose low-rate median is far above the round trip: the host, not
/// the path, made it slow.
pub(crate) fn noise(s: &Sweep) -> Option<String> {
    let limit = RTT_MS as f64 + 2.0;
    (s.low_p50_ms > limit).then(|| {
        format!(
            "with TCP_NODELAY the p50 at {} req/s was {:.2} ms on a {RTT_MS} ms round trip",
            s.low_rate, s.low_p50_ms
        )
    })
}

/// Builds the path, serves, captures the client's interface during a sweep, and analyses the
/// capture: both runs go to the store (phase `phase`).
pub(crate) fn measure(
    ctx: &Ctx,
    opts: &Options,
    nodelay: bool,
    phase: &str,
    ev: &mut Evidence,
) -> Result<Sweep, TruthError> {
    let path = Path::emulated(RTT_MS, RATE_BPS)?;
    let (client_if, _) = path.ifaces();
    let (_, server_ip) = path.addrs();
    let listen = format!("{server_ip}:7200");
    let nd = format!("--nodelay={nodelay}");
    let mut srv = ctx.server(
        path.server(),
        "serve tcp",
        &[
            "--json",
            "serve",
            "tcp",
            "--listen",
            &listen,
            &nd,
            "--reply-bytes",
            "100",
            "--duration",
            "600s",
        ],
    )?;
    let tap = Tap::start(
        ctx,
        path.client(),
        "client",
        &client_if,
        &format!("client-{phase}"),
        "at the client",
    )?;
    let (rates, secs) = match opts.scale {
        Scale::Quick => ("50,500,5000", "2s"),
        Scale::Full => ("50,500,5000,20000", "5s"),
    };
    let url = format!("tcp://{listen}");
    let load = ctx.load(
        path.client(),
        "load --sweep",
        &[
            &url,
            "--sweep",
            rates,
            "--duration",
            secs,
            "--warmup",
            "500ms",
            "--conns",
            "1",
            &nd,
            "--split-writes",
            "--seed",
            "1",
        ],
        Duration::from_secs(180),
    )?;
    pause(Duration::from_millis(300))?;
    let tapped = tap.stop()?;
    srv.interrupt();
    let _ = json_of(&mut srv, "tailhunt serve", Duration::from_secs(10));
    ev.add(&load.doc, "load", phase);
    let (_, (_, pcap)) = tapped.analyse(ctx, "", &[])?;
    ev.add(&pcap, "pcap", phase);
    if !opts.keep {
        let _ = std::fs::remove_file(&tapped.file);
    }
    lowest_step(&load.doc).ok_or_else(|| TruthError::Output {
        what: "tailhunt load --sweep".into(),
        detail: "no step with a rate and latency percentiles".into(),
        stderr: String::new(),
    })
}

/// The lowest rate's p50 and p99 from a load document's steps.
fn lowest_step(doc: &Value) -> Option<Sweep> {
    let steps = doc["steps"].as_array()?;
    let low = steps
        .iter()
        .filter(|s| s["latency_ns"]["p99"].is_number())
        .min_by(|a, b| {
            let r = |s: &Value| s["rate"].as_f64().unwrap_or(f64::MAX);
            r(a).total_cmp(&r(b))
        })?;
    Some(Sweep {
        low_rate: low["rate"].as_f64()?,
        low_p50_ms: low["latency_ns"]["p50"].as_f64()? / 1e6,
        low_p99_ms: low["latency_ns"]["p99"].as_f64()? / 1e6,
    })
}
