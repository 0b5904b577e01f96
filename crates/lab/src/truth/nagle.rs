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
use super::tap::{stop_all, Tap};
use super::tool::{json_of, Ctx};
use super::{pause, Planted, Truth, TruthError, Unit, View};

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
        "--json", "serve", "tcp", "--listen", &server, &nodelay, "--reply-bytes", "100",
        "--think-time", "500us", "--duration", "120s",
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
        url.as_str(), "--rate", &rate, "--duration", "3s", "--warmup", "0s", "--conns", &conns,
        &nodelay,
    ];
    if s.split == Split::Client {
        args.push("--split-writes");
    }
    let captured = ctx.load(&net.a, "load", &args, Duration::from_secs(40))?;
    pause(Duration::from_millis(300))?;
    let tapped = stop_all(taps)?;
    let sweep = if s.sweep {
        let mut a = vec![
            url.as_str(), "--sweep", "50,500,5000", "--duration", "2s", "--warmup", "500ms",
            "--conns", "1", &nodelay, "--split-writes",
        ];
        a.extend(["--seed", "1"]);
        Some(ctx.load(&net.a, "sweep", &a, Duration::from_secs(60))?)
    } else {
        None
    };
    srv.interrupt();
    let served = json_of(&mut srv, "tailhunt serve", Duration::from_secs(10))?;

    let mut planted = Vec::new();
    if !case.twin {
        let who = match s.split {
            Split::Client => "the client wrote each request",
            Split::Server => "the server wrote each reply",
        };
        planted.push(Planted {
            detector: "nagle-stall".into(),
            unit: Unit::Flow {
                client_ip: net.a_addr.clone(),
                server: server.clone(),
            },
            count: s.conns,
            note: format!("{who} in two pieces without TCP_NODELAY, {} requests/s", s.rate),
        });
        if sweep.is_some() {
            planted.push(Planted {
                detector: "latency-rises-as-load-falls".into(),
                unit: Unit::Target { target: url.clone() },
                count: 1,
                note: "a sweep of 50, 500 and 5000 requests/s with two-piece requests and no TCP_NODELAY".into(),
            });
        }
    }
    let mut views = Vec::new();
    let mut outputs = Vec::new();
    for t in &tapped {
        let (v, o) = t.analyse(ctx, "", &[])?;
        views.push(v);
        outputs.push(o);
    }
    let mut cpu = json!({"load": captured.cpu_share});
    let mut programs = json!({
        "server": served, "captures": tapped.iter().map(|t| t.capture.clone()).collect::<Vec<_>>(),
        "load_steps": captured.doc["steps"],
    });
    views.push(View {
        name: "load".into(),
        kind: super::ViewKind::Record,
        position: "the captured client's own record".into(),
        analysis: Vec::new(),
        target: Some(url.clone()),
    });
    outputs.push(("load".into(), captured.doc));
    if let Some(sw) = sweep {
        cpu["sweep"] = json!(sw.cpu_share);
        programs["sweep_steps"] = sw.doc["steps"].clone();
        views.push(View {
            name: "sweep".into(),
        kind: super::ViewKind::Load,
            position: "tailhunt load --sweep, its findings".into(),
            analysis: Vec::new(),
            target: Some(url.clone()),
        });
        outputs.push(("sweep".into(), sw.doc));
    }
    let truth = Truth {
        case: case.name.clone(),
        seed: case.seed,
        twin: case.twin,
        spec: case.spec.clone(),
        planted,
        takers: Vec::new(),
        views,
        programs,
        facts: json!({"load_cpu_share": cpu}),
    };
    Ok((truth, outputs))
}
