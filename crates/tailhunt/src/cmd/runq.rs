//! `tailhunt runq`: run-queue latency per cgroup (eBPF, or `/proc/PID/schedstat` degraded),
//! stored as a run, with the noisy-neighbor and cpu-throttled detectors at the end.

use std::io::Write;

use anyhow::{Context, Result};
use serde_json::json;
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::evidence::runq::{RunqRecord, TracerSetup};
use tailhunt_model::{ClockOrigin, RunKind, RunStatus, SinkError};
use tailhunt_report::runq::{
    render_degraded_interval, render_interval, render_runq, DegradedIntervalDoc, IntervalDoc,
    OverheadDoc, RunqDoc, Totals,
};
use tailhunt_sched::record::{DegradedRecorder, Recorder};
use tailhunt_sched::{Interval, Observer, TracerConfig};
use tailhunt_store::Store;

use crate::cli::{Cli, RunqArgs};
use crate::output;
use crate::signals::{self, Interrupted};

fn config(a: &RunqArgs) -> Result<TracerConfig> {
    let cfg = TracerConfig {
        interval: a.interval,
        duration: a.duration,
        attach: a.attach,
        store: a.store,
        hierarchy: a.hierarchy,
        cgroups: a.cgroups.clone(),
        kernel_threads: a.kernel_threads,
        all_events: a.all_events,
        outlier_ns: a.outlier.as_nanos() as u64,
        max_cgroups: a.max_cgroups,
        ..TracerConfig::default()
    };
    cfg.validate()?;
    Ok(cfg)
}

/// Prints each interval as it ends and feeds the store.
struct Printer<'r, 's> {
    recorder: &'r mut Recorder<'s>,
    totals: Totals,
    intervals: Vec<IntervalDoc>,
    origin: ClockOrigin,
    print: bool,
    top: usize,
}

impl Observer for Printer<'_, '_> {
    fn started(&mut self, started: &TracerSetup) -> Result<(), SinkError> {
        self.origin = started.origin;
        if self.print {
            let what = if started.filter.is_empty() {
                "all cgroups".to_string()
            } else {
                format!("{} cgroup(s)", started.filter.len())
            };
            tell!("tracing run-queue latency of {what} (until --duration or Ctrl-C)");
        }
        self.recorder.started(started)
    }

    fn interval(&mut self, iv: &Interval) -> Result<(), SinkError> {
        self.recorder.interval(iv)?;
        self.totals.add(&iv.cgroups);
        let doc = IntervalDoc::new(
            (iv.start_ns, iv.end_ns),
            &iv.cgroups,
            iv.counters,
            &self.origin,
        );
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
        tailhunt_sched::tracing_unavailable()
    };
    if let (Some(why), true) = (&unavailable, a.require_bpf) {
        anyhow::bail!("{why} (--require-bpf refuses the degraded mode)");
    }
    signals::install();
    let mut store = crate::cmd::open_tagged(cli)
        .with_context(|| format!("cannot open the store '{}'", cli.db.display()))?;
    let baseline = a
        .baseline
        .as_deref()
        .map(|b| tailhunt_diagnose::stored::runq_run(&store, b))
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
            tell!("tailhunt: BPF unavailable: {why}; falling back to /proc/PID/schedstat (mean waits per cgroup only)");
            degraded(&mut store, &cfg, params, why, a, cli.json)?
        }
        None => traced(&mut store, &cfg, params, baseline, a, cli.json)?,
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
    baseline: Option<String>,
    a: &RunqArgs,
    json: bool,
) -> Result<(RunqDoc, bool)> {
    let mut writer = store.begin_run(RunKind::Runq, params, ClockOrigin::now())?;
    let mut recorder = Recorder::new(&mut writer);
    let mut printer = Printer {
        recorder: &mut recorder,
        totals: Totals::default(),
        intervals: Vec::new(),
        origin: ClockOrigin::now(),
        print: !json && !a.quiet,
        top: a.top,
    };
    let result = tailhunt_sched::trace(cfg, signals::flag(), &mut printer);
    let (totals, intervals) = (printer.totals.rows(), printer.intervals);
    let record = RunqRecord {
        baseline_run: baseline,
        ..recorder.record()
    };
    put_evidence(&mut writer, &record).map_err(|e| anyhow::anyhow!(e))?;
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            return Err(super::abandoned(writer, e.into(), |id, _| {
                let n = intervals.len();
                format!("tracing stopped: kept {n} interval(s) as partial run {id}")
            }));
        }
    };
    let (run_id, status, cut_short) = close(writer, summary.interrupted, cfg)?;
    let diagnosis = tailhunt_diagnose::diagnose_and_store(store, &run_id)?;
    let findings = diagnosis.findings;
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
    let mut writer = store.begin_run(RunKind::Runq, params, origin)?;
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
    let record = recorder.record(&why);
    put_evidence(&mut writer, &record).map_err(|e| anyhow::anyhow!(e))?;
    let (_, stopped) = match result {
        Ok(r) => r,
        Err(e) => {
            return Err(super::abandoned(writer, e.into(), |id, _| {
                format!("sampling stopped: kept what was read as partial run {id}")
            }));
        }
    };
    let (run_id, status, cut_short) = close(writer, stopped, cfg)?;
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
    stopped: bool,
    cfg: &TracerConfig,
) -> Result<(String, RunStatus, bool)> {
    let partial = stopped && cfg.duration.is_some();
    let (id, status) = writer.finish_as(partial, json!({}))?;
    Ok((id, status, partial))
}
