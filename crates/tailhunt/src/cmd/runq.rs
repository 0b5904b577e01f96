//! `tailhunt runq`: run-queue latency per cgroup (eBPF, or /proc/<pid>/schedstat degraded),
//! stored as a run, with the noisy-neighbor and cpu-throttled detectors at the end.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;
use tailhunt_diagnose::runq::{self as detect, CgroupTimeline, RunqStep, Share};
use tailhunt_histogram::Histogram;
use tailhunt_model::{ClockOrigin, Finding, RunStatus, SeriesData, SinkError};
use tailhunt_report::runq::{
    render_degraded_interval, render_interval, render_runq, DegradedIntervalDoc, IntervalDoc,
    OverheadDoc, RunqDoc, Totals,
};
use tailhunt_sched::cgroups::Hierarchy;
use tailhunt_sched::cpu_stat::Quota;
use tailhunt_sched::record::{DegradedRecorder, Recorder};
use tailhunt_sched::{Attach, Interval, Observer, Started, TimestampStore, TracerConfig};
use tailhunt_store::Store;

use super::duration_flag;
use crate::cli::{AttachArg, Cli, HierarchyArg, RunqArgs, StoreArg};
use crate::output;
use crate::signals::{self, Interrupted};

fn config(a: &RunqArgs) -> Result<TracerConfig> {
    let interval = duration_flag("--interval", &a.interval)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| duration_flag("--duration", d))
        .transpose()?;
    if duration.is_some_and(|d| d.is_zero()) {
        anyhow::bail!("--duration 0: give how long to trace, e.g. --duration 30s (or leave it out and stop with Ctrl-C)");
    }
    Ok(TracerConfig {
        interval,
        duration,
        attach: match a.attach {
            AttachArg::Auto => Attach::Auto,
            AttachArg::TpBtf => Attach::TpBtf,
            AttachArg::RawTp => Attach::RawTp,
        },
        store: a.store.map(|s| match s {
            StoreArg::TaskStorage => TimestampStore::TaskStorage,
            StoreArg::Array => TimestampStore::Array,
            StoreArg::Hash => TimestampStore::Hash,
        }),
        hierarchy: hierarchy(a.hierarchy),
        cgroups: a.cgroups.clone(),
        kernel_threads: a.kernel_threads,
        all_events: a.all_events,
        outlier_ns: duration_flag("--outlier", &a.outlier)?.as_nanos() as u64,
        max_cgroups: max_cgroups(a.max_cgroups)?,
        ..TracerConfig::default()
    })
}

/// `--max-cgroups`, bounded: each cgroup has a histogram (about 8 KB) in kernel memory.
fn max_cgroups(n: u32) -> Result<u32> {
    const MAX: u32 = 16_384;
    if !(1..=MAX).contains(&n) {
        anyhow::bail!(
            "--max-cgroups {n}: give 1 to {MAX} (each cgroup's histogram takes about 8 KB of kernel memory; waits of cgroups past the limit are counted as lost)"
        );
    }
    Ok(n)
}

fn hierarchy(h: HierarchyArg) -> Hierarchy {
    match h {
        HierarchyArg::V2 => Hierarchy::V2,
        HierarchyArg::V1Cpu => Hierarchy::V1Cpu,
    }
}

/// Why BPF cannot be used here, when it cannot.
fn bpf_unavailable() -> Option<String> {
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing; it needs CONFIG_DEBUG_INFO_BTF=y)".into());
    }
    tailhunt_sched::bpf_denied().map(|why| format!("not permitted to load BPF programs ({why}): run as root or grant CAP_BPF and CAP_PERFMON"))
}

/// Prints each interval as it ends and feeds the store.
struct Live<'r, 's> {
    recorder: &'r mut Recorder<'s>,
    totals: Totals,
    intervals: Vec<IntervalDoc>,
    origin: ClockOrigin,
    print: bool,
    top: usize,
}

impl Observer for Live<'_, '_> {
    fn started(&mut self, started: &Started) -> Result<(), SinkError> {
        self.origin = started.origin;
        if self.print {
            let what = if started.filter.is_empty() {
                "all cgroups".to_string()
            } else {
                format!("{} cgroup(s)", started.filter.len())
            };
            eprintln!("tracing run-queue latency of {what} (until --duration or Ctrl-C)");
        }
        self.recorder.started(started)
    }

    fn interval(&mut self, iv: &Interval) -> Result<(), SinkError> {
        self.recorder.interval(iv)?;
        self.totals.add(iv);
        let doc = IntervalDoc::new(iv, &self.origin);
        if self.print {
            let mut out = std::io::stdout().lock();
            out.write_all(render_interval(&doc, self.top).as_bytes())?;
            out.flush()?;
        }
        self.intervals.push(doc);
        Ok(())
    }
}

pub fn run(cli: &Cli, a: &RunqArgs) -> Result<()> {
    let cfg = config(a)?;
    let unavailable = if a.degraded {
        Some("--degraded was given".to_string())
    } else {
        bpf_unavailable()
    };
    if let (Some(why), true) = (&unavailable, a.require_bpf) {
        anyhow::bail!("{why} (--require-bpf refuses the degraded mode)");
    }
    signals::install();
    let mut store = Store::open(&cli.db)
        .with_context(|| format!("cannot open the store '{}'", cli.db.display()))?;
    let baseline = a
        .baseline
        .as_deref()
        .map(|b| baseline_run(&store, b))
        .transpose()?;
    let params = json!({
        "baseline_run": baseline,
        "interval_ns": cfg.interval.as_nanos() as u64,
        "duration_ns": cfg.duration.map(|d| d.as_nanos() as u64),
        "cgroups": a.cgroups,
        "hierarchy": format!("{:?}", a.hierarchy),
        "outlier_ns": cfg.outlier_ns,
        "all_events": cfg.all_events,
    });
    let (doc, interrupted) = match unavailable {
        Some(why) => {
            eprintln!("tailhunt: BPF unavailable: {why}; falling back to /proc/<pid>/schedstat (mean waits per cgroup only)");
            degraded(&mut store, &cfg, params, why, a, cli.json)?
        }
        None => traced(&mut store, &cfg, params, a, cli.json)?,
    };
    output::print(cli.json, &doc, |d| render_runq(d, a.top))?;
    if interrupted {
        return Err(anyhow::Error::new(Interrupted).context(format!(
            "stopped before --duration ended: kept what was measured as partial run {}",
            doc.run_id
        )));
    }
    Ok(())
}

/// The BPF path. Returns the document and whether Ctrl-C cut a `--duration` short.
fn traced(
    store: &mut Store,
    cfg: &TracerConfig,
    params: serde_json::Value,
    a: &RunqArgs,
    json: bool,
) -> Result<(RunqDoc, bool)> {
    let mut writer = store.begin_run("runq", params, ClockOrigin::now())?;
    let mut recorder = Recorder::new(&mut writer);
    let mut live = Live {
        recorder: &mut recorder,
        totals: Totals::default(),
        intervals: Vec::new(),
        origin: ClockOrigin::now(),
        print: !json && !a.quiet,
        top: a.top,
    };
    let result = tailhunt_sched::trace(cfg, signals::flag(), &mut live);
    let (totals, intervals) = (live.totals.rows(), live.intervals);
    let extra = recorder.params();
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            let kept = !intervals.is_empty();
            let id = writer.finish_partial(extra)?;
            let e = anyhow::Error::new(e);
            return Err(if kept {
                e.context(format!(
                    "tracing stopped: kept {} interval(s) as partial run {id}",
                    intervals.len()
                ))
            } else {
                store.delete_run(&id)?;
                e
            });
        }
    };
    let (run_id, status, cut_short) = close(writer, extra, summary.interrupted, cfg)?;
    let findings = diagnose_stored(store, &run_id)?;
    let doc = RunqDoc {
        run_id,
        status,
        mode: "bpf".into(),
        degraded_reason: None,
        started: Some(summary.started),
        intervals,
        degraded_intervals: Vec::new(),
        totals,
        overhead: Some(OverheadDoc::new(summary.programs, summary.counters)),
        findings,
    };
    Ok((doc, cut_short))
}

fn degraded(
    store: &mut Store,
    cfg: &TracerConfig,
    params: serde_json::Value,
    why: String,
    a: &RunqArgs,
    json: bool,
) -> Result<(RunqDoc, bool)> {
    let origin = ClockOrigin::now();
    let mut writer = store.begin_run("runq", params, origin)?;
    let mut recorder = DegradedRecorder::new(&mut writer);
    let mut docs = Vec::new();
    let print = !json && !a.quiet;
    let result = tailhunt_sched::schedstat::trace(
        cfg.hierarchy,
        cfg.interval,
        cfg.duration,
        signals::flag(),
        |iv| {
            recorder.interval(iv)?;
            let d = DegradedIntervalDoc::new(iv, &origin);
            if print {
                let mut out = std::io::stdout().lock();
                out.write_all(render_degraded_interval(&d, a.top).as_bytes())?;
                out.flush()?;
            }
            docs.push(d);
            Ok(())
        },
    );
    let mut extra = recorder.params();
    extra["runq"]["degraded_reason"] = json!(why);
    let (_, stopped) = match result {
        Ok(r) => r,
        Err(e) => {
            let id = writer.finish_partial(extra)?;
            return Err(anyhow::Error::new(e).context(format!(
                "sampling stopped: kept what was read as partial run {id}"
            )));
        }
    };
    let (run_id, status, cut_short) = close(writer, extra, stopped, cfg)?;
    let doc = RunqDoc {
        run_id,
        status,
        mode: "schedstat".into(),
        degraded_reason: Some(why),
        started: None,
        intervals: Vec::new(),
        degraded_intervals: docs,
        totals: Vec::new(),
        overhead: None,
        findings: Vec::new(),
    };
    Ok((doc, cut_short))
}

/// Finishes the run: complete, unless Ctrl-C cut a `--duration` short (without one, Ctrl-C is
/// how a run ends). Returns its id, status and whether it was cut short.
fn close(
    writer: tailhunt_store::RunWriter<'_>,
    extra: serde_json::Value,
    stopped: bool,
    cfg: &TracerConfig,
) -> Result<(String, RunStatus, bool)> {
    if stopped && cfg.duration.is_some() {
        Ok((writer.finish_partial(extra)?, RunStatus::Partial, true))
    } else {
        Ok((writer.finish(extra)?, RunStatus::Complete, false))
    }
}

/// The run `--baseline` names, which must be a `runq` run.
fn baseline_run(store: &Store, spec: &str) -> Result<String> {
    let id = store.resolve_run(spec)?;
    let run = store.run(&id)?;
    if run.kind != "runq" {
        anyhow::bail!(
            "--baseline {spec}: run {id} is a '{}' run; give a run recorded by `tailhunt runq` (see `tailhunt runs`)",
            run.kind
        );
    }
    Ok(id)
}

/// Runs the run-queue detectors on a stored `runq` run (against its `--baseline` run, when it
/// had one that still exists) and stores their findings.
pub fn diagnose_stored(store: &mut Store, run_id: &str) -> Result<Vec<Finding>> {
    let run = store.run(run_id)?;
    let baseline = match run.params["baseline_run"].as_str() {
        Some(b) if store.run(b).is_ok() => timelines(store, b)?,
        _ => Vec::new(),
    };
    let findings = detect::diagnose(&timelines(store, run_id)?, &baseline);
    store.replace_findings(run_id, &findings)?;
    Ok(findings)
}

fn share<'a>(s: &'a mut RunqStep, by: &str) -> &'a mut Share {
    s.by.entry(by.to_string()).or_default()
}

/// Rebuilds each cgroup's timeline from the stored series and the run's parameters.
fn timelines(store: &Store, run_id: &str) -> Result<Vec<CgroupTimeline>> {
    let run = store.run(run_id)?;
    let mut steps: BTreeMap<String, BTreeMap<i64, RunqStep>> = BTreeMap::new();
    let blank = |end: i64| RunqStep {
        start_ns: end,
        end_ns: end,
        latency: Histogram::with_layout(tailhunt_sched::interval::kernel_layout()),
        by: BTreeMap::new(),
        throttled_periods: None,
        throttled_ns: None,
    };
    // What the detectors read; the outlier events and pressure are not loaded.
    const USED: [&str; 6] = [
        "runq_latency",
        "runq_preemptions",
        "runq_waits",
        "runq_wait_ns",
        "cpu_throttled_periods",
        "cpu_throttled_ns",
    ];
    for info in store.series(run_id)? {
        let Some(cgroup) = info.labels.get("cgroup").cloned() else {
            continue;
        };
        if !USED.contains(&info.name.as_str()) {
            continue;
        }
        let series = store.load_series(&info)?;
        let per = steps.entry(cgroup).or_default();
        match (&series.data, info.name.as_str()) {
            (SeriesData::Histograms(hs), "runq_latency") => {
                for h in hs {
                    let s = per.entry(h.end_ns).or_insert_with(|| blank(h.end_ns));
                    s.start_ns = h.start_ns;
                    s.latency = h.histogram.clone();
                }
            }
            (SeriesData::Values(points), name) => {
                let by = info.labels.get("by").cloned();
                for p in points {
                    let s = per.entry(p.t_ns).or_insert_with(|| blank(p.t_ns));
                    let v = u64::try_from(p.value).unwrap_or(0);
                    match (name, &by) {
                        ("runq_preemptions", Some(b)) => share(s, b).preemptions = v,
                        ("runq_waits", Some(b)) => share(s, b).waits = v,
                        ("runq_wait_ns", Some(b)) => share(s, b).wait_ns = v,
                        ("cpu_throttled_periods", _) => s.throttled_periods = Some(v),
                        ("cpu_throttled_ns", _) => s.throttled_ns = Some(v),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let info = &run.params["runq"];
    Ok(steps
        .into_iter()
        .map(|(cgroup, per)| {
            let quota = serde_json::from_value::<Quota>(info["cgroups"][&cgroup]["quota"].clone())
                .ok()
                .map(|q| q.to_string());
            let blockers = info["blockers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|b| b["cgroup"] == cgroup.as_str())
                .map(|b| {
                    (
                        b["by"].as_str().unwrap_or("").to_string(),
                        b["comm"].as_str().unwrap_or("").to_string(),
                        b["pid"].as_u64().unwrap_or(0) as u32,
                        b["count"].as_u64().unwrap_or(0),
                    )
                })
                .collect();
            CgroupTimeline {
                cgroup,
                steps: per.into_values().collect(),
                quota,
                blockers,
            }
        })
        .collect())
}
