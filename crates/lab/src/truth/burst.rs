//! The burst cases: bulk sources and small requests share a shaped link, in both directions.
//!
//! ```text
//!  cache 198.18.50.2 ── sw ── 198.18.51.2 far (dbs 198.18.51.11-14) ── 198.18.52.2 api
//!   :7000 api server     tbf both ways       :7100 db servers
//!   :7001 bulk server    (200 ms queues)
//! ```
//!
//! `tailhunt serve tcp` plays the api server, the dbs (replies of 10 ms at the link rate) and
//! the cache's own bulk server; `tailhunt load` plays the fetchers (the cache asking each db 3
//! times a second; far clients asking the cache's bulk server, the other direction) and the
//! api client (500 small requests a second, TCP_NODELAY), whose requests wait in the far→cache
//! queue behind the dbs' replies and whose replies wait in the cache→far queue behind the bulk
//! server's. Sustained: one `tailhunt transfer` fills the far→cache direction for 60% of the run,
//! its sender on Reno (loss-based, it fills the queue; BBR would keep it short).
//!
//! Views: `cache` (its interface: each direction's queue is upstream for what arrives and
//! downstream for what leaves), `far` (the far host's interface toward the switch), and both
//! again with `--requests` naming the api client's own run. Planted: `microburst` naming every
//! source's flow, in each direction whose tbf held back at least 1% of the packets it sent (its
//! `overlimits`; at 10 Gbit/s this machine cannot fill the link, and then nothing was planted
//! there); for the sustained case `link-saturated` naming the transfer (a link full for
//! seconds is not a microburst: a one-second graph shows it). The twin's sources answer 100
//! bytes.

use std::time::Duration;

use serde_json::{json, Value};

use super::net::Dumbbell;
use super::spec::{BurstSpec, Case};
use super::tap::{analyse_all, counts, stop_all, Tap};
use super::tool::{json_of, Ctx, LoadRun, RunningLoad, Schedule};
use super::{pause, Planted, Truth, TruthError, Unit, ViewKind};
use crate::scenario::procs::Proc;
use tailhunt_netlab::netns::{veth, Netns};

pub(crate) const API: &str = "198.18.52.2";
const API_GW: &str = "198.18.52.1";
/// Seconds the api client (and the sources) run.
pub(crate) const RUN_S: u64 = 4;

/// The hosts: the cache and far sides of the switch, the api host behind the far side, and
/// the dbs' addresses on the far host.
pub(crate) struct Net {
    pub(crate) net: Dumbbell,
    pub(crate) api: Netns,
    pub(crate) dbs: Vec<String>,
}

impl Net {
    pub(crate) fn new(s: &BurstSpec) -> Result<Net, TruthError> {
        let net = Dumbbell::new("mb-cache", "mb-far", 50)?;
        let api = Netns::new("mb-api")?;
        veth(&api, &format!("{API}/24"), &net.b, &format!("{API_GW}/24"))?;
        net.b.run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        api.run(&["ip", "route", "add", "default", "via", API_GW])?;
        net.sw
            .run(&["ip", "route", "add", "198.18.52.0/24", "via", &net.b_addr])?;
        let dbs: Vec<String> = (0..s.sources)
            .map(|i| format!("198.18.51.{}", 11 + i))
            .collect();
        for d in &dbs {
            net.b
                .run(&["ip", "addr", "add", &format!("{d}/24"), "dev", &net.b_if])?;
        }
        let queue = Duration::from_millis(200);
        if s.sustained {
            // The transfer's sender fills the queue as loss-based senders do (Reno: the only
            // other one a namespace may choose here, `tcp_allowed_congestion_control`); with
            // BBR, this host's default, the queue stays under a millisecond at 1 Gbit/s and
            // nothing waits in it, which is not the saturation the case claims.
            net.b
                .run(&["sysctl", "-qw", "net.ipv4.tcp_congestion_control=reno"])?;
        }
        net.shape_toward_a(s.rate_bps, queue)?;
        net.shape_toward_b(s.rate_bps, queue)?;
        Ok(Net { net, api, dbs })
    }
}

/// What the traffic programs recorded.
pub(crate) struct Traffic {
    pub(crate) api: LoadRun,
    pub(crate) fetched: Vec<Value>,
    pub(crate) transfer: Value,
    pub(crate) served: Vec<Value>,
}

/// Runs a burst case.
pub(crate) fn run(
    case: &Case,
    s: &BurstSpec,
    ctx: &Ctx,
) -> Result<(Truth, Vec<(String, Value)>), TruthError> {
    let n = Net::new(s)?;
    // 10 ms at the link rate per reply; the twin's sources answer small.
    let reply = if case.twin { 100 } else { s.rate_bps / 8 / 100 };
    let servers = servers(ctx, &n, s, reply)?;
    let taps = vec![
        Tap::start(ctx, &n.net.a, "cache", &n.net.a_if, "cache",
            "at the cache: arrivals after the far-to-cache queue, departures before the cache-to-far queue")?,
        Tap::start(ctx, &n.net.b, "far", &n.net.b_if, "far",
            "at the far host: departures before the far-to-cache queue, arrivals after the cache-to-far queue")?,
    ];
    let t = traffic(ctx, &n, s, servers)?;
    pause(Duration::from_millis(300))?;
    let tapped = stop_all(taps)?;
    let queues = n.net.queue_counts();
    let planted = planted(s, &n.net.a_addr, &n.dbs, &n.net.b_addr, case.twin);
    let base = ["--link-rate".to_string(), s.rate_bps.to_string()];
    let run_id = t.api.doc["run_id"].as_str().unwrap_or("").to_string();
    let requests = ["--requests".to_string(), run_id.clone()];
    let mut views = analyse_all(ctx, &tapped, &base, Some(("+requests", &requests)))?;
    let moved = if s.sustained {
        Some(median_moved(ctx, &run_id, &t.transfer)?)
    } else {
        None
    };
    let step = t.api.doc["steps"][0].clone();
    views.program(
        "api",
        ViewKind::Record,
        "the api client's own record",
        None,
        t.api.doc,
    );
    let programs = json!({
        "api_step": step, "fetchers": t.fetched, "transfer": t.transfer, "servers": t.served,
        "queues": queues, "captures": counts(&tapped), "reply_bytes": reply,
    });
    let facts = json!({
        "api_p50_ns": step["latency_ns"]["p50"], "api_p99_ns": step["latency_ns"]["p99"],
        "load_cpu_share": {"api": t.api.cpu_share},
        "api_median_during_transfer_ns": moved.as_ref().map(|m| m.during_ns),
        "api_median_outside_transfer_ns": moved.as_ref().map(|m| m.outside_ns),
    });
    let (mut truth, outputs) = Truth::of(case, planted, views, programs, facts);
    // A direction the machine could not fill planted nothing there.
    let toward_cache =
        |p: &Planted| matches!(&p.unit, Unit::Flow { client_ip, .. } if *client_ip == n.net.a_addr);
    let why = "the shaper in its direction held back fewer than 1% of the packets it sent: the link never filled";
    if !held(&queues, "toward_a") {
        truth.set_aside(toward_cache, why);
    }
    if !held(&queues, "toward_b") {
        truth.set_aside(|p| !toward_cache(p), why);
    }
    if let Some(m) = moved.filter(|m| !m.moved()) {
        let why = format!(
            "the api client's own median service time did not move while the transfer ran ({} during it, {} outside it, from its {} and {} requests; twice and 0.5 ms more is the claim): the queue stayed short",
            ms(m.during_ns),
            ms(m.outside_ns),
            m.during,
            m.outside
        );
        truth.set_aside(|p| p.detector == "link-saturated", &why);
    }
    Ok((truth, outputs))
}

/// The api client's own median service time while the sustained transfer ran and outside
/// it, from the two programs' records (the load run's samples, the transfer's time range;
/// one monotonic clock).
struct Moved {
    during_ns: i64,
    outside_ns: i64,
    during: usize,
    outside: usize,
}

impl Moved {
    /// The saturation the case claims moves the median itself: at least twice as slow
    /// during the transfer and half a millisecond more (below that the medians differ by
    /// less than this host's scheduling noise), with 20 requests on each side to tell.
    fn moved(&self) -> bool {
        self.during >= 20
            && self.outside >= 20
            && self.during_ns >= 2 * self.outside_ns
            && self.during_ns - self.outside_ns >= 500_000
    }
}

fn median_moved(ctx: &Ctx, api_run: &str, transfer: &Value) -> Result<Moved, TruthError> {
    let range = (
        transfer["range_ns"][0].as_i64().unwrap_or(i64::MAX),
        transfer["range_ns"][1].as_i64().unwrap_or(i64::MIN),
    );
    let (mut during, mut outside): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
    for (start, end) in ctx.samples(api_run)? {
        if start <= range.1 && end >= range.0 {
            during.push(end - start);
        } else {
            outside.push(end - start);
        }
    }
    let median = |v: &mut Vec<i64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    Ok(Moved {
        during_ns: median(&mut during),
        outside_ns: median(&mut outside),
        during: during.len(),
        outside: outside.len(),
    })
}

/// `1.234 ms` for a note.
fn ms(ns: i64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The servers: the api's and the bulk one on the cache, the dbs on the far host, and for a
/// sustained case a transfer server there.
pub(crate) fn servers(
    ctx: &Ctx,
    n: &Net,
    s: &BurstSpec,
    reply: u64,
) -> Result<(Vec<Proc>, Option<Proc>), TruthError> {
    let reply = reply.to_string();
    let cache = &n.net.a_addr;
    let serve = |ns, listen: &str, bytes: &str| {
        ctx.server(
            ns,
            &format!("serve {listen}"),
            &[
                "--json",
                "serve",
                "tcp",
                "--listen",
                listen,
                "--reply-bytes",
                bytes,
                "--duration",
                "60s",
            ],
        )
    };
    let mut out = vec![serve(&n.net.a, &format!("{cache}:7000"), "100")?];
    if s.reverse > 0 {
        out.push(serve(&n.net.a, &format!("{cache}:7001"), &reply)?);
    }
    for d in &n.dbs {
        out.push(serve(&n.net.b, &format!("{d}:7100"), &reply)?);
    }
    let mut bulk = None;
    if s.sustained {
        let listen = format!("{}:7400", n.net.b_addr);
        bulk = Some(ctx.server(
            &n.net.b,
            "transfer server",
            &[
                "--json", "transfer", "server", "--listen", &listen, "--count", "1",
            ],
        )?);
    }
    Ok((out, bulk))
}

/// The fetchers, the sustained transfer and the api client, all at once; then the servers'
/// own counts.
pub(crate) fn traffic(
    ctx: &Ctx,
    n: &Net,
    s: &BurstSpec,
    (servers, mut bulk): (Vec<Proc>, Option<Proc>),
) -> Result<Traffic, TruthError> {
    let cache = &n.net.a_addr;
    let fetch = |ns, url: String| -> Result<RunningLoad, TruthError> {
        let s = Schedule {
            url: &url,
            rate: 3,
            duration_s: RUN_S,
            conns: 1,
            timeout_s: 3,
        };
        ctx.start_schedule(ns, &format!("fetch {url}"), &s)
    };
    let mut loads = Vec::new();
    for d in &n.dbs {
        loads.push(("fetch-db", fetch(&n.net.a, format!("tcp://{d}:7100"))?));
    }
    for _ in 0..s.reverse {
        loads.push((
            "fetch-cache",
            fetch(&n.net.b, format!("tcp://{cache}:7001"))?,
        ));
    }
    let mut transfer = None;
    if s.sustained {
        let bytes = (s.rate_bps / 8 * RUN_S * 6 / 10).to_string();
        let server = format!("{}:7400", n.net.b_addr);
        transfer = Some(ctx.spawn(
            &n.net.a,
            "transfer client",
            &["--json", "transfer", "client", &server, "--bytes", &bytes],
        )?);
    }
    let api_url = format!("tcp://{cache}:7000");
    let api = Schedule {
        url: &api_url,
        rate: 500,
        duration_s: RUN_S,
        conns: 4,
        timeout_s: 3,
    };
    let api = ctx.start_schedule(&n.api, "api", &api)?;
    let limit = Duration::from_secs(RUN_S + 30);
    let api = api.finish(limit)?;
    let mut fetched = Vec::new();
    for (what, l) in loads {
        let r = l.finish(limit)?;
        fetched.push(json!({"what": what, "cpu_share": r.cpu_share, "doc": r.doc}));
    }
    let transfer = match (transfer.as_mut(), bulk.as_mut()) {
        (Some(t), Some(b)) => {
            json_of(b, "tailhunt transfer server", limit)?;
            json_of(t, "tailhunt transfer client", limit)?
        }
        _ => Value::Null,
    };
    let mut served = Vec::new();
    for mut p in servers {
        p.interrupt();
        served.push(json_of(&mut p, "tailhunt serve", Duration::from_secs(10))?);
    }
    Ok(Traffic {
        api,
        fetched,
        transfer,
        served,
    })
}

/// Every source the case started (none for the twin).
fn planted(s: &BurstSpec, cache: &str, dbs: &[String], far: &str, twin: bool) -> Vec<Planted> {
    if twin {
        return Vec::new();
    }
    let flow = |client: &str, server: String, count, note: String| Planted {
        detector: "microburst".into(),
        unit: Unit::Flow {
            client_ip: client.into(),
            server,
        },
        count,
        note,
    };
    let mut out: Vec<Planted> = dbs
        .iter()
        .map(|d| {
            flow(cache, format!("{d}:7100"), 1,
                "a db answering the cache 3 times a second with 10 ms of link time, toward the cache".into())
        })
        .collect();
    if s.reverse > 0 {
        out.push(flow(far, format!("{cache}:7001"), s.reverse,
            "far clients fetching 10 ms replies from the cache 3 times a second, toward the far side".into()));
    }
    if s.sustained {
        out.push(Planted {
            detector: "link-saturated".into(),
            ..flow(
                cache,
                format!("{far}:7400"),
                1,
                "a bulk transfer keeping the far-to-cache direction full for 60% of the run".into(),
            )
        });
    }
    out
}

/// Whether the switch's tbf toward `dir` held back at least one packet in a hundred it sent (its
/// `overlimits`): a few held packets are a blip, not a full link.
fn held(queues: &Value, dir: &str) -> bool {
    let q = &queues[dir];
    q["overlimits"].as_u64().unwrap_or(0) * 100 >= q["sent_packets"].as_u64().unwrap_or(u64::MAX)
}
