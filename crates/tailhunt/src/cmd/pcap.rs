//! `tailhunt pcap` and `tailhunt capture`.

use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use tailhunt_analyze::Distribution;
use tailhunt_diagnose::capture::{diagnose_capture, DETECTORS};
use tailhunt_diagnose::microburst::Requests;
use tailhunt_model::{ClockOrigin, Finding, RunStatus, Sample, SeriesData};
use tailhunt_pcap::analysis::{AnalysisConfig, Analyzer, CaptureReport};
use tailhunt_pcap::run::{analyse, Outcome, Progress, Stopped};
use tailhunt_pcap::PacketSource;
use tailhunt_report::capture::{render_capture, CaptureDoc, PortLatency};
use tailhunt_store::Store;

use crate::cli::{CaptureAnalysisArgs, CaptureArgs, Cli, PcapArgs};
use crate::output;
use crate::signals::{self, Interrupted};

mod csv;
mod live;
mod matching;

/// Flows kept in the run's parameters (the largest and every one a detector flagged); the
/// CSV export has them all.
const MAX_STORED_FLOWS: usize = 5000;

/// Reads `--bin`, `--link-rate` and `--burst-threshold`.
fn config(a: &CaptureAnalysisArgs) -> Result<AnalysisConfig> {
    let bin = super::duration_flag("--bin", &a.bin)?.as_nanos() as i64;
    if !(10_000..=1_000_000_000).contains(&bin) {
        anyhow::bail!(
            "--bin {} is out of range: use 10us .. 1s (1ms shows microbursts; finer needs µs timestamps)",
            a.bin
        );
    }
    let link_rate_bps = a.link_rate.as_deref().map(parse_rate_bps).transpose()?;
    if !(a.burst_threshold > 0.0 && a.burst_threshold <= 1.0) {
        anyhow::bail!(
            "--burst-threshold {} must be a share of the link rate in (0, 1], e.g. 0.8",
            a.burst_threshold
        );
    }
    Ok(AnalysisConfig {
        bin_ns: bin,
        link_rate_bps,
        burst_threshold: a.burst_threshold,
    })
}

/// `1gbit`, `100mbit`, `10g`, `2.5gbit`, `100mbps`, `1e9`: bits per second.
pub fn parse_rate_bps(text: &str) -> Result<u64> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit
        .trim_end_matches("ps")
        .trim_end_matches("it")
        .trim_end_matches('b')
    {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => anyhow::bail!(
            "--link-rate '{text}': unknown unit '{unit}' (use e.g. 100mbit, 1gbit, 10g, or bits/s)"
        ),
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        anyhow::anyhow!("--link-rate '{text}' is not a rate (use e.g. 100mbit, 1gbit)")
    })?;
    let bps = v * scale;
    if !(bps >= 1000.0 && bps.is_finite()) {
        anyhow::bail!(
            "--link-rate '{text}' is below 1 kbit/s: give the interface's rate, e.g. 1gbit"
        );
    }
    Ok(bps as u64)
}

pub fn run_files(cli: &Cli, a: &PcapArgs) -> Result<()> {
    let cfg = config(&a.analysis)?;
    let mut sources: Vec<Box<dyn PacketSource>> = Vec::new();
    for f in &a.files {
        sources.push(
            tailhunt_pcap::open(f).with_context(|| format!("cannot analyse '{}'", f.display()))?,
        );
    }
    let sizes: Vec<u64> = a
        .files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .collect();
    let inputs: Vec<String> = a.files.iter().map(|f| f.display().to_string()).collect();
    let matched = match &a.match_with {
        Some(other) => Some(matching::run(&a.files, other)?),
        None => None,
    };
    signals::install();
    let mut shown = ProgressLine::new(inputs.clone(), sizes);
    let what = Inputs {
        kind: "pcap",
        names: inputs,
        matched,
    };
    execute(cli, what, &mut sources, cfg, &a.analysis, &mut |p| {
        shown.show(p)
    })
}

pub fn run_live(cli: &Cli, a: &CaptureArgs) -> Result<()> {
    live::run(cli, a)
}

/// What a capture command analyses.
struct Inputs {
    /// Run kind: `pcap` or `capture`.
    kind: &'static str,
    /// File names, or `live:IFACE`.
    names: Vec<String>,
    /// The `--match` report, for the document.
    matched: Option<tailhunt_pcap::matching::MatchReport>,
}

/// The shared tail of both commands: analyse into a new run, diagnose, export, print.
fn execute(
    cli: &Cli,
    what: Inputs,
    sources: &mut [Box<dyn PacketSource>],
    cfg: AnalysisConfig,
    a: &CaptureAnalysisArgs,
    progress_fn: &mut dyn FnMut(Progress),
) -> Result<()> {
    let Inputs {
        kind,
        names: inputs,
        matched,
    } = what;
    let mut store = Store::open(&cli.db)?;
    // Resolve --requests before measuring anything: a typo should not cost a capture.
    let requests = match &a.requests {
        Some(spec) => Some(resolve_requests(&store, spec)?),
        None => None,
    };
    let params = json!({
        "inputs": inputs,
        "bin_ns": cfg.bin_ns,
        "link_rate_bps": cfg.link_rate_bps,
        "requests": requests,
    });
    let mut writer = store.begin_run(kind, params, ClockOrigin::wall(0))?;
    let (outcome, analyzer) = analyse(sources, cfg, &mut writer, signals::flag(), progress_fn)
        .context("analysing the capture")?;
    writer.set_origin(ClockOrigin::wall(outcome.report.first_ns))?;
    let run_id = writer.id().to_string();
    let stopped = outcome.stopped.clone();
    write_csvs(a, &outcome, &analyzer)?;
    drop(analyzer);
    let stored = stored_report(outcome.report);
    // The report (every flow) goes into the run as a compressed document, not into its params:
    // as a params string it cost as much CPU as the analysis itself and doubled peak memory
    // (escaped, parsed back and rewritten whole when the run finished; bench/pcap.sh).
    writer.put_document("capture", &serde_json::to_string(&stored)?)?;
    let extra = json!({
        "stopped": stopped.as_ref().map(describe),
    });
    if stopped.is_some() {
        writer.finish_partial(extra)?;
    } else {
        writer.finish(extra)?;
    }
    let (ports, findings) = diagnose_stored(&mut store, &run_id, &stored, requests.as_deref())?;
    let doc = CaptureDoc {
        run_id: run_id.clone(),
        status: if stopped.is_some() {
            RunStatus::Partial
        } else {
            RunStatus::Complete
        },
        inputs,
        stopped: stopped.as_ref().map(describe),
        report: stored,
        ports,
        findings,
        detectors: DETECTORS.iter().map(|d| d.to_string()).collect(),
        top: a.top,
        matching: matched,
    };
    output::print(cli.json, &doc, render_capture)?;
    match stopped {
        Some(Stopped::Interrupted) => Err(anyhow::Error::new(Interrupted).context(format!(
            "the packets read before it are analysed and kept as partial run {run_id}"
        ))),
        Some(Stopped::BadInput(why)) => {
            anyhow::bail!("{why}; the analysis of what was read is kept as partial run {run_id}")
        }
        None => Ok(()),
    }
}

fn describe(s: &Stopped) -> String {
    match s {
        Stopped::Interrupted => Interrupted.to_string(),
        Stopped::BadInput(why) => why.clone(),
    }
}

fn write_csvs(a: &CaptureAnalysisArgs, o: &Outcome, an: &Analyzer) -> Result<()> {
    if let Some(path) = &a.flows_csv {
        csv::write_flows(path, &o.report).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.bins_csv {
        csv::write_bins(path, &o.report, an)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The report as stored in the run: flows capped at [`MAX_STORED_FLOWS`], keeping every flow
/// a detector may use (closes, stalls, window-limited) before the largest of the rest.
fn stored_report(mut out: CaptureReport) -> CaptureReport {
    if out.flows.len() > MAX_STORED_FLOWS {
        let notable = |f: &tailhunt_pcap::analysis::FlowSummary| {
            f.tcp.as_ref().is_some_and(|t| {
                t.nagle_stalls > 0
                    || t.rwnd_limited_share > 0.3
                    || t.close.as_ref().is_some_and(|c| c.round_gap_s.is_some())
            })
        };
        out.flows.sort_by_key(|f| {
            (
                !notable(f),
                std::cmp::Reverse(
                    f.client_to_server.payload_bytes + f.server_to_client.payload_bytes,
                ),
            )
        });
        out.flows.truncate(MAX_STORED_FLOWS);
        out.flows.sort_by_key(|f| f.id);
    }
    out
}

/// `RUN[:SERIES]` with RUN resolved to a full id (stored with the capture run).
fn resolve_requests(store: &Store, spec: &str) -> Result<String> {
    let (run, series) = spec.split_once(':').unwrap_or((spec, ""));
    let id = store
        .resolve_run(run)
        .with_context(|| format!("--requests {spec}"))?;
    Ok(if series.is_empty() {
        id
    } else {
        format!("{id}:{series}")
    })
}

/// Latency series of another run (`RUN[:SERIES]`), with times moved to epoch ns.
fn external_requests(store: &Store, spec: &str) -> Result<Vec<(String, Vec<Sample>)>> {
    let (run, series) = spec.split_once(':').unwrap_or((spec, "latency"));
    let info = store
        .run(run)
        .with_context(|| format!("--requests {spec}"))?;
    let mut out = Vec::new();
    for s in store.series(run)? {
        if s.name != series && s.display_name != series {
            continue;
        }
        if let SeriesData::Samples(samples) = store.load_series(&s)?.data {
            let wall = |t: i64| info.origin.to_wall(t);
            let moved = samples
                .iter()
                .map(|x| {
                    Sample::new(
                        wall(x.intended_ns),
                        wall(x.start_ns),
                        wall(x.end_ns),
                        x.outcome,
                    )
                })
                .collect();
            out.push((format!("{run}:{}", s.display_name), moved));
        }
    }
    if out.is_empty() {
        anyhow::bail!("--requests {spec}: run {run} has no sample series named '{series}' (see `tailhunt analyze {run}`)");
    }
    Ok(out)
}

/// Loads the run's request latencies back (and those of `requests`, another run, when
/// given), summarises them per port and runs the capture detectors; the findings are stored
/// with the run.
pub fn diagnose_stored(
    store: &mut Store,
    run_id: &str,
    report: &CaptureReport,
    requests: Option<&str>,
) -> Result<(Vec<PortLatency>, Vec<Finding>)> {
    let mut latency = Vec::new();
    let mut server = std::collections::BTreeMap::new();
    for info in store.series(run_id)? {
        let Some(port) = info
            .labels
            .get("server_port")
            .and_then(|p| p.parse::<u16>().ok())
        else {
            continue;
        };
        match info.name.as_str() {
            "latency" => latency.push((info.display_name.clone(), port, store.load_series(&info)?)),
            "server_time" => {
                server.insert(
                    port,
                    Distribution::from_series(&store.load_series(&info)?, true),
                );
            }
            _ => {}
        }
    }
    let mut ports = Vec::new();
    let mut requests_owned = Vec::new();
    for (name, port, series) in &latency {
        let d = Distribution::from_series(series, true);
        let all = series.count();
        let s = server.get(port);
        ports.push(PortLatency {
            series: name.clone(),
            server_port: *port,
            answered: d.count(),
            unanswered: all - d.count(),
            p50_ns: d.quantile(0.5),
            p99_ns: d.quantile(0.99),
            max_ns: d.quantile(1.0),
            server_p50_ns: s.and_then(|s| s.quantile(0.5)),
            server_p99_ns: s.and_then(|s| s.quantile(0.99)),
        });
        if let SeriesData::Samples(samples) = &series.data {
            requests_owned.push((name.clone(), samples));
        }
    }
    ports.sort_by_key(|p| std::cmp::Reverse(p.answered));
    let external = match requests {
        Some(spec) => external_requests(store, spec)?,
        None => Vec::new(),
    };
    requests_owned.extend(external.iter().map(|(n, s)| (n.clone(), s)));
    let requests: Vec<Requests<'_>> = requests_owned
        .iter()
        .map(|(n, s)| Requests {
            series: n.clone(),
            samples: s,
        })
        .collect();
    let findings = diagnose_capture(report, &requests);
    store.replace_findings(run_id, &findings)?;
    Ok((ports, findings))
}

/// A progress line on stderr when it is a terminal.
struct ProgressLine {
    inputs: Vec<String>,
    sizes: Vec<u64>,
    tty: bool,
    last: Instant,
    shown: bool,
}

impl ProgressLine {
    fn new(inputs: Vec<String>, sizes: Vec<u64>) -> ProgressLine {
        ProgressLine {
            inputs,
            sizes,
            tty: std::io::stderr().is_terminal(),
            last: Instant::now(),
            shown: false,
        }
    }

    fn show(&mut self, p: Progress) {
        if !self.tty || self.last.elapsed().as_millis() < 250 {
            return;
        }
        self.last = Instant::now();
        let size = self.sizes.get(p.source).copied().unwrap_or(0);
        let name = self.inputs.get(p.source).map_or("", |s| s.as_str());
        let pct = if size > 0 {
            format!(" ({:.0}%)", p.position as f64 * 100.0 / size as f64)
        } else {
            String::new()
        };
        let _ = write!(
            std::io::stderr(),
            "\ranalysing {name}: {:.0} MB{pct}, {} packets",
            p.position as f64 / 1e6,
            p.packets
        );
        self.shown = true;
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        if self.shown {
            let _ = std::io::stderr().write_all(b"\r\x1b[K");
        }
    }
}

/// Whether the Ctrl-C flag is set (live capture's watcher).
fn ctrl_c() -> bool {
    signals::flag().load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::parse_rate_bps;

    #[test]
    fn link_rates_parse() {
        assert_eq!(parse_rate_bps("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate_bps("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate_bps("10g").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate_bps("2.5Gbit").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate_bps("100mbps").unwrap(), 100_000_000);
        assert_eq!(parse_rate_bps("1e9").unwrap(), 1_000_000_000);
        assert!(parse_rate_bps("fast").is_err());
        assert!(parse_rate_bps("0").is_err());
        assert!(parse_rate_bps("10furlongs").is_err());
    }
}
