//! The receive-window cases: `tailhunt transfer` downloads through the link emulator.
//!
//! ```text
//!  client 198.18.30.2 ──veth── 198.18.30.1 gw 198.18.31.1 ══emulator══ 198.18.31.2 server
//!          └ capture "receiver"                                 capture "sender" ┘ (TUN)
//! ```
//!
//! The emulator's queue (in front of its rate limit, each way) sits between the two captures:
//! upstream of the receiver's, downstream of the sender's. Planted, with SO_RCVBUF set:
//! `receive-window-limited` on the download's flow; with a timeout shorter than the download,
//! also `application-timeout` (the client closes with unread data: a RST). The twin lets the
//! kernel autotune. A third view is the client's own document: its TCP_INFO findings.

use std::time::Duration;

use serde_json::{json, Value};

use super::spec::{Case, WindowSpec};
use super::tap::{stop_all, Tap};
use super::tool::{json_of, Ctx};
use super::{pause, Planted, Truth, TruthError, Unit, View};
use crate::link::{EmulatedLink, LinkConfig};
use crate::netns::{veth, Netns};

const CLIENT: &str = "198.18.30.2";
const GW_LAN: &str = "198.18.30.1";
const GW_WAN: &str = "198.18.31.1/30";
const SERVER: &str = "198.18.31.2";
const PORT: &str = "7400";

/// Runs a window case.
pub(crate) fn run(
    case: &Case,
    s: &WindowSpec,
    ctx: &Ctx,
) -> Result<(Truth, Vec<(String, Value)>), TruthError> {
    let client = Netns::new("win-cli")?;
    let gw = Netns::new("win-gw")?;
    let server = Netns::new("win-srv")?;
    let (c_end, _) = veth(&client, &format!("{CLIENT}/24"), &gw, &format!("{GW_LAN}/24"))?;
    // Two bandwidth-delay products of queue: slow start fills the pipe without overflowing it.
    let bdp = s.rate_bps / 8 * s.rtt_ms / 1000;
    let cfg = LinkConfig {
        delay_ns: s.rtt_ms * 1_000_000 / 2,
        rate_bps: Some(s.rate_bps),
        queue_bytes: (2 * bdp).max(200_000),
        ..LinkConfig::default()
    };
    let link = EmulatedLink::start(&gw, GW_WAN, &server, &format!("{SERVER}/30"), cfg, cfg)
        .map_err(crate::scenario::ScenarioError::from)?;
    gw.run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    client.run(&["ip", "route", "add", "default", "via", GW_LAN])?;
    let (_, server_tun) = link.device_names();
    server.run(&["ip", "route", "add", "198.18.30.0/24", "dev", &server_tun])?;

    let taps = vec![
        Tap::start(ctx, &client, "client", &c_end.iface, "receiver",
            "at the receiver (client), downstream of the emulator's queue")?,
        Tap::start(ctx, &server, "server", &server_tun, "sender",
            "at the sender (server's TUN device), upstream of the emulator's queue")?,
    ];
    let listen = format!("{SERVER}:{PORT}");
    let mut srv = ctx.server(&server, "transfer server",
        &["--json", "transfer", "server", "--listen", &listen, "--count", "1"])?;
    let bytes = s.bytes.to_string();
    let mut args = vec!["--json", "transfer", "client", &listen, "--bytes", &bytes];
    let rcvbuf = s.rcvbuf.map(|r| r.to_string());
    if let Some(r) = &rcvbuf {
        args.extend(["--rcvbuf", r]);
    }
    let timeout = s.timeout_s.map(|t| format!("{t}s"));
    if let Some(t) = &timeout {
        args.extend(["--timeout", t]);
    }
    let mut cli = ctx.spawn(&client, "transfer client", &args)?;
    let limit = Duration::from_secs(60);
    let client_doc = json_of(&mut cli, "tailhunt transfer client", limit)?;
    let server_doc = json_of(&mut srv, "tailhunt transfer server", Duration::from_secs(15))?;
    pause(Duration::from_millis(300))?;
    let tapped = stop_all(taps)?;
    let stats = link.stats();
    drop(link);

    let flow = Unit::Flow {
        client_ip: CLIENT.into(),
        server: listen.clone(),
    };
    let mut planted = Vec::new();
    if let Some(r) = s.rcvbuf {
        planted.push(Planted {
            detector: "receive-window-limited".into(),
            unit: flow.clone(),
            count: 1,
            note: format!(
                "the client set SO_RCVBUF={r} before connecting, over a {} ms round trip",
                s.rtt_ms
            ),
        });
    }
    let timed_out = client_doc["outcome"] == "timeout";
    if timed_out {
        planted.push(Planted {
            detector: "application-timeout".into(),
            unit: flow,
            count: 1,
            note: "the client gave up at its timeout and closed with data unread".into(),
        });
    }
    let mut views = Vec::new();
    let mut outputs = Vec::new();
    for t in &tapped {
        let (v, o) = t.analyse(ctx, "", &[])?;
        views.push(v);
        outputs.push(o);
    }
    views.push(View {
        name: "tcp_info".into(),
        kind: super::ViewKind::TcpInfo,
        position: "the client's own TCP_INFO (tailhunt transfer client's findings)".into(),
        analysis: args.iter().map(|a| a.to_string()).collect(),
        target: None,
    });
    outputs.push(("tcp_info".into(), client_doc.clone()));
    let captures: Vec<Value> = tapped.iter().map(|t| t.capture.clone()).collect();
    let truth = Truth {
        case: case.name.clone(),
        seed: case.seed,
        twin: case.twin,
        spec: case.spec.clone(),
        planted,
        takers: Vec::new(),
        views,
        programs: json!({
            "client": record(&client_doc),
            "server": server_doc,
            "link": {"rtt_ms": s.rtt_ms, "rate_bps": s.rate_bps, "queue_bytes": cfg.queue_bytes, "stats": stats},
            "captures": captures,
        }),
        facts: json!({
            "window_bound_bps": window_bound(&client_doc),
            "throughput_bps": client_doc["throughput_bps"],
            "timed_out": timed_out,
        }),
    };
    Ok((truth, outputs))
}

/// The transfer's own record, without its findings (those are tailhunt's analysis).
fn record(doc: &Value) -> Value {
    let mut r = doc.clone();
    if let Some(o) = r.as_object_mut() {
        o.remove("findings");
    }
    r
}

/// What the client's kernel said its window and round trip were: mean advertised window over
/// the smallest RTT (bits/s).
fn window_bound(doc: &Value) -> Option<f64> {
    let wnd = doc["tcp"]["rcv_wnd_mean_bytes"].as_f64()?;
    let rtt = doc["tcp"]["min_rtt_ns"].as_f64().filter(|r| *r > 0.0)?;
    Some(wnd * 8.0 / (rtt / 1e9))
}
