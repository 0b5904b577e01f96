//! The stream worker's connections over their lives: broken (closed, what was in flight
//! failed, opened again after a back-off), retired (closed as the server announced, opened
//! again for the next request), reopened, and timed out.

use std::os::fd::AsFd;
use std::time::Duration;

use rustix::event::epoll;
use tailhunt_model::{Outcome, Sample};

use super::{interest_flags, open, Loop};
use crate::breakdown::Breakdown;
use crate::clock::mono_ns;
use crate::engine::WorkerResult;

/// How long a reconnect may block the loop.
const RECONNECT_TIMEOUT: Duration = Duration::from_millis(200);
/// Wait between reconnect attempts of one connection.
const RECONNECT_BACKOFF_NS: i64 = 100_000_000;

impl Loop<'_> {
    /// Reopens the closed connections whose back-off has passed.
    pub(super) fn revive(&mut self, now: i64, r: &mut WorkerResult) {
        self.dead_retry = i64::MAX;
        for i in 0..self.conns.len() {
            if self.conns[i].sock.is_some() {
                continue;
            }
            if now >= self.conns[i].retry_at {
                self.reconnect(i, r);
                self.offer(i);
            }
            if self.conns[i].sock.is_none() {
                self.dead_retry = self.dead_retry.min(self.conns[i].retry_at);
            }
        }
    }

    /// Connection `i` broke: it is closed, what was in flight on it ends with `outcome`
    /// (timeouts that are overdue end as timeouts whatever `outcome` is), and it is opened
    /// again after a back-off.
    pub(super) fn fail(&mut self, i: usize, outcome: Outcome, r: &mut WorkerResult) {
        if self.close(i, outcome, r, RECONNECT_BACKOFF_NS) {
            r.counters.disconnects += 1;
        }
    }

    /// Connection `i` ended as the server said it would (a response that closes it), or
    /// while idle: closed here and opened again for the next request, as a client's pool
    /// does, with no failure counted. (Sending the next request on it failed one request in
    /// two against an HTTP/1.0 server.) Requests sent after the closing response are never
    /// answered. A closed connection is reopened only when a request is dispatched
    /// ([`Loop::take_room`]), so a server that hangs up on every connection costs one connect
    /// per request, never a loop of them.
    pub(super) fn retire(&mut self, i: usize, r: &mut WorkerResult) {
        if !self.conns[i].inflight.is_empty() {
            r.note_error(|| {
                "a request was sent after the response that closed its connection".into()
            });
        }
        self.close(i, Outcome::Error, r, 0);
    }

    /// Closes connection `i` (whether it was open), ends what was in flight on it, and
    /// reopens it `backoff_ns` from now.
    fn close(&mut self, i: usize, outcome: Outcome, r: &mut WorkerResult, backoff_ns: i64) -> bool {
        let now = mono_ns();
        let timeout = self.timeout_ns;
        let c = &mut self.conns[i];
        let open = c.sock.take().map(|s| {
            let _ = epoll::delete(&self.epoll, s.as_fd());
        });
        for f in c.inflight.drain(..) {
            let overdue = now >= f.intended + timeout;
            let (o, end) = if overdue {
                (Outcome::Timeout, f.intended + timeout)
            } else {
                (outcome, now)
            };
            let breakdown = self.cfg.breakdown.then(Breakdown::default);
            r.finish(Sample::new(f.intended, f.start, end, o), true, breakdown);
            self.live_done += 1;
        }
        c.rlen = 0;
        c.wbuf.clear();
        c.written = 0;
        c.retry_at = now + backoff_ns;
        self.dead_retry = self.dead_retry.min(c.retry_at);
        open.is_some()
    }

    fn reconnect(&mut self, i: usize, r: &mut WorkerResult) {
        let before = mono_ns();
        match open(self.cfg, self.tls.as_ref(), RECONNECT_TIMEOUT) {
            Ok((s, tx_stamps)) => {
                if epoll::add(
                    &self.epoll,
                    s.as_fd(),
                    epoll::EventData::new_u64(i as u64),
                    interest_flags(false),
                )
                .is_ok()
                {
                    let c = &mut self.conns[i];
                    (c.sock, c.written, c.tx_stamps) = (Some(s), 0, tx_stamps);
                    c.reopened = Some((before, mono_ns()));
                    r.counters.connects += 1;
                }
            }
            Err(e) => {
                r.counters.connect_failures += 1;
                let why = crate::engine::connect_hint(&e);
                r.note_error(|| format!("reconnect: {why}"));
                self.refused_since_response = Some(format!(
                    "its connections closed and reconnecting failed ({why})"
                ));
                self.conns[i].retry_at = mono_ns() + RECONNECT_BACKOFF_NS;
            }
        }
    }

    /// Times out requests whose deadline passed: in flight (the connection is closed, as a real
    /// client would) or still waiting in the client (never sent).
    pub(super) fn expire(&mut self, now: i64, r: &mut WorkerResult) {
        while let Some(&intended) = self.backlog.front() {
            if now < intended + self.timeout_ns {
                break;
            }
            self.backlog.pop_front();
            let end = intended + self.timeout_ns;
            let breakdown = self.cfg.breakdown.then(Breakdown::default);
            r.finish(
                Sample::new(intended, end, end, Outcome::Timeout),
                false,
                breakdown,
            );
            self.live_done += 1;
        }
        for i in 0..self.conns.len() {
            if self.conns[i]
                .inflight
                .front()
                .is_some_and(|f| now >= f.intended + self.timeout_ns)
            {
                r.note_error(|| format!("requests timed out after {:?}", self.cfg.timeout));
                self.fail(i, Outcome::Error, r);
            }
        }
    }
}
