//! The receive-window cases: `tailhunt transfer` downloads with a pinned or autotuned receive
//! buffer, over one of two paths.
//!
//! The long path (`shared: false`), a round trip of propagation delay:
//!
//! ```text
//!  client 198.18.30.2 ──veth── 198.18.30.1 gw 198.18.31.1 ══emulator══ 198.18.31.2 server
//!          └ capture "receiver"                                 capture "sender" ┘ (TUN)
//! ```
//!
//! The shared queue (`shared: true`), a round trip made of queueing delay alone: a tbf
//! bottleneck with a 300 ms queue toward the client, kept full by a competing download (from
//! port 7401, joining 100 ms after the case's own download began, the server's congestion
//! control set to the loss-based Reno, its send buffer sized to fill the queue without
//! overflowing it): the handshake crossed an empty queue, and the round trip the sender lives
//! with later is queueing delay the capture's legs never saw.
//!
//! ```text
//!  client 198.18.33.2 ── sw (tbf toward the client) ── 198.18.34.2 server :7400, :7401
//!     └ capture "receiver": downstream of the queue      capture "sender": upstream ┘
//! ```
//!
//! Planted, with SO_RCVBUF set: `receive-window-limited` on the download's flow (not on the
//! competitor); with a timeout shorter than the download, also `application-timeout`. The twin
//! lets the kernel autotune. A third view is the client's own document: its TCP_INFO findings.

use std::time::Duration;

use serde_json::{json, Value};

use super::net::Dumbbell;
use super::spec::{Case, WindowSpec};
use super::tap::{analyse_all, counts, stop_all, Tap};
use super::tool::{json_of, strip_findings, Ctx};
use super::{pause, Planted, Truth, TruthError, Unit, ViewKind};
use tailhunt_netlab::link::{EmulatedLink, LinkConfig};
use tailhunt_netlab::netns::{veth, Netns};

const PORT: &str = "7400";
const COMPETITOR_PORT: &str = "7401";

/// The case's network (also the lab's `rcvbuf` and `nagle` scenarios').
pub(crate) enum Path {
    /// The link is declared first so it stops before the namespaces go.
    Emulated {
        link: EmulatedLink,
        client: Netns,
        _gw: Netns,
        server: Netns,
        client_if: String,
    },
    Shared(Dumbbell),
}

impl Path {
    /// Client, gateway and server, the gateway reaching the server over the link emulator
    /// with a round trip of `rtt_ms` at `rate_bps`.
    pub(crate) fn emulated(rtt_ms: u64, rate_bps: u64) -> Result<Path, TruthError> {
        let (client_ip, gw_lan) = ("198.18.30.2", "198.18.30.1");
        let client = Netns::new("win-cli")?;
        let gw = Netns::new("win-gw")?;
        let server = Netns::new("win-srv")?;
        let (c_end, _) = veth(
            &client,
            &format!("{client_ip}/24"),
            &gw,
            &format!("{gw_lan}/24"),
        )?;
        // Two bandwidth-delay products of queue: slow start fills the pipe without overflowing.
        let bdp = rate_bps / 8 * rtt_ms / 1000;
        let cfg = LinkConfig {
            delay_ns: rtt_ms * 1_000_000 / 2,
            rate_bps: Some(rate_bps),
            queue_bytes: (2 * bdp).max(200_000),
            ..LinkConfig::default()
        };
        let link = EmulatedLink::start(&gw, "198.18.31.1/30", &server, "198.18.31.2/30", cfg, cfg)
            .map_err(crate::scenario::ScenarioError::from)?;
        gw.run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        client.run(&["ip", "route", "add", "default", "via", gw_lan])?;
        let (_, server_tun) = link.device_names();
        server.run(&["ip", "route", "add", "198.18.30.0/24", "dev", &server_tun])?;
        Ok(Path::Emulated {
            link,
            client,
            _gw: gw,
            server,
            client_if: c_end.iface,
        })
    }

    fn shared(s: &WindowSpec) -> Result<Path, TruthError> {
        let net = Dumbbell::new("win-cli", "win-srv", 33)?;
        net.shape_toward_a(s.rate_bps, Duration::from_millis(300))?;
        // BBR (this host's default) keeps the queue short; a loss-based sender fills it, as
        // most bulk traffic on a shared link does. Reno is the loss-based one a namespace may
        // choose here (tcp_allowed_congestion_control).
        net.b
            .run(&["sysctl", "-qw", "net.ipv4.tcp_congestion_control=reno"])?;
        Ok(Path::Shared(net))
    }

    pub(crate) fn client(&self) -> &Netns {
        match self {
            Path::Emulated { client, .. } => client,
            Path::Shared(n) => &n.a,
        }
    }

    pub(crate) fn server(&self) -> &Netns {
        match self {
            Path::Emulated { server, .. } => server,
            Path::Shared(n) => &n.b,
        }
    }

    pub(crate) fn ifaces(&self) -> (String, String) {
        match self {
            Path::Emulated {
                link, client_if, ..
            } => (client_if.clone(), link.device_names().1),
            Path::Shared(n) => (n.a_if.clone(), n.b_if.clone()),
        }
    }

    pub(crate) fn addrs(&self) -> (String, String) {
        match self {
            Path::Emulated { .. } => ("198.18.30.2".into(), "198.18.31.2".into()),
            Path::Shared(n) => (n.a_addr.clone(), n.b_addr.clone()),
        }
    }

    fn record(&self, s: &WindowSpec) -> Value {
        match self {
            Path::Emulated { link, .. } => json!({
                "emulator": {"rtt_ms": s.rtt_ms, "rate_bps": s.rate_bps, "stats": link.stats()},
            }),
            Path::Shared(n) => json!({
                "tbf": {"rate_bps": s.rate_bps, "queue_ms": 300, "counts": n.queue_counts()},
            }),
        }
    }
}

/// What the downloads recorded.
struct Downloads {
    client: Value,
    server: Value,
    competitor: Value,
}

/// Runs a window case.
pub(crate) fn run(
    case: &Case,
    s: &WindowSpec,
    ctx: &Ctx,
) -> Result<(Truth, Vec<(String, Value)>), TruthError> {
    let path = if s.shared {
        Path::shared(s)?
    } else {
        Path::emulated(s.rtt_ms, s.rate_bps)?
    };
    let (client_if, server_if) = path.ifaces();
    let (client_ip, server_ip) = path.addrs();
    let taps = vec![
        Tap::start(
            ctx,
            path.client(),
            "client",
            &client_if,
            "receiver",
            "at the receiver (client), downstream of the bottleneck's queue",
        )?,
        Tap::start(
            ctx,
            path.server(),
            "server",
            &server_if,
            "sender",
            "at the sender (server), upstream of the bottleneck's queue",
        )?,
    ];
    let listen = format!("{server_ip}:{PORT}");
    let d = downloads(ctx, &path, s, &server_ip, &listen)?;
    pause(Duration::from_millis(300))?;
    let tapped = stop_all(taps)?;

    let flow = Unit::Flow {
        client_ip,
        server: listen,
    };
    let mut planted = Vec::new();
    if let Some(r) = s.rcvbuf {
        planted.push(Planted {
            detector: "receive-window-limited".into(),
            unit: flow.clone(),
            count: 1,
            note: format!("the client set SO_RCVBUF={r} before connecting"),
        });
    }
    let timed_out = d.client["outcome"] == "timeout";
    if timed_out {
        planted.push(Planted {
            detector: "application-timeout".into(),
            unit: flow,
            count: 1,
            note: "the client gave up at its timeout".into(),
        });
    }
    let mut views = analyse_all(ctx, &tapped, &[], None)?;
    let position = "the client's own TCP_INFO (tailhunt transfer client's findings)";
    views.program(
        "tcp_info",
        ViewKind::TcpInfo,
        position,
        None,
        d.client.clone(),
    );
    let programs = json!({
        "client": strip_findings(&d.client),
        "server": d.server,
        "competitor": d.competitor,
        "path": path.record(s),
        "captures": counts(&tapped),
    });
    let facts = json!({
        "window_bound_bps": (!s.shared).then(|| window_bound(&d.client, s.rtt_ms)).flatten(),
        "throughput_bps": d.client["throughput_bps"],
        "timed_out": timed_out,
        "download_retransmissions": d.server["connections"][0]["tcp"]["total_retrans"],
    });
    Ok(Truth::of(case, planted, views, programs, facts))
}

/// The case's download (and on the shared queue the competing one), to the end.
fn downloads(
    ctx: &Ctx,
    path: &Path,
    s: &WindowSpec,
    server_ip: &str,
    listen: &str,
) -> Result<Downloads, TruthError> {
    let mut srv = ctx.server(
        path.server(),
        "transfer server",
        &[
            "--json", "transfer", "server", "--listen", listen, "--count", "1",
        ],
    )?;
    let competing_server = match s.shared {
        true => Some(competitor_server(ctx, path, server_ip, s)?),
        false => None,
    };
    let bytes = s.bytes.to_string();
    let mut args = vec!["--json", "transfer", "client", listen, "--bytes", &bytes];
    let rcvbuf = s.rcvbuf.map(|r| r.to_string());
    if let Some(r) = &rcvbuf {
        args.extend(["--rcvbuf", r]);
    }
    let timeout = s.timeout_s.map(|t| format!("{t}s"));
    if let Some(t) = &timeout {
        args.extend(["--timeout", t]);
    }
    let mut cli = ctx.spawn(path.client(), "transfer client", &args)?;
    let competitor = match competing_server {
        Some(srv) => Some((competitor_client(ctx, path, server_ip, s)?, srv)),
        None => None,
    };
    let limit = Duration::from_secs(60);
    let client = json_of(&mut cli, "tailhunt transfer client", limit)?;
    let server = json_of(
        &mut srv,
        "tailhunt transfer server",
        Duration::from_secs(15),
    )?;
    let competitor = match competitor {
        Some((mut c, mut cs)) => {
            let d = json_of(&mut c, "competing transfer client", limit)?;
            json_of(&mut cs, "competing transfer server", limit)?;
            strip_findings(&d)
        }
        None => Value::Null,
    };
    Ok(Downloads {
        client,
        server,
        competitor,
    })
}

/// The competing download's send buffer: the kernel doubles it, and the doubled buffer holds at
/// most 80% of the queue's 300 ms at the bottleneck's rate, so the competitor keeps the queue
/// full (a 150-240 ms round trip, by how much of the buffer its segments' overhead takes) without
/// overflowing it. A competitor that overflowed it (autotuned Reno's sawtooth) dropped the
/// case's own segments too, now and then: its Reno sender halved its congestion window and,
/// gaining one segment per 250 ms round, stayed congestion-limited for the rest of the download
/// (measured: its own rwnd-limited share fell from 0.89 to 0.43), a second cause the case does
/// not claim.
fn competitor_sndbuf(s: &WindowSpec) -> u64 {
    s.rate_bps / 8 * 3 / 10 * 4 / 10
}

/// The competing download's server (shared-queue path), its send buffer pinned (see
/// [`competitor_sndbuf`]).
fn competitor_server(
    ctx: &Ctx,
    path: &Path,
    server_ip: &str,
    s: &WindowSpec,
) -> Result<crate::scenario::procs::Proc, TruthError> {
    let listen = format!("{server_ip}:{COMPETITOR_PORT}");
    let sndbuf = competitor_sndbuf(s).to_string();
    ctx.server(
        path.server(),
        "competing transfer server",
        &[
            "--json", "transfer", "server", "--listen", &listen, "--count", "1", "--sndbuf",
            &sndbuf,
        ],
    )
}

/// The competing download (shared-queue path, the client autotuned): it joins 100 ms after the
/// case's own download began, so that download's handshake crossed an empty queue, and lasts
/// eight seconds at the bottleneck's rate.
fn competitor_client(
    ctx: &Ctx,
    path: &Path,
    server_ip: &str,
    s: &WindowSpec,
) -> Result<crate::scenario::procs::Proc, TruthError> {
    pause(Duration::from_millis(100))?;
    let listen = format!("{server_ip}:{COMPETITOR_PORT}");
    let bytes = (s.rate_bps / 8 * 8).to_string();
    ctx.spawn(
        path.client(),
        "competing transfer client",
        &["--json", "transfer", "client", &listen, "--bytes", &bytes],
    )
}

/// The window the client's kernel advertised (its mean, from its own TCP_INFO) over the round
/// trip the emulator was set to, bits/s: what a window-limited download achieves.
fn window_bound(doc: &Value, rtt_ms: u64) -> Option<f64> {
    let wnd = doc["tcp"]["rcv_wnd_mean_bytes"].as_f64()?;
    Some(wnd * 8.0 / (rtt_ms.max(1) as f64 / 1e3))
}
