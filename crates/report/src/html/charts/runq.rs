//! Run-queue pictures: latency per cgroup over time with throttled periods marked, and the
//! wait time and preemptions by who held the CPU.
//!
//! In: a runq run's `runq_latency{cgroup}` interval histograms, `cpu_throttled_periods{cgroup}`,
//! `runq_wait_ns{cgroup,by}` and `runq_preemptions{cgroup,by}`. Out: [`Chart`]s.

use std::collections::BTreeMap;

use tailhunt_store::StoreError;

use crate::html::charts::Line;
use crate::html::format::{fmt_value, Fmt};
use crate::html::run::{Chart, ChartKind, RunData};
use crate::html::svg::{colour, Axis, Kind, Plot, Scale};

/// A cgroup, the wait behind each other (who, wait ns, preemptions), and its total wait.
type WaitRow = (String, Vec<(String, f64, f64)>, f64);

/// Cgroups drawn (the ones with the highest p99).
const MAX_CGROUPS: usize = 6;
/// Rows of the wait chart.
const MAX_WAITERS: usize = 4;
/// Who-held-the-CPU entries per row before the rest is "others".
const MAX_BY: usize = 6;

/// The run-queue charts the run has the series for.
pub fn charts(
    rd: &RunData<'_>,
    out: &mut Vec<Chart>,
    missing: &mut Vec<String>,
) -> Result<(), StoreError> {
    match latency(rd)? {
        Some(c) => out.push(c),
        None => missing.push(
            "run-queue latency over time: no cgroup has two intervals of run-queue latency".into(),
        ),
    }
    match waits(rd)? {
        Some(c) => out.push(c),
        None => missing.push("wait shares: no waits were attributed to who held the CPU".into()),
    }
    Ok(())
}

fn latency(rd: &RunData<'_>) -> Result<Option<Chart>, StoreError> {
    let mut lines: Vec<Line> = Vec::new();
    let (mut t_lo, mut t_hi) = (f64::MAX, f64::MIN);
    for s in rd.named("runq_latency") {
        let cgroup = s.labels.get("cgroup").cloned().unwrap_or_default();
        let pts: Vec<(f64, f64)> = rd
            .histograms(s)?
            .iter()
            .filter_map(|ih| {
                let v = ih.histogram.quantile(0.99)? as f64;
                Some((rd.secs((ih.start_ns + ih.end_ns) / 2), v.max(1.0)))
            })
            .collect();
        if pts.len() < 2 {
            continue;
        }
        t_lo = t_lo.min(pts[0].0);
        t_hi = t_hi.max(pts[pts.len() - 1].0);
        let worst = pts.iter().map(|p| p.1).fold(0.0, f64::max);
        lines.push((cgroup, pts, worst));
    }
    if lines.is_empty() {
        return Ok(None);
    }
    lines.sort_by(|a, b| b.2.total_cmp(&a.2));
    lines.truncate(MAX_CGROUPS);
    let (lo, hi) = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.1))
        .fold((f64::MAX, 0f64), |(a, b), v| (a.min(v), b.max(v)));
    let mut p = Plot::new(
        300.0,
        Axis::new(
            Scale::new(Kind::Linear, t_lo, t_hi),
            Fmt::Seconds,
            "time from the start of the run",
        ),
        Axis::new(
            Scale::new(Kind::Log, lo / 1.5, hi * 1.5),
            Fmt::Duration,
            "run-queue latency p99 (log)",
        ),
    );
    let mut throttled = 0;
    for s in rd.named("cpu_throttled_periods") {
        let cgroup = s.labels.get("cgroup").cloned().unwrap_or_default();
        for pt in rd.points(s)?.iter().filter(|p| p.value > 0) {
            throttled += 1;
            let t = rd.secs(pt.t_ns);
            p.band(
                t - 0.5,
                t + 0.5,
                "throttled",
                "",
                &format!("{cgroup}: {} CPU-quota periods throttled", pt.value),
            );
        }
    }
    for (i, (cgroup, pts, _)) in lines.iter().enumerate() {
        p.series(cgroup, colour(i));
        p.line(pts, false);
    }
    let id = rd.id(ChartKind::Runq, 0);
    Ok(Some(Chart {
        svg: p.finish(&id),
        id,
        kind: ChartKind::Runq,
        title: "Run-queue latency per cgroup".into(),
        caption: format!(
            "How long each cgroup's runnable tasks waited for a CPU, p99 per interval (log). {}",
            if throttled > 0 {
                "Shaded: intervals in which a CPU quota throttled the cgroup (the wait is its own quota, not a neighbour)."
            } else {
                "No CPU-quota throttling was seen."
            }
        ),
        series: vec!["runq_latency".into(), "cpu_throttled_periods".into()],
    }))
}

fn waits(rd: &RunData<'_>) -> Result<Option<Chart>, StoreError> {
    // cgroup -> by -> (wait ns, preemptions)
    let mut table: BTreeMap<String, BTreeMap<String, (f64, f64)>> = BTreeMap::new();
    for (name, slot) in [("runq_wait_ns", 0), ("runq_preemptions", 1)] {
        for s in rd.named(name) {
            let (Some(cg), Some(by)) = (s.labels.get("cgroup"), s.labels.get("by")) else {
                continue;
            };
            let sum: f64 = rd.points(s)?.iter().map(|p| p.value as f64).sum();
            let cell = table
                .entry(cg.clone())
                .or_default()
                .entry(by.clone())
                .or_default();
            if slot == 0 {
                cell.0 += sum;
            } else {
                cell.1 += sum;
            }
        }
    }
    let mut rows: Vec<WaitRow> = table
        .into_iter()
        .map(|(cg, by)| {
            let mut v: Vec<(String, f64, f64)> = by
                .into_iter()
                .filter(|(b, _)| b != "idle")
                .map(|(b, (w, n))| (b, w, n))
                .collect();
            v.sort_by(|a, b| b.1.total_cmp(&a.1));
            let total = v.iter().map(|x| x.1).sum();
            (cg, v, total)
        })
        .filter(|r| r.2 > 0.0)
        .collect();
    if rows.is_empty() {
        return Ok(None);
    }
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows.truncate(MAX_WAITERS);
    let n = rows.len() as f64;
    let mut p = Plot::new(
        70.0 + 50.0 * n,
        Axis::new(
            Scale::new(Kind::Linear, 0.0, 1.0),
            Fmt::Share,
            "share of the cgroup's wait time, by who held its CPU",
        ),
        Axis::new(Scale::new(Kind::Linear, 0.0, n), Fmt::Count, ""),
    );
    p.hide_y_ticks();
    let mut colours: BTreeMap<String, usize> = BTreeMap::new();
    for (row, (cg, by, total)) in rows.iter().enumerate() {
        let y0 = n - row as f64 - 0.8;
        let mut at = 0.0;
        let (shown, rest) = by.split_at(by.len().min(MAX_BY));
        let others: (f64, f64) = rest.iter().fold((0.0, 0.0), |a, x| (a.0 + x.1, a.1 + x.2));
        let mut entries: Vec<(String, f64, f64)> = shown.to_vec();
        if others.0 > 0.0 {
            entries.push(("others".into(), others.0, others.1));
        }
        for (by, wait, preempt) in entries {
            let next = colours.len();
            let c = *colours.entry(by.clone()).or_insert(next);
            p.series(&by, colour(c));
            let share = wait / total;
            p.bar(
                at,
                at + share,
                Some(y0),
                y0 + 0.5,
                &format!(
                    "{cg} waited {} behind {by} ({}), preempted {preempt} times by it",
                    fmt_value(Fmt::Duration, wait),
                    fmt_value(Fmt::Share, share)
                ),
            );
            at += share;
        }
        let preempted: f64 = by.iter().filter(|b| b.0 != *cg).map(|b| b.2).sum();
        p.note(
            0.005,
            y0 + 0.7,
            &format!(
                "{cg}: {} waiting in all, preempted {preempted} times by others",
                fmt_value(Fmt::Duration, *total)
            ),
        );
    }
    let id = rd.id(ChartKind::RunqWaits, 0);
    Ok(Some(Chart {
        svg: p.finish(&id),
        id,
        kind: ChartKind::RunqWaits,
        title: "Who held the CPU while each cgroup waited".into(),
        caption: "Each bar splits a cgroup's run-queue wait by the cgroup (or system service) that ran on its CPU meanwhile; hover for the preemptions. One large share from another cgroup is a noisy neighbour.".into(),
        series: vec!["runq_wait_ns".into(), "runq_preemptions".into()],
    }))
}
