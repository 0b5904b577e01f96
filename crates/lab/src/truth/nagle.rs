//! The Nagle cases: requests (or replies) written in two pieces without TCP_NODELAY.
//!
//! ```text
//!  client 198.18.60.2 ── sw ── 198.18.61.2:7200 server (tailhunt serve tcp, 500 µs think time)
//!     └ capture "client"              capture "server" ┘
//! ```
//!
//! `tailhunt load --split-writes --nodelay=false` (or `tailhunt serve --split-writes
//! --nodelay=false`) at a low rate on a few connections, captured on both hosts: planted
//! `nagle-stall` on every connection. With `sweep`, `tailhunt load --sweep 50,500,5000` then
//! runs against the same server (not captured): planted `latency-rises-as-load-falls` on the
//! target. The twin sets TCP_NODELAY on both ends.

use std::time::Duration;

use serde_json::{json, Value};

use super::net::Dumbbell;
use super::spec::{Case, NagleSpec, Split};
use super::tap::{analyse_all, counts, stop_all, Tap};
use super::tool::{json_of, Ctx};
use super::{pause, Planted, Truth, TruthError, Unit, ViewKind};

/// Runs a Nagle case.
pub(crate) fn run(
    case: &Case,
    s: &NagleSpec,
    ctx: &Ctx,
) -> Result<(Truth, Vec<(String, Value)>), TruthError> {
    let net = Dumbbell::new("ng-cli", "ng-srv", 60)?;
    let server = format!("{}:7200", net.b_addr);
    let nodelay = format!("--nodelay={}", case.twin);
    let mut serve_args = vec![
        "--json",
        "serve",
        "tcp",
        "--listen",
        &server,
        &nodelay,
        "--reply-bytes",
        "100",
        "--think-time",
        "500us",
        "--duration",
        "120s",
    ];
    if s.split == Split::Server {
        serve_args.push("--split-writes");
    }
    let mut srv = ctx.server(&net.b, "serve tcp", &serve_args)?;
    let taps = vec![
        Tap::start(ctx, &net.a, "client", &net.a_if, "client", "at the client")?,
        Tap::start(ctx, &net.b, "server", &net.b_if, "server", "at the server")?,
    ];
    let url = format!("tcp://{server}");
    let (rate, conns) = (s.rate.to_string(), s.conns.to_string());
    let mut args = vec![
        url.as_str(),
        "--rate",
        &rate,
        "--duration",
        "3s",
        "--warmup",
        "0s",
        "--conns",
        &conns,
        &nodelay,
    ];
    if s.split == Split::Client {
        args.push("--split-writes");
    }
    let captured = ctx.load(&net.a, "load", &args, Duration::from_secs(40))?;
    pause(Duration::from_millis(300))?;
    let tapped = stop_all(taps)?;
    let sweep = match s.sweep {
        true => Some(ctx.load(
            &net.a,
            "sweep",
            &[
                url.as_str(),
                "--sweep",
                "50,500,5000",
                "--duration",
                "2s",
                "--warmup",
                "500ms",
                "--conns",
                "1",
                &nodelay,
                "--split-writes",
                "--seed",
                "1",
            ],
            Duration::from_secs(60),
        )?),
        false => None,
    };
    srv.interrupt();
    let served = json_of(&mut srv, "tailhunt serve", Duration::from_secs(10))?;

    let planted = if case.twin {
        Vec::new()
    } else {
        planted(s, &net.a_addr, &server, &url)
    };
    let mut views = analyse_all(ctx, &tapped, &[], None)?;
    let mut cpu = json!({"load": captured.cpu_share});
    let mut programs = json!({
        "server": served, "captures": counts(&tapped), "load_steps": captured.doc["steps"],
    });
    let position = "the captured client's own record";
    views.program(
        "load",
        ViewKind::Record,
        position,
        Some(url.clone()),
        captured.doc,
    );
    if let Some(sw) = sweep {
        cpu["sweep"] = json!(sw.cpu_share);
        programs["sweep_steps"] = sw.doc["steps"].clone();
        let position = "tailhunt load --sweep, its findings";
        views.program("sweep", ViewKind::Load, position, Some(url.clone()), sw.doc);
    }
    let (mut truth, outputs) = Truth::of(
        case,
        planted,
        views,
        programs,
        json!({"load_cpu_share": cpu}),
    );
    set_aside_without_effect(&mut truth);
    Ok((truth, outputs))
}

/// A stall counts only when the captured client's own latencies show it (p50 of 20 ms or more:
/// most requests waited for a delayed ACK); a sweep only when its own p50 at the lowest rate is
/// at least 3x the highest rate's.
fn set_aside_without_effect(truth: &mut Truth) {
    let p50 = |step: &Value| step["latency_ns"]["p50"].as_f64();
    let own = p50(&truth.programs["load_steps"][0]);
    if own.is_none_or(|p| p < 20e6) {
        let why = format!(
            "the client's own p50 was {:.2} ms: no delayed-ACK stall",
            own.unwrap_or(0.0) / 1e6
        );
        truth.set_aside(|p| p.detector == "nagle-stall", &why);
    }
    let steps = truth.programs["sweep_steps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let by_rate = |pick: fn(f64, f64) -> bool| {
        steps
            .iter()
            .filter_map(|s| Some((s["rate"].as_f64()?, p50(s)?)))
            .reduce(|a, b| if pick(a.0, b.0) { a } else { b })
    };
    let (low, high) = (by_rate(|a, b| a < b), by_rate(|a, b| a > b));
    let rose = matches!((low, high), (Some(l), Some(h)) if l.1 >= 3.0 * h.1);
    if !rose {
        truth.set_aside(
            |p| p.detector == "latency-rises-as-load-falls",
            "the sweep's own p50 at the lowest rate was not 3x the highest rate's",
        );
    }
}

/// What a case with the cause plants: a stall on every connection, and with a sweep the
/// target's latency rising as its load falls.
fn planted(s: &NagleSpec, client_ip: &str, server: &str, url: &str) -> Vec<Planted> {
    let who = match s.split {
        Split::Client => "the client wrote each request",
        Split::Server => "the server wrote each reply",
    };
    let mut out = vec![Planted {
        detector: "nagle-stall".into(),
        unit: Unit::Flow {
            client_ip: client_ip.into(),
            server: server.into(),
        },
        count: s.conns,
        note: format!(
            "{who} in two pieces without TCP_NODELAY, {} requests/s",
            s.rate
        ),
    }];
    if s.sweep {
        out.push(Planted {
            detector: "latency-rises-as-load-falls".into(),
            unit: Unit::Target { target: url.into() },
            count: 1,
            note:
                "a sweep of 50, 500 and 5000 requests/s with two-piece requests and no TCP_NODELAY"
                    .into(),
        });
    }
    out
}
