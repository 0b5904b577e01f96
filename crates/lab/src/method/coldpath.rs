//! `cold-path`: the measurement traps and cold paths of root cause #5, planted on services a
//! prober watches over a 2 ms round trip, each beside a healthy twin.
//!
//! ```text
//!  client ── gw ══ emulator (2 ms round trip) ══ server 198.18.31.2
//!   tailhunt probe (two runs at once)              dnsmasq :53 (svc.lab, the remote resolver)
//!                                                  tailhunt serve: api, session (+3 ms on a
//!                                                  connection's first request), lookup (http,
//!                                                  5 ms floor), store (+3 ms from mid-run), feed
//!                                                  (15% of replies +5 ms in the first half of
//!                                                  every minute), and plain twins
//! ```
//!
//! Before: one probe run at 100 ms rounds for the cold paths and the floor (api by name and by
//! IP through the remote resolver, session first and second request, lookup and its twin, a
//! TCP connect for the network's floor), and one at 20 ms rounds for what happens over time
//! (store, feed, their twin), both for the same minutes. Expected: `cold-path` naming api's
//! DNS lookup and session's first request, `latency-floor` naming lookup, `step-change`
//! naming store, `periodic-tail` naming feed, and nothing at medium confidence about a twin.
//! Fix: a caching resolver beside the client; api probed again, the lookup's cost (median by
//! name minus median by IP) must fall to a quarter of what it was.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::judge::{self, Evidence, FindingRef, Verdict};
use super::{Figure, Options, Scale, ScenarioResult};
use crate::scenario::procs::Proc;
use crate::truth::tool::{json_of, Ctx};
use crate::truth::window::Path;
use crate::truth::{pause, TruthError};
use tailhunt_netlab::netns::Netns;

const RTT_MS: u64 = 2;
const RATE_BPS: u64 = 100_000_000;
/// The name the remote resolver answers for the server.
const NAME: &str = "svc.lab";

/// The causes planted, and the probe each must be about.
const EXPECTED: [(&str, &str); 5] = [
    ("cold-path", "api"),
    ("cold-path", "session"),
    ("latency-floor", "lookup"),
    ("step-change", "store"),
    ("periodic-tail", "feed"),
];

/// The servers: name, port, `tailhunt serve` arguments after the protocol.
fn servers(scale: Scale) -> Vec<(&'static str, &'static str, Vec<String>)> {
    let step = format!("{}s+3ms", timing(scale).0.as_secs() / 2);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        ("api", "7500", s(&["tcp"])),
        ("session", "7501", s(&["tcp", "--first-request", "3ms"])),
        ("lookup", "7502", s(&["http", "--floor", "5ms"])),
        ("store", "7503", s(&["tcp", "--step", &step])),
        ("feed", "7504", s(&["tcp", "--tail-wave", "60s:15%:5ms"])),
        ("twin-lookup", "7505", s(&["http"])),
        ("twin-store", "7506", s(&["tcp"])),
    ]
}

/// How long the probes run before the fix, and after it.
fn timing(scale: Scale) -> (Duration, Duration) {
    match scale {
        // Four periods of the minute-long wave: the period finder needs 2.5 cycles of a period
        // of at least a minute, and with three the autocorrelation at the period was 0.49
        // against a noise floor of 0.42 on a busy host.
        Scale::Quick => (Duration::from_secs(240), Duration::from_secs(20)),
        Scale::Full => (Duration::from_secs(300), Duration::from_secs(60)),
    }
}

/// The probe configurations: the cold paths and floor (100 ms rounds), and the probes over
/// time (20 ms rounds, so the per-interval percentiles have a 2 s grain).
fn configs(server: &str) -> (String, String) {
    let resolver = format!("{server}:53");
    let cold = format!(
        r#"interval = "100ms"
timeout = "25ms"
[[probe]]
name = "net"
kind = "tcp-connect"
target = "{server}:7500"
[[probe]]
name = "api"
kind = "tcp-echo"
target = "{NAME}:7500"
resolver = "{resolver}"
compare = ["name"]
[[probe]]
name = "session"
kind = "tcp-echo"
target = "{server}:7501"
compare = ["pair"]
[[probe]]
name = "lookup"
kind = "http"
target = "{server}:7502"
[[probe]]
name = "twin-lookup"
kind = "http"
target = "{server}:7505"
"#
    );
    let timed = format!(
        r#"interval = "20ms"
timeout = "10ms"
[[probe]]
name = "store"
kind = "tcp-echo"
target = "{server}:7503"
[[probe]]
name = "feed"
kind = "tcp-echo"
target = "{server}:7504"
[[probe]]
name = "twin-store"
kind = "tcp-echo"
target = "{server}:7506"
"#
    );
    (cold, timed)
}

/// Runs the scenario.
pub(crate) fn run(
    ctx: &Ctx,
    opts: &Options,
    say: &dyn Fn(&str),
) -> Result<ScenarioResult, TruthError> {
    let path = Path::emulated(RTT_MS, RATE_BPS)?;
    let (client_ip, server_ip) = path.addrs();
    let mut ev = Evidence::default();
    let _resolver = dnsmasq(
        ctx,
        path.server(),
        "remote resolver",
        &server_ip,
        &[
            &format!("--address=/{NAME}/{server_ip}"),
            // Answers the cache beside the client may keep (dnsmasq's own default is 0).
            "--local-ttl=300",
        ],
    )?;
    let mut procs = Vec::new();
    for (name, port, args) in servers(opts.scale) {
        let listen = format!("{server_ip}:{port}");
        let mut argv = vec!["serve"];
        argv.extend(args.iter().map(String::as_str));
        argv.extend(["--listen", &listen]);
        procs.push(ctx.server(path.server(), &format!("{name} server"), &argv)?);
    }
    let (before_for, after_for) = timing(opts.scale);
    say(&format!(
        "probing the planted services and their twins for {} s",
        before_for.as_secs()
    ));
    let (cold, timed) = configs(&server_ip);
    let cold_doc = probe(ctx, path.client(), "cold", &cold, before_for)?;
    let timed_doc = probe(ctx, path.client(), "timed", &timed, before_for)?;
    let (cold_doc, timed_doc) = (cold_doc.finish()?, timed_doc.finish()?);
    ev.add(&cold_doc, "probe", "before");
    ev.add(&timed_doc, "probe", "before");
    let before_cost = lookup_cost(ctx, &cold_doc)?;
    let after_cost = match opts.fix {
        true => {
            say("fix: a caching resolver beside the client; api probed again");
            let _cache = dnsmasq(
                ctx,
                path.client(),
                "caching resolver",
                &client_ip,
                &[&format!("--server={server_ip}")],
            )?;
            let fixed = configs_after(&client_ip, &server_ip);
            let doc = probe(ctx, path.client(), "after", &fixed, after_for)?.finish()?;
            ev.add(&doc, "probe", "after");
            Some(lookup_cost(ctx, &doc)?)
        }
        false => None,
    };
    drop(procs);
    let all = ev.findings(ctx)?;
    let goal = before_cost.map(|b| b / 4.0);
    let figure = Figure {
        name: "DNS lookup cost (api: median by name minus median by IP)".into(),
        unit: "ms".into(),
        before: before_cost,
        after: after_cost.flatten(),
        goal: "a quarter of what it was, or less".into(),
    };
    let check = match (after_cost, goal) {
        (None, _) => Ok(()),
        (Some(Some(a)), Some(g)) if a <= g => Ok(()),
        (Some(a), _) => Err(format!(
            "with a caching resolver the lookup still costs {} ms",
            a.map_or("-".into(), |v| format!("{v:.3}"))
        )),
    };
    let notes = vec![format!(
        "lookup cost before: {} ms over a {RTT_MS} ms round trip to the resolver",
        before_cost.map_or("-".into(), |v| format!("{v:.3}"))
    )];
    let named = named_check(&all);
    let noise = twins_moved(&all);
    let mut r = judge::judge(
        "cold-path",
        super::planted_of("cold-path"),
        all,
        Some((figure, check)),
        noise,
        ev,
        notes,
    );
    if let (Verdict::Pass, Err(why)) = (&r.verdict, named) {
        r.verdict = Verdict::Fail { why };
    }
    Ok(r)
}

/// The probe after the fix: api by name through the cache beside the client, and by IP.
fn configs_after(client_ip: &str, server_ip: &str) -> String {
    format!(
        r#"interval = "100ms"
timeout = "25ms"
[[probe]]
name = "api"
kind = "tcp-echo"
target = "{NAME}:7500"
resolver = "{client_ip}:53"
compare = ["name"]
[[probe]]
name = "net"
kind = "tcp-connect"
target = "{server_ip}:7500"
"#
    )
}

/// Every planted cause must be found about its probe at medium confidence or more, and no
/// probe detector may say anything at medium about a probe where nothing was planted for it.
fn named_check(findings: &[FindingRef]) -> Result<(), String> {
    let about = |f: &FindingRef| f.summary.split(" (").next().unwrap_or("").to_string();
    // Each (detector, probe): its most confident finding's confidence and summary (the
    // summary goes into a failure, so a false finding says what it saw: its period, its step).
    let mut found: BTreeMap<(String, String), (f64, &str)> = BTreeMap::new();
    for f in findings {
        let key = (f.detector.clone(), about(f));
        let best = found.entry(key).or_insert((f64::MIN, ""));
        if f.confidence > best.0 {
            *best = (f.confidence, f.summary.as_str());
        }
    }
    let medium = crate::truth::score::MEDIUM;
    let missed: Vec<String> = EXPECTED
        .iter()
        .filter(|(d, p)| {
            found
                .get(&(d.to_string(), p.to_string()))
                .is_none_or(|(c, _)| *c < medium)
        })
        .map(|(d, p)| format!("{d} about {p}"))
        .collect();
    let wrong: Vec<String> = found
        .iter()
        .filter(|((d, p), (c, _))| {
            *c >= medium
                && super::judge::PROBE_DETECTORS.contains(&d.as_str())
                && !EXPECTED.contains(&(d.as_str(), p.as_str()))
        })
        .map(|((d, p), (c, summary))| format!("{d} about {p} ({c:.2}: {summary})"))
        .collect();
    match (missed.is_empty(), wrong.is_empty()) {
        (true, true) => Ok(()),
        (false, _) => Err(format!("not found: {}", missed.join(", "))),
        (true, false) => Err(format!(
            "found where nothing was planted: {}",
            wrong.join(", ")
        )),
    }
}

/// The probes where nothing was planted: the twins and the TCP connect.
const UNPLANTED: [&str; 3] = ["twin-lookup", "twin-store", "net"];

/// When a twin (a plain server on the same host) steps or oscillates too, the host changed
/// under every probe during the run (another tenant's load, a stall of the link emulator):
/// the scenario cannot tell a planted cause from that, and says so.
fn twins_moved(findings: &[FindingRef]) -> Option<String> {
    let moved: Vec<String> = findings
        .iter()
        .filter(|f| f.confidence >= crate::truth::score::MEDIUM)
        .filter(|f| matches!(f.detector.as_str(), "step-change" | "periodic-tail"))
        .filter(|f| {
            let probe = f.summary.split(" (").next().unwrap_or("");
            UNPLANTED.contains(&probe)
        })
        .map(|f| format!("{} ({:.2}): {}", f.detector, f.confidence, f.summary))
        .collect();
    (!moved.is_empty()).then(|| {
        format!(
            "a healthy twin moved too, so the host changed during the run: {}",
            moved.join("; ")
        )
    })
}

/// `dnsmasq` answering on `addr:53` inside `ns`, with `extra` options; waits until it answers.
fn dnsmasq(
    ctx: &Ctx,
    ns: &Netns,
    what: &str,
    addr: &str,
    extra: &[&str],
) -> Result<Proc, TruthError> {
    let pid_file = ctx.file(&format!("{}.pid", what.replace(' ', "-")));
    let pid_arg = format!("--pid-file={}", pid_file.display());
    let listen = format!("--listen-address={addr}");
    let mut argv = vec![
        "dnsmasq",
        "--keep-in-foreground",
        "--conf-file=/dev/null",
        "--no-resolv",
        "--no-hosts",
        "--bind-interfaces",
        "--user=root",
        "--port=53",
        &listen,
        &pid_arg,
    ];
    argv.extend_from_slice(extra);
    let p = Proc::spawn(ns, what, &argv).map_err(|e| {
        TruthError::Work(format!(
            "cannot start dnsmasq ({e}): install it (scripts/setup.sh installs dnsmasq-base)"
        ))
    })?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = ns.run(&["ss", "-Hlun"])?;
        if String::from_utf8_lossy(&out.stdout).contains(&format!("{addr}:53")) {
            return Ok(p);
        }
        if Instant::now() > deadline {
            return Err(TruthError::Work(format!(
                "{what} (dnsmasq) did not listen on {addr}:53 within 10 s: {}",
                p.stderr().trim()
            )));
        }
        pause(Duration::from_millis(50))?;
    }
}

/// A `tailhunt probe` running in `ns` for `d`.
struct Probing {
    proc: Proc,
    limit: Duration,
}

impl Probing {
    /// Waits for its JSON document.
    fn finish(mut self) -> Result<Value, TruthError> {
        json_of(&mut self.proc, "tailhunt probe", self.limit)
    }
}

fn probe(
    ctx: &Ctx,
    ns: &Netns,
    name: &str,
    config: &str,
    d: Duration,
) -> Result<Probing, TruthError> {
    let file = ctx.file(&format!("probes-{name}.toml"));
    std::fs::write(&file, config)
        .map_err(|e| TruthError::Work(format!("cannot write '{}': {e}", file.display())))?;
    let secs = format!("{}s", d.as_secs());
    let file = file.display().to_string();
    let proc = ctx.spawn(
        ns,
        "tailhunt probe",
        &["--json", "probe", "--config", &file, "--duration", &secs],
    )?;
    Ok(Probing {
        proc,
        limit: d + Duration::from_secs(30),
    })
}

/// api's median by name minus its median by IP, ms, from `tailhunt analyze` of the run.
fn lookup_cost(ctx: &Ctx, doc: &Value) -> Result<Option<f64>, TruthError> {
    let Some(run) = doc["run_id"].as_str() else {
        return Ok(None);
    };
    let a = ctx.analyse(&["analyze", run])?;
    let median = |variant: &str| {
        a["series"].as_array()?.iter().find_map(|s| {
            let l = &s["series"]["labels"];
            (l["probe"] == "api" && l["variant"] == variant)
                .then(|| {
                    s["analysis"]["summary"]["quantiles"]
                        .as_array()?
                        .iter()
                        .find(|q| q["label"] == "p50")?["value_ns"]
                        .as_f64()
                })
                .flatten()
        })
    };
    Ok(match (median("by-name"), median("by-ip")) {
        (Some(n), Some(i)) => Some((n - i) / 1e6),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(detector: &str, summary: &str, confidence: f64) -> FindingRef {
        FindingRef {
            detector: detector.into(),
            confidence,
            summary: summary.into(),
            run: "r".into(),
        }
    }

    fn planted() -> Vec<FindingRef> {
        vec![
            f("cold-path", "api (tcp-echo): a DNS lookup adds 2.26ms", 0.9),
            f(
                "cold-path",
                "session (tcp-echo): the first request adds",
                0.9,
            ),
            f(
                "latency-floor",
                "lookup (http): never faster than 7.19ms",
                0.78,
            ),
            f("step-change", "store (tcp-echo): p50 stepped up", 0.9),
            f("periodic-tail", "feed (tcp-echo): p99 oscillates", 0.66),
        ]
    }

    #[test]
    fn each_cause_must_be_named_on_its_own_probe() {
        assert_eq!(named_check(&planted()), Ok(()));
        let mut missing = planted();
        missing.retain(|x| !x.summary.starts_with("session"));
        assert!(named_check(&missing)
            .unwrap_err()
            .contains("cold-path about session"));
        let mut extra = planted();
        extra.push(f("step-change", "api (tcp-echo): p99 stepped", 0.7));
        assert!(named_check(&extra)
            .unwrap_err()
            .contains("step-change about api (0.70: api (tcp-echo): p99 stepped)"));
    }

    #[test]
    fn a_twin_that_moves_makes_the_run_inconclusive_not_failed() {
        assert_eq!(twins_moved(&planted()), None);
        let mut noisy = planted();
        noisy.push(f(
            "step-change",
            "twin-store (tcp-echo): p50 stepped up",
            0.81,
        ));
        let why = twins_moved(&noisy).unwrap();
        assert!(why.contains("twin-store"), "{why}");
        let mut weak = planted();
        weak.push(f("step-change", "twin-lookup (http): p90 stepped", 0.3));
        assert_eq!(twins_moved(&weak), None);
    }
}
