//! `tailhunt export`.

use std::io::Write;

use anyhow::{Context, Result};
use tailhunt_histogram::hdr::{write_interval_log, IntervalToWrite};
use tailhunt_histogram::Histogram;
use tailhunt_model::{IntervalHistogram, SeriesData, SeriesKind, Timing};
use tailhunt_report::doc::WrittenDoc;

use super::{open_existing, select_series};
use crate::cli::{Cli, ExportArgs, ExportFormat};
use crate::output;

/// Interval length when samples are turned into an interval log.
const HLOG_INTERVAL_NS: i64 = 1_000_000_000;

pub fn run(cli: &Cli, a: &ExportArgs) -> Result<()> {
    let store = open_existing(&cli.db)?;
    let run_id = store.resolve_run(&a.run)?;
    let run = store.run(&run_id)?;
    let selected = select_series(&store, &run_id, &a.series)?;
    let mut out = output::open_output(a.output.as_deref())?;
    let mut values = 0u64;
    let format = match a.format {
        ExportFormat::Csv => "csv",
        ExportFormat::Jsonl => "jsonl",
        ExportFormat::Hlog => "hlog",
    };
    // Values series (bins, window sizes) have their own CSV columns; samples theirs.
    let all_values = !selected.is_empty() && selected.iter().all(|s| s.kind == SeriesKind::Values);
    if matches!(a.format, ExportFormat::Csv) {
        if all_values {
            writeln!(out, "series,t_ns,value")?;
        } else if selected.iter().any(|s| s.kind == SeriesKind::Values) {
            anyhow::bail!(
                "the selection mixes sample series with values series (bins), which have other CSV columns: choose one kind with --series, or use --format jsonl"
            );
        } else {
            writeln!(out, "series,intended_ns,start_ns,end_ns,latency_ns,outcome")?;
        }
    }
    for info in &selected {
        let series = store.load_series(info)?;
        match (&series.data, a.format) {
            (SeriesData::Samples(samples), ExportFormat::Csv | ExportFormat::Jsonl) => {
                let csv = matches!(a.format, ExportFormat::Csv);
                for s in samples {
                    if csv {
                        writeln!(
                            out,
                            "{},{},{},{},{},{}",
                            info.display_name,
                            s.intended_ns,
                            s.start_ns,
                            s.end_ns,
                            s.latency_ns(),
                            s.outcome.name()
                        )?;
                    } else {
                        let line = serde_json::json!({
                            "series": info.display_name,
                            "intended_ns": s.intended_ns,
                            "start_ns": s.start_ns,
                            "end_ns": s.end_ns,
                            "latency_ns": s.latency_ns(),
                            "outcome": s.outcome.name(),
                        });
                        writeln!(out, "{line}")?;
                    }
                }
                values += samples.len() as u64;
            }
            (SeriesData::Samples(samples), ExportFormat::Hlog) => {
                let intervals = if series.timing == Timing::Untimed {
                    let mut h = Histogram::new();
                    samples
                        .iter()
                        .for_each(|s| h.record(s.latency_ns().max(0) as u64));
                    vec![IntervalHistogram {
                        start_ns: 0,
                        end_ns: HLOG_INTERVAL_NS,
                        histogram: h,
                    }]
                } else {
                    per_second(samples)
                };
                values += write_hlog(
                    &mut out,
                    run.origin
                        .to_wall(intervals.first().map_or(0, |i| i.start_ns)),
                    &info.display_name,
                    &intervals,
                )?;
            }
            (SeriesData::Histograms(hs), ExportFormat::Hlog) => {
                values += write_hlog(
                    &mut out,
                    run.origin.to_wall(hs.first().map_or(0, |i| i.start_ns)),
                    &info.display_name,
                    hs,
                )?;
            }
            (SeriesData::Values(points), ExportFormat::Csv | ExportFormat::Jsonl) => {
                for p in points {
                    if matches!(a.format, ExportFormat::Csv) {
                        writeln!(out, "{},{},{}", info.display_name, p.t_ns, p.value)?;
                    } else {
                        let line = serde_json::json!({
                            "series": info.display_name, "t_ns": p.t_ns, "value": p.value,
                        });
                        writeln!(out, "{line}")?;
                    }
                }
                values += points.len() as u64;
            }
            (SeriesData::Values(_), ExportFormat::Hlog) => anyhow::bail!(
                "series {} holds values over time (bins), not latencies: export it with --format csv or jsonl",
                info.display_name
            ),
            (SeriesData::Histograms(_), _) => anyhow::bail!(
                "series {} holds interval histograms, not samples: export it with --format hlog",
                info.display_name
            ),
        }
    }
    out.flush()?;
    drop(out);
    if let Some(path) = &a.output {
        let doc = WrittenDoc {
            file: path.display().to_string(),
            format: format.into(),
            values,
        };
        output::print(cli.json, &doc, |d| {
            format!("wrote {} values to {} ({})\n", d.values, d.file, d.format)
        })?;
    }
    Ok(())
}

fn per_second(samples: &[tailhunt_model::Sample]) -> Vec<IntervalHistogram> {
    let Some(first) = samples.iter().map(|s| s.intended_ns).min() else {
        return Vec::new();
    };
    let mut out: Vec<IntervalHistogram> = Vec::new();
    let mut sorted: Vec<_> = samples.iter().collect();
    sorted.sort_by_key(|s| s.intended_ns);
    for s in sorted {
        let start = first + (s.intended_ns - first) / HLOG_INTERVAL_NS * HLOG_INTERVAL_NS;
        if out.last().is_none_or(|iv| iv.start_ns != start) {
            out.push(IntervalHistogram {
                start_ns: start,
                end_ns: start + HLOG_INTERVAL_NS,
                histogram: Histogram::new(),
            });
        }
        if let Some(iv) = out.last_mut() {
            iv.histogram.record(s.latency_ns().max(0) as u64);
        }
    }
    out
}

fn write_hlog(
    out: &mut dyn Write,
    start_wall_ns: i64,
    tag: &str,
    intervals: &[IntervalHistogram],
) -> Result<u64> {
    let first = intervals.first().map_or(0, |i| i.start_ns);
    let to_write: Vec<IntervalToWrite<'_>> = intervals
        .iter()
        .map(|iv| IntervalToWrite {
            offset_ns: iv.start_ns - first,
            duration_ns: iv.end_ns - iv.start_ns,
            histogram: &iv.histogram,
        })
        .collect();
    // HdrHistogram tags may not contain ',' or spaces.
    let tag: String = tag
        .chars()
        .map(|c| {
            if c == ',' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect();
    let mut buf = Vec::new();
    write_interval_log(&mut buf, start_wall_ns, Some(&tag), &to_write)
        .context("writing interval log")?;
    out.write_all(&buf)?;
    Ok(intervals.iter().map(|i| i.histogram.count()).sum())
}
