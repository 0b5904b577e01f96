//! The method as a command: each scenario reproduces a root cause, measures it with the real
//! `tailhunt` commands a user would run, asks the detectors what is wrong without telling them
//! what was planted, applies the fix and measures again (`tailhunt lab list | run | clean`).
//!
//! # Brief overview
//!
//! In: scenario names ([`catalogue`] lists them), [`Options`] (scale, whether to apply the fix,
//! the store the runs go to) and the `tailhunt` binary ([`Tools`]). Out: a [`LabReport`]: per
//! scenario the planted cause, the top finding and the others (from `tailhunt diagnose` on the
//! stored runs), the figure before and after the fix, and a [`Verdict`]. Every run the scenario
//! records is stored tagged with the scenario's name (`tailhunt runs` shows it), so `analyze`,
//! `diagnose` and `export` work on them afterwards.
//!
//! Before running, what an earlier lab run left after a crash is removed
//! ([`crate::state::clean`]); while running, the lab's state directory names every process it
//! started, so `tailhunt lab clean` can do the same after this run is killed.

mod coldpath;
mod judge;
mod microburst;
mod nagle;
mod noisy;
mod rcvbuf;
pub mod text;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use judge::{FindingRef, Verdict, PROBE_DETECTORS};

use crate::truth::{Tools, TruthError};

/// How long the scenarios measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scale {
    /// Short steps: `all` in about five minutes.
    Quick,
    /// The durations a careful engineer would use.
    Full,
}

/// How to run the scenarios.
#[derive(Debug, Clone)]
pub struct Options {
    /// Quick or full.
    pub scale: Scale,
    /// Apply the fix and measure again.
    pub fix: bool,
    /// Keep the captures and program records in `work_dir` (else removed at the end).
    pub keep: bool,
    /// The store the runs are recorded in.
    pub store: PathBuf,
    /// Where captures and records go while a scenario runs.
    pub work_dir: PathBuf,
    /// Where to write the HTML report of the scenarios' runs (`None`: no report).
    pub report: Option<PathBuf>,
}

/// One scenario as `lab list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioInfo {
    /// Its name (`tailhunt lab run NAME`).
    pub name: &'static str,
    /// The cause it plants, and the finding expected.
    pub planted: &'static str,
    /// What it measures, with which commands.
    pub measures: &'static str,
    /// The fix it applies and the figure that must improve.
    pub fix: &'static str,
    /// What it needs (root, BPF, cgroups).
    pub needs: Vec<&'static str>,
    /// Roughly how long at quick scale, seconds.
    pub quick_s: u32,
    /// Roughly how long at full scale, seconds.
    pub full_s: u32,
}

/// Every scenario, in the order `all` runs them.
pub fn catalogue() -> Vec<ScenarioInfo> {
    let net = vec!["root (network namespaces, link emulator)"];
    let cpu = vec![
        "root",
        "BPF (tailhunt runq)",
        "cgroup2 + v1 cpu controller",
        "2 CPUs",
    ];
    vec![
        ScenarioInfo {
            name: "microburst",
            planted: "three dbs answering a cache at once (10 ms of link time each, 3 times a second) over the 100 Mbit/s link an api client's small requests cross: microburst naming the db flows",
            measures: "tailhunt load (the api client, 500 req/s) and tailhunt pcap --requests at the cache: the api p99",
            fix: "the db traffic over a second interface: the api p99 below 1 ms (or 2x its median)",
            needs: net.clone(),
            quick_s: 20,
            full_s: 20,
        },
        ScenarioInfo {
            name: "nagle",
            planted: "a client writing each request in two pieces without TCP_NODELAY, server likewise: latency-rises-as-load-falls and nagle-stall",
            measures: "tailhunt load --sweep over a 4 ms round trip, captured at the client (tailhunt pcap): p99 at the lowest rate",
            fix: "TCP_NODELAY on both ends: the low-rate p99 falls to the network floor (within 3x the round trip)",
            needs: net.clone(),
            quick_s: 25,
            full_s: 70,
        },
        ScenarioInfo {
            name: "rcvbuf",
            planted: "SO_RCVBUF=64k on a download over an 80 ms round trip, and a client timeout: receive-window-limited naming the process and its SO_RCVBUF, application-timeout",
            measures: "tailhunt transfer client/server over the link emulator, captured at the receiver (tailhunt pcap): the download's time",
            fix: "autotuned receive buffer: the download finishes within 2x the path's limit (bytes / rate)",
            needs: net.clone(),
            quick_s: 20,
            full_s: 45,
        },
        ScenarioInfo {
            name: "noisy-neighbor",
            planted: "three CPU hogs in a heavier cgroup joining a 1 kHz sleeper's CPU: noisy-neighbor naming the neighbour",
            measures: "tailhunt runq (whole host, 1 s intervals): the victim's run-queue p99",
            fix: "cpuset isolation (the hogs on the other CPU): the victim's run-queue p99 returns to its calm baseline",
            needs: cpu.clone(),
            quick_s: 30,
            full_s: 50,
        },
        ScenarioInfo {
            name: "noisy-neighbor-system-service",
            planted: "three CPU hogs in the root cgroup (system services) on the sleeper's CPU: noisy-neighbor naming system",
            measures: "tailhunt runq: the victim's run-queue p99",
            fix: "cpuset isolation (the services on the other CPU): the victim's run-queue p99 returns to its baseline",
            needs: cpu.clone(),
            quick_s: 30,
            full_s: 50,
        },
        ScenarioInfo {
            name: "noisy-neighbor-cpu-quota",
            planted: "the victim's own CPU quota cut to 10 ms per 100 ms: cpu-throttled, no neighbour blamed",
            measures: "tailhunt runq: the victim's run-queue p99 and throttling",
            fix: "the quota raised (removed): the victim's run-queue p99 returns to its baseline",
            needs: cpu,
            quick_s: 30,
            full_s: 50,
        },
        ScenarioInfo {
            name: "cold-path",
            planted: "a DNS lookup at a resolver one 2 ms round trip away, 3 ms on each connection's first request, a server never faster than 5 ms, a 3 ms step mid-run and a tail that rises every minute, each beside a healthy twin: cold-path (api's lookup, session's first request), latency-floor (lookup), step-change (store), periodic-tail (feed)",
            measures: "tailhunt probe (two runs at once: 100 ms rounds for the cold paths and the floor, 20 ms rounds over time): what each variant costs, with its 95% interval",
            fix: "a caching resolver beside the client: api's lookup cost (median by name minus by IP) falls to a quarter or less",
            needs: vec!["root (network namespaces, link emulator)", "dnsmasq"],
            quick_s: 270,
            full_s: 370,
        },
        ScenarioInfo {
            name: "healthy",
            planted: "nothing: the microburst topology with small db replies, nagle with TCP_NODELAY, rcvbuf autotuned, a runq trace of the sleeper alone",
            measures: "the same commands as the scenarios above",
            fix: "none: no root-cause finding at or above medium confidence",
            needs: vec![
                "root",
                "BPF (tailhunt runq)",
                "cgroup2 + v1 cpu controller",
                "2 CPUs",
            ],
            quick_s: 45,
            full_s: 100,
        },
    ]
}

/// Errors that stop `lab run` before or between scenarios (a scenario's own failure is its
/// verdict, not an error).
#[derive(Debug, thiserror::Error)]
pub enum MethodError {
    /// A name that is no scenario.
    #[error("no scenario '{0}' (tailhunt lab list shows them; or give all)")]
    Unknown(String),
    /// Not root.
    #[error("the lab's scenarios build network namespaces and cgroups: run as root (sudo tailhunt lab run ...)")]
    NotRoot,
    /// The state directory could not be written.
    #[error("cannot write the lab's state under '{path}': {source} (run as root; /run must be writable)")]
    State {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Setting up the tools failed.
    #[error(transparent)]
    Setup(#[from] TruthError),
}

/// The verdict table of one `lab run`.
#[derive(Debug, Clone, Serialize)]
pub struct LabReport {
    /// Quick or full.
    pub scale: Scale,
    /// Whether the fixes were applied.
    pub fix: bool,
    /// The store holding every run.
    pub store: String,
    /// What the run removed first (an earlier run's leftovers).
    pub cleaned_first: crate::state::Cleaned,
    /// Per scenario, in order (a retried scenario appears once per attempt).
    pub scenarios: Vec<ScenarioResult>,
    /// Stopped by a signal: the scenarios after the current one did not run.
    pub interrupted: bool,
    /// Every scenario passed.
    pub passed: bool,
    /// The HTML report of every scenario's runs, each before drawn against its after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// Why the HTML report could not be written (the verdicts stand without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_error: Option<String>,
}

/// One scenario's row of the verdict table.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    /// The scenario.
    pub scenario: String,
    /// Which attempt this is (1, or 2 for a retry of an inconclusive one).
    pub attempt: u32,
    /// The causes planted (detector names; empty for `healthy`).
    pub planted: Vec<String>,
    /// The most confident root-cause finding.
    pub top: Option<FindingRef>,
    /// The other root-cause findings, most confident first.
    pub others: Vec<FindingRef>,
    /// The figure the fix must improve.
    pub figure: Option<Figure>,
    /// The verdict.
    pub verdict: Verdict,
    /// The runs stored, with the command and phase of each.
    pub runs: Vec<RunRef>,
    /// What the programs measured that helps read the verdict.
    pub notes: Vec<String>,
}

/// The figure a fix must improve.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// What it is ("p99 at 50 req/s").
    pub name: String,
    /// Its unit (`ms`, `s`).
    pub unit: String,
    /// Before the fix.
    pub before: Option<f64>,
    /// After the fix (absent with --no-fix).
    pub after: Option<f64>,
    /// What the fix must achieve, in words.
    pub goal: String,
}

/// A run a scenario stored.
#[derive(Debug, Clone, Serialize)]
pub struct RunRef {
    /// Its id in the store.
    pub id: String,
    /// The command that recorded it (`load`, `pcap`, `transfer`, `runq`).
    pub command: String,
    /// `before` or `after` the fix (`baseline` for a healthy one).
    pub phase: String,
}

/// Checks the names and expands `all`; an unknown one is an error naming it.
pub fn resolve(names: &[String]) -> Result<Vec<&'static str>, MethodError> {
    let cat = catalogue();
    let mut out = Vec::new();
    for n in names {
        if n == "all" {
            out.extend(cat.iter().map(|s| s.name));
            continue;
        }
        match cat.iter().find(|s| s.name == n) {
            Some(s) => out.push(s.name),
            None => return Err(MethodError::Unknown(n.clone())),
        }
    }
    out.dedup();
    Ok(out)
}

/// Runs `names` in order, reporting progress through `progress`. A scenario that ends
/// inconclusive is not retried here (the caller may run it again). `lab run` cleans what an
/// earlier run left first.
pub fn run(
    names: &[&str],
    opts: &Options,
    tools: &Tools,
    progress: &dyn Fn(&str),
) -> Result<LabReport, MethodError> {
    if !tailhunt_netlab::netns::is_root() {
        return Err(MethodError::NotRoot);
    }
    let root = Path::new(crate::state::STATE_ROOT);
    let cleaned_first = crate::state::clean(root);
    let _state = crate::state::begin(root).map_err(|source| MethodError::State {
        path: root.to_path_buf(),
        source,
    })?;
    let mut report = LabReport {
        scale: opts.scale,
        fix: opts.fix,
        store: opts.store.display().to_string(),
        cleaned_first,
        scenarios: Vec::new(),
        interrupted: false,
        passed: false,
        report: None,
        report_error: None,
    };
    for name in names {
        if crate::truth::stopping() {
            report.interrupted = true;
            break;
        }
        progress(&format!("{name}: starting"));
        let r = run_one(name, opts, tools, progress);
        progress(&format!("{name}: {}", r.verdict));
        if matches!(&r.verdict, Verdict::Fail { why } if why == "interrupted") {
            report.interrupted = true;
        }
        report.scenarios.push(r);
    }
    report.passed = !report.interrupted
        && !report.scenarios.is_empty()
        && report.scenarios.iter().all(|s| s.verdict == Verdict::Pass);
    if let Some(path) = &opts.report {
        progress("writing the report");
        match write_report(&report, opts, tools, path) {
            Ok(()) => report.report = Some(path.display().to_string()),
            Err(e) => report.report_error = Some(e.to_string()),
        }
    }
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&opts.work_dir);
    }
    Ok(report)
}

/// `tailhunt report` of every run the scenarios stored, labelled by scenario, phase and
/// command, compared within each scenario (its runs carry the scenario as their tag).
fn write_report(
    report: &LabReport,
    opts: &Options,
    tools: &Tools,
    path: &Path,
) -> Result<(), TruthError> {
    let mut args: Vec<String> = vec!["report".into()];
    let mut labels = Vec::new();
    for s in &report.scenarios {
        for r in &s.runs {
            args.push(r.id.clone());
            let attempt = if s.attempt > 1 {
                format!(" (attempt {})", s.attempt)
            } else {
                String::new()
            };
            labels.push(format!("{} {} {}{attempt}", s.scenario, r.phase, r.command));
        }
    }
    if labels.is_empty() {
        return Err(TruthError::Work("no scenario stored a run to draw".into()));
    }
    for l in labels {
        args.extend(["--label".into(), l]);
    }
    args.extend([
        "--compare-by".into(),
        "tag".into(),
        "--title".into(),
        "tailhunt lab: each cause planted, found and fixed".into(),
        "-o".into(),
        path.display().to_string(),
    ]);
    let ctx = tools.for_lab(&opts.work_dir, &opts.store, "lab-report");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ctx.analyse(&args).map(|_| ())
}

/// Runs one scenario to its verdict (errors become a `fail` naming them).
pub fn run_one(
    name: &str,
    opts: &Options,
    tools: &Tools,
    progress: &dyn Fn(&str),
) -> ScenarioResult {
    let dir = opts.work_dir.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        let why = format!("cannot create '{}': {e}", dir.display());
        return judge::failed(name, planted_of(name), why);
    }
    let ctx = tools.for_lab(&dir, &opts.store, name);
    let say = |s: &str| progress(&format!("{name}: {s}"));
    let r = match name {
        "microburst" => microburst::run(&ctx, opts, &say),
        "nagle" => nagle::run(&ctx, opts, &say),
        "rcvbuf" => rcvbuf::run(&ctx, opts, &say),
        "cold-path" => coldpath::run(&ctx, opts, &say),
        "healthy" => healthy(&ctx, opts, &say),
        "noisy-neighbor" => noisy::run(&ctx, opts, noisy::Variant::Neighbour, &say),
        "noisy-neighbor-system-service" => noisy::run(&ctx, opts, noisy::Variant::System, &say),
        "noisy-neighbor-cpu-quota" => noisy::run(&ctx, opts, noisy::Variant::Quota, &say),
        other => Err(TruthError::Work(format!("no scenario '{other}'"))),
    };
    let planted = planted_of(name);
    match r {
        Ok(r) => r,
        // A wait cut short by the stop request reads as a timeout: say what happened.
        Err(_) if crate::truth::stopping() => judge::failed(name, planted, "interrupted".into()),
        Err(e) => judge::failed(name, planted, e.to_string()),
    }
}

/// The causes a scenario plants (detector names).
pub(crate) fn planted_of(name: &str) -> &'static [&'static str] {
    match name {
        "microburst" => &["microburst"],
        "nagle" => &["latency-rises-as-load-falls", "nagle-stall"],
        "rcvbuf" => &["receive-window-limited", "application-timeout"],
        "noisy-neighbor" | "noisy-neighbor-system-service" => &["noisy-neighbor"],
        "noisy-neighbor-cpu-quota" => &["cpu-throttled"],
        "cold-path" => &["cold-path", "latency-floor", "step-change", "periodic-tail"],
        _ => &[],
    }
}

/// `healthy`: every topology with nothing planted, measured as it is.
fn healthy(
    ctx: &crate::truth::tool::Ctx,
    opts: &Options,
    say: &dyn Fn(&str),
) -> Result<ScenarioResult, TruthError> {
    let mut ev = judge::Evidence::default();
    say("microburst topology, the dbs answering small");
    let m = microburst::measure(ctx, opts, microburst::Round::Healthy, &mut ev)?;
    say("nagle topology with TCP_NODELAY");
    let n = nagle::measure(ctx, opts, true, "baseline", &mut ev)?;
    say("rcvbuf topology, autotuned, no timeout");
    let r = rcvbuf::measure(ctx, opts, rcvbuf::Setup::Healthy, "baseline", &mut ev)?;
    say("runq trace of the sleeper alone");
    let q = noisy::measure(ctx, opts, noisy::Variant::Calm, false, &mut ev)?;
    let victim = q.loaded_ms.or(q.calm_ms);
    let notes = vec![
        format!(
            "microburst topology: api p50 {:.2} ms, p99 {:.2} ms",
            m.p50_ms, m.p99_ms
        ),
        format!(
            "nagle topology: p99 at the lowest rate {:.2} ms",
            n.low_p99_ms
        ),
        format!("rcvbuf topology: download {:.2} s", r.seconds),
        format!(
            "runq: the sleeper's run-queue p99 {} ms",
            victim.map_or("-".into(), |v| format!("{v:.3}"))
        ),
    ];
    // A healthy baseline far off its floor says the host was busy, not that all is well.
    let noise = nagle::noise(&n)
        .or_else(|| rcvbuf::noise(&r))
        .or_else(|| {
            (m.p50_ms > 2.0)
                .then(|| format!("the api p50 was {:.2} ms with nothing planted", m.p50_ms))
        })
        .or_else(|| {
            victim
                .filter(|v| *v > 1.0)
                .map(|v| format!("the lone sleeper's run-queue p99 was {v:.2} ms"))
        });
    let findings = ev.findings(ctx)?;
    Ok(judge::judge(
        "healthy",
        &[],
        findings,
        None,
        noise,
        ev,
        notes,
    ))
}
