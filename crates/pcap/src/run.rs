//! Driving the pass: a packet source through decode and analysis into a series sink.
//!
//! In: one or more [`PacketSource`]s (files in the order given — rotated captures continue
//! each other — or a live capture), an [`AnalysisConfig`], a [`SeriesSink`]. Out: an
//! [`Outcome`] with the [`CaptureReport`] and, when a source stopped early (a truncated or
//! corrupt file, Ctrl-C), why: everything read before that point is analysed and kept.

use std::sync::atomic::{AtomicBool, Ordering};

use tailhunt_model::{SeriesSink, SinkError};

use crate::analysis::{AnalysisConfig, Analyzer, CaptureReport};
use crate::decode::decode;
use crate::read::PacketSource;
use crate::record::Recorder;

/// Progress callback interval, packets.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Errors that stop the analysis before any report can be made.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The sink refused a write (the store is full or locked).
    #[error("cannot store the analysis: {0}")]
    Sink(SinkError),
}

/// Where a pass stopped short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// A source ended inside a record or held nonsense: the message says where.
    BadInput(String),
    /// Stopped on request (Ctrl-C).
    Interrupted,
}

/// What a pass produced.
#[derive(Debug)]
pub struct Outcome {
    /// The report.
    pub report: CaptureReport,
    /// Set when the input was not read to its end.
    pub stopped: Option<Stopped>,
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

/// Analyses `sources` in order into `sink`.
pub fn analyse(
    sources: &mut [Box<dyn PacketSource>],
    cfg: AnalysisConfig,
    sink: &mut dyn SeriesSink,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Outcome, Analyzer), RunError> {
    let mut an = Analyzer::new(cfg);
    let mut rec = Recorder::new(sink);
    let mut stopped = None;
    'sources: for (i, src) in sources.iter_mut().enumerate() {
        loop {
            if an.packets().is_multiple_of(PROGRESS_EVERY) {
                if stop.load(Ordering::Relaxed) {
                    stopped = Some(Stopped::Interrupted);
                    break 'sources;
                }
                progress(Progress {
                    source: i,
                    position: src.position(),
                    packets: an.packets(),
                });
            }
            let raw = match src.next_packet() {
                Ok(Some(raw)) => raw,
                Ok(None) => break,
                Err(e) => {
                    stopped = Some(Stopped::BadInput(e.to_string()));
                    break 'sources;
                }
            };
            match decode(&raw) {
                Ok(d) => an.push(&d),
                Err(why) => an.skip(raw.ts_ns, raw.wire_len, why),
            }
            if !an.events.is_empty() {
                let mut ev = std::mem::take(&mut an.events);
                rec.drain(&mut ev, |f| an.flow_last_ns(f))
                    .map_err(RunError::Sink)?;
                an.events = ev;
            }
        }
        if stop.load(Ordering::Relaxed) {
            stopped = Some(Stopped::Interrupted);
            break;
        }
    }
    let report = an.finish();
    let mut ev = std::mem::take(&mut an.events);
    rec.drain(&mut ev, |f| an.flow_last_ns(f))
        .map_err(RunError::Sink)?;
    rec.finish(&an, &report).map_err(RunError::Sink)?;
    Ok((Outcome { report, stopped }, an))
}
