//! `tailhunt pcap` and `tailhunt capture`.

use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use serde_json::json;
use tailhunt_diagnose::capture::DETECTORS;
use tailhunt_model::evidence::capture::{link_types_not_analysed, CaptureReport};
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::{ClockOrigin, RunKind, RunStatus};
use tailhunt_pcap::analysis::{AnalysisConfig, Analyzer, ConfigError};
use tailhunt_pcap::bins_csv::write_bins_csv;
use tailhunt_pcap::run::{analyse_threads, Outcome, Progress, Stopped};
use tailhunt_pcap::{is_stdin, FileSet, SourceSet};
use tailhunt_report::capture::{port_latencies, render_capture, CaptureDoc};
use tailhunt_report::export::flows::write_flows_csv;
use tailhunt_store::Store;

use crate::cli::{CaptureAnalysisArgs, CaptureArgs, Cli, PcapArgs};
use crate::output;
use crate::progress::Line;
use crate::signals::{self, Interrupted};

mod live;
mod matching;

/// Reads `--bin`, `--link-rate` and `--burst-threshold`; the analysis checks their ranges.
fn config(a: &CaptureAnalysisArgs) -> Result<AnalysisConfig> {
    let cfg = AnalysisConfig {
        bin_ns: a.bin.as_nanos() as i64,
        link_rate_bps: a.link_rate,
        burst_threshold: a.burst_threshold,
        // Every flow's bins only when they are written out; otherwise a closed connection
        // keeps just the bins a burst could claim.
        keep_flow_bins: a.bins_csv.is_some(),
        // Every flow goes into the run as a row when it finishes; the report keeps those the
        // detectors may name and the largest (all that is printed).
        store_flows: true,
        largest_flows: a.top,
    };
    cfg.validate().map_err(|e| {
        let flag = match e {
            ConfigError::BinWidth(_) => "--bin",
            ConfigError::BurstThreshold(_) => "--burst-threshold",
            ConfigError::LinkRate(_) => "--link-rate",
        };
        anyhow::anyhow!("{flag}: {e}")
    })?;
    Ok(cfg)
}

/// `-` (standard input) is read once, alone, and only from a pipe or a file.
fn refuse_stdin_misuse(a: &PcapArgs) -> Result<()> {
    let piped = a.files.iter().any(|f| is_stdin(f));
    if piped && a.files.len() > 1 {
        anyhow::bail!("'-' (standard input) must be the only capture: give it alone, or save the piped capture to a file and list the files");
    }
    if piped && a.match_with.is_some() {
        anyhow::bail!("--match reads the capture once more to pair it with OTHER, and a pipe cannot be read twice: save the piped capture to a file first");
    }
    if piped && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        anyhow::bail!("'-' reads a capture from standard input, which is a terminal here: pipe one in (`tcpdump -w - | tailhunt pcap -`, `zcat cap.pcap.gz | tailhunt pcap -`)");
    }
    Ok(())
}

pub fn run_files(cli: &Cli, a: &PcapArgs) -> Result<()> {
    let cfg = config(&a.analysis)?;
    refuse_stdin_misuse(a)?;
    // A file that is not there is a typo: say so before reading anything.
    let mut sizes = Vec::with_capacity(a.files.len());
    for f in a.files.iter().filter(|f| !is_stdin(f)) {
        let meta =
            std::fs::metadata(f).with_context(|| format!("cannot analyse '{}'", f.display()))?;
        sizes.push(meta.len());
    }
    // Files are opened one at a time as their turn comes; a set in which no file can be read
    // is refused here, before a run is stored.
    let mut sources = FileSet::new(a.files.clone()).stopped_by(signals::flag());
    let inputs: Vec<String> = (0..sources.count()).map(|i| sources.name(i)).collect();
    sources.open_first()?;
    let matched = match &a.match_with {
        Some(other) => Some(matching::run(&a.files, other)?),
        None => None,
    };
    signals::install();
    let mut line = Line::new();
    let names = inputs.clone();
    let what = Inputs {
        kind: RunKind::Pcap,
        names: inputs,
        matched,
        threads: a
            .threads
            .map_or_else(tailhunt_pcap::run::default_threads, usize::from),
    };
    execute(cli, what, &mut sources, cfg, &a.analysis, &mut |p| {
        line.show(|| {
            let size = sizes.get(p.source).copied().unwrap_or(0);
            let pct = if size > 0 {
                format!(" ({:.0}%)", p.position as f64 * 100.0 / size as f64)
            } else {
                String::new()
            };
            format!(
                "analysing {}: {:.0} MB{pct}, {} packets",
                names.get(p.source).map_or("", |s| s.as_str()),
                p.position as f64 / 1e6,
                p.packets
            )
        })
    })
}

pub fn run_live(cli: &Cli, a: &CaptureArgs) -> Result<()> {
    live::run(cli, a)
}

/// What a capture command analyses.
struct Inputs {
    /// Run kind: `pcap` or `capture`.
    kind: RunKind,
    /// File names, or `live:IFACE`.
    names: Vec<String>,
    /// The `--match` report, for the document.
    matched: Option<tailhunt_model::evidence::capture::MatchReport>,
    /// Analysis threads (1: all on this thread).
    threads: usize,
}

/// The shared tail of both commands: analyse into a new run, diagnose, export, print.
fn execute(
    cli: &Cli,
    what: Inputs,
    sources: &mut (dyn SourceSet + Send),
    cfg: AnalysisConfig,
    a: &CaptureAnalysisArgs,
    progress_fn: &mut dyn FnMut(Progress),
) -> Result<()> {
    let Inputs {
        kind,
        names: inputs,
        matched,
        threads,
    } = what;
    let mut store = crate::cmd::open_tagged(cli)?;
    // The pass only appends (flow rows and sample blocks, each page written once): SQLite's
    // 2 MB default cache would fill with pages it never reads again, 1.8 MiB of the heap at
    // 100,000 connections.
    store.limit_cache(256 * 1024)?;
    // Resolve --requests before measuring anything: a typo should not cost a capture.
    let requests = match &a.requests {
        Some(spec) => Some(tailhunt_diagnose::stored::requests_spec(&store, spec)?),
        None => None,
    };
    let params = json!({
        "inputs": inputs,
        "bin_ns": cfg.bin_ns,
        "link_rate_bps": cfg.link_rate_bps,
        "requests": requests,
    });
    let mut writer = store.begin_run(kind, params, ClockOrigin::wall(0))?;
    let (mut outcome, analyzer) = analyse_threads(
        sources,
        cfg,
        threads,
        &mut writer,
        signals::flag(),
        progress_fn,
    )
    .context("analysing the capture")?;
    writer.set_origin(ClockOrigin::wall(outcome.report.first_ns))?;
    let run_id = writer.id().to_string();
    for (file, name) in outcome.inputs.iter_mut().zip(&inputs) {
        file.name.clone_from(name);
    }
    let stopped = outcome.stopped.clone();
    let problems = outcome.problems();
    for note in outcome.notes() {
        tell!("tailhunt: {note}");
    }
    write_bins_csv_of(a, &outcome, &analyzer)?;
    drop(analyzer);
    // What the pass freed (connections, bins, delays, scattered through the heap) is handed
    // back before the report's compression context and the diagnosis take their own: else
    // the stages add up (see `heap`).
    crate::heap::release_free_pages();
    // The report (every flow) goes into the run as a compressed document, not into its
    // params: as a params string it cost as much CPU as the analysis itself and doubled peak
    // memory (escaped, parsed back and rewritten whole when the run finished; bench/pcap.sh).
    put_evidence(&mut writer, &outcome.report).map_err(|e| anyhow::anyhow!(e))?;
    let extra = json!({
        "stopped": stopped.as_ref().map(describe),
        "files": outcome.inputs,
    });
    let partial = stopped.is_some() || outcome.incomplete();
    writer.finish_as(partial, extra)?;
    write_flows_csv_of(a, &store, &run_id, &outcome.report)?;
    let Outcome {
        report,
        inputs: files,
        ..
    } = outcome;
    // The detectors read the report just stored, which keeps every flow, from memory rather
    // than parsing the stored copy back (with 100,000 connections the flows are over 100 MiB
    // of JSON): one copy is held throughout, and it is what is printed.
    let diagnosis = tailhunt_diagnose::diagnose_capture_run(&store, &run_id, &report)?;
    tailhunt_diagnose::store_findings(&mut store, &run_id, &diagnosis)?;
    let ports = port_latencies(&store, &run_id)?;
    let findings = diagnosis.findings;
    let doc = CaptureDoc {
        run_id: run_id.clone(),
        status: if partial {
            RunStatus::Partial
        } else {
            RunStatus::Complete
        },
        inputs,
        stopped: stopped.as_ref().map(describe),
        link_types_not_analysed: link_types_not_analysed(&files),
        files,
        report,
        ports,
        findings,
        detectors: DETECTORS.iter().map(|d| d.to_string()).collect(),
        top: a.top,
        matching: matched,
    };
    output::print(cli.json, &doc, render_capture)?;
    exit_status(stopped, &problems, partial, &run_id)
}

/// Ok when the inputs were read whole and something was analysed; otherwise the error that
/// says what was not and where the rest is kept.
fn exit_status(
    stopped: Option<Stopped>,
    problems: &[String],
    partial: bool,
    run_id: &str,
) -> Result<()> {
    if stopped == Some(Stopped::Interrupted) {
        return Err(anyhow::Error::new(Interrupted).context(format!(
            "the packets read before it are analysed and kept as partial run {run_id}"
        )));
    }
    if problems.is_empty() {
        return Ok(());
    }
    let kept = if partial {
        format!("the analysis of what was read is kept as partial run {run_id}")
    } else {
        format!("the counts are kept as run {run_id}")
    };
    anyhow::bail!("{}; {kept}", problems.join("; "))
}

fn describe(s: &Stopped) -> String {
    match s {
        Stopped::Interrupted => Interrupted.to_string(),
    }
}

fn create(path: &std::path::Path) -> Result<std::io::BufWriter<std::fs::File>> {
    std::fs::File::create(path)
        .map(std::io::BufWriter::new)
        .with_context(|| format!("writing {}", path.display()))
}

fn write_bins_csv_of(a: &CaptureAnalysisArgs, o: &Outcome, an: &Analyzer) -> Result<()> {
    if let Some(path) = &a.bins_csv {
        write_bins_csv(create(path)?, &o.report, an)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `--flows-csv`: every flow, read back one at a time from the run's rows.
fn write_flows_csv_of(
    a: &CaptureAnalysisArgs,
    store: &Store,
    run_id: &str,
    report: &CaptureReport,
) -> Result<()> {
    if let Some(path) = &a.flows_csv {
        write_flows_csv(create(path)?, store, run_id, report)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Whether the Ctrl-C flag is set (live capture's watcher).
fn ctrl_c() -> bool {
    signals::flag().load(Ordering::Relaxed)
}
