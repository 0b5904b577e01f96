//! A pass over two threads: this one reads, decodes and stores; the other analyses every frame
//! as a one-thread pass does.
//!
//! In: a [`SourceSet`], an [`AnalysisConfig`], a [`SeriesSink`]. Out: what
//! [`crate::run::analyse`] gives for the same sources (the same analyzer does the same work
//! on the same frames in the same order) and its [`Analyzer`].
//!
//! - *This thread* reads the sources, decodes each frame and hands it on (payload left out:
//!   the analysis reads only lengths; a frame that does not decode goes as the reason why) in
//!   chunks of [`CHUNK`]; before each chunk it stores what the worker made of the chunks
//!   before: the samples in the order the worker made them, the finished flows' rows.
//! - *The worker* keeps the whole analysis: counts, every channel's bins, the connections,
//!   the sweeps. After each frame it turns the frame's events into samples as a one-thread
//!   pass does at that point.
//!
//! With more workers the connections are split between them ([`crate::shard`]), and the
//! front of the analysis (counts, channels, sweeps) stays with the reader. With one worker
//! that split kept the reader the longer side in the command, where the reader also stores
//! (docs/benchmarks.md, 2026-12-01): the channels' bins are moved to the worker here.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

use tailhunt_model::evidence::capture::{FlowSummary, InputReport};
use tailhunt_model::{Sample, SeriesSink};

use crate::analysis::{AnalysisConfig, Analyzer};
use crate::decode::{decode, Decoded, Skip};
use crate::inputs::count_link_type;
use crate::packet::RawPacket;
use crate::read::SourceSet;
use crate::record::{samples_of, Recorder, SampleSeries};
use crate::run::{finish_pass, read_sources, Frames, Outcome, Progress, RunError};
use crate::shard::{detach, CHUNK, DEPTH};

/// A frame as the worker takes it.
enum Item {
    Packet(Decoded<'static>),
    /// A frame that did not decode: the analysis counts it.
    Skipped {
        ts_ns: i64,
        wire_len: u32,
        why: Skip,
    },
}

/// What the worker made of one chunk: its samples in the order made, and the flows that
/// finished.
struct Made {
    samples: Vec<(SampleSeries, Sample)>,
    finished: Vec<FlowSummary>,
}

/// The reading side: the chunk being filled, and the storing of what the worker made.
struct Reader<'r, 's> {
    frames: u64,
    batch: Vec<Item>,
    worker: Option<SyncSender<Vec<Item>>>,
    spare: Receiver<Vec<Item>>,
    made: Receiver<Made>,
    back: Sender<Vec<(SampleSeries, Sample)>>,
    rec: &'r mut Recorder<'s>,
}

impl Reader<'_, '_> {
    /// Stores what the worker has made, then hands it the chunk.
    fn send(&mut self) -> Result<(), RunError> {
        while let Ok(m) = self.made.try_recv() {
            self.store(m)?;
        }
        let empty = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
        let full = std::mem::replace(&mut self.batch, empty);
        self.worker
            .as_ref()
            .ok_or(RunError::Thread("an analysis worker stopped"))?
            .send(full)
            .map_err(|_| RunError::Thread("an analysis worker stopped"))
    }

    fn store(&mut self, mut m: Made) -> Result<(), RunError> {
        for (series, sample) in m.samples.drain(..) {
            self.rec.sample(series, sample).map_err(RunError::Sink)?;
        }
        // The worker may be done: then it needs no vector back.
        let _ = self.back.send(m.samples);
        self.rec.flows(&mut m.finished).map_err(RunError::Sink)
    }

    /// Hands on the last chunk, lets the worker end, and stores the rest of what it made.
    fn finish(&mut self) -> Result<(), RunError> {
        if !self.batch.is_empty() {
            self.send()?;
        }
        self.worker = None;
        while let Ok(m) = self.made.recv() {
            self.store(m)?;
        }
        Ok(())
    }
}

impl Frames for Reader<'_, '_> {
    fn packets(&self) -> u64 {
        self.frames
    }

    fn frame(&mut self, raw: &RawPacket<'_>, input: &mut InputReport) -> Result<(), RunError> {
        let item = match decode(raw) {
            Ok(d) => Item::Packet(detach(&d)),
            Err(why) => {
                if why == Skip::UnknownLink {
                    count_link_type(input, raw.link);
                }
                Item::Skipped {
                    ts_ns: raw.ts_ns,
                    wire_len: raw.wire_len,
                    why,
                }
            }
        };
        self.batch.push(item);
        self.frames += 1;
        if self.batch.len() == CHUNK {
            self.send()?;
        }
        Ok(())
    }
}

/// The worker: analyses every frame of its chunks, sends back what each chunk made, and
/// returns its analyzer when the reader is done (or has stopped listening).
fn work(
    mut an: Analyzer,
    chunks: Receiver<Vec<Item>>,
    spare: Sender<Vec<Item>>,
    made: Sender<Made>,
    stored: Receiver<Vec<(SampleSeries, Sample)>>,
) -> Analyzer {
    for mut chunk in chunks {
        let mut samples = stored.try_recv().unwrap_or_default();
        for item in &chunk {
            match item {
                Item::Packet(d) => an.push(d),
                Item::Skipped {
                    ts_ns,
                    wire_len,
                    why,
                } => an.skip(*ts_ns, *wire_len, *why),
            }
            // As a one-thread pass does after each frame (an unanswered request ends at its
            // flow's last packet as of now).
            if !an.events.is_empty() {
                let mut ev = std::mem::take(&mut an.events);
                let keep = |series, sample, _| {
                    samples.push((series, sample));
                    Ok::<(), std::convert::Infallible>(())
                };
                let Ok(()) = samples_of(&mut ev, |f| an.flow_last_ns(f), keep);
                an.events = ev;
            }
        }
        chunk.clear();
        // The reader may have finished: then nobody needs the chunk back.
        let _ = spare.send(chunk);
        let m = Made {
            samples,
            finished: std::mem::take(&mut an.finished),
        };
        if made.send(m).is_err() {
            break;
        }
    }
    an
}

/// Analyses `sources` in order into `sink` on this thread and one worker; see the module
/// docs.
pub fn analyse(
    sources: &mut (dyn SourceSet + Send),
    cfg: AnalysisConfig,
    sink: &mut dyn SeriesSink,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Outcome, Analyzer), RunError> {
    let an = Analyzer::new(cfg)?;
    let mut rec = Recorder::new(sink);
    let (an, inputs, stopped) = std::thread::scope(|scope| {
        let (to_worker, chunks) = sync_channel(DEPTH);
        let (spare_tx, spare) = channel();
        // Not bounded here: this thread takes what the worker made before it hands out each
        // chunk, so no more than the chunks in flight wait in it.
        let (made_tx, made) = channel();
        let (back, stored) = channel();
        let worker = std::thread::Builder::new()
            .name("pcap-flows".into())
            .spawn_scoped(scope, move || work(an, chunks, spare_tx, made_tx, stored))
            .map_err(|_| RunError::Thread("cannot start an analysis thread"))?;
        let mut reader = Reader {
            frames: 0,
            batch: Vec::with_capacity(CHUNK),
            worker: Some(to_worker),
            spare,
            made,
            back,
            rec: &mut rec,
        };
        let read = read_sources(&mut *sources, &mut reader, stop, progress);
        // On an error the worker's results are not waited for; it ends when its channel
        // closes.
        let done = read.and_then(|done| reader.finish().map(|()| done));
        drop(reader);
        let an = worker
            .join()
            .map_err(|_| RunError::Thread("an analysis worker failed"))?;
        let (inputs, stopped) = done?;
        Ok::<_, RunError>((an, inputs, stopped))
    })?;
    finish_pass(an, rec, inputs, stopped)
}
