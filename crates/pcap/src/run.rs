//! Driving the pass: a set of packet sources through decode and analysis into a series sink.
//!
//! In: a [`SourceSet`] (files in the order given — rotated captures continue each other — or a
//! live capture), an [`AnalysisConfig`], a [`SeriesSink`]. Out: an [`Outcome`] with the
//! [`CaptureReport`], one [`InputReport`] per source, and whether the pass was stopped early
//! (Ctrl-C).
//!
//! Every source gets its turn: one that cannot be opened, is empty, or ends in a truncated or
//! corrupt record is recorded as such (with the frames read before the bad record) and the
//! pass goes on with the next one. Frames of link types the decoder does not read are counted
//! per source and link type.

use std::sync::atomic::{AtomicBool, Ordering};

use tailhunt_model::{SeriesSink, SinkError};

use crate::analysis::{AnalysisConfig, Analyzer};
use crate::decode::{decode, Skip};
use tailhunt_model::evidence::capture::{
    link_types_not_analysed, CaptureReport, InputReport, InputStatus,
};

use crate::inputs::count_link_type;
use crate::packet::RawPacket;
use crate::read::{PacketSource, ReadError, SourceSet};
use crate::record::Recorder;

/// Progress callback interval, packets.
const PROGRESS_EVERY: u64 = 1 << 16;
/// How often, in packets, the pass looks at the clock (about 25 ns each time).
const CLOCK_EVERY: u64 = 1 << 6;
/// The longest the pass goes without looking at its stop flag and reporting progress when
/// frames come slowly (a capture piped in from a live tcpdump: 65,536 frames can be minutes).
const PROGRESS_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

/// Errors that stop the analysis before any report can be made.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The settings are out of range.
    #[error("{0}")]
    Config(#[from] crate::analysis::ConfigError),
    /// The sink refused a write (the store is full or locked).
    #[error("cannot store the analysis: {0}")]
    Sink(SinkError),
    /// A thread of a sharded pass ended before its work was done.
    #[error("{0}: run again with --threads 1 to analyse on one thread")]
    Thread(&'static str),
}

/// Why a pass stopped before its sources' end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// Stopped on request (Ctrl-C).
    Interrupted,
}

/// What a pass produced.
#[derive(Debug)]
pub struct Outcome {
    /// The report.
    pub report: CaptureReport,
    /// What became of each source, in order.
    pub inputs: Vec<InputReport>,
    /// Set when the pass was stopped before the sources' end.
    pub stopped: Option<Stopped>,
    /// Pieces of the pass's scratch file ([`crate::spill`]) that could not be read back:
    /// channels' bins or bystanders' delays missing from the report and series.
    pub scratch_lost: u64,
    /// Why the scratch file could not be created or written, when it could not: the pass kept
    /// those bytes in memory instead (the same results, more memory).
    pub scratch_unwritable: Option<String>,
    /// The file system the scratch file was on, when that one keeps its files in memory
    /// (tmpfs, ramfs): the bytes it holds counted against memory after all.
    pub scratch_in_memory: Option<&'static str>,
    /// Bytes the pass moved to its scratch file (or kept in memory in its place).
    pub scratch_bytes: u64,
}

impl Outcome {
    /// Sources not read whole for a reason other than a stop request (cut or unread).
    pub fn damaged(&self) -> impl Iterator<Item = &InputReport> {
        self.inputs.iter().filter(|i| i.is_damaged())
    }

    /// Whether the report misses something besides a stop request: a source not read whole,
    /// or a piece of the scratch file not read back.
    pub fn incomplete(&self) -> bool {
        self.damaged().next().is_some() || self.scratch_lost > 0
    }

    /// Frames that were read but none analysed because every one was of a link type the
    /// decoder does not read.
    pub fn nothing_analysed(&self) -> bool {
        let frames: u64 = self.inputs.iter().map(|i| i.frames).sum();
        frames > 0
            && self
                .inputs
                .iter()
                .all(|i| i.frames_of_known_link_types() == 0)
    }

    /// What the user should know about how the pass ran that changes no result, one sentence
    /// each: where its scratch file could not bound its memory. Empty when all went well.
    pub fn notes(&self) -> Vec<String> {
        let dir = std::env::temp_dir();
        let mut out = Vec::new();
        if let Some(why) = &self.scratch_unwritable {
            out.push(format!(
                "no scratch file in {} ({why}): the pass kept its older bins, delays and \
                 time-sequence points in memory instead (same results; point TMPDIR at a \
                 writable disk to bound the memory)",
                dir.display()
            ));
        }
        if let Some(fs) = self.scratch_in_memory {
            out.push(format!(
                "the scratch file is in {}, on {fs}, which keeps files in memory: the {:.1} MiB \
                 of older bins, delays and time-sequence points the pass moved there counted \
                 against memory after all (same results; point TMPDIR at a disk to bound the \
                 memory)",
                dir.display(),
                self.scratch_bytes as f64 / f64::from(1 << 20)
            ));
        }
        out
    }

    /// What a command's exit status must report, one sentence each: inputs not read whole,
    /// and a pass that read frames but could analyse none of them. Empty when all went well.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.nothing_analysed() {
            let links: Vec<String> = link_types_not_analysed(&self.inputs)
                .iter()
                .map(|l| l.describe())
                .collect();
            out.push(format!(
                "nothing analysed: {} (tailhunt reads Ethernet, Linux cooked v1/v2, raw IP and BSD loopback)",
                links.join(", ")
            ));
        }
        let damaged: Vec<String> = self.damaged().filter_map(|i| i.why.clone()).collect();
        if self.inputs.len() > 1 && !damaged.is_empty() {
            out.push(format!(
                "{} of {} files not read whole: {}",
                damaged.len(),
                self.inputs.len(),
                damaged.join("; ")
            ));
        } else {
            out.extend(damaged);
        }
        if self.scratch_lost > 0 {
            out.push(format!(
                "{} pieces of the pass's scratch file could not be read back, so bins or delays \
                 are missing (is the disk of TMPDIR failing or full?)",
                self.scratch_lost
            ));
        }
        out
    }
}

/// Progress of a pass.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Index of the source being read.
    pub source: usize,
    /// Bytes consumed of it.
    pub position: u64,
    /// Frames analysed so far, all sources.
    pub packets: u64,
}

/// Analyses `sources` in order into `sink`, on this thread.
pub fn analyse(
    sources: &mut dyn SourceSet,
    cfg: AnalysisConfig,
    sink: &mut dyn SeriesSink,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Outcome, Analyzer), RunError> {
    let mut an = Analyzer::new(cfg)?;
    let mut rec = Recorder::new(sink);
    let mut whole = Whole {
        an: &mut an,
        rec: &mut rec,
    };
    let (inputs, stopped) = read_sources(sources, &mut whole, stop, progress)?;
    finish_pass(an, rec, inputs, stopped)
}

/// The analysis threads to use when none are asked for: one per CPU this process may use (its
/// affinity and CPU quota), the reader being one of them; one CPU takes the one-thread path.
/// On 2 CPUs two threads (the reader and one worker) took the command 1.28-1.51x less wall
/// time than one on 2026-12-01 (the mixed 1 GB capture, bulk traffic alone, and 100,000 short
/// connections), with no more memory on the 100,000-connection capture once the storing ran
/// on the reader and the batches in flight shrank (they had kept 2 CPUs on one thread until
/// then: docs/benchmarks.md).
pub fn default_threads() -> usize {
    threads_for(usable_cpus())
}

/// The CPUs this process may use: its affinity and CPU quota (1 when they cannot be read).
fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// [`default_threads`] on a host with `cpus` CPUs (at most 256, as `--threads` accepts).
fn threads_for(cpus: usize) -> usize {
    cpus.clamp(1, 256)
}

/// Analyses `sources` in order into `sink` with `threads` threads: with more than one, the
/// sources are read and decoded (and the results stored) on a thread of their own; with two
/// the other analyses every frame ([`crate::pipeline`]), with more the flows are split over
/// the other `threads - 1` ([`crate::shard`]). What is stored and reported is the same as
/// with one.
/// (Until 2026-11-30 `threads` counted the workers alone, so two meant three busy threads on
/// two CPUs: as fast as the reader and one worker, with 3 MiB more in flight.)
pub fn analyse_threads(
    sources: &mut (dyn SourceSet + Send),
    cfg: AnalysisConfig,
    threads: usize,
    sink: &mut dyn SeriesSink,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Outcome, Analyzer), RunError> {
    match threads {
        0 | 1 => analyse(sources, cfg, sink, stop, progress),
        2 => crate::pipeline::analyse(sources, cfg, sink, stop, progress),
        _ => crate::shard::analyse(sources, cfg, threads - 1, sink, stop, progress),
    }
}

/// Ends a pass: every flow finished, its last events stored, the report built and the
/// channels' and largest flows' series written.
pub(crate) fn finish_pass(
    mut an: Analyzer,
    mut rec: Recorder<'_>,
    inputs: Vec<InputReport>,
    stopped: Option<Stopped>,
) -> Result<(Outcome, Analyzer), RunError> {
    let report = an.finish_with(|f| rec.flows(f)).map_err(RunError::Sink)?;
    let mut ev = std::mem::take(&mut an.events);
    rec.drain(&mut ev, |f| an.flow_last_ns(f))
        .map_err(RunError::Sink)?;
    rec.flows(&mut an.finished).map_err(RunError::Sink)?;
    rec.finish(&an, &report).map_err(RunError::Sink)?;
    Ok((
        Outcome {
            report,
            inputs,
            stopped,
            scratch_lost: an.scratch_lost(),
            scratch_unwritable: an.scratch_unwritable(),
            scratch_in_memory: an.scratch_in_memory(),
            scratch_bytes: an.spilled_bytes(),
        },
        an,
    ))
}

/// Where a pass hands the frames it reads.
pub(crate) trait Frames {
    /// Frames taken so far, all sources.
    fn packets(&self) -> u64;
    /// Takes one frame of the source `input` describes (counting there the link types it
    /// cannot decode).
    fn frame(&mut self, raw: &RawPacket<'_>, input: &mut InputReport) -> Result<(), RunError>;
}

/// A pass on one thread: each frame decoded, analysed and its events stored at once.
struct Whole<'a, 's> {
    an: &'a mut Analyzer,
    rec: &'a mut Recorder<'s>,
}

impl Frames for Whole<'_, '_> {
    fn packets(&self) -> u64 {
        self.an.packets()
    }

    fn frame(&mut self, raw: &RawPacket<'_>, input: &mut InputReport) -> Result<(), RunError> {
        let an = &mut *self.an;
        // Matched by reference: binding the decoded frame by value copied its 152 bytes out
        // of the result for every frame (2.5% of the one-thread command in `perf`).
        match &decode(raw) {
            Ok(d) => an.push(d),
            Err(why) => {
                if *why == Skip::UnknownLink {
                    count_link_type(input, raw.link);
                }
                an.skip(raw.ts_ns, raw.wire_len, *why)
            }
        }
        if !an.events.is_empty() {
            let mut ev = std::mem::take(&mut an.events);
            self.rec
                .drain(&mut ev, |f| an.flow_last_ns(f))
                .map_err(RunError::Sink)?;
            an.events = ev;
        }
        if !an.finished.is_empty() {
            self.rec.flows(&mut an.finished).map_err(RunError::Sink)?;
        }
        Ok(())
    }
}

/// Whether a source is worth decompressing on a thread of its own: when it is compressed and
/// this process may use more than one CPU. Confined to one CPU (`taskset -c 0`), the two
/// threads only take turns: the 1 GB mix took 0.51 s with the thread against 0.48 s without
/// (gzip), 0.40 against 0.37 s (zstd), five runs each.
fn read_ahead_pays(compressed: bool, cpus: usize) -> bool {
    compressed && cpus > 1
}

/// Reads `sources` in order into `target`: what became of each, and whether a stop request
/// ended the pass.
pub(crate) fn read_sources(
    sources: &mut dyn SourceSet,
    target: &mut dyn Frames,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Vec<InputReport>, Option<Stopped>), RunError> {
    let mut stopped = None;
    let mut inputs = Vec::with_capacity(sources.count());
    let cpus = usable_cpus();
    for i in 0..sources.count() {
        let mut input = InputReport::new(sources.name(i));
        if stopped.is_some() {
            input.status = InputStatus::NotReached;
            inputs.push(input);
            continue;
        }
        match sources.open(i) {
            Ok(src) => {
                // Decompressing runs beside the analysis (see `Input::read_ahead`).
                if read_ahead_pays(src.compressed(), cpus) {
                    src.read_ahead();
                }
                let pass = Pass {
                    index: i,
                    stop,
                    progress: &mut *progress,
                };
                stopped = pass.read(src, target, &mut input)?;
            }
            Err(e) => {
                input.status = match e {
                    ReadError::Empty { .. } => InputStatus::Empty,
                    _ => InputStatus::Unread,
                };
                input.why = Some(e.to_string());
            }
        }
        if stopped.is_none() && stop.load(Ordering::Relaxed) {
            stopped = Some(Stopped::Interrupted);
        }
        inputs.push(input);
    }
    Ok((inputs, stopped))
}

/// Reading one source of a pass.
struct Pass<'p> {
    index: usize,
    stop: &'p AtomicBool,
    progress: &'p mut dyn FnMut(Progress),
}

impl Pass<'_> {
    /// Reads `src` to its end, its first bad record, or a stop request; `input` records how
    /// far and what it held.
    fn read(
        self,
        src: &mut dyn PacketSource,
        target: &mut dyn Frames,
        input: &mut InputReport,
    ) -> Result<Option<Stopped>, RunError> {
        let mut looked = std::time::Instant::now();
        loop {
            let n = target.packets();
            if n.is_multiple_of(CLOCK_EVERY)
                && (n.is_multiple_of(PROGRESS_EVERY) || looked.elapsed() >= PROGRESS_INTERVAL)
            {
                looked = std::time::Instant::now();
                if self.stop.load(Ordering::Relaxed) {
                    input.status = InputStatus::Stopped;
                    return Ok(Some(Stopped::Interrupted));
                }
                (self.progress)(Progress {
                    source: self.index,
                    position: src.position(),
                    packets: target.packets(),
                });
            }
            let raw = match src.next_packet() {
                Ok(Some(raw)) => raw,
                Ok(None) => return Ok(None),
                // A read that gave way to a stop request (standard input: `UntilStopped`).
                Err(_) if self.stop.load(Ordering::Relaxed) => {
                    input.status = InputStatus::Stopped;
                    return Ok(Some(Stopped::Interrupted));
                }
                Err(e) => {
                    input.status = InputStatus::Cut;
                    input.why = Some(e.to_string());
                    return Ok(None);
                }
            };
            input.frames += 1;
            target.frame(&raw, input)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{read_ahead_pays, threads_for};

    #[test]
    fn compressed_sources_read_ahead_only_with_a_cpu_to_spare() {
        assert!(read_ahead_pays(true, 2));
        assert!(
            !read_ahead_pays(true, 1),
            "one CPU: the threads would only take turns"
        );
        assert!(
            !read_ahead_pays(false, 8),
            "a plain file is read where it is analysed"
        );
    }

    #[test]
    fn one_thread_per_cpu() {
        assert_eq!(
            [0, 1, 2, 3, 4, 16, 1000].map(threads_for),
            [1, 1, 2, 3, 4, 16, 256]
        );
    }
}
