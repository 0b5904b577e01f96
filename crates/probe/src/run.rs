//! Running the rounds: one worker thread per probe, the schedule and the store on the
//! caller's thread.
//!
//! In: the checked [`Config`], the live probes, a [`SeriesSink`] (the store's run writer), a
//! stop flag and how long to go on. Out: every measurement stored as it is taken, the
//! [`Live`] counters for a progress line, and the `probe` document at the end (also rewritten
//! every [`DOCUMENT_EVERY`], so a killed run keeps a recent one).
//!
//! The caller's thread plans each round ([`Planner`]) shortly before it is due and hands each
//! slot to its probe's worker, which sleeps until the slot's time and measures; results come
//! back over a channel and go to the sink at once. A probe that hangs holds only its own
//! worker (its later slots start late, and that lateness is measured), never the schedule or
//! the other probes. On a stop request no new round is planned, slots not yet due are not
//! measured, and what was measured is kept.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tailhunt_model::evidence::probe::ProbeRecord;
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::{Outcome, SeriesSink};

use crate::config::Config;
use crate::kind::{now_ns, Op, Probe};
use crate::record::{Recorder, Report};
use crate::schedule::{Planner, Slot};
use crate::ProbeError;

/// How long before a round is due its slots are handed out.
const LEAD_NS: i64 = 2_000_000;
/// The longest a worker sleeps before it looks at the stop flag again.
const STOP_POLL_NS: i64 = 50_000_000;
/// How often the `probe` document is rewritten while the run goes on.
pub const DOCUMENT_EVERY: Duration = Duration::from_secs(10);

/// Counters a progress line reads while the run goes on.
#[derive(Debug, Default)]
pub struct Live {
    /// Rounds planned.
    pub rounds: AtomicU64,
    /// Samples stored.
    pub samples: AtomicU64,
    /// Error samples.
    pub errors: AtomicU64,
    /// Timeout samples.
    pub timeouts: AtomicU64,
    /// The probes failing now (three or more failures in a row): name and last error.
    pub failing: Mutex<Vec<(String, String)>>,
}

/// A probe that started failing (with its last error) or answers again, since the last look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailingChange {
    /// It failed three or more times in a row.
    Started {
        /// The probe.
        name: String,
        /// Its last error.
        error: String,
    },
    /// It answered again.
    Stopped {
        /// The probe.
        name: String,
    },
}

impl Live {
    /// What changed in the failing probes since `seen` (which becomes the current set): the
    /// `probe` and `agent` commands print each change as a line while probing goes on.
    pub fn failing_changes(&self, seen: &mut Vec<(String, String)>) -> Vec<FailingChange> {
        let now = self.failing.lock().map(|f| f.clone()).unwrap_or_default();
        let mut out: Vec<FailingChange> = now
            .iter()
            .filter(|(n, _)| !seen.iter().any(|(s, _)| s == n))
            .map(|(name, error)| FailingChange::Started {
                name: name.clone(),
                error: error.clone(),
            })
            .collect();
        out.extend(
            seen.iter()
                .filter(|(s, _)| !now.iter().any(|(n, _)| n == s))
                .map(|(name, _)| FailingChange::Stopped { name: name.clone() }),
        );
        *seen = now;
        out
    }
}

impl std::fmt::Display for FailingChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailingChange::Started { name, error } => {
                write!(f, "probe '{name}' is failing: {error}")
            }
            FailingChange::Stopped { name } => write!(f, "probe '{name}' answers again"),
        }
    }
}

/// How long to go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// One round.
    Once,
    /// Rounds that start within this long of the origin.
    For(Duration),
    /// Until stopped.
    Forever,
}

/// What the run did.
#[derive(Debug)]
pub struct Finished {
    /// The `probe` document.
    pub record: ProbeRecord,
    /// Whether a stop request cut it short.
    pub interrupted: bool,
}

/// Runs `config`'s probes (`probes[i]` is `config.probes[i]`, live) from `origin_ns` until
/// `length` is over or `stop` is set.
pub fn run(
    config: &Config,
    probes: Vec<Box<dyn Probe>>,
    origin_ns: i64,
    length: Length,
    sink: &mut dyn SeriesSink,
    live: &Live,
    stop: &Arc<AtomicBool>,
) -> Result<Finished, ProbeError> {
    let interval_ns = (config.interval.as_nanos() as i64).max(1);
    let mut slots = Vec::new();
    for (i, spec) in config.probes.iter().enumerate() {
        slots.extend(Op::for_spec(spec).into_iter().map(|op| (i, op)));
    }
    let mut planner = Planner::new(origin_ns, interval_ns, slots, config.seed);
    let mut recorder = Recorder::new(&config.probes, config.interval, origin_ns);
    let (tx, results) = mpsc::channel::<Report>();
    let mut workers = Vec::new();
    let mut handles = Vec::new();
    for (probe, spec) in probes.into_iter().zip(&config.probes) {
        let (wtx, wrx) = mpsc::channel::<Slot>();
        let (tx, stop) = (tx.clone(), Arc::clone(stop));
        let timeout = spec.timeout;
        let h = std::thread::Builder::new()
            .name(format!("probe {}", spec.name))
            .spawn(move || worker(probe, timeout, &wrx, &tx, &stop))
            .map_err(|e| ProbeError::Start(format!("cannot start a probe thread: {e}")))?;
        workers.push(wtx);
        handles.push(h);
    }
    drop(tx);
    let end_ns = match length {
        Length::For(d) => Some(origin_ns.saturating_add(d.as_nanos() as i64)),
        _ => None,
    };
    let mut rounds = 0u64;
    let mut last_doc = now_ns();
    loop {
        let due = planner.round_start_ns(rounds);
        let over = match length {
            Length::Once => rounds >= 1,
            Length::For(_) => end_ns.is_some_and(|e| due >= e),
            Length::Forever => false,
        };
        if over || stop.load(Ordering::Relaxed) {
            break;
        }
        // Store what arrives until the round is due (or a stop request).
        while now_ns() < due - LEAD_NS && !stop.load(Ordering::Relaxed) {
            let wait = Duration::from_nanos((due - LEAD_NS - now_ns()).clamp(0, 50_000_000) as u64);
            drain(&results, wait, &mut recorder, sink, live)?;
            if now_ns() - last_doc > DOCUMENT_EVERY.as_nanos() as i64 {
                put_evidence(sink, &recorder.record(rounds, config.seed))
                    .map_err(|e| ProbeError::Sink(e.to_string()))?;
                last_doc = now_ns();
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        for slot in planner.round(rounds) {
            // A worker that ended (it cannot) would only lose its own slots.
            let _ = workers[slot.probe].send(slot);
        }
        rounds += 1;
        live.rounds.store(rounds, Ordering::Relaxed);
    }
    // No more slots: the workers finish the ones they hold and end; their results follow.
    drop(workers);
    while drain(
        &results,
        Duration::from_millis(50),
        &mut recorder,
        sink,
        live,
    )? {}
    for h in handles {
        let _ = h.join();
    }
    let record = recorder.record(rounds, config.seed);
    put_evidence(sink, &record).map_err(|e| ProbeError::Sink(e.to_string()))?;
    sink.commit_now()
        .map_err(|e| ProbeError::Sink(e.to_string()))?;
    Ok(Finished {
        record,
        interrupted: stop.load(Ordering::Relaxed),
    })
}

/// Stores the reports that arrive within `wait`; `false` once every worker has ended.
fn drain(
    results: &Receiver<Report>,
    wait: Duration,
    recorder: &mut Recorder,
    sink: &mut dyn SeriesSink,
    live: &Live,
) -> Result<bool, ProbeError> {
    let first = match results.recv_timeout(wait) {
        Ok(r) => r,
        Err(RecvTimeoutError::Timeout) => {
            sink.commit_if_due()
                .map_err(|e| ProbeError::Sink(e.to_string()))?;
            return Ok(true);
        }
        Err(RecvTimeoutError::Disconnected) => return Ok(false),
    };
    let mut changed_failing = false;
    for r in std::iter::once(first).chain(results.try_iter()) {
        let was = recorder.status()[r.slot.probe].keeps_failing();
        let s = recorder.add(sink, &r)?;
        live.samples.fetch_add(1, Ordering::Relaxed);
        match s.outcome {
            Outcome::Error => live.errors.fetch_add(1, Ordering::Relaxed),
            Outcome::Timeout => live.timeouts.fetch_add(1, Ordering::Relaxed),
            Outcome::Ok => 0,
        };
        changed_failing |= was != recorder.status()[r.slot.probe].keeps_failing();
    }
    if changed_failing {
        if let Ok(mut f) = live.failing.lock() {
            *f = recorder
                .status()
                .iter()
                .filter(|s| s.keeps_failing())
                .map(|s| (s.name.clone(), s.last_error.clone().unwrap_or_default()))
                .collect();
        }
    }
    sink.commit_if_due()
        .map_err(|e| ProbeError::Sink(e.to_string()))?;
    Ok(true)
}

/// One probe's thread: waits for each slot's time, measures, reports.
fn worker(
    mut probe: Box<dyn Probe>,
    timeout: Duration,
    slots: &Receiver<Slot>,
    results: &Sender<Report>,
    stop: &AtomicBool,
) {
    tailhunt_load::clock::tighten_timer_slack();
    let mut out = Vec::with_capacity(2);
    while let Ok(slot) = slots.recv() {
        // Sleep until the slot is due, in short steps so a stop request is seen: a slot not
        // yet due when the stop came never started and is not a sample.
        let mut stopped = false;
        loop {
            let wait = slot.intended_ns - now_ns();
            stopped = stopped || stop.load(Ordering::Relaxed);
            if wait <= 0 || stopped {
                break;
            }
            std::thread::sleep(Duration::from_nanos(wait.min(STOP_POLL_NS) as u64));
        }
        if stopped {
            continue;
        }
        out.clear();
        probe.run(slot.op, timeout, &mut out);
        for (i, measured) in out.drain(..).enumerate() {
            let r = Report {
                slot,
                measured,
                first_of_slot: i == 0,
            };
            if results.send(r).is_err() {
                return;
            }
        }
    }
}
