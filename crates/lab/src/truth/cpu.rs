//! The run-queue cases: CPU workloads in cgroups on one CPU while `tailhunt runq` traces the
//! host from the other.
//!
//! In: a [`RunqVariant`] and whether it is the twin. Out: the truth and runq's document.
//!
//! Every variant runs ten one-second intervals; the workloads are pinned to [`WORK_CPU`] (CPU 1)
//! and the tracer to the other. (The project's own run-queue tests pin theirs to CPU 0: two
//! people testing on one machine then collide less.) The victim is a 1 kHz sleeper (or, for the quota, a worker using two thirds of a
//! CPU). The cause starts 4.5 s into the trace, so the first intervals are calm:
//!
//! | variant | planted |
//! |---|---|
//! | unequal | 3 hogs in `neighbour` (cpu.shares 8192 against the victim's 64): `noisy-neighbor` naming the victim and `neighbour` |
//! | equal | 2 hogs in each of `n1` and `n2` (the victim's weight): the victim behind both |
//! | system | 3 hogs in the root cgroup, the victim's container at cpu.shares 128: the victim behind `system` |
//! | busy | as unequal, with a half-duty load in the root cgroup on both CPUs all along |
//! | control-equal | a hog in `a`, one in `b` and one in the root from before the trace: nothing changes, nothing to blame (scored as a healthy twin) |
//! | quota | the worker's quota is cut to 10 ms per 100 ms: `cpu-throttled` naming it |
//!
//! Twins: the same without the cause (no hogs; the busy load alone; no quota cut).
//!
//! Every group the case starts a CPU user in (hogs, the worker, the busy host's load) is a
//! *taker*, from its first workload's start: a finding blaming it for the wait of a cgroup that
//! is not the planted victim (the host's own processes, behind the quota's worker) is a side
//! effect of the case, not counted either way.
//!
//! A neighbour is scored only when the sleeper's own record shows the slowdown (its wake-up
//! lateness p99 at least 3x its calm seconds' and 1 ms or more), and a quota only when the kernel
//! throttled the group; otherwise the cause goes to the truth's `unplanted`.
//!
//! A neighbour slows the sleeper only when its weight leaves the sleeper less CPU than it uses:
//! the sleeper takes about 6% of a CPU (50 µs of work per wakeup, and the wakeups' own cost),
//! and while it is within its share the kernel (EEVDF) runs it promptly on wakeup. Measured
//! here, with the victim at 1024 against 8192 (an 11% share) the sleeper's lateness p99 with the
//! hogs was 0.1 ms in about half the seconds and 3.5 ms in the others; at 256 (3%) it was
//! 3.5-6 ms in every one. On the busy host the half-duty load alone keeps it at about 3.5 ms, and
//! at 256 the hogs took it to 8-13 ms, under three times that; at 64 to 22-39 ms. So the unequal
//! and busy victims get 64 (a small CPU request next to a big batch job). Each workload is its
//! own session (as daemons are), so the system variant's three root hogs weigh 3072 against its
//! top group's 128 (4%), not 1024 as one autogroup.
//!
//! The case's top group gets cpu.shares 10240 (ten root tasks' worth): on a shared host the root
//! cgroup holds everybody else's work on that CPU, and the planted cause must stay the main thing
//! the victim waits behind. Where the host is the point it does not: the busy variant keeps the
//! default 1024, and the system variant gives it 128, a small container next to busy host
//! services (with more, the sleeper's 5% of a CPU is never short).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::cgroup::Cgroups;
use super::spec::{Case, RunqVariant};
use super::tool::{json_of, Ctx};
use super::work::WorkKind;
use super::{pause, Planted, Truth, TruthError, Unit, View, ViewKind, Views};
use crate::scenario::procs::Proc;

/// The CPU the workloads share.
const WORK_CPU: usize = 1;
/// The CPU the tracer runs on.
const TRACER_CPU: &str = "0";
/// Seconds traced.
const TRACE_S: u64 = 10;
/// When the cause starts, after the tracer.
const ONSET: Duration = Duration::from_millis(4500);
/// How much the sleeper's own lateness must rise for a neighbour to count as planted.
const EFFECT: f64 = 3.0;

/// Runs a run-queue case.
pub(crate) fn run(
    case: &Case,
    variant: RunqVariant,
    ctx: &Ctx,
) -> Result<(Truth, Vec<(String, Value)>), TruthError> {
    let worker = PathBuf::from(ctx.worker()?);
    let tag: String = case
        .name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(20)
        .collect();
    let mut cg = Cgroups::new(&tag)?;
    let mut plan = Plan::new(&mut cg, variant, case.twin)?;
    plan.note_takers(&cg);
    // The workloads' records: the truth of who ran where, when, and what the victim suffered.
    let records = ctx.file("workloads");
    std::fs::create_dir_all(&records).map_err(|source| TruthError::Io {
        path: records.clone(),
        source,
    })?;
    let mut n = 0;
    let mut start = |cg: &mut Cgroups, kind, group: Option<&str>, cpu, secs| {
        n += 1;
        let file = records.join(format!("{n:02}-{}.json", WorkKind::name(kind)));
        cg.spawn(&worker, kind, group, cpu, secs, &file)
    };
    let whole = (TRACE_S + 3) as f64;
    for (kind, group, cpu) in plan.from_start.clone() {
        start(&mut cg, kind, group.as_deref(), cpu, whole)?;
    }
    pause(Duration::from_millis(500))?;
    let mut runq = start_runq(ctx)?;
    pause(ONSET)?;
    let onset_wall = super::wall_ns();
    for (kind, group, cpu) in plan.at_onset.clone() {
        start(&mut cg, kind, group.as_deref(), cpu, TRACE_S as f64 - 3.0)?;
    }
    if let Some(group) = &plan.quota_cut {
        cg.set_v1(group, "cpu.cfs_period_us", "100000")?;
        cg.set_v1(group, "cpu.cfs_quota_us", "10000")?;
    }
    let doc = json_of(
        &mut runq,
        "tailhunt runq",
        Duration::from_secs(TRACE_S + 30),
    )?;
    cg.wait_all(Duration::from_secs(10))?;
    let programs = read_records(&records)?;
    plan.finish_takers(&programs, &cg.top());
    let mut facts = victim_facts(&programs, onset_wall);
    facts["case_cgroup"] = json!(cg.top());
    let mut views = Views::default();
    let view = View {
        name: "runq".into(),
        kind: ViewKind::Runq,
        position: format!("tailhunt runq on CPU {TRACER_CPU}, whole host, 1 s intervals; workloads on CPU {WORK_CPU}"),
        analysis: vec!["runq".into(), "--duration".into(), format!("{TRACE_S}s")],
        target: None,
    };
    views.add(view, doc);
    let throttled = cg.cpu_stat("victim", "nr_throttled");
    let programs = json!({
        "workloads": programs, "onset_wall_ns": onset_wall, "victim_nr_throttled": throttled,
    });
    let (mut truth, outputs) = Truth::of(case, plan.planted, views, programs, facts);
    truth.takers = plan.takers;
    set_aside_without_effect(&mut truth, throttled);
    Ok((truth, outputs))
}

fn start_runq(ctx: &Ctx) -> Result<Proc, TruthError> {
    let secs = format!("{TRACE_S}s");
    let mut argv = vec!["taskset".to_string(), "-c".into(), TRACER_CPU.into()];
    argv.extend(ctx.argv(&["--json", "runq", "--duration", &secs]));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    Ok(Proc::spawn_host("tailhunt runq", &argv)?)
}

type Start = (WorkKind, Option<String>, usize);

/// What a variant starts, when, and what it plants.
struct Plan {
    from_start: Vec<Start>,
    at_onset: Vec<Start>,
    quota_cut: Option<String>,
    planted: Vec<Planted>,
    /// The groups (display names) of every CPU user the case starts besides the sleeper.
    taker_groups: Vec<String>,
    takers: Vec<(String, i64)>,
}

impl Plan {
    fn new(cg: &mut Cgroups, v: RunqVariant, twin: bool) -> Result<Plan, TruthError> {
        let mut p = Plan {
            from_start: Vec::new(),
            at_onset: Vec::new(),
            quota_cut: None,
            planted: Vec::new(),
            taker_groups: Vec::new(),
            takers: Vec::new(),
        };
        cg.group("victim")?;
        // The host's own work (other builds) runs on that CPU too, as single tasks of weight 1024
        // in the root cgroup. Outweighing it keeps the planted cause the main one; where the
        // host is the point (system, busy) the case's group keeps the default weight.
        match v {
            // A small container (a low CPU request) next to busy host services: the sleeper
            // needs 5% of the CPU, more than 128 shares against three root hogs give it.
            RunqVariant::System => cg.set_top_v1("cpu.shares", "128")?,
            RunqVariant::Busy => {}
            _ => cg.set_top_v1("cpu.shares", "10240")?,
        }
        if matches!(v, RunqVariant::Unequal | RunqVariant::Busy) {
            cg.set_v1("victim", "cpu.shares", "64")?;
        }
        let victim = cg.display(Some("victim"));
        let g = |s: &str| Some(s.to_string());
        if v == RunqVariant::Quota {
            p.from_start.push((WorkKind::Worker, g("victim"), WORK_CPU));
            if !twin {
                p.quota_cut = g("victim");
                p.planted.push(Planted {
                    detector: "cpu-throttled".into(),
                    unit: Unit::Cgroup { cgroup: victim },
                    count: 1,
                    note: "its CPU quota was cut to 10 ms per 100 ms 4.5 s into the trace".into(),
                });
            }
            return Ok(p);
        }
        p.from_start
            .push((WorkKind::Sleeper, g("victim"), WORK_CPU));
        let neighbours = p.neighbours(cg, v)?;
        if v == RunqVariant::Busy {
            for cpu in [0, 1] {
                p.from_start.push((WorkKind::HalfHog, None, cpu));
            }
        }
        if twin {
            return Ok(p);
        }
        for (group, hogs) in neighbours {
            if let Some(name) = group {
                cg.group(name)?;
            }
            if v == RunqVariant::Unequal || v == RunqVariant::Busy {
                cg.set_v1("neighbour", "cpu.shares", "8192")?;
            }
            for _ in 0..hogs {
                p.at_onset
                    .push((WorkKind::Hog, group.map(String::from), WORK_CPU));
            }
            let neighbour = cg.display(group);
            p.planted.push(Planted {
                detector: "noisy-neighbor".into(),
                unit: Unit::Pair {
                    victim: victim.clone(),
                    neighbour: neighbour.clone(),
                },
                count: 1,
                note: format!(
                    "{hogs} CPU hogs in {neighbour} joined the victim's CPU 4.5 s into the trace"
                ),
            });
        }
        Ok(p)
    }

    /// Notes the groups of the CPU users (all but the sleeper) as takers.
    fn note_takers(&mut self, cg: &Cgroups) {
        for (kind, group, _) in self.from_start.iter().chain(&self.at_onset) {
            let name = cg.display(group.as_deref());
            if *kind != WorkKind::Sleeper && !self.taker_groups.contains(&name) {
                self.taker_groups.push(name);
            }
        }
    }

    /// The groups whose hogs join at onset, with how many hogs each; the control's hogs start
    /// with the sleeper instead.
    fn neighbours(
        &mut self,
        cg: &mut Cgroups,
        v: RunqVariant,
    ) -> Result<Vec<(Option<&'static str>, usize)>, TruthError> {
        Ok(match v {
            RunqVariant::Unequal | RunqVariant::Busy => vec![(Some("neighbour"), 3)],
            RunqVariant::Equal => vec![(Some("n1"), 2), (Some("n2"), 2)],
            RunqVariant::System => vec![(None, 3)],
            RunqVariant::ControlEqual => {
                for grp in ["a", "b"] {
                    cg.group(grp)?;
                    self.from_start
                        .push((WorkKind::Hog, Some(grp.into()), WORK_CPU));
                }
                self.from_start.push((WorkKind::Hog, None, WORK_CPU));
                vec![]
            }
            RunqVariant::Quota => vec![],
        })
    }

    /// The takers with the time their first workload started, from the workloads' own records
    /// (`top`: the case's own top group; a record outside it is in the root cgroup).
    fn finish_takers(&mut self, records: &[Value], top: &str) {
        for t in &self.taker_groups {
            let first = records
                .iter()
                .filter(|r| r["kind"] != WorkKind::Sleeper.name())
                .filter(|r| {
                    let dir = r["cgroups"][0].as_str().unwrap_or("");
                    if t == "system" {
                        !dir.contains(top)
                    } else {
                        dir.ends_with(t.as_str())
                    }
                })
                .filter_map(|r| r["start_wall_ns"].as_i64())
                .min();
            if let Some(first) = first {
                self.takers.push((t.clone(), first));
            }
        }
    }
}

/// A neighbour counts only when the sleeper's own lateness shows it (its p99, median
/// over the seconds after the onset, at least [`EFFECT`] times the calm seconds' and at least
/// 1 ms), a quota only when the kernel throttled the group (`nr_throttled` in its cpu.stat).
fn set_aside_without_effect(truth: &mut Truth, nr_throttled: Option<u64>) {
    let f = &truth.facts;
    let calm = f["victim_late_p99_calm_median_ns"].as_f64();
    let hot = f["victim_late_p99_after_onset_median_ns"].as_f64();
    let felt = matches!((calm, hot), (Some(c), Some(h)) if h >= EFFECT * c && h >= 1e6);
    if !felt {
        let why = format!(
            "the sleeper's own lateness p99 went from {:.2} ms to {:.2} ms, less than {EFFECT}x (and 1 ms)",
            calm.unwrap_or(0.0) / 1e6,
            hot.unwrap_or(0.0) / 1e6
        );
        truth.set_aside(|p| p.detector == "noisy-neighbor", &why);
    }
    if nr_throttled.unwrap_or(0) == 0 {
        truth.set_aside(
            |p| p.detector == "cpu-throttled",
            "the kernel never throttled the group",
        );
    }
}

fn read_records(dir: &Path) -> Result<Vec<Value>, TruthError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| TruthError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|source| TruthError::Io {
            path: f.clone(),
            source,
        })?;
        out.push(super::tool::parse(&f.to_string_lossy(), &text, "")?);
    }
    Ok(out)
}

/// The sleeper's own view: its lateness p99 per second before and after the onset.
fn victim_facts(records: &[Value], onset_wall: i64) -> Value {
    let Some(s) = records
        .iter()
        .find(|r| r["kind"] == "sleeper")
        .and_then(|r| r["seconds"].as_array())
    else {
        return json!({});
    };
    let p99s = |f: &dyn Fn(i64) -> bool| -> Vec<i64> {
        s.iter()
            .filter(|x| x["start_wall_ns"].as_i64().is_some_and(f))
            .filter_map(|x| x["p99_late_ns"].as_i64())
            .collect()
    };
    let calm = p99s(&|t| t < onset_wall - 1_000_000_000);
    let loaded = p99s(&|t| t > onset_wall + 500_000_000);
    let med = |v: Vec<i64>| crate::scenario::median(v);
    json!({
        "victim_late_p99_per_second_calm_ns": calm,
        "victim_late_p99_per_second_after_onset_ns": loaded,
        "victim_late_p99_calm_median_ns": med(calm.clone()),
        "victim_late_p99_after_onset_median_ns": med(loaded.clone()),
    })
}
