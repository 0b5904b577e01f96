//! The timeout cases: a client that gives up, in the three ways clients do.
//!
//! ```text
//!  client 198.18.40.2 ── sw (tbf toward the client: the server's data queue) ── 198.18.41.2:7500 server
//!     └ capture "client": downstream of the queue        capture "server": upstream ┘
//! ```
//!
//! - `fin`: `tailhunt serve tcp` answers with a response three timeouts long at the shaped
//!   rate; `tailhunt load --timeout` reads it as it arrives and closes at its timeout: a FIN,
//!   then the server's remaining data meets resets.
//! - `rst`: `tailhunt transfer client --timeout` stops reading at its timeout and closes with
//!   data unread: its close is a RST.
//! - `server-slow`: the server thinks two seconds longer than the client waits: the client
//!   closes before one response byte was sent (a different cause, with a different fix).
//! - `server-slow-abort`: the same slow server, and a client ([`super::abandon`]) that aborts
//!   at its timeout with SO_LINGER 0: a single RST, and nothing after it (the server's late
//!   answer fails on the reset socket), as proxies that reset timed-out connections do.
//!
//! Planted: `application-timeout` on the client's connection. Twins: the response fits in the
//! timeout (fin, rst) or the server answers in 300 ms (server-slow; the aborting twin then
//! holds its answered connection until its timeout and resets it all the same).

use std::time::Duration;

use serde_json::{json, Value};

use super::net::Dumbbell;
use super::spec::{Case, TimeoutSpec, TimeoutStyle};
use super::tap::{analyse_all, counts, stop_all, Tap};
use super::tool::{json_of, strip_findings, Ctx, Schedule};
use super::{pause, Planted, Truth, TruthError, Unit, ViewKind};
use crate::scenario::procs::Proc;

const PORT: u16 = 7500;

/// Runs a timeout case.
pub(crate) fn run(
    case: &Case,
    s: &TimeoutSpec,
    ctx: &Ctx,
) -> Result<(Truth, Vec<(String, Value)>), TruthError> {
    let net = Dumbbell::new("to-cli", "to-srv", 40)?;
    // Five seconds of queue at the shaped rate: the server's data waits rather than drops, so
    // the slowness is the rate's, not loss's.
    net.shape_toward_a(s.rate_bps, Duration::from_secs(5))?;
    let taps = vec![
        Tap::start(
            ctx,
            &net.a,
            "client",
            &net.a_if,
            "client",
            "at the client, downstream of the queue holding the server's data",
        )?,
        Tap::start(
            ctx,
            &net.b,
            "server",
            &net.b_if,
            "server",
            "at the server, upstream of the queue holding its data",
        )?,
    ];
    let server = format!("{}:{PORT}", net.b_addr);
    let timeout_ns = s.timeout_s * 1_000_000_000;
    // What fits in the timeout at the shaped rate.
    let fits = s.rate_bps / 8 * s.timeout_s;
    let (programs, facts, load_view) = match s.style {
        TimeoutStyle::Transfer | TimeoutStyle::Rst => {
            let bytes = if case.twin { fits / 4 } else { fits * 3 };
            transfer(ctx, &net, &server, s, bytes)?
        }
        TimeoutStyle::Fin | TimeoutStyle::ServerSlow => {
            let (reply, think_ms) = match (s.style, case.twin) {
                (TimeoutStyle::Fin, false) => (fits * 3, 0),
                (TimeoutStyle::Fin, true) => (fits / 4, 0),
                (_, false) => (100, s.timeout_s * 1000 + 2000),
                (_, true) => (100, 300),
            };
            frames(ctx, &net, &server, s.timeout_s, reply, think_ms)?
        }
        TimeoutStyle::ServerSlowAbort => {
            let think_ms = if case.twin {
                300
            } else {
                s.timeout_s * 1000 + 2000
            };
            aborted(ctx, &net, &server, s.timeout_s, think_ms)?
        }
    };
    pause(Duration::from_millis(500))?;
    let tapped = stop_all(taps)?;
    let mut planted = Vec::new();
    if facts["timed_out"].as_bool().unwrap_or(false) {
        planted.push(Planted {
            detector: "application-timeout".into(),
            unit: Unit::Flow {
                client_ip: net.a_addr.clone(),
                server: server.clone(),
            },
            count: 1,
            note: format!(
                "the client gave up {} s after its request ({:?} style)",
                s.timeout_s, s.style
            ),
        });
    }
    let mut views = analyse_all(ctx, &tapped, &[], None)?;
    if let Some((name, doc)) = load_view {
        let kind = if name == "tcp_info" {
            ViewKind::TcpInfo
        } else {
            ViewKind::Record
        };
        views.program(&name, kind, "the client's own record", None, doc);
    }
    let mut facts = facts;
    facts["timeout_ns"] = json!(timeout_ns);
    let programs =
        json!({"programs": programs, "queues": net.queue_counts(), "captures": counts(&tapped)});
    Ok(Truth::of(case, planted, views, programs, facts))
}

type Made = (Value, Value, Option<(String, Value)>);

/// `tailhunt serve tcp` answering `reply` bytes after thinking `think_ms`, in the server's
/// namespace.
fn slow_server(
    ctx: &Ctx,
    net: &Dumbbell,
    server: &str,
    reply: u64,
    think_ms: u64,
) -> Result<Proc, TruthError> {
    let (reply_s, think) = (reply.to_string(), format!("{think_ms}ms"));
    ctx.server(
        &net.b,
        "serve tcp",
        &[
            "--json",
            "serve",
            "tcp",
            "--listen",
            server,
            "--reply-bytes",
            &reply_s,
            "--think-time",
            &think,
            "--duration",
            "30s",
        ],
    )
}

/// Lets the server finish thinking and try its late answer while the captures run (it meets
/// a reset, or fails on a reset socket), then stops it; returns its document.
fn stop_after_thinking(mut srv: Proc, think_ms: u64, timeout_s: u64) -> Result<Value, TruthError> {
    pause(Duration::from_millis(
        think_ms.saturating_sub(timeout_s * 1000) + 1500,
    ))?;
    srv.interrupt();
    json_of(&mut srv, "tailhunt serve", Duration::from_secs(10))
}

/// `tailhunt serve tcp` and one request from `tailhunt load`.
fn frames(
    ctx: &Ctx,
    net: &Dumbbell,
    server: &str,
    timeout_s: u64,
    reply: u64,
    think_ms: u64,
) -> Result<Made, TruthError> {
    let srv = slow_server(ctx, net, server, reply, think_ms)?;
    let url = format!("tcp://{server}");
    let s = Schedule {
        url: &url,
        rate: 1,
        duration_s: 1,
        conns: 1,
        timeout_s,
    };
    let load = ctx
        .start_schedule(&net.a, "load", &s)?
        .finish(Duration::from_secs(timeout_s + 30))?;
    let served = stop_after_thinking(srv, think_ms, timeout_s)?;
    let step = &load.doc["steps"][0];
    let timed_out = step["timeouts"].as_u64().unwrap_or(0) > 0;
    // A server that thinks past the client's timeout has sent nothing when the client closes.
    let before_close = (think_ms > timeout_s * 1000 + 500).then_some(0);
    let facts = json!({
        "timed_out": timed_out,
        "server_think_ns": think_ms * 1_000_000,
        "reply_bytes": reply,
        "response_bytes_before_close": before_close,
        "load_cpu_share": {"load": load.cpu_share},
    });
    let programs = json!({"server": served, "client_run": load.doc["run_id"], "client_step": step});
    Ok((programs, facts, Some(("load".into(), load.doc))))
}

/// `tailhunt transfer server` and a `transfer client --timeout`.
fn transfer(
    ctx: &Ctx,
    net: &Dumbbell,
    server: &str,
    s: &TimeoutSpec,
    bytes: u64,
) -> Result<Made, TruthError> {
    let mut srv = ctx.server(
        &net.b,
        "transfer server",
        &[
            "--json", "transfer", "server", "--listen", server, "--count", "1",
        ],
    )?;
    let (bytes_s, timeout) = (bytes.to_string(), format!("{}s", s.timeout_s));
    let limit = Duration::from_secs(s.timeout_s + 30);
    if s.style == TimeoutStyle::Rst {
        let record = abandon(ctx, net, server, &["--bytes", &bytes_s], s.timeout_s, limit)?;
        let served = json_of(
            &mut srv,
            "tailhunt transfer server",
            Duration::from_secs(15),
        )?;
        let timed_out = record["bytes_read"].as_u64().unwrap_or(0) < bytes;
        let facts = json!({
            "timed_out": timed_out,
            "bytes_requested": bytes,
            "response_bytes_before_close": record["bytes_read"],
            "unread_bytes_at_close": record["unread_bytes_at_close"],
        });
        return Ok((json!({"server": served, "client": record}), facts, None));
    }
    let mut cli = ctx.spawn(
        &net.a,
        "transfer client",
        &[
            "--json",
            "transfer",
            "client",
            server,
            "--bytes",
            &bytes_s,
            "--timeout",
            &timeout,
        ],
    )?;
    let client = json_of(&mut cli, "tailhunt transfer client", limit)?;
    let served = json_of(
        &mut srv,
        "tailhunt transfer server",
        Duration::from_secs(15),
    )?;
    let timed_out = client["outcome"] == "timeout";
    let facts = json!({
        "timed_out": timed_out,
        "bytes_requested": bytes,
        "response_bytes_before_close": client["bytes_transferred"],
    });
    let programs = json!({"server": served, "client": strip_findings(&client)});
    Ok((programs, facts, Some(("tcp_info".into(), client))))
}

/// `tailhunt serve tcp` thinking `think_ms` and a client that sends it one request and aborts
/// at its timeout (SO_LINGER 0).
fn aborted(
    ctx: &Ctx,
    net: &Dumbbell,
    server: &str,
    timeout_s: u64,
    think_ms: u64,
) -> Result<Made, TruthError> {
    let srv = slow_server(ctx, net, server, 100, think_ms)?;
    let limit = Duration::from_secs(timeout_s + 30);
    let record = abandon(ctx, net, server, &["--frame", "--abort"], timeout_s, limit)?;
    let served = stop_after_thinking(srv, think_ms, timeout_s)?;
    let facts = json!({
        "timed_out": !record["response_complete"].as_bool().unwrap_or(false),
        "server_think_ns": think_ms * 1_000_000,
        "reply_bytes": 100,
        "response_bytes_before_close": record["bytes_read"],
    });
    Ok((json!({"server": served, "client": record}), facts, None))
}

/// The abandoning client (`tailhunt-truth abandon ARGS`, see [`super::abandon`]) inside the
/// client's namespace; returns its record.
fn abandon(
    ctx: &Ctx,
    net: &Dumbbell,
    server: &str,
    args: &[&str],
    timeout_s: u64,
    limit: Duration,
) -> Result<Value, TruthError> {
    let worker = ctx.worker()?;
    let out = ctx.file("abandon.json");
    let (timeout, out_s) = (
        format!("{}", timeout_s * 1000),
        out.to_string_lossy().into_owned(),
    );
    let mut argv = vec![worker.as_str(), "abandon", server];
    argv.extend_from_slice(args);
    argv.extend(["--timeout-ms", &timeout, "--out", &out_s]);
    let mut p = Proc::spawn(&net.a, "abandoning client", &argv)?;
    p.wait_success(limit)?;
    let text = std::fs::read_to_string(&out).map_err(|source| TruthError::Io {
        path: out.clone(),
        source,
    })?;
    super::tool::parse("tailhunt-truth abandon", &text, &p.stderr())
}
