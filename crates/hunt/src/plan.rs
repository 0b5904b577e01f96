//! The plan of a hunt: how the budget is shared between the floor, the sweep's steps and the
//! diagnosis, and which evidence can be collected here (root, the route's interface, whether
//! the target is local).
//!
//! In: the [`HuntConfig`] and the facts of this host ([`Host`]). Out: a [`Plan`] the caller
//! shows before anything runs, and that the hunt follows.

use std::time::Duration;

use serde::Serialize;

use crate::{HuntConfig, HuntError, Source, MIN_BUDGET};

/// Connects the floor makes, and how far apart.
pub const FLOOR_CONNECTS: usize = 20;
/// Gap between two floor connects.
pub const FLOOR_GAP: Duration = Duration::from_millis(20);
/// The shortest step (warm-up included) worth running: below it a low rate has too few
/// requests for a p99.
pub const MIN_STEP: Duration = Duration::from_millis(800);
/// Requests a step measures at least: below this a p99 is one or two requests, and one stray
/// stall of a busy host at a low rate reads as latency rising as load falls (seen: a healthy
/// loopback server's 50 requests at 50/s gave p99 4.2 ms against 0.24 ms at 4k/s).
pub const MIN_REQUESTS: f64 = 200.0;

/// What this host allows.
#[derive(Debug, Clone)]
pub struct Host {
    /// Running as root (effective uid 0).
    pub root: bool,
    /// The interface of the route to the target, or why it is not known.
    pub interface: Result<String, String>,
    /// The route to the target is local (`lo`): the target runs on this host.
    pub local_route: bool,
    /// The local process listening on the target's port, when it was found.
    pub local: Option<crate::runq::Listener>,
}

/// One source in the plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedSource {
    /// Which.
    pub source: Source,
    /// Whether the hunt will try it.
    pub planned: bool,
    /// What it will measure, or why not.
    pub note: String,
}

/// How the hunt will spend its budget.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The whole budget, ns.
    pub budget_ns: u64,
    /// Highest rate allowed, requests/s.
    pub max_rate: f64,
    /// Candidate rates of the ramp, lowest first.
    pub rates: Vec<f64>,
    /// Measured time of a step, ns.
    pub step_ns: u64,
    /// Measured time of each rate's step, ns (in the order of `rates`): `step_ns`, or long
    /// enough for [`MIN_REQUESTS`] at a low rate.
    pub steps_ns: Vec<u64>,
    /// Warm-up of a step, ns (kept apart, not analysed).
    pub warmup_ns: u64,
    /// Connections the load generator uses.
    pub conns: usize,
    /// Sources, with what each measures or why it is left out.
    pub sources: Vec<PlannedSource>,
}

/// Connections of the sweep by default: one. What a connection sees depends on its own
/// request rate (a delayed ACK waits until the next request or the 40 ms timer; below about
/// 25 requests/s per connection Linux acknowledges at once and the stall is gone), so one
/// connection sweeps the widest range of per-connection rates. Measured behind a 4 ms round
/// trip with a split-write server: p50 24 ms at 50/s and 5.4 ms at 4k/s on one connection,
/// but 8.6 ms flat at 50/s over four.
pub const DEFAULT_CONNS: usize = 1;

impl Plan {
    /// Shares the budget: the floor (about half a second), a reserve for the diagnosis, and
    /// the rest over the ramp's steps and one randomised repeat of them.
    pub fn new(cfg: &HuntConfig, host: &Host, udp: bool) -> Result<Plan, HuntError> {
        if cfg.budget < MIN_BUDGET {
            return Err(HuntError::Flag(format!(
                "--budget {:?} is too short: give at least {}s (the floor, a few sweep steps and the diagnosis)",
                cfg.budget,
                MIN_BUDGET.as_secs()
            )));
        }
        if !(cfg.max_rate.is_finite() && cfg.max_rate > 0.0) {
            return Err(HuntError::Flag(format!(
                "--max-rate {}: give a rate above 0 requests/s, such as 20k",
                cfg.max_rate
            )));
        }
        if !(1..=1000).contains(&cfg.conns) {
            return Err(HuntError::Flag(format!(
                "--conns {}: give 1 to 1000 connections",
                cfg.conns
            )));
        }
        tailhunt_load::limits::check_sweep(&[cfg.max_rate], 1)
            .map_err(|e| HuntError::Flag(format!("--max-rate: {e}")))?;
        let rates = crate::ramp::candidate_rates(cfg.max_rate);
        let reserve = reserve(cfg.budget);
        // The floor's connects, and the moment the capture and the tracer get to start.
        let floor = FLOOR_GAP * FLOOR_CONNECTS as u32 + Duration::from_millis(800);
        let sweep = cfg.budget.saturating_sub(reserve + floor);
        // A step runs a little past its planned time (its requests in flight drain, the
        // store commits): plan for 90% so the ramp and its repeat both fit.
        let (step, measured) = share(sweep.mul_f64(0.9) / 2, &rates);
        let warmup = tailhunt_load::engine::default_warmup_within(step);
        Ok(Plan {
            budget_ns: cfg.budget.as_nanos() as u64,
            max_rate: cfg.max_rate,
            step_ns: (step - warmup).as_nanos() as u64,
            steps_ns: measured
                .iter()
                .map(|m| (*m).max(step - warmup).as_nanos() as u64)
                .collect(),
            rates,
            warmup_ns: warmup.as_nanos() as u64,
            conns: cfg.conns,
            sources: sources(host, udp),
        })
    }

    /// Whether `source` is planned.
    pub fn has(&self, source: Source) -> bool {
        self.sources.iter().any(|s| s.source == source && s.planned)
    }
}

/// Shares one round's time among the rates: a common step length, and at low rates the time
/// [`MIN_REQUESTS`] need; the common length shrinks (not below [`MIN_STEP`]) to pay for them.
/// Returns the common step length and each rate's minimum measured time.
fn share(round: Duration, rates: &[f64]) -> (Duration, Vec<Duration>) {
    let need: Vec<Duration> = rates
        .iter()
        .map(|r| Duration::from_secs_f64(MIN_REQUESTS / r.max(1e-3)))
        .collect();
    let n = rates.len().max(1) as u32;
    let mut step = round / n;
    for _ in 0..rates.len() {
        let long: Vec<Duration> = need.iter().copied().filter(|d| *d > step).collect();
        let rest = n - long.len() as u32;
        if rest == 0 {
            break;
        }
        let next = round.saturating_sub(long.iter().sum()) / rest;
        if next == step {
            break;
        }
        step = next;
    }
    (step.max(MIN_STEP), need)
}

/// Time kept for stopping the sources, storing their runs and the detectors.
pub fn reserve(budget: Duration) -> Duration {
    Duration::from_secs(2) + budget / 20
}

fn sources(host: &Host, udp: bool) -> Vec<PlannedSource> {
    let yes = |source, note: &str| PlannedSource {
        source,
        planned: true,
        note: note.to_string(),
    };
    let no = |source, note: String| PlannedSource {
        source,
        planned: false,
        note,
    };
    let mut out = Vec::new();
    out.push(if udp {
        no(
            Source::Floor,
            "the target is UDP: no TCP connect to time, and no echo service is assumed".into(),
        )
    } else {
        yes(Source::Floor, "TCP connect time to the target")
    });
    out.push(yes(
        Source::Sweep,
        "open-loop load at rising rates from 50/s, then the rates reached again in random order",
    ));
    out.push(match (&host.interface, host.root) {
        (_, false) => no(
            Source::Capture,
            "not root: capturing packets needs root (or CAP_NET_RAW)".into(),
        ),
        (Err(why), true) => no(Source::Capture, why.clone()),
        (Ok(iface), true) => yes(
            Source::Capture,
            &format!("packets to and from the target on {iface}"),
        ),
    });
    out.push(if udp {
        no(
            Source::Sockets,
            "the target is UDP: there are no TCP connections to sample".into(),
        )
    } else if host.root {
        yes(
            Source::Sockets,
            "TCP_INFO of every connection to the target's port, with the setsockopt audit",
        )
    } else {
        yes(
            Source::Sockets,
            "TCP_INFO of every connection to the target's port (not root: no setsockopt audit)",
        )
    });
    out.push(crate::runq::planned(host));
    out
}

/// Whether this process runs as root, from the effective uid in `/proc/self/status`.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// The interface of the route to `ip`, as `ip route get` names it.
pub fn route_interface(ip: std::net::IpAddr) -> Result<String, String> {
    let out = std::process::Command::new("ip")
        .args(["-o", "route", "get", &ip.to_string()])
        .output()
        .map_err(|e| format!("cannot run `ip route get` to find the interface: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "dev" {
            if let Some(dev) = words.next() {
                return Ok(dev.to_string());
            }
        }
    }
    Err(format!(
        "no route to {ip} (`ip route get` said: {})",
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(root: bool) -> Host {
        Host {
            root,
            interface: Ok("lo".into()),
            local_route: false,
            local: None,
        }
    }

    fn cfg(budget: u64) -> HuntConfig {
        HuntConfig {
            url: "tcp://127.0.0.1:7000".into(),
            budget: Duration::from_secs(budget),
            max_rate: 20_000.0,
            conns: 1,
            store: "x.db".into(),
            seed: 1,
            report: None,
            request: Default::default(),
        }
    }

    #[test]
    fn the_sweep_fits_in_the_budget() {
        let p = Plan::new(&cfg(120), &host(true), false).unwrap();
        let round: u64 = p.steps_ns.iter().map(|m| m + p.warmup_ns).sum();
        assert!(2 * round <= p.budget_ns, "{p:?}");
        assert!(p.steps_ns.iter().all(|&m| m == p.step_ns), "{p:?}");
        // A shorter budget: 50/s still measures 200 requests; the others share what is left.
        let p = Plan::new(&cfg(30), &host(true), false).unwrap();
        assert_eq!(p.steps_ns[0], 4_000_000_000, "{p:?}");
        assert!(p.steps_ns[1..].iter().all(|&m| m == p.step_ns), "{p:?}");
        let round: u64 = p.steps_ns.iter().map(|m| m + p.warmup_ns).sum();
        assert!(2 * round <= p.budget_ns, "{p:?}");
        assert!(p.has(Source::Capture) && p.has(Source::Floor));
    }

    #[test]
    fn without_root_the_capture_is_left_out_and_says_why() {
        let p = Plan::new(&cfg(30), &host(false), false).unwrap();
        assert!(!p.has(Source::Capture));
        let c = p.sources.iter().find(|s| s.source == Source::Capture);
        assert!(c.unwrap().note.contains("not root"));
        assert!(p.has(Source::Sockets));
    }

    #[test]
    fn a_short_budget_and_a_bad_rate_are_refused() {
        assert!(Plan::new(&cfg(1), &host(true), false).is_err());
        let mut c = cfg(30);
        c.max_rate = 0.0;
        let e = Plan::new(&c, &host(true), false).unwrap_err().to_string();
        assert!(e.contains("--max-rate"), "{e}");
    }
}
