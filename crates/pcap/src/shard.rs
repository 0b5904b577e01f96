//! A pass over several threads: this one reads and stores, the others analyse, and the
//! result is the same as one thread's.
//!
//! In: a [`SourceSet`], an [`AnalysisConfig`], a number of workers, a [`SeriesSink`]. Out:
//! what [`crate::run::analyse`] gives for the same sources — the same report, the same series
//! with the same samples in the same order — and its [`Analyzer`].
//!
//! - *This thread* reads the sources (a compressed one is decompressed on a thread of its
//!   own, as on one thread: [`crate::read::PacketSource::read_ahead`]), decodes each frame,
//!   counts it and adds it to its two channels' bins (the front of the analysis, see
//!   [`crate::analysis`]), and hands the decoded header (payload left out: the analysis
//!   reads only lengths) to the worker its flow key hashes to. The key names a connection
//!   regardless of direction, so both directions of a connection go to one worker. Frames and
//!   sweeps go in chunks of [`CHUNK`] items, one batch per worker per chunk, and batches come
//!   back to be refilled: no allocation and no channel send per packet.
//! - Each *worker* keeps the flows of its share: TCP state, bins per flow, timestamps. Where
//!   a one-thread pass sweeps (every 65,536 frames, or sooner once 10 ms of capture time
//!   has passed) the reader sends every worker the sweep that pass makes before that
//!   packet, with the channel bins that reached the burst threshold since the last sweep;
//!   each worker keeps the list of all of them ([`HotBins`]): a closed, quiet connection is
//!   retired at the same packet and keeps the same bins as on one thread, and memory still
//!   follows the open connections (the list grows with the capture's busy bins, not with
//!   connections).
//! - Before it hands out each chunk, this thread stores what the workers have made of the
//!   chunks before (`Storer`): each sample is tagged with the frame number of its packet,
//!   and a chunk's samples from all workers are put in that order before the [`Recorder`]
//!   opens series and stores them. A worker numbers a flow with the frame number of its first
//!   packet and reports it; this thread keeps those numbers in order (packed into the scratch
//!   file a block of 4,096 at a time: `FlowIds`), so a flow's id is its rank, as on one
//!   thread. With [`AnalysisConfig::store_flows`] a worker hands each flow over as it
//!   finishes, and this thread gives it its id, offers it to the report's choice and stores
//!   it, so memory follows the open connections here too. At the end the front and the
//!   workers' analyzers are joined and the pass ends as a one-thread pass does.
//! - The storing had a thread of its own until 2026-12-01: with one worker on two CPUs that
//!   made three threads, and its wake-ups took the other two's time (docs/benchmarks.md).
//!
//! [`crate::run::analyse_threads`] splits this way from three threads on; with two it hands
//! the whole analysis to the one worker ([`crate::pipeline`]), which took the command about 5%
//! less wall time than this split with one worker. [`analyse`] still takes one worker (the
//! pass example's `--workers 1` compares the two).

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::Arc;

use tailhunt_model::evidence::capture::{FlowSummary, InputReport, Proto};
use tailhunt_model::{Sample, SeriesSink};

use crate::analysis::NewHot;
use crate::analysis::{AnalysisConfig, Analyzer, FlowIds};
use crate::decode::{decode, Decoded, Skip, Tcp, Transport, Udp};
use crate::flowkey::FlowKey;
use crate::inputs::count_link_type;
use crate::packet::RawPacket;
use crate::read::SourceSet;
use crate::record::{samples_of, Origin, Recorder, SampleSeries};
#[cfg(doc)]
use crate::retired::HotBins;
use crate::retired::KeptFlows;
use crate::run::{finish_pass, read_sources, Frames, Outcome, Progress, RunError};

/// Items (frames and sweeps) the reader hands out at once: the capacity of every batch.
/// What is in flight (batches of 160-byte items, and the samples and finished flows made of
/// them) scales with it: at 2,048 the 100,000-connection capture of bench/pcap.sh peaked at
/// 27.7 MiB on two threads against 25.0 on one; at 512 about 25.0 on both (three runs each,
/// 2026-12-01, the store on /var/tmp; in that day's bench round two threads still held about
/// 0.8 MiB more than one), and the two-thread pass over the 1 GB mix was no slower (twenty
/// interleaved runs: 0.277 s median against 0.286 s).
pub const CHUNK: usize = 512;
/// Chunks waiting for each worker. 2 was no slower than 4 (sixteen interleaved runs of the
/// two-thread pass over the 1 GB mix, 2026-12-01: 0.295 s median against 0.300) and holds
/// less in flight.
pub(crate) const DEPTH: usize = 2;

/// What the reader hands a worker.
enum Item {
    /// The sweep a one-thread pass makes before frame `ordinal`, at capture time `now`.
    Sweep {
        ordinal: u64,
        now: i64,
        /// The bins that reached the burst threshold since the last sweep.
        hot: Arc<Vec<NewHot>>,
    },
    /// Frame `ordinal`, decoded.
    Packet {
        ordinal: u64,
        packet: Decoded<'static>,
    },
}

/// What a worker made of one chunk: its samples, the frames that started a flow, and the
/// flows that finished (ids: their first frames), when they are stored as they finish.
#[derive(Default)]
struct Made {
    tagged: Vec<Tagged>,
    created: Vec<u64>,
    finished: Vec<FlowSummary>,
}

/// A worker's results, and the way its emptied sample vectors go back to it.
type WorkerOut = (Receiver<Made>, Sender<Vec<Tagged>>);

/// A sample and its place in the pass: `(frame, RTT before exchanges, sweep before packet,
/// flow retired by the sweep)`, the order a one-thread pass stores them in.
struct Tagged {
    key: (u64, u8, u8, usize),
    series: SampleSeries,
    sample: Sample,
}

/// The worker a flow belongs to, of `workers`: a hash of its key, which is the same for
/// both directions. `None` for frames that belong to no flow.
pub fn worker_of(d: &Decoded<'_>, workers: usize) -> Option<usize> {
    use std::hash::{Hash, Hasher};
    let (proto, src, dst) = match &d.transport {
        Transport::Tcp(t) => (Proto::Tcp, t.src_port, t.dst_port),
        Transport::Udp(u) => (Proto::Udp, u.src_port, u.dst_port),
        Transport::Other(_) => return None,
    };
    if workers <= 1 {
        return Some(0);
    }
    let (key, _) = FlowKey::of(
        proto,
        std::net::SocketAddr::new(d.src, src),
        std::net::SocketAddr::new(d.dst, dst),
    );
    let mut h = crate::fxhash::FxHasher::default();
    key.hash(&mut h);
    // The high bits: the multiply at the end of each step mixes into them.
    Some(((h.finish() as u128 * workers as u128) >> 64) as usize)
}

/// `d` without its payload bytes (the analysis reads only the lengths), to outlive the
/// reader's buffer.
pub(crate) fn detach(d: &Decoded<'_>) -> Decoded<'static> {
    let transport = match d.transport {
        Transport::Tcp(t) => Transport::Tcp(Tcp {
            src_port: t.src_port,
            dst_port: t.dst_port,
            seq: t.seq,
            ack: t.ack,
            flags: t.flags,
            window: t.window,
            options: t.options,
            payload_len: t.payload_len,
            payload: &[],
        }),
        Transport::Udp(u) => Transport::Udp(Udp {
            src_port: u.src_port,
            dst_port: u.dst_port,
            payload_len: u.payload_len,
            payload: &[],
        }),
        Transport::Other(p) => Transport::Other(p),
    };
    Decoded {
        ts_ns: d.ts_ns,
        iface: d.iface,
        wire_len: d.wire_len,
        src: d.src,
        dst: d.dst,
        ip_len: d.ip_len,
        ip_id: d.ip_id,
        ttl: d.ttl,
        vlan: d.vlan,
        transport,
    }
}

/// The reader's side: counts and channels, the batches being filled, and the storing of what
/// the workers made of the chunks handed out before.
struct Front<'r, 's> {
    an: Analyzer,
    /// The bins that reached the threshold, as last handed to the workers (an empty list is
    /// handed on without a new allocation).
    shared: Arc<Vec<NewHot>>,
    batches: Vec<Vec<Item>>,
    /// Items in this chunk: its frames and its sweeps. A sweep goes to every batch and a
    /// frame to at most one, so no batch holds more than this; the chunk is handed on when it
    /// reaches [`CHUNK`], so the batches never outgrow their capacity. (Counting frames alone
    /// let the chunk's sweeps push a full batch over it, which doubled every batch in
    /// circulation: 3.9 MB more at the peak of the 100,000-connection capture, heaptrack.)
    items: usize,
    workers: Vec<SyncSender<Vec<Item>>>,
    spare: Receiver<Vec<Item>>,
    store: Storer<'r, 's>,
}

impl Front<'_, '_> {
    /// Stores what the workers have finished, then hands the chunk's batches to them.
    fn send(&mut self) -> Result<(), RunError> {
        self.store.store(false)?;
        for (batch, to) in self.batches.iter_mut().zip(&self.workers) {
            let empty = self
                .spare
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
            let full = std::mem::replace(batch, empty);
            to.send(full)
                .map_err(|_| RunError::Thread("an analysis worker stopped"))?;
        }
        self.store.pending += 1;
        self.items = 0;
        Ok(())
    }

    fn shared_hot(&mut self) -> Arc<Vec<NewHot>> {
        let new = self.an.take_new_hot();
        if !new.is_empty() || !self.shared.is_empty() {
            self.shared = Arc::new(new);
        }
        self.shared.clone()
    }
}

impl Frames for Front<'_, '_> {
    fn packets(&self) -> u64 {
        self.an.packets()
    }

    fn frame(&mut self, raw: &RawPacket<'_>, input: &mut InputReport) -> Result<(), RunError> {
        let ordinal = self.an.packets();
        // By reference, as `Whole::frame` does: binding by value copies the decoded frame.
        match &decode(raw) {
            Ok(d) => {
                if self.an.push_front(d) {
                    let hot = self.shared_hot();
                    for batch in &mut self.batches {
                        batch.push(Item::Sweep {
                            ordinal,
                            now: d.ts_ns,
                            hot: hot.clone(),
                        });
                    }
                    self.items += 1;
                }
                if let Some(w) = worker_of(d, self.batches.len()) {
                    self.batches[w].push(Item::Packet {
                        ordinal,
                        packet: detach(d),
                    });
                }
            }
            Err(why) => {
                if *why == Skip::UnknownLink {
                    count_link_type(input, raw.link);
                }
                self.an.skip(raw.ts_ns, raw.wire_len, *why)
            }
        }
        self.items += 1;
        // A frame adds at most two items (its sweep and itself): room is kept for both.
        if self.items + 2 > CHUNK {
            self.send()?;
        }
        Ok(())
    }
}

/// A worker: analyses the flows of its batches, sends their samples tagged, returns its
/// analyzer when the reader is done (or this thread has stopped listening).
fn work(
    mut an: Analyzer,
    batches: Receiver<Vec<Item>>,
    spare: Sender<Vec<Item>>,
    out: Sender<Made>,
    stored: Receiver<Vec<Tagged>>,
) -> Analyzer {
    for mut batch in batches {
        // The vectors go round: allocating one per chunk here and freeing it on the storing
        // thread cost more than the merge itself.
        let mut tagged = stored.try_recv().unwrap_or_default();
        for item in &batch {
            match *item {
                Item::Sweep {
                    ordinal,
                    now,
                    ref hot,
                } => {
                    an.sweep_shard(ordinal, now, hot);
                    collect(&mut an, ordinal, 0, &mut tagged);
                }
                Item::Packet { ordinal, packet } => {
                    an.push_shard(ordinal, &packet);
                    collect(&mut an, ordinal, 1, &mut tagged);
                }
            }
        }
        batch.clear();
        // The reader may have finished: then nobody needs the batch back.
        let _ = spare.send(batch);
        let made = Made {
            tagged,
            created: std::mem::take(&mut an.created),
            finished: std::mem::take(&mut an.finished),
        };
        if out.send(made).is_err() {
            break;
        }
    }
    an
}

/// Moves the analyzer's pending events into `out` as tagged samples of frame `ordinal`
/// (`part` 0: its sweep, 1: its packet).
fn collect(an: &mut Analyzer, ordinal: u64, part: u8, out: &mut Vec<Tagged>) {
    if an.events.is_empty() {
        return;
    }
    let mut ev = std::mem::take(&mut an.events);
    let tag = |series, sample, origin| {
        let key = match origin {
            Origin::Rtt => (ordinal, 0, part, 0),
            // A sweep's exchanges come in order of flow id, whichever worker holds the flow.
            Origin::Exchange(flow) => (ordinal, 1, part, if part == 0 { flow } else { 0 }),
        };
        out.push(Tagged {
            key,
            series,
            sample,
        });
        Ok::<(), std::convert::Infallible>(())
    };
    let Ok(()) = samples_of(&mut ev, |f| an.flow_last_ns(f), tag);
    an.events = ev;
}

/// Analyses `sources` in order into `sink`: this thread reads and stores, `workers` analysis
/// threads keep the flows; see the module docs.
pub fn analyse(
    sources: &mut (dyn SourceSet + Send),
    cfg: AnalysisConfig,
    workers: usize,
    sink: &mut dyn SeriesSink,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Outcome, Analyzer), RunError> {
    let front_an = Analyzer::front(cfg)?;
    let shards = (0..workers.max(1))
        .map(|_| Analyzer::shard(cfg, &front_an))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rec = Recorder::new(sink);
    let mut flows = Flows {
        ids: front_an.flow_ids(),
        kept: cfg.store_flows.then(|| KeptFlows::new(cfg.largest_flows)),
        finished: Vec::new(),
    };
    let (front, inputs, stopped, shards) = std::thread::scope(|scope| {
        let (spare_tx, spare_rx) = channel();
        let mut to_workers = Vec::new();
        let mut outs = Vec::new();
        let mut handles = Vec::new();
        for (i, an) in shards.into_iter().enumerate() {
            let (tx, rx) = sync_channel(DEPTH);
            // Not bounded here: this thread takes what a worker made before it hands out each
            // chunk, so no more than the chunks in flight wait in it.
            let (out_tx, out_rx) = channel();
            let (back_tx, back_rx) = channel();
            let spare = spare_tx.clone();
            let worker = std::thread::Builder::new()
                .name(format!("pcap-flows-{i}"))
                .spawn_scoped(scope, move || work(an, rx, spare, out_tx, back_rx))
                .map_err(|_| RunError::Thread("cannot start an analysis thread"))?;
            handles.push(worker);
            to_workers.push(tx);
            outs.push((out_rx, back_tx));
        }
        drop(spare_tx);
        let batches = (0..workers.max(1))
            .map(|_| Vec::with_capacity(CHUNK))
            .collect();
        let mut front = Front {
            an: front_an,
            shared: Arc::new(Vec::new()),
            batches,
            items: 0,
            workers: to_workers,
            spare: spare_rx,
            store: Storer::new(&mut rec, &mut flows, outs),
        };
        let read = read_sources(&mut *sources, &mut front, stop, progress).and_then(|done| {
            if front.items > 0 {
                front.send()?;
            }
            Ok(done)
        });
        // The workers end when their channels close: after the last chunk, or at once on an
        // error (their results are not waited for then).
        front.workers.clear();
        let stored = read.and_then(|done| front.store.store(true).map(|()| done));
        let shards = handles
            .into_iter()
            .map(|h| h.join())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| RunError::Thread("an analysis worker failed"))?;
        let (inputs, stopped) = stored?;
        Ok::<_, RunError>((front.an, inputs, stopped, shards))
    })?;
    rec.flows(&mut flows.finished).map_err(RunError::Sink)?;
    let joined = Analyzer::merge(front, shards, &flows.ids, flows.kept);
    finish_pass(joined, rec, inputs, stopped)
}

/// This thread's account of the flows: every flow's first frame (its id is its rank), and
/// with [`AnalysisConfig::store_flows`] the report's choice of the finished ones and those
/// waiting to be stored.
struct Flows {
    ids: FlowIds,
    kept: Option<KeptFlows>,
    finished: Vec<FlowSummary>,
}

impl Flows {
    /// Takes a chunk's results from every worker: the flows they started (all before the
    /// flows that finish in it), then those that finished, given their ids.
    fn take(&mut self, made: &mut [Made]) {
        let mut created: Vec<u64> = made.iter_mut().flat_map(|m| m.created.drain(..)).collect();
        self.ids.add(&mut created);
        for m in made {
            for mut f in m.finished.drain(..) {
                f.id = self.ids.id(f.id as u64);
                if let Some(kept) = &mut self.kept {
                    kept.offer(&f);
                }
                self.finished.push(f);
            }
        }
    }
}

/// The storing, done by the reader between chunks: each chunk's samples from every worker,
/// put in the order of a one-thread pass, into the recorder.
struct Storer<'r, 's> {
    rec: &'r mut Recorder<'s>,
    flows: &'r mut Flows,
    outs: Vec<WorkerOut>,
    /// What each worker has made and this thread has not stored yet, oldest chunk first.
    waiting: Vec<VecDeque<Made>>,
    /// Chunks handed out and not stored yet.
    pending: usize,
    merged: Vec<Tagged>,
    made: Vec<Made>,
}

impl<'r, 's> Storer<'r, 's> {
    fn new(rec: &'r mut Recorder<'s>, flows: &'r mut Flows, outs: Vec<WorkerOut>) -> Self {
        let waiting = outs.iter().map(|_| VecDeque::new()).collect();
        let made = Vec::with_capacity(outs.len());
        Storer {
            rec,
            flows,
            outs,
            waiting,
            pending: 0,
            merged: Vec::new(),
            made,
        }
    }

    /// Stores every chunk all workers are done with; with `wait`, waits for them to finish
    /// every chunk handed out. A worker that stopped is an error.
    fn store(&mut self, wait: bool) -> Result<(), RunError> {
        let gone = || RunError::Thread("an analysis worker stopped");
        while self.pending > 0 {
            for ((out, _), waiting) in self.outs.iter().zip(&mut self.waiting) {
                // A worker that has ended may still have results waiting: they come first.
                waiting.extend(out.try_iter());
                if waiting.is_empty() {
                    match (wait, out.try_recv()) {
                        (_, Ok(m)) => waiting.push_back(m),
                        (false, Err(TryRecvError::Empty)) => return Ok(()),
                        (true, Err(TryRecvError::Empty)) => {
                            waiting.push_back(out.recv().map_err(|_| gone())?)
                        }
                        (_, Err(TryRecvError::Disconnected)) => return Err(gone()),
                    }
                }
            }
            self.store_chunk()?;
        }
        Ok(())
    }

    /// Stores the oldest chunk, which every worker has made.
    fn store_chunk(&mut self) -> Result<(), RunError> {
        for ((_, back), waiting) in self.outs.iter().zip(&mut self.waiting) {
            let Some(mut m) = waiting.pop_front() else {
                continue;
            };
            self.merged.append(&mut m.tagged);
            // The worker may be done: then it needs no vector back.
            let _ = back.send(std::mem::take(&mut m.tagged));
            self.made.push(m);
        }
        self.pending -= 1;
        self.flows.take(&mut self.made);
        self.made.clear();
        if !self.flows.finished.is_empty() {
            self.rec
                .flows(&mut self.flows.finished)
                .map_err(RunError::Sink)?;
        }
        // Stable: one worker's samples of one frame stay in the order it made them.
        self.merged.sort_by_key(|t| t.key);
        for t in self.merged.drain(..) {
            self.rec
                .sample(t.series, t.sample)
                .map_err(RunError::Sink)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::LinkType;

    /// An IPv4 frame (raw IP) of protocol `proto` with the ports at the start of its payload.
    fn frame(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&40u16.to_be_bytes());
        p[8] = 64;
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        if proto == 6 {
            p[32] = 5 << 4;
        } else {
            p[24..26].copy_from_slice(&20u16.to_be_bytes());
        }
        p
    }

    fn worker(data: &[u8], workers: usize) -> Option<usize> {
        let raw = RawPacket {
            ts_ns: 0,
            iface: 0,
            link: LinkType::RawIp,
            wire_len: data.len() as u32,
            data,
        };
        worker_of(&decode(&raw).expect("decodes"), workers)
    }

    /// Regression: the reader counted frames, not items, so a chunk's sweeps pushed a full
    /// batch past its capacity and every batch in circulation doubled. With sweeps as often as
    /// they come (frames 20 ms apart), each batch handed on still fits its capacity.
    #[test]
    fn sweeps_do_not_grow_the_batches() {
        let an = Analyzer::front(AnalysisConfig::default()).expect("config");
        let (to_worker, batches) = sync_channel(64);
        let (_spare_tx, spare) = channel();
        // A worker that has made nothing yet: the reader stores nothing.
        let (_made_tx, made_rx) = channel();
        let mut sink: Vec<tailhunt_model::Series> = Vec::new();
        let mut rec = Recorder::new(&mut sink);
        let an_ids = an.flow_ids();
        let mut flows = Flows {
            ids: an_ids,
            kept: None,
            finished: Vec::new(),
        };
        let (back_tx, _back_rx) = channel();
        let mut front = Front {
            an,
            shared: Arc::new(Vec::new()),
            batches: vec![Vec::with_capacity(CHUNK)],
            items: 0,
            workers: vec![to_worker],
            spare,
            store: Storer::new(&mut rec, &mut flows, vec![(made_rx, back_tx)]),
        };
        let data = frame([10, 0, 0, 1], [10, 0, 0, 2], 6, 40_000, 80);
        let mut input = InputReport::new("test".into());
        // Enough frames for several chunks and several sweeps, whichever comes less often.
        let frames = 6 * CHUNK.max(crate::analysis::SWEEP_MIN_FRAMES as usize) as i64;
        for i in 0..frames {
            let raw = RawPacket {
                ts_ns: 1_000_000_000 + i * 20_000_000,
                iface: 0,
                link: LinkType::RawIp,
                wire_len: data.len() as u32,
                data: &data,
            };
            front.frame(&raw, &mut input).expect("frame");
        }
        let pending = front.store.pending;
        drop(front);
        let sent: Vec<Vec<Item>> = batches.iter().collect();
        assert!(sent.len() >= 6, "{} batches", sent.len());
        assert_eq!(pending, sent.len());
        let sweeps: usize = sent
            .iter()
            .map(|b| b.iter().filter(|i| matches!(i, Item::Sweep { .. })).count())
            .sum();
        // A sweep is due at most once per SWEEP_MIN_FRAMES (1,024) frames.
        assert!(sweeps >= 4, "{sweeps} sweeps");
        for b in &sent {
            assert!(
                b.capacity() == CHUNK && b.len() <= CHUNK,
                "a batch of {} items, capacity {} (chunk {CHUNK})",
                b.len(),
                b.capacity()
            );
        }
    }

    /// Both directions of a connection go to one worker, and connections spread over all.
    #[test]
    fn both_directions_of_a_flow_go_to_one_worker() {
        for workers in [2, 3, 7] {
            let mut used = vec![0u32; workers];
            for i in 0..2000u16 {
                let (a, b) = ([10, 0, (i % 7) as u8, 1], [10, 1, 0, (i % 250) as u8]);
                for proto in [6, 17] {
                    let there = worker(&frame(a, b, proto, 30_000 + i, 443), workers);
                    let back = worker(&frame(b, a, proto, 443, 30_000 + i), workers);
                    assert_eq!(there, back, "{a:?} {b:?} {i}");
                    used[there.unwrap()] += 1;
                }
            }
            let fair = 4000 / workers as u32;
            assert!(
                used.iter()
                    .all(|&n| n > fair * 8 / 10 && n < fair * 12 / 10),
                "{used:?}"
            );
        }
        // ICMP and the like belong to no flow.
        assert_eq!(worker(&frame([1; 4], [2; 4], 1, 0, 0), 2), None);
    }
}
