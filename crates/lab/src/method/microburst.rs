//! `microburst`: an api client's small requests share a shaped link with a cache's fetches
//! from several dbs, whose replies arrive at once.
//!
//! ```text
//!  cache 198.18.50.2 ── sw (tbf 100 Mbit/s both ways) ── 198.18.51.2 far (dbs .11-.13 :7100) ── api
//!     └ capture (tcpdump), then tailhunt pcap --requests API_RUN --link-rate 100mbit
//!  fix:  cache 198.18.53.1 ──── second interface ──── 198.18.53.2 far   (routes to the dbs)
//! ```
//!
//! The topology and traffic are the ground-truth burst case's (`crate::truth::burst`): `tailhunt
//! serve tcp` as the api server and the dbs (replies of 10 ms at the link rate), `tailhunt load`
//! as the cache's fetchers (3 a second per db) and the api client (500 small requests a second,
//! TCP_NODELAY), whose requests wait in the far-to-cache queue behind the dbs' replies.
//! Expected: `microburst` naming the db flows, from the capture joined to the api client's own
//! latencies. Fix: the db traffic over a second interface; the api p99 must fall below 1 ms or
//! below twice its median.

use std::time::Duration;

use serde_json::Value;

use super::judge::{self, Evidence};
use super::{Figure, Options, ScenarioResult};
use crate::truth::burst::{servers, traffic, Net};
use crate::truth::score::MEDIUM;
use crate::truth::spec::BurstSpec;
use crate::truth::tap::Tap;
use crate::truth::tool::Ctx;
use crate::truth::{pause, TruthError};
use tailhunt_netlab::netns::veth;

const RATE_BPS: u64 = 100_000_000;
/// The dbs (at 198.18.51.11 and up, as the burst case's network places them).
const SOURCES: u32 = 3;

/// How a round is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Round {
    /// The dbs' replies (10 ms of link time) share the api's link.
    Planted,
    /// The dbs on a second interface.
    Fixed,
    /// Nothing planted: the dbs answer 100 bytes over the shared link.
    Healthy,
}

/// The api client's own latency, ms.
pub(crate) struct Api {
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
}

/// Runs the scenario.
pub(crate) fn run(
    ctx: &Ctx,
    opts: &Options,
    say: &dyn Fn(&str),
) -> Result<ScenarioResult, TruthError> {
    let mut ev = Evidence::default();
    say("api requests and db replies over one shaped link");
    let before = measure(ctx, opts, Round::Planted, &mut ev)?;
    let after = match opts.fix {
        true => {
            say("fix: the db traffic over a second interface, measure again");
            Some(measure(ctx, opts, Round::Fixed, &mut ev)?)
        }
        false => None,
    };
    let findings = ev.findings(ctx)?;
    let figure = Figure {
        name: "api p99".into(),
        unit: "ms".into(),
        before: Some(before.p99_ms),
        after: after.as_ref().map(|a| a.p99_ms),
        goal: "below 1 ms or below 2x its median".into(),
    };
    let check = match &after {
        None => Ok(()),
        Some(a) if quiet(a) => Ok(()),
        Some(a) => Err(format!(
            "with the dbs on their own interface the api p99 is {:.2} ms (p50 {:.2} ms)",
            a.p99_ms, a.p50_ms
        )),
    };
    // The api alone on its link, yet slow at the median, or a tail without a burst left on
    // the link: the host, not the link.
    let left = ev.findings_after(ctx)?;
    let burst_left = left
        .iter()
        .any(|f| f.detector == "microburst" && f.confidence >= MEDIUM);
    let noise = after.as_ref().and_then(|a| {
        if a.p50_ms > 2.0 {
            Some(format!(
                "with the dbs moved away the api p50 was still {:.2} ms",
                a.p50_ms
            ))
        } else if check.is_err() && !burst_left {
            Some(format!(
                "with the dbs moved away no burst was left on the link, yet the api p99 was {:.2} ms (p50 {:.2} ms)",
                a.p99_ms, a.p50_ms
            ))
        } else {
            None
        }
    });
    let notes = vec![format!(
        "before: api p50 {:.2} ms, p99 {:.2} ms",
        before.p50_ms, before.p99_ms
    )];
    let mut r = judge::judge(
        "microburst",
        super::planted_of("microburst"),
        findings,
        Some((figure, check)),
        noise,
        ev,
        notes,
    );
    // The finding must name the flows behind the bursts: every db's.
    let dbs: Vec<String> = (0..SOURCES)
        .map(|i| format!("198.18.51.{}:7100", 11 + i))
        .collect();
    judge::require_named(&mut r, "microburst", &dbs);
    Ok(r)
}

/// One round: the network, the servers, the capture at the cache, the traffic, and `tailhunt
/// pcap` with the api client's run.
pub(crate) fn measure(
    ctx: &Ctx,
    opts: &Options,
    round: Round,
    ev: &mut Evidence,
) -> Result<Api, TruthError> {
    let spec = BurstSpec {
        rate_bps: RATE_BPS,
        sources: SOURCES,
        reverse: 0,
        sustained: false,
    };
    let n = Net::new(&spec)?;
    if round == Round::Fixed {
        second_interface(&n)?;
    }
    let (phase, reply) = match round {
        Round::Planted => ("before", RATE_BPS / 8 / 100),
        Round::Fixed => ("after", RATE_BPS / 8 / 100),
        Round::Healthy => ("baseline", 100),
    };
    let procs = servers(ctx, &n, &spec, reply)?;
    let tap = Tap::start(
        ctx,
        &n.net.a,
        "cache",
        &n.net.a_if,
        &format!("cache-{phase}"),
        "at the cache, on its interface toward the switch",
    )?;
    let t = traffic(ctx, &n, &spec, procs)?;
    pause(Duration::from_millis(300))?;
    let tapped = tap.stop()?;
    ev.add(&t.api.doc, "load", phase);
    let run = t.api.doc["run_id"].as_str().unwrap_or("").to_string();
    let args = [
        "--link-rate".to_string(),
        RATE_BPS.to_string(),
        "--requests".to_string(),
        run,
    ];
    let (_, (_, pcap)) = tapped.analyse(ctx, "", &args)?;
    ev.add(&pcap, "pcap", phase);
    if !opts.keep {
        let _ = std::fs::remove_file(&tapped.file);
    }
    api(&t.api.doc["steps"][0]).ok_or_else(|| TruthError::Output {
        what: "tailhunt load (api)".into(),
        detail: "no latency percentiles in its step".into(),
        stderr: String::new(),
    })
}

/// The fix: a direct veth between the cache and the far host, and the cache's routes to the
/// dbs over it (their replies come back to the address the cache sent from, on that link).
fn second_interface(n: &Net) -> Result<(), TruthError> {
    veth(&n.net.a, "198.18.53.1/24", &n.net.b, "198.18.53.2/24")?;
    for d in &n.dbs {
        n.net.a.run(&[
            "ip",
            "route",
            "add",
            &format!("{d}/32"),
            "via",
            "198.18.53.2",
        ])?;
    }
    Ok(())
}

/// The goal: the api p99 below 1 ms or below twice its median.
pub(crate) fn quiet(a: &Api) -> bool {
    a.p99_ms < 1.0 || a.p99_ms < 2.0 * a.p50_ms
}

fn api(step: &Value) -> Option<Api> {
    Some(Api {
        p50_ms: step["latency_ns"]["p50"].as_f64()? / 1e6,
        p99_ms: step["latency_ns"]["p99"].as_f64()? / 1e6,
    })
}
