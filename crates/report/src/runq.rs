//! `tailhunt runq`: the run-queue document and its terminal rendering.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;
use tailhunt_histogram::Histogram;
use tailhunt_model::evidence::runq::{
    kernel_layout, mean_ns_per_hook, CgroupInterval, CgroupKind, CgroupRef, Counters,
    DegradedInterval, ProgramCost, Quota, TracerSetup,
};
use tailhunt_model::{ClockOrigin, Finding, RunStatus};

use crate::terminal::{render_duration, render_findings, render_time, table, thousands};

/// Another cgroup's part in a cgroup's waits.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ByRow {
    /// The other cgroup's name (`idle`: the CPU was idle).
    pub cgroup: String,
    /// Preemptions of this cgroup's tasks in its favour.
    pub preemptions: u64,
    /// Waits during which it ran on the waiter's CPU.
    pub waits: u64,
    /// How long it ran during them, ns: its part of the wait time.
    pub wait_ns: u64,
}

/// One cgroup, over an interval or the whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CgroupRow {
    /// Name (`docker:...`, a unit, a path, `system`).
    pub cgroup: String,
    /// Path in the charged hierarchy.
    pub path: String,
    /// Kind.
    pub kind: CgroupKind,
    /// Waits (run-queue latencies) measured.
    pub waits: u64,
    /// p50, ns (within 3.1%: the in-kernel histogram's bucket bound).
    pub p50_ns: Option<u64>,
    /// p90, ns.
    pub p90_ns: Option<u64>,
    /// p99, ns.
    pub p99_ns: Option<u64>,
    /// Upper edge of the highest bucket, ns.
    pub max_ns: Option<u64>,
    /// Mean, ns (exact).
    pub mean_ns: Option<f64>,
    /// Time its tasks ran, on all CPUs, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_ns: Option<u64>,
    /// Who ran while it waited (and for how long), and who preempted it, most wait first.
    pub by: Vec<ByRow>,
    /// Periods throttled by its CPU quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttled_periods: Option<u64>,
    /// Time throttled, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttled_ns: Option<u64>,
    /// Time some task of it waited for a CPU (PSI), ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pressure_some_ns: Option<u64>,
    /// Its CPU quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
}

impl CgroupRow {
    fn new(cg: &CgroupRef, h: &Histogram) -> CgroupRow {
        CgroupRow {
            cgroup: cg.name.clone(),
            path: cg.path.clone(),
            kind: cg.kind,
            waits: h.count(),
            p50_ns: h.quantile(0.5),
            p90_ns: h.quantile(0.9),
            p99_ns: h.quantile(0.99),
            max_ns: h.max(),
            mean_ns: h.mean(),
            run_ns: None,
            by: Vec::new(),
            throttled_periods: None,
            throttled_ns: None,
            pressure_some_ns: None,
            quota: None,
        }
    }

    /// The row of one cgroup in one interval.
    pub fn from_interval(c: &CgroupInterval) -> CgroupRow {
        CgroupRow {
            by: c
                .by
                .iter()
                .map(|a| ByRow {
                    cgroup: a.other.name.clone(),
                    preemptions: a.preemptions,
                    waits: a.waits,
                    wait_ns: a.wait_ns,
                })
                .collect(),
            run_ns: c.run_ns,
            throttled_periods: c.throttling.map(|t| t.throttled_periods),
            throttled_ns: c.throttling.map(|t| t.throttled_ns),
            pressure_some_ns: c.pressure_some_us.map(|u| u.saturating_mul(1000)),
            quota: c.quota,
            ..CgroupRow::new(&c.cgroup, &c.latency)
        }
    }
}

/// One interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalDoc {
    /// Start, ns since the epoch.
    pub start_wall_ns: i64,
    /// End, ns since the epoch.
    pub end_wall_ns: i64,
    /// Cgroups with waits, most waits first.
    pub cgroups: Vec<CgroupRow>,
    /// Kernel-side counters in the interval.
    pub counters: Counters,
}

impl IntervalDoc {
    /// From one interval of the tracer (`span_ns`: its start and end on the monotonic clock);
    /// times converted with the run's clock origin.
    pub fn new(
        span_ns: (i64, i64),
        cgroups: &[CgroupInterval],
        counters: Counters,
        origin: &ClockOrigin,
    ) -> IntervalDoc {
        IntervalDoc {
            start_wall_ns: origin.to_wall(span_ns.0),
            end_wall_ns: origin.to_wall(span_ns.1),
            cgroups: cgroups.iter().map(CgroupRow::from_interval).collect(),
            counters,
        }
    }
}

/// One cgroup in one interval of the degraded mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DegradedRow {
    /// Name.
    pub cgroup: String,
    /// Path.
    pub path: String,
    /// Total run-queue wait of its threads, ns.
    pub wait_ns: u64,
    /// Timeslices they ran.
    pub timeslices: u64,
    /// Mean wait per timeslice, ns.
    pub mean_wait_ns: Option<f64>,
    /// Threads seen.
    pub threads: usize,
}

/// One interval of the degraded mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DegradedIntervalDoc {
    /// Start, ns since the epoch.
    pub start_wall_ns: i64,
    /// End, ns since the epoch.
    pub end_wall_ns: i64,
    /// Cgroups, most wait first.
    pub cgroups: Vec<DegradedRow>,
}

impl DegradedIntervalDoc {
    /// From a schedstat interval.
    pub fn new(iv: &DegradedInterval, origin: &ClockOrigin) -> DegradedIntervalDoc {
        DegradedIntervalDoc {
            start_wall_ns: origin.to_wall(iv.start_ns),
            end_wall_ns: origin.to_wall(iv.end_ns),
            cgroups: iv
                .cgroups
                .iter()
                .map(|c| DegradedRow {
                    cgroup: c.cgroup.name.clone(),
                    path: c.cgroup.path.clone(),
                    wait_ns: c.wait_ns,
                    timeslices: c.timeslices,
                    mean_wait_ns: c.mean_wait_ns(),
                    threads: c.threads,
                })
                .collect(),
        }
    }
}

/// What the tracer cost, from the kernel's BPF statistics, and what it lost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverheadDoc {
    /// Each program's runs and time.
    pub programs: Vec<ProgramCost>,
    /// Mean cost per hook over all of them, ns.
    pub ns_per_hook: Option<f64>,
    /// Events sent, dropped, rate-limited; counts lost to full maps.
    pub counters: Counters,
}

impl OverheadDoc {
    /// From the totals of a run.
    pub fn new(programs: Vec<ProgramCost>, counters: Counters) -> OverheadDoc {
        OverheadDoc {
            ns_per_hook: mean_ns_per_hook(&programs),
            programs,
            counters,
        }
    }
}

/// The `tailhunt runq` document.
#[derive(Debug, Clone, Serialize)]
pub struct RunqDoc {
    /// Run id.
    pub run_id: String,
    /// `complete`, or `partial` when stopped early.
    pub status: RunStatus,
    /// `bpf`, or `schedstat` (the degraded mode).
    pub mode: String,
    /// Why the degraded mode was used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    /// How the tracer was set up (BPF mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<TracerSetup>,
    /// Intervals (BPF mode).
    pub intervals: Vec<IntervalDoc>,
    /// Intervals (degraded mode).
    pub degraded_intervals: Vec<DegradedIntervalDoc>,
    /// Each cgroup over the whole run (BPF mode), most waits first.
    pub totals: Vec<CgroupRow>,
    /// The tracer's own cost (BPF mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<OverheadDoc>,
    /// Findings of `noisy-neighbor` and `cpu-throttled`.
    pub findings: Vec<Finding>,
}

/// Whole-run totals per cgroup, accumulated interval by interval.
#[derive(Debug, Default)]
pub struct Totals {
    rows: BTreeMap<String, (CgroupRef, Histogram, BTreeMap<String, ByRow>, CgroupRow)>,
}

impl Totals {
    /// Adds one interval's cgroups.
    pub fn add(&mut self, cgroups: &[CgroupInterval]) {
        for c in cgroups {
            let e = self.rows.entry(c.cgroup.name.clone()).or_insert_with(|| {
                (
                    c.cgroup.clone(),
                    Histogram::with_layout(kernel_layout()),
                    BTreeMap::new(),
                    CgroupRow::new(&c.cgroup, &Histogram::new()),
                )
            });
            e.1.merge(&c.latency);
            for a in &c.by {
                let b = e.2.entry(a.other.name.clone()).or_insert_with(|| ByRow {
                    cgroup: a.other.name.clone(),
                    ..ByRow::default()
                });
                b.preemptions += a.preemptions;
                b.waits += a.waits;
                b.wait_ns += a.wait_ns;
            }
            let sum = |acc: Option<u64>, v: Option<u64>| match (acc, v) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            };
            let row = &mut e.3;
            row.run_ns = sum(row.run_ns, c.run_ns);
            row.throttled_periods = sum(
                row.throttled_periods,
                c.throttling.map(|t| t.throttled_periods),
            );
            row.throttled_ns = sum(row.throttled_ns, c.throttling.map(|t| t.throttled_ns));
            row.pressure_some_ns = sum(row.pressure_some_ns, c.pressure_some_us.map(|u| u * 1000));
            row.quota = c.quota.or(row.quota);
        }
    }

    /// One row per cgroup, most waits first.
    pub fn rows(&self) -> Vec<CgroupRow> {
        let mut out: Vec<CgroupRow> = self
            .rows
            .values()
            .map(|(cg, h, by, acc)| {
                let mut by: Vec<ByRow> = by.values().cloned().collect();
                by.sort_by_key(|b| std::cmp::Reverse(b.wait_ns));
                CgroupRow {
                    by,
                    run_ns: acc.run_ns,
                    throttled_periods: acc.throttled_periods,
                    throttled_ns: acc.throttled_ns,
                    pressure_some_ns: acc.pressure_some_ns,
                    quota: acc.quota,
                    ..CgroupRow::new(cg, h)
                }
            })
            .collect();
        out.sort_by(|a, b| b.waits.cmp(&a.waits).then(a.cgroup.cmp(&b.cgroup)));
        out
    }
}

fn opt_duration(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), render_duration)
}

/// "neighbour 88% (412 preempt/s)": the other cgroups that ran for most of the wait time.
fn render_by(row: &CgroupRow, seconds: f64) -> String {
    let total: u64 = row.by.iter().map(|b| b.wait_ns).sum();
    let parts: Vec<String> = row
        .by
        .iter()
        .filter(|b| b.cgroup != row.cgroup)
        .take(2)
        .map(|b| {
            let share = b.wait_ns as f64 / total.max(1) as f64 * 100.0;
            if seconds > 0.0 {
                format!(
                    "{} {:.0}% ({:.0} preempt/s)",
                    b.cgroup,
                    share,
                    b.preemptions as f64 / seconds
                )
            } else {
                format!("{} {:.0}%", b.cgroup, share)
            }
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

fn render_throttle(row: &CgroupRow) -> String {
    match (row.throttled_periods, row.throttled_ns) {
        (Some(0), _) => "no".into(),
        (Some(p), Some(ns)) => format!("{p}x {}", render_duration(ns)),
        _ => "-".into(),
    }
}

/// The table of cgroup rows; `seconds` turns preemption counts into rates.
pub fn render_rows(rows: &[CgroupRow], top: usize, seconds: f64) -> String {
    let body: Vec<Vec<String>> = rows
        .iter()
        .take(top)
        .map(|r| {
            vec![
                r.cgroup.clone(),
                thousands(r.waits),
                opt_duration(r.p50_ns),
                opt_duration(r.p99_ns),
                opt_duration(r.max_ns),
                render_by(r, seconds),
                render_throttle(r),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "cgroup",
            "waits",
            "p50",
            "p99",
            "max",
            "waited behind (share of wait time)",
            "throttled",
        ],
        &body,
        "lrrrrll",
    );
    if rows.len() > top {
        let _ = writeln!(
            out,
            "(+{} more cgroups; --top to show them)",
            rows.len() - top
        );
    }
    out
}

/// One interval, as printed while tracing.
pub fn render_interval(iv: &IntervalDoc, top: usize) -> String {
    let secs = (iv.end_wall_ns - iv.start_wall_ns) as f64 / 1e9;
    let mut out = format!("\n{} ({:.1}s)\n", render_time(iv.end_wall_ns), secs);
    out.push_str(&render_rows(&iv.cgroups, top, secs));
    let c = &iv.counters;
    if c.lost_anything() {
        let _ = writeln!(
            out,
            "lost: {} events (ring buffer full), {} waits (cgroup map full), {} attributions, {} wakeups untimed",
            c.ring_dropped, c.cgroups_full, c.pairs_full, c.timestamps_full
        );
    }
    out
}

/// One degraded interval, as printed while sampling.
pub fn render_degraded_interval(iv: &DegradedIntervalDoc, top: usize) -> String {
    let mut out = format!("\n{}\n", render_time(iv.end_wall_ns));
    let rows: Vec<Vec<String>> = iv
        .cgroups
        .iter()
        .take(top)
        .map(|c| {
            vec![
                c.cgroup.clone(),
                c.threads.to_string(),
                thousands(c.timeslices),
                render_duration(c.wait_ns),
                c.mean_wait_ns
                    .map_or_else(|| "-".into(), |m| render_duration(m as u64)),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "cgroup",
            "threads",
            "timeslices",
            "total wait",
            "mean wait/slice",
        ],
        &rows,
        "lrrrr",
    ));
    out
}

/// The end of a run: totals, the tracer's cost, findings.
pub fn render_runq(d: &RunqDoc, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\nrun {} ({}; {})", d.run_id, d.status.name(), d.mode);
    if let Some(why) = &d.degraded_reason {
        let _ = writeln!(
            out,
            "degraded mode: {why}\n  /proc/PID/schedstat gives mean waits per cgroup only: no percentiles, no outliers, no attribution"
        );
    }
    if let Some(s) = &d.started {
        let attach = serde_json::to_value(s.attach)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let store = serde_json::to_value(s.store)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let _ = writeln!(out, "programs: {attach}, timestamps in {store}");
        if let Some(why) = &s.fallback_reason {
            let _ = writeln!(out, "  (tp_btf refused: {why})");
        }
    }
    if !d.totals.is_empty() {
        let secs: f64 = d
            .intervals
            .iter()
            .map(|i| (i.end_wall_ns - i.start_wall_ns) as f64 / 1e9)
            .sum();
        let _ = writeln!(out, "\nwhole run ({secs:.1}s):");
        out.push_str(&render_rows(&d.totals, top, secs));
    }
    if let Some(o) = &d.overhead {
        let per: Vec<String> = o
            .programs
            .iter()
            .map(|p| {
                format!(
                    "{} {} x {}",
                    p.name,
                    thousands(p.run_cnt),
                    p.ns_per_run()
                        .map_or_else(|| "-".into(), |n| format!("{n:.0} ns"))
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "\ntracer cost (kernel BPF statistics): {} per hook on average; {}",
            o.ns_per_hook
                .map_or_else(|| "not measured".into(), |n| format!("{n:.0} ns")),
            per.join(", ")
        );
        let c = &o.counters;
        let _ = writeln!(
            out,
            "events: {} sent, {} dropped (ring buffer full), {} over the outlier budget; lost counts: {} cgroup map, {} attribution map, {} timestamp store",
            thousands(c.emitted),
            c.ring_dropped,
            thousands(c.rate_limited),
            c.cgroups_full,
            c.pairs_full,
            c.timestamps_full
        );
        if c.beyond_history > 0 {
            let _ = writeln!(
                out,
                "{} wait(s) reached back past their CPU's remembered history of who ran: that part is charged to `unattributed`",
                thousands(c.beyond_history)
            );
        }
    }
    if d.findings.is_empty() && d.mode == "bpf" {
        let _ = writeln!(out, "\nno noisy neighbour or CPU throttling found");
    }
    render_findings(&d.findings, &mut out);
    out
}
