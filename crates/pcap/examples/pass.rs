//! Times the analysis pass alone, without the store: `pass FILE... [--threads N]
//! [--link-rate BITS_PER_S]` prints the seconds from the first frame to the report built and
//! the CPU seconds the process used. It analyses as `tailhunt pcap` does (every flow handed
//! over as a row as it finishes), and the channels' and flows' series and the rows go to a
//! sink that drops them. `--read-only` reads and decodes the frames and does nothing else
//! (what a sharded pass's reader thread cannot do faster); `--workers W` runs the sharded
//! pass with W analysis threads (even 1). `bench/pcap.sh` runs it to tell the packet phase
//! from the end of a `tailhunt pcap` run (storing, diagnosing, printing), which it times
//! whole. (Until 2026-12-01 it kept every flow's summary in memory to the end instead, which
//! the command does not: the sharded pass then merged 13,000 summaries on one thread.)

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use tailhunt_model::evidence::RowChunk;
use tailhunt_model::{IntervalHistogram, Point, Sample, SeriesMeta, SeriesSink, SinkError};
use tailhunt_pcap::analysis::AnalysisConfig;
use tailhunt_pcap::run::analyse_threads;
use tailhunt_pcap::{FileSet, SourceSet};

/// Counts what it is given and keeps nothing.
#[derive(Default)]
struct Drop {
    samples: u64,
}

impl SeriesSink for Drop {
    fn open_series(&mut self, _meta: &SeriesMeta) -> Result<usize, SinkError> {
        Ok(0)
    }

    fn push_samples(&mut self, _series: usize, samples: &[Sample]) -> Result<(), SinkError> {
        self.samples += samples.len() as u64;
        Ok(())
    }

    fn push_histogram(&mut self, _series: usize, _h: &IntervalHistogram) -> Result<(), SinkError> {
        Ok(())
    }

    fn push_values(&mut self, _series: usize, points: &[Point]) -> Result<(), SinkError> {
        self.samples += points.len() as u64;
        Ok(())
    }

    fn put_rows(&mut self, _name: &str, _version: u32, _rows: &RowChunk) -> Result<(), SinkError> {
        Ok(())
    }

    fn put_document(&mut self, _name: &str, _version: u32, _json: &str) -> Result<(), SinkError> {
        Ok(())
    }
}

/// User plus system CPU seconds of this process so far.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut files = Vec::new();
    let (mut threads, mut link, mut read_only, mut workers) = (1usize, None, false, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => threads = args.next().ok_or("--threads N")?.parse()?,
            "--link-rate" => link = Some(args.next().ok_or("--link-rate BITS")?.parse()?),
            "--read-only" => read_only = true,
            "--workers" => workers = Some(args.next().ok_or("--workers N")?.parse()?),
            _ => files.push(a.into()),
        }
    }
    if files.is_empty() {
        return Err("usage: pass FILE... [--threads N] [--link-rate BITS_PER_S]".into());
    }
    // As `tailhunt pcap` analyses by default: every flow handed to the sink as it finishes.
    let cfg = AnalysisConfig {
        link_rate_bps: link,
        store_flows: true,
        largest_flows: 10,
        ..AnalysisConfig::default()
    };
    if read_only {
        return read(files);
    }
    let mut sink = Drop::default();
    let (wall, cpu) = (Instant::now(), cpu_s());
    let mut set = FileSet::new(files);
    let stop = AtomicBool::new(false);
    let (outcome, _an) = match workers {
        // The reader and this many workers, whatever `--threads` would choose.
        Some(w) => tailhunt_pcap::shard::analyse(&mut set, cfg, w, &mut sink, &stop, &mut |_| {})?,
        None => analyse_threads(&mut set, cfg, threads, &mut sink, &stop, &mut |_| {})?,
    };
    println!(
        "pass_wall {:.3} pass_cpu {:.3} packets {} flows {} samples {}",
        wall.elapsed().as_secs_f64(),
        cpu_s() - cpu,
        outcome.report.packets,
        outcome.report.flows.len(),
        sink.samples
    );
    Ok(())
}

/// Reads and decodes every frame of `files`, and prints how long that took.
fn read(files: Vec<std::path::PathBuf>) -> Result<(), Box<dyn std::error::Error>> {
    let (wall, cpu) = (Instant::now(), cpu_s());
    let (mut frames, mut tcp) = (0u64, 0u64);
    let mut set = FileSet::new(files);
    for i in 0..set.count() {
        let src = set.open(i)?;
        while let Some(raw) = src.next_packet()? {
            frames += 1;
            if let Ok(d) = tailhunt_pcap::decode(&raw) {
                tcp += u64::from(matches!(d.transport, tailhunt_pcap::Transport::Tcp(_)));
            }
        }
    }
    println!(
        "read_wall {:.3} read_cpu {:.3} packets {frames} tcp {tcp}",
        wall.elapsed().as_secs_f64(),
        cpu_s() - cpu
    );
    Ok(())
}
