//! The stream worker: TCP connections, pipelined requests, one epoll loop.

use std::collections::VecDeque;
use std::io::{ErrorKind, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::event::epoll;
use tailhunt_model::Outcome;

use super::handoff::Outbox;
use super::tls::{self, Link, Tls};
use super::{stopped, Live, StepConfig, Window, WorkerResult, MAX_WAIT_NS};
use crate::clock::{mono_ns, real_ns};
use crate::proto::{self, StreamProtocol};
use crate::schedule::Schedule;
use crate::tstamp;

mod lifecycle;
mod receive;

/// How long a connect at the start may block the loop.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes asked of each read.
const READ_CHUNK: usize = 1 << 16;

struct InFlight {
    intended: i64,
    start: i64,
    /// The part of the wait before the write that was a connect ([`actual_start`]): from
    /// `start` to the write. In the breakdown it is network time.
    connect_ns: i64,
    /// Breakdown only: bytes written on the connection through this request's last byte (its
    /// transmit timestamp's id is [`tstamp::stream_id`] of it), CLOCK_REALTIME at the send and
    /// the kernel's transmit timestamp (0 until it comes from the error queue).
    end_offset: u64,
    send_real_ns: u64,
    kernel_tx_ns: u64,
}

struct Conn {
    sock: Option<Link>,
    inflight: VecDeque<InFlight>,
    /// Read buffer: zeroed once and reused; `rlen` bytes of it hold unparsed data.
    rbuf: Vec<u8>,
    rlen: usize,
    wbuf: Vec<u8>,
    retry_at: i64,
    /// Breakdown only: bytes queued on this socket since its timestamps were enabled (its
    /// first byte has transmit id 0), and whether transmit timestamps are on.
    written: u64,
    tx_stamps: bool,
    /// Whether the connection's index is in [`Loop::room`].
    queued: bool,
    /// When it was last opened again, before and after the connect (CLOCK_MONOTONIC), until
    /// the first request on it is sent: see [`actual_start`].
    reopened: Option<(i64, i64)>,
}

/// The actual send time of a request intended at `intended` and written at `now` on a
/// connection opened again from `reopened.0` to `.1` (a server that closes its connections:
/// `Connection: close`, an idle timeout). The time the request waited for that connect is
/// the network's and the server's (a handshake), not the client's: it goes to the request's
/// service time, and only the rest of the wait (before the connect, and after it until the
/// write) stays in its client lateness. A request intended after the connect waited for none
/// of it. Never before `intended`, never after `now`.
fn actual_start(intended: i64, now: i64, reopened: Option<(i64, i64)>) -> i64 {
    match reopened {
        Some((before, after)) if intended < after && after <= now => {
            now - (after - intended.max(before))
        }
        _ => now,
    }
}

/// A worker's connections, opened before the schedule starts.
pub(crate) struct Worker {
    conns: Vec<Conn>,
    /// `https://`: the sessions' configuration.
    tls: Option<Tls>,
}

/// Opens a connection; with `--breakdown` also turns on kernel timestamps (before the first
/// byte is written, so transmit ids count from the connection's first byte) and says whether
/// transmit timestamps are on. Timestamps are best effort: refused, the breakdown has less.
fn open(cfg: &StepConfig, tls: Option<&Tls>, timeout: Duration) -> std::io::Result<(Link, bool)> {
    let s = tls::connect(&cfg.target.addr, tls, cfg.nodelay, timeout)?;
    let tx = cfg.breakdown && tstamp::enable(s.tcp(), tstamp::Want::ALL).is_ok_and(|on| on.tx);
    Ok((s, tx))
}

impl Worker {
    /// Opens `n` connections; fails only if none opens.
    pub fn connect(cfg: &StepConfig, n: usize) -> std::io::Result<Worker> {
        let tls = tls::for_step(cfg)?;
        let mut conns = Vec::with_capacity(n);
        let mut last_err = None;
        for _ in 0..n {
            let (sock, tx_stamps) = match open(cfg, tls.as_ref(), CONNECT_TIMEOUT) {
                Ok((s, tx)) => (Some(s), tx),
                Err(e) => {
                    last_err = Some(e);
                    (None, false)
                }
            };
            conns.push(Conn {
                sock,
                inflight: VecDeque::new(),
                rbuf: vec![0; READ_CHUNK],
                rlen: 0,
                wbuf: Vec::new(),
                retry_at: 0,
                written: 0,
                tx_stamps,
                queued: false,
                reopened: None,
            });
        }
        match last_err {
            Some(e) if conns.iter().all(|c| c.sock.is_none()) => Err(e),
            _ => Ok(Worker { conns, tls }),
        }
    }

    pub fn run(
        self,
        cfg: &StepConfig,
        w: Window,
        live: &Arc<Live>,
        stop: &Arc<AtomicBool>,
        out: Outbox,
    ) -> WorkerResult {
        let mut r = WorkerResult::new(out, &w);
        // The request was checked before the run (limits::check_step).
        let proto = match proto::for_target(&cfg.target, cfg.request_bytes, &cfg.http) {
            Ok(Some(p)) => p,
            Ok(None) => return r,
            Err(e) => {
                r.note_error(|| e.to_string());
                return r;
            }
        };
        let mut lp = match Loop::new(self, cfg, proto, live) {
            Ok(lp) => lp,
            Err(e) => {
                r.note_error(|| format!("epoll: {e}"));
                return r;
            }
        };
        lp.run(w, stop, &mut r);
        if lp.conns.iter().all(|c| c.sock.is_none()) {
            r.lost = lp.refused_since_response.take();
        }
        r
    }
}

/// What a connection waits for: replies, and room in the socket while requests wait in its
/// write buffer. Edge-triggered: each read takes everything the socket holds (a short read
/// of a plain socket means it is empty; TLS reads until `WouldBlock`) and a write that did not
/// take everything leaves the socket full, so every later event comes with new bytes or new
/// room. Level-triggered, epoll put each reported socket back on its ready list and polled it
/// again at the next wait only to find it empty: one more `tcp_poll` per reply.
fn interest_flags(write: bool) -> epoll::EventFlags {
    let base = epoll::EventFlags::IN | epoll::EventFlags::ET;
    if write {
        base | epoll::EventFlags::OUT
    } else {
        base
    }
}

struct Loop<'a> {
    cfg: &'a StepConfig,
    /// `https://`: the sessions' configuration (for reconnects).
    tls: Option<Tls>,
    proto: Box<dyn StreamProtocol>,
    conns: Vec<Conn>,
    epoll: rustix::fd::OwnedFd,
    backlog: VecDeque<i64>,
    /// Connections that can take a request (open, fewer than `max_inflight` in flight), in the
    /// order they get the next ones: a request takes the front and the connection goes to the
    /// back if it still has room (round robin), so a send costs O(1), not a scan of the pool.
    /// Entries are checked when taken (a connection can break while queued).
    room: VecDeque<usize>,
    /// Earliest `retry_at` of a closed connection (`i64::MAX`: none closed).
    dead_retry: i64,
    /// Requests written and finished since [`Live`] was last updated (once per loop turn, not
    /// per request: the progress line reads it a few times a second).
    live_sent: u64,
    live_done: u64,
    scratch: Vec<u8>,
    seq: u64,
    timeout_ns: i64,
    /// No pending request's deadline is earlier than this (`i64::MAX`: none pending). Requests
    /// are scheduled in intended-time order and only ever leave, so the earliest deadline can
    /// only move later: the O(connections) timeout scan runs when this passes, not every turn.
    deadline_check: i64,
    live: &'a Live,
    /// `recvmsg` for kernel timestamps (breakdown only).
    reader: tstamp::Reader,
    /// The last failed reconnect since the last response (cleared by a response).
    refused_since_response: Option<String>,
    /// When the last request was written and the last response read: a reply is expected
    /// while the first is later (the worker polls for it within its spin window).
    last_send_ns: i64,
    last_reply_ns: i64,
}

impl<'a> Loop<'a> {
    fn new(
        w: Worker,
        cfg: &'a StepConfig,
        proto: Box<dyn StreamProtocol>,
        live: &'a Live,
    ) -> std::io::Result<Loop<'a>> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        for (i, c) in w.conns.iter().enumerate() {
            if let Some(s) = &c.sock {
                epoll::add(
                    &epoll,
                    s.as_fd(),
                    epoll::EventData::new_u64(i as u64),
                    interest_flags(false),
                )?;
            }
        }
        let mut lp = Loop {
            cfg,
            proto,
            conns: w.conns,
            tls: w.tls,
            epoll,
            backlog: VecDeque::new(),
            room: VecDeque::new(),
            dead_retry: i64::MAX,
            live_sent: 0,
            live_done: 0,
            scratch: Vec::with_capacity(4096),
            seq: 0,
            timeout_ns: cfg.timeout.as_nanos() as i64,
            deadline_check: i64::MAX,
            live,
            reader: tstamp::Reader::new(),
            refused_since_response: None,
            last_send_ns: 0,
            last_reply_ns: 0,
        };
        for i in 0..lp.conns.len() {
            if lp.conns[i].sock.is_some() {
                lp.offer(i);
            } else {
                lp.dead_retry = 0;
            }
        }
        Ok(lp)
    }

    fn run(&mut self, w: Window, stop: &AtomicBool, r: &mut WorkerResult) {
        let mut sched = Schedule::new(self.cfg.arrival, w.rate, w.start_ns, w.phase_ns, w.seed);
        let mut events = Vec::with_capacity(256);
        loop {
            let now = mono_ns();
            let sending = sched.peek() < w.end_ns && !stopped(stop);
            r.note_stop(stop, now, w.end_ns);
            while sched.peek() <= now && sched.peek() < w.end_ns && !stopped(stop) {
                self.backlog.push_back(sched.peek());
                self.deadline_check = self.deadline_check.min(sched.peek() + self.timeout_ns);
                sched.advance();
            }
            self.dispatch(now, r);
            // What is left waited for a connection (everything due was just offered one).
            r.counters.max_backlog = r.counters.max_backlog.max(self.backlog.len() as u64);
            if now >= self.deadline_check {
                self.expire(now, r);
                self.deadline_check = self.next_deadline().unwrap_or(i64::MAX);
            }
            self.publish();
            r.hand_off(now, || {
                let next = if sending { sched.peek() } else { i64::MAX };
                self.watermark().min(next)
            });
            if !sending
                && self.backlog.is_empty()
                && self.conns.iter().all(|c| c.inflight.is_empty())
            {
                break;
            }
            let mut wait = MAX_WAIT_NS;
            // With every connection open and busy a send can wait only for a reply: waking for
            // the timetable, or polling for it, would find nothing to do (at the highest rates
            // that polling was most of the client's own CPU). What falls due meanwhile joins
            // the backlog with its intended time when the reply comes. A closed connection is
            // reopened when a send is due, so then the timetable still wakes the worker.
            let can_send = !self.room.is_empty() || self.dead_retry != i64::MAX;
            if sending && can_send {
                wait = wait.min(sched.peek() - now);
            }
            if self.deadline_check != i64::MAX {
                wait = wait.min(self.deadline_check - now);
            }
            // A send of this turn is later than `now`: its reply is awaited too (no clock read).
            let awaiting = w.reply_spin
                && self.last_send_ns > self.last_reply_ns
                && now - self.last_send_ns < w.spin_ns;
            if let Err(e) = super::wait_events(&self.epoll, &mut events, wait, w.spin_ns, awaiting)
            {
                r.note_error(|| format!("epoll_wait: {e}"));
                break;
            }
            for ev in events.iter() {
                let (flags, data) = (ev.flags, ev.data); // copies out of the packed struct
                let i = data.u64() as usize;
                if flags.intersects(epoll::EventFlags::OUT) {
                    self.flush(i, r);
                }
                if flags.intersects(
                    epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR,
                ) {
                    self.read(i, r);
                }
            }
        }
    }

    /// Writes waiting requests to connections with room, round robin.
    fn dispatch(&mut self, now: i64, r: &mut WorkerResult) {
        while !self.backlog.is_empty() {
            let Some(i) = self.take_room(now, r) else {
                return;
            };
            let Some(intended) = self.backlog.pop_front() else {
                return;
            };
            self.send(i, intended, r);
            self.offer(i);
        }
    }

    /// The next connection with room: reopens closed connections whose back-off has passed,
    /// then takes the front of [`Loop::room`].
    fn take_room(&mut self, now: i64, r: &mut WorkerResult) -> Option<usize> {
        if now >= self.dead_retry {
            self.revive(now, r);
        }
        while let Some(i) = self.room.pop_front() {
            let c = &mut self.conns[i];
            c.queued = false;
            if c.sock.is_some() && c.inflight.len() < self.cfg.max_inflight {
                return Some(i);
            }
        }
        None
    }

    /// Queues connection `i` for requests if it is open, has room and is not queued yet.
    fn offer(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.queued && c.sock.is_some() && c.inflight.len() < self.cfg.max_inflight {
            c.queued = true;
            self.room.push_back(i);
        }
    }

    /// Hands the counts since the last call to [`Live`].
    fn publish(&mut self) {
        if self.live_sent > 0 {
            self.live.sent.fetch_add(self.live_sent, Ordering::Relaxed);
            self.live_sent = 0;
        }
        if self.live_done > 0 {
            self.live.done.fetch_add(self.live_done, Ordering::Relaxed);
            self.live_done = 0;
        }
    }

    fn send(&mut self, i: usize, intended: i64, r: &mut WorkerResult) {
        self.scratch.clear();
        let split = self.proto.write_request(&mut self.scratch, self.seq);
        self.seq += 1;
        let c = &mut self.conns[i];
        let now = mono_ns();
        let start = actual_start(intended, now, c.reopened.take());
        self.last_send_ns = now;
        let send_real_ns = if self.cfg.breakdown {
            real_ns() as u64
        } else {
            0
        };
        c.written += self.scratch.len() as u64;
        c.inflight.push_back(InFlight {
            intended,
            start,
            connect_ns: now - start,
            end_offset: c.written,
            send_real_ns,
            kernel_tx_ns: 0,
        });
        self.live_sent += 1;
        let pieces: [&[u8]; 2] = if self.cfg.split_writes {
            [&self.scratch[..split], &self.scratch[split..]]
        } else {
            [&self.scratch, &[]]
        };
        let mut failed = None;
        for piece in pieces {
            if piece.is_empty() {
                continue;
            }
            if !c.wbuf.is_empty() {
                c.wbuf.extend_from_slice(piece);
                continue;
            }
            let Some(sock) = c.sock.as_mut() else { break };
            match sock.write(piece) {
                Ok(k) if k == piece.len() => {}
                Ok(k) => c.wbuf.extend_from_slice(&piece[k..]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => c.wbuf.extend_from_slice(piece),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            r.note_error(|| format!("write: {e}"));
            self.fail(i, Outcome::Error, r);
        } else if !self.conns[i].wbuf.is_empty() || self.pending_tls(i) {
            self.interest(i, true);
        }
    }

    fn interest(&self, i: usize, write: bool) {
        if let Some(s) = &self.conns[i].sock {
            let _ = epoll::modify(
                &self.epoll,
                s.as_fd(),
                epoll::EventData::new_u64(i as u64),
                interest_flags(write),
            );
        }
    }

    /// Whether connection `i`'s TLS session holds bytes the socket did not take yet.
    fn pending_tls(&self, i: usize) -> bool {
        self.conns[i].sock.as_ref().is_some_and(Link::pending_write)
    }

    fn flush(&mut self, i: usize, r: &mut WorkerResult) {
        let c = &mut self.conns[i];
        let Some(sock) = c.sock.as_mut() else { return };
        // Encrypted bytes first: they belong to requests before those in `wbuf`.
        let written = sock.flush_tls().and_then(|()| match c.wbuf.is_empty() {
            true => Ok(0),
            false => sock.write(&c.wbuf),
        });
        match written {
            Ok(k) => {
                c.wbuf.drain(..k);
                if c.wbuf.is_empty() && !self.pending_tls(i) {
                    self.interest(i, false);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => {
                r.note_error(|| format!("write: {e}"));
                self.fail(i, Outcome::Error, r);
            }
        }
    }

    /// The earliest intended time of a request not finished yet (waiting in the client or in
    /// flight); `i64::MAX` when none is.
    fn watermark(&self) -> i64 {
        let inflight = self
            .conns
            .iter()
            .filter_map(|c| c.inflight.front().map(|f| f.intended));
        inflight
            .chain(self.backlog.front().copied())
            .min()
            .unwrap_or(i64::MAX)
    }

    fn next_deadline(&self) -> Option<i64> {
        let earliest = self.watermark();
        (earliest != i64::MAX).then(|| earliest + self.timeout_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::actual_start;

    /// Only the part of a request's wait that was the connect moves out of its lateness.
    #[test]
    fn a_connect_waited_for_moves_from_lateness_to_service() {
        // Kept connection: the actual send is the write.
        assert_eq!(actual_start(100, 150, None), 150);
        // Intended before the connect began (client 10 late), connect 200..260, written at
        // 265: lateness 10 + 5, the connect's 60 in service.
        assert_eq!(actual_start(190, 265, Some((200, 260))), 205);
        // Intended during the connect: only the connect's rest after it was waited for.
        assert_eq!(actual_start(230, 265, Some((200, 260))), 235);
        // Intended after the connect: none of it was waited for.
        assert_eq!(actual_start(262, 265, Some((200, 260))), 265);
        // A connect that ended after the write (a clock oddity): nothing moves.
        assert_eq!(actual_start(190, 250, Some((200, 260))), 250);
    }
}
