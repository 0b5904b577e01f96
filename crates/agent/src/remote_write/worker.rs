//! The sending thread of one endpoint: takes the oldest queued batch, renders it for the
//! endpoint's current mode, posts its requests, and acknowledges it once every request was
//! delivered or rejected for good (see the parent module for the rules).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message as _;

use super::{
    lock, render, send, Batch, EndpointConfig, EndpointStatus, HistogramMode, SendOutcome,
};
use crate::queue::Queue;

pub(super) struct Worker {
    pub(super) agent: ureq::Agent,
    pub(super) config: EndpointConfig,
    pub(super) queue: Arc<Mutex<Queue>>,
    pub(super) status: Arc<Mutex<EndpointStatus>>,
    pub(super) stop: Arc<AtomicBool>,
}

/// Where the head batch stands after one round of sending.
enum Round {
    /// Every request delivered or rejected: acknowledge the batch.
    Done,
    /// Try again (after a backoff, or at once in classic mode after a fall back).
    Again,
}

impl Worker {
    /// Sleeps up to `d`, waking early on stop.
    fn pause(&self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until && !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10).min(until - Instant::now()));
        }
    }

    fn event(&self, text: String) {
        lock(&self.status).event(format!("{}: {text}", self.config.name));
    }

    pub(super) fn run(self) {
        let agent = self.agent.clone();
        let mut backoff = self.config.backoff_min;
        // Requests of the head batch already handled (kept across retries of the rest).
        let mut done_in_head = 0usize;
        while !self.stop.load(Ordering::SeqCst) {
            let head = lock(&self.queue).peek();
            let bytes = match head {
                Ok(Some(b)) => b,
                Ok(None) => {
                    self.pause(Duration::from_millis(20));
                    continue;
                }
                Err(e) => {
                    lock(&self.status).last_error = Some(e.to_string());
                    self.pause(backoff);
                    continue;
                }
            };
            let round = match Batch::decode(&bytes[..]) {
                Ok(batch) => self.send_batch(&agent, &batch, &mut done_in_head, &mut backoff),
                Err(e) => {
                    self.event(format!("dropped an unreadable queued batch: {e}"));
                    Round::Done
                }
            };
            if let Round::Done = round {
                done_in_head = 0;
                self.ack();
            }
        }
    }

    fn send_batch(
        &self,
        agent: &ureq::Agent,
        batch: &Batch,
        done_in_head: &mut usize,
        backoff: &mut Duration,
    ) -> Round {
        let mode = lock(&self.status).mode;
        let (requests, bad) = render(batch, mode);
        if bad > 0 && *done_in_head == 0 {
            self.event(format!(
                "{bad} queued histogram(s) did not decode and were left out"
            ));
        }
        let token = self.config.bearer_token.as_deref();
        for request in requests.iter().skip(*done_in_head) {
            match send(agent, &self.config.url, token, request) {
                SendOutcome::Delivered => {
                    *done_in_head += 1;
                    *backoff = self.config.backoff_min;
                    let was_failing = {
                        let mut s = lock(&self.status);
                        s.delivered_requests += 1;
                        s.last_error.take().is_some()
                    };
                    if was_failing {
                        self.event("delivering again".into());
                    }
                }
                SendOutcome::Rejected(msg) => {
                    *done_in_head += 1;
                    lock(&self.status).rejected_requests += 1;
                    self.event(format!("request rejected, not retried: {msg}"));
                }
                SendOutcome::NativeRejected(msg) => {
                    lock(&self.status).mode = HistogramMode::Classic;
                    self.event(format!(
                        "the receiver rejects native histograms ({msg}); sending classic buckets from now on"
                    ));
                    return Round::Again;
                }
                SendOutcome::Retry(msg) => {
                    let first = {
                        let mut s = lock(&self.status);
                        s.retries += 1;
                        s.last_error.replace(msg.clone()).is_none()
                    };
                    if first {
                        self.event(format!("{msg}; retrying with backoff, batches stay queued"));
                    }
                    self.pause(*backoff);
                    *backoff = (*backoff * 2).min(self.config.backoff_max);
                    return Round::Again;
                }
            }
        }
        Round::Done
    }

    fn ack(&self) {
        let (result, stats) = {
            let mut q = lock(&self.queue);
            (q.ack(), q.stats())
        };
        let mut s = lock(&self.status);
        s.queue = stats;
        match result {
            Ok(()) => s.acknowledged_batches += 1,
            Err(e) => s.last_error = Some(e.to_string()),
        }
    }
}
