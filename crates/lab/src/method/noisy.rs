//! `noisy-neighbor` and its variants: a 1 kHz sleeper (the victim) shares CPU 1 with CPU hogs
//! that join part-way through a `tailhunt runq` trace of the whole host.
//!
//! | variant | planted | expected | fix |
//! |---|---|---|---|
//! | neighbour | 3 hogs in `neighbour` (cpu.shares 8192 against the victim's 64) | `noisy-neighbor` naming `neighbour` | the hogs on CPU 0 (cpuset isolation) |
//! | system | 3 hogs in the root cgroup, the victim's container at cpu.shares 128 | `noisy-neighbor` naming `system` | the hogs on CPU 0 |
//! | quota | the victim (a worker using two thirds of a CPU) has its quota cut to 10 ms per 100 ms | `cpu-throttled`, no neighbour blamed | no quota cut |
//!
//! The weights are the ones the ground-truth cases measured (`crate::truth::cpu`). The figure
//! is the victim's run-queue p99 as `tailhunt runq` reports it per interval (median over the
//! intervals after the onset), against its calm intervals before the onset; a calm baseline
//! already over a millisecond means the host was too busy to tell. The tracer runs on CPU 0 at
//! real-time priority (`chrt`, when present), so hogs moved there by the fix do not starve it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::judge::{self, Evidence};
use super::{Figure, Options, Scale, ScenarioResult};
use crate::scenario::procs::Proc;
use crate::truth::cgroup::Cgroups;
use crate::truth::tool::{json_of, Ctx};
use crate::truth::work::WorkKind;
use crate::truth::{pause, wall_ns, TruthError};

/// The CPU the victim runs on.
const VICTIM_CPU: usize = 1;
/// The other CPU: the tracer, and the hogs after the fix.
const OTHER_CPU: usize = 0;

/// Which variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// Hogs in a heavier sibling cgroup.
    Neighbour,
    /// Hogs in the root cgroup.
    System,
    /// The victim's own quota.
    Quota,
    /// Nothing planted: the sleeper alone (the healthy twin).
    Calm,
}

/// The victim's run-queue p99 in one trace, ms.
pub(crate) struct Trace {
    /// Median over the intervals before the onset.
    pub(crate) calm_ms: Option<f64>,
    /// Median over the intervals after it.
    pub(crate) loaded_ms: Option<f64>,
}

fn timing(scale: Scale) -> (u64, Duration) {
    match scale {
        Scale::Quick => (10, Duration::from_millis(4500)),
        Scale::Full => (20, Duration::from_secs(8)),
    }
}

/// Runs the scenario.
pub(crate) fn run(
    ctx: &Ctx,
    opts: &Options,
    v: Variant,
    say: &dyn Fn(&str),
) -> Result<ScenarioResult, TruthError> {
    let name = ctx.tag.clone().unwrap_or_default();
    let mut ev = Evidence::default();
    say("runq trace; the cause starts part-way through");
    let before = measure(ctx, opts, v, false, &mut ev)?;
    let after = match opts.fix {
        true => {
            say(match v {
                Variant::Quota => "fix: the quota raised, trace again",
                _ => "fix: the hogs isolated on the other CPU, trace again",
            });
            Some(measure(ctx, opts, v, true, &mut ev)?)
        }
        false => None,
    };
    let findings = ev.findings(ctx)?;
    let (figure, check, noise, notes) = fix_figure(v, &before, after.as_ref());
    let mut r = judge::judge(
        &name,
        super::planted_of(&name),
        findings,
        Some((figure, check)),
        noise,
        ev,
        notes,
    );
    // The neighbour must be the one named.
    match v {
        Variant::Neighbour => judge::require_named(&mut r, "noisy-neighbor", &["neighbour".into()]),
        Variant::System => judge::require_named(&mut r, "noisy-neighbor", &["system".into()]),
        Variant::Quota | Variant::Calm => {}
    }
    Ok(r)
}

type FixFigure = (Figure, Result<(), String>, Option<String>, Vec<String>);

/// The victim's run-queue p99 before and after the fix against its calm baseline: the figure,
/// whether the fix met it, any sign of host noise, and the notes.
fn fix_figure(v: Variant, before: &Trace, after: Option<&Trace>) -> FixFigure {
    let calm = before.calm_ms;
    // The quota's victim uses two thirds of a CPU: on a shared host its waits behind the
    // host's own work are milliseconds long even when nothing is planted.
    let floor = match v {
        Variant::Quota => 5.0,
        _ => 1.0,
    };
    let goal = calm.map(|c| (3.0 * c).max(floor));
    let figure = Figure {
        name: "victim's run-queue p99".into(),
        unit: "ms".into(),
        before: before.loaded_ms,
        after: after.and_then(|a| a.loaded_ms),
        goal: match goal {
            Some(g) => format!(
                "back to its baseline: at most {g:.2} ms (3x the calm {:.3} ms, or {floor} ms)",
                calm.unwrap_or(0.0)
            ),
            None => "back to its calm baseline".into(),
        },
    };
    let check = match (after, goal) {
        (None, _) => Ok(()),
        (Some(a), Some(g)) if a.loaded_ms.is_some_and(|x| x <= g) => Ok(()),
        (Some(a), _) => Err(format!(
            "after the fix the victim's run-queue p99 is {} ms",
            a.loaded_ms.map_or("unknown".into(), |x| format!("{x:.2}"))
        )),
    };
    // A calm baseline already slow (before the cause, in either trace) is the host's doing.
    let after_calm = after.and_then(|a| a.calm_ms);
    let noise = match (calm, after_calm) {
        (Some(c), _) if c > floor => Some(format!(
            "the victim's calm run-queue p99 was already {c:.2} ms before the cause started"
        )),
        (None, _) => Some("no calm interval of the victim was traced".into()),
        (_, Some(a)) if goal.is_some_and(|g| a > g) && check.is_err() => Some(format!(
            "in the fixed trace the victim's calm p99 was {a:.2} ms before anything started"
        )),
        _ => None,
    };
    let notes = vec![format!(
        "victim's calm run-queue p99: {} ms before the fix, {} ms in the fixed trace",
        calm.map_or("-".into(), |c| format!("{c:.3}")),
        after_calm.map_or("-".into(), |c| format!("{c:.3}"))
    )];
    (figure, check, noise, notes)
}

/// One trace: the victim from the start, the cause at the onset (or the fixed setup).
pub(crate) fn measure(
    ctx: &Ctx,
    opts: &Options,
    v: Variant,
    fixed: bool,
    ev: &mut Evidence,
) -> Result<Trace, TruthError> {
    let phase = match (v, fixed) {
        (Variant::Calm, _) => "baseline",
        (_, true) => "after",
        (_, false) => "before",
    };
    let (trace_s, onset) = timing(opts.scale);
    let worker = PathBuf::from(ctx.worker()?);
    let mut cg = Cgroups::new("lab")?;
    cg.group("victim")?;
    match v {
        Variant::System => cg.set_top_v1("cpu.shares", "128")?,
        _ => cg.set_top_v1("cpu.shares", "10240")?,
    }
    let records = ctx.file(phase);
    std::fs::create_dir_all(&records).map_err(|source| TruthError::Io {
        path: records.clone(),
        source,
    })?;
    let rec = |n: &str| records.join(format!("{n}.json"));
    let whole = (trace_s + 3) as f64;
    let victim_kind = match v {
        Variant::Quota => WorkKind::Worker,
        _ => WorkKind::Sleeper,
    };
    if v == Variant::Neighbour {
        cg.set_v1("victim", "cpu.shares", "64")?;
    }
    cg.spawn(
        &worker,
        victim_kind,
        Some("victim"),
        VICTIM_CPU,
        whole,
        &rec("victim"),
    )?;
    pause(Duration::from_millis(500))?;
    let mut runq = start_runq(ctx, trace_s)?;
    pause(onset)?;
    let onset_wall = wall_ns();
    let hog_s = trace_s as f64 - onset.as_secs_f64() + 1.0;
    // The fix's own cgroup for the isolated neighbour (see `isolated`).
    let mut apart = None;
    match v {
        Variant::Neighbour | Variant::System => {
            let (target, group) = match (v, fixed) {
                (Variant::Neighbour, false) => {
                    cg.group("neighbour")?;
                    cg.set_v1("neighbour", "cpu.shares", "8192")?;
                    (&mut cg, Some("neighbour"))
                }
                (Variant::Neighbour, true) => {
                    let c = apart.insert(isolated()?);
                    (c, Some("neighbour"))
                }
                _ => (&mut cg, None),
            };
            let cpu = if fixed { OTHER_CPU } else { VICTIM_CPU };
            for i in 0..3 {
                let r = rec(&format!("hog{i}"));
                target.spawn(&worker, WorkKind::Hog, group, cpu, hog_s, &r)?;
            }
        }
        Variant::Quota if !fixed => {
            cg.set_v1("victim", "cpu.cfs_period_us", "100000")?;
            cg.set_v1("victim", "cpu.cfs_quota_us", "10000")?;
        }
        Variant::Quota | Variant::Calm => {}
    }
    let doc = json_of(
        &mut runq,
        "tailhunt runq",
        Duration::from_secs(trace_s + 30),
    )?;
    cg.wait_all(Duration::from_secs(15))?;
    if let Some(c) = apart.as_mut() {
        c.wait_all(Duration::from_secs(15))?;
    }
    // Only findings about the scenario's own cgroups count (the trace sees the whole host).
    ev.add_scoped(&doc, "runq", phase, Some(format!("{}/", cg.top())));
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&records);
    }
    Ok(victim_p99(&doc, &cg.display(Some("victim")), onset_wall))
}

/// The neighbour's cgroup once isolated: a container of its own beside the victim's (not
/// inside it), its hogs pinned to the other CPU. Left inside the victim's top group, the
/// kernel spreads that group's weight over the CPUs by where its load is, so the hogs' CPU
/// would take nearly all of it and the victim, alone on its CPU, would be left a sliver
/// against the host's own processes there (measured: its p99 stayed at 3.6 ms).
fn isolated() -> Result<Cgroups, TruthError> {
    let mut c = Cgroups::new("lab-apart")?;
    c.group("neighbour")?;
    c.set_v1("neighbour", "cpu.shares", "8192")?;
    Ok(c)
}

/// `tailhunt runq --duration D` on CPU 0, at real-time priority when `chrt` is there.
fn start_runq(ctx: &Ctx, trace_s: u64) -> Result<Proc, TruthError> {
    let secs = format!("{trace_s}s");
    let mut argv: Vec<String> = Vec::new();
    if Path::new("/usr/bin/chrt").exists() {
        argv.extend(["/usr/bin/chrt", "-f", "10"].map(String::from));
    }
    argv.extend(["taskset", "-c", &OTHER_CPU.to_string()].map(String::from));
    argv.extend(ctx.argv(&["--json", "runq", "--duration", &secs]));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    Ok(Proc::spawn_host("tailhunt runq", &argv)?)
}

/// The victim's p99 per interval, median over the calm intervals (ending a second before the
/// onset) and over the loaded ones (starting half a second after it), ms.
fn victim_p99(doc: &Value, victim: &str, onset_wall: i64) -> Trace {
    let empty = Vec::new();
    let intervals = doc["intervals"].as_array().unwrap_or(&empty);
    let p99 = |keep: &dyn Fn(i64, i64) -> bool| -> Vec<i64> {
        intervals
            .iter()
            .filter(|i| {
                let (s, e) = (i["start_wall_ns"].as_i64(), i["end_wall_ns"].as_i64());
                matches!((s, e), (Some(s), Some(e)) if keep(s, e))
            })
            .filter_map(|i| {
                i["cgroups"]
                    .as_array()?
                    .iter()
                    .find(|r| r["path"].as_str() == Some(victim))?["p99_ns"]
                    .as_i64()
            })
            .collect()
    };
    let calm = p99(&|_, e| e <= onset_wall - 1_000_000_000);
    let loaded = p99(&|s, _| s >= onset_wall + 500_000_000);
    let ms = |v: Vec<i64>| crate::scenario::median(v).map(|x| x as f64 / 1e6);
    Trace {
        calm_ms: ms(calm),
        loaded_ms: ms(loaded),
    }
}
