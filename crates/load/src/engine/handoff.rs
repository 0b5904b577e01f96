//! Handing finished requests from the workers to the caller while a step runs.
//!
//! In: each worker's finished requests, sent in batches at least every [`HANDOFF_NS`] (or
//! sooner when [`HANDOFF_MAX`] pile up), each batch with the worker's *watermark*: no request
//! it has still to finish was due before that time. Out: the same requests in intended-time
//! order, given to a [`StepSink`] as soon as no earlier one can still arrive from any worker.
//! So a store can commit them within its commit interval (a killed run loses about a second,
//! not a step), and nobody holds a whole step in memory to sort it at the end.

use std::collections::BinaryHeap;
use std::sync::mpsc::Sender;

use tailhunt_model::{Sample, SinkError};

use crate::breakdown::Breakdown;

/// Longest time a worker holds finished requests before handing them over, ns.
pub const HANDOFF_NS: i64 = 50_000_000;

/// Finished requests a worker hands over at once at most. Small: the recorder shares the CPU
/// with the worker when the client is confined to one (`taskset -c 1 tailhunt load`), and
/// what it does with a batch is a stretch the worker does not run. With 4,096 a saturated
/// client's send lag had a 1.5 ms step every 24 ms at 170k/s (every hand-off); with 512 that
/// step was gone, at about one channel send per 2 ms.
pub const HANDOFF_MAX: usize = 512;

/// One scheduled request, finished.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finished {
    /// Its times and outcome.
    pub sample: Sample,
    /// Whether it was written to a socket. A request that waited in the client until its
    /// timeout (no usable connection), or whose send failed, was never sent: it is still a
    /// sample (a user waited that long), but not part of what the server was asked.
    pub sent: bool,
    /// Whether it was due in the measured window (false: the warm-up before it).
    pub measured: bool,
    /// Where its time went, when the step collects breakdowns (zeros when the server sent no
    /// timestamps or the request did not complete).
    pub breakdown: Option<Breakdown>,
}

/// Where a step's finished requests go while it runs.
pub trait StepSink {
    /// Finished requests in intended-time order; later calls hold only later ones.
    fn finished(&mut self, batch: &[Finished]) -> Result<(), SinkError>;

    /// Called every few tens of milliseconds while the step runs, with or without new
    /// requests (a store commits what it holds when its interval has passed).
    fn tick(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// A sink that keeps everything, for tests and small in-memory uses.
#[derive(Debug, Default)]
pub struct Collect(pub Vec<Finished>);

impl StepSink for Collect {
    fn finished(&mut self, batch: &[Finished]) -> Result<(), SinkError> {
        self.0.extend_from_slice(batch);
        Ok(())
    }
}

/// What a worker sends to the step's caller.
pub(crate) struct Batch {
    pub worker: usize,
    pub items: Vec<Finished>,
    /// No request of this worker still to finish was due before this (`i64::MAX`: done).
    pub watermark_ns: i64,
}

/// A worker's side of the hand-off.
pub(crate) struct Outbox {
    /// `None` once closed.
    tx: Option<Sender<Batch>>,
    worker: usize,
    items: Vec<Finished>,
    last_ns: i64,
}

impl Outbox {
    pub fn new(tx: Sender<Batch>, worker: usize, now_ns: i64) -> Outbox {
        Outbox {
            tx: Some(tx),
            worker,
            items: Vec::with_capacity(HANDOFF_MAX),
            last_ns: now_ns,
        }
    }

    pub fn push(&mut self, f: Finished) {
        self.items.push(f);
    }

    /// Whether the batch should go now.
    pub fn due(&self, now_ns: i64) -> bool {
        self.items.len() >= HANDOFF_MAX || now_ns - self.last_ns >= HANDOFF_NS
    }

    /// Sends what is held (even nothing: the watermark moves) with the worker's watermark.
    pub fn send(&mut self, now_ns: i64, watermark_ns: i64) {
        let items = std::mem::replace(&mut self.items, Vec::with_capacity(HANDOFF_MAX));
        // The receiver is gone only when the step's caller stopped listening (a panic): the
        // worker then has nobody to hand its requests to and finishes anyway.
        if let Some(tx) = &self.tx {
            let _ = tx.send(Batch {
                worker: self.worker,
                items,
                watermark_ns,
            });
        }
        self.last_ns = now_ns;
    }

    /// Hands over what is left as the worker's last batch and closes: the caller stops
    /// listening once every worker has closed.
    pub fn close(&mut self, now_ns: i64) {
        self.send(now_ns, i64::MAX);
        self.tx = None;
    }
}

/// One batch's requests, sorted, from `next` on still waiting for their turn.
struct Run {
    items: Vec<Finished>,
    next: usize,
}

/// The earliest waiting request of a run: its intended time, then the batch's arrival number
/// (requests due at the same time leave in the order they arrived), and where the run is.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    key: std::cmp::Reverse<(i64, u64)>, // reversed: BinaryHeap is a max-heap
    run: usize,
}

/// Puts the workers' batches back into intended-time order by merging sorted runs: each batch
/// is sorted when it arrives (a worker finishes requests nearly in order, so that sort is
/// close to a scan) and a heap holds one entry per batch that still waits, not one per
/// request. A request stuck until its timeout holds back every later one (a million at 200k/s
/// and a 5 s timeout) and the runs keep them without re-sorting. With a heap of requests the
/// push and pop of each request was a quarter of the recorder's CPU on a saturated client
/// (`perf`, 200k/s), the recorder being 8% of the CPU the worker shares with it; merging
/// runs takes a request out with a comparison while its run is the earliest.
pub(crate) struct Reorder {
    runs: Vec<Run>,
    /// Slots of `runs` that are empty, for the next batch.
    free: Vec<usize>,
    heads: BinaryHeap<Head>,
    batches: u64,
    watermarks: Vec<i64>,
    out: Vec<Finished>,
}

impl Reorder {
    pub fn new(workers: usize) -> Reorder {
        Reorder {
            runs: Vec::new(),
            free: Vec::new(),
            heads: BinaryHeap::new(),
            batches: 0,
            watermarks: vec![i64::MIN; workers],
            out: Vec::new(),
        }
    }

    pub fn add(&mut self, b: Batch) {
        if let Some(w) = self.watermarks.get_mut(b.worker) {
            *w = (*w).max(b.watermark_ns);
        }
        let mut items = b.items;
        if items.is_empty() {
            return;
        }
        // Stable: requests due at the same time keep their order within the batch.
        items.sort_by_key(|f| f.sample.intended_ns);
        // A batch is allocated for a full hand-off; one that waits long (behind a stuck
        // request) should not hold that room for a few requests.
        if items.capacity() > 2 * items.len() + 64 {
            items.shrink_to_fit();
        }
        self.batches += 1;
        let key = std::cmp::Reverse((items[0].sample.intended_ns, self.batches));
        let run = Run { items, next: 0 };
        let slot = match self.free.pop() {
            Some(i) => {
                self.runs[i] = run;
                i
            }
            None => {
                self.runs.push(run);
                self.runs.len() - 1
            }
        };
        self.heads.push(Head { key, run: slot });
    }

    /// Gives `sink` every request no earlier one can still precede (all of them with `all`).
    pub fn release(&mut self, sink: &mut dyn StepSink, all: bool) -> Result<(), SinkError> {
        let until = if all {
            i64::MAX
        } else {
            self.watermarks.iter().copied().min().unwrap_or(i64::MAX)
        };
        let due = |t: i64| all || t < until;
        self.out.clear();
        while let Some(top) = self.heads.peek() {
            if !due(top.key.0 .0) {
                break;
            }
            let Some(Head { key, run: slot }) = self.heads.pop() else {
                break;
            };
            let order = key.0 .1;
            // The run's requests leave while they are earlier than every other run's first.
            let bound = self.heads.peek().map(|h| h.key.0);
            let run = &mut self.runs[slot];
            while let Some(f) = run.items.get(run.next) {
                let k = (f.sample.intended_ns, order);
                if !due(k.0) || bound.is_some_and(|b| k > b) {
                    break;
                }
                self.out.push(*f);
                run.next += 1;
            }
            match run.items.get(run.next) {
                Some(f) => {
                    let key = std::cmp::Reverse((f.sample.intended_ns, order));
                    self.heads.push(Head { key, run: slot });
                }
                None => {
                    run.items = Vec::new();
                    run.next = 0;
                    self.free.push(slot);
                }
            }
        }
        if self.out.is_empty() {
            return Ok(());
        }
        sink.finished(&self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::Outcome;

    fn f(intended: i64) -> Finished {
        Finished {
            sample: Sample::new(intended, intended, intended + 10, Outcome::Ok),
            sent: true,
            measured: true,
            breakdown: None,
        }
    }

    fn times(c: &Collect) -> Vec<i64> {
        c.0.iter().map(|x| x.sample.intended_ns).collect()
    }

    #[test]
    fn requests_come_out_in_order_once_no_worker_can_precede_them() {
        let mut r = Reorder::new(2);
        let mut sink = Collect::default();
        r.add(Batch {
            worker: 0,
            items: vec![f(30), f(10)],
            watermark_ns: 40,
        });
        // Worker 1 has said nothing yet: it may still finish something due at time 0.
        r.release(&mut sink, false).unwrap();
        assert!(sink.0.is_empty());
        r.add(Batch {
            worker: 1,
            items: vec![f(20)],
            watermark_ns: 25,
        });
        r.release(&mut sink, false).unwrap();
        assert_eq!(times(&sink), [10, 20]);
        r.add(Batch {
            worker: 1,
            items: vec![f(35), f(50)],
            watermark_ns: i64::MAX,
        });
        r.release(&mut sink, false).unwrap();
        assert_eq!(times(&sink), [10, 20, 30, 35]);
        r.release(&mut sink, true).unwrap();
        assert_eq!(times(&sink), [10, 20, 30, 35, 50]);
    }

    /// Many batches, each out of order within itself, from three workers whose watermarks
    /// move at different speeds: every request comes out once, in intended-time order, and
    /// requests due at the same time keep the order they arrived in.
    #[test]
    fn shuffled_batches_come_out_sorted_and_ties_in_arrival_order() {
        let mut r = Reorder::new(3);
        let mut sink = Collect::default();
        let mut seed = 11u64;
        let mut sent = 0;
        for round in 0..200i64 {
            for worker in 0..3 {
                let mut items: Vec<Finished> = (0..20)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        f(round * 100 + (seed >> 58) as i64)
                    })
                    .collect();
                items.reverse();
                for x in &mut items {
                    sent += 1;
                    x.sample.end_ns = sent; // marks the arrival order
                }
                r.add(Batch {
                    worker,
                    items,
                    watermark_ns: round * 100 - 100 * worker as i64,
                });
            }
            r.release(&mut sink, false).unwrap();
        }
        r.release(&mut sink, true).unwrap();
        assert_eq!(sink.0.len(), 200 * 3 * 20);
        let keys: Vec<(i64, i64)> = sink
            .0
            .iter()
            .map(|x| (x.sample.intended_ns, x.sample.end_ns))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "out of order");
    }

    /// A request stuck until its timeout holds every later one back; when it ends, they all
    /// come out in order after it, whatever batches they came in.
    #[test]
    fn a_stuck_request_holds_the_rest_back_until_it_ends() {
        let mut r = Reorder::new(1);
        let mut sink = Collect::default();
        for round in 1..50i64 {
            let items = (0..30).rev().map(|k| f(round * 1000 + k * 10)).collect();
            r.add(Batch {
                worker: 0,
                items,
                watermark_ns: 5, // the request due at 5 is still out
            });
            r.release(&mut sink, false).unwrap();
            assert!(sink.0.is_empty(), "released before the stuck request");
        }
        r.add(Batch {
            worker: 0,
            items: vec![f(5)],
            watermark_ns: 30_000,
        });
        r.release(&mut sink, false).unwrap();
        let got = times(&sink);
        assert_eq!(got[0], 5);
        assert_eq!(got.len(), 1 + 29 * 30, "everything due before 30,000");
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        r.release(&mut sink, true).unwrap();
        assert_eq!(sink.0.len(), 1 + 49 * 30);
        assert!(times(&sink).windows(2).all(|w| w[0] < w[1]));
    }
}
