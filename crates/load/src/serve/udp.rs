//! UDP echo (see [`crate::wire`]): one reply datagram per request datagram, to its sender.
//!
//! In: request datagrams on the one socket every worker reads (`EPOLLEXCLUSIVE`, so one worker
//! wakes per burst). Out: a response body echoing `seq`, padded to the reply size, after the
//! think time (held replies wait in a per-worker queue ordered by due time, then arrival).
//! Datagrams shorter than a `seq` count as bad requests and get no reply. A reply the kernel
//! refuses (send buffer full) is dropped, as the network would; `replies` counts only those sent.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::io::Errno;
use rustix::net::{SendFlags, SocketAddrAny};

use super::runtime::{mono_ns, Counters, WorkerCtx, TOKEN_SOCKET, TOKEN_TIMER, TOKEN_WAKE};
use super::ServeConfig;
use crate::wire::{self, ServerTimes};

/// Datagrams read per wake-up before looking at timers again (the socket stays readable, and
/// level-triggered epoll reports it again).
const RECV_BATCH: usize = 256;

/// A reply waiting for its think time or the end of a pause.
struct Held {
    due: u64,
    order: u64,
    seq: u64,
    peer: SocketAddrAny,
    times: ServerTimes,
}

impl PartialEq for Held {
    fn eq(&self, other: &Held) -> bool {
        (self.due, self.order) == (other.due, other.order)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Held) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    fn cmp(&self, other: &Held) -> Ordering {
        (self.due, self.order).cmp(&(other.due, other.order))
    }
}

/// One worker thread of a UDP echo server.
pub(crate) struct UdpWorker {
    ctx: WorkerCtx,
    sock: Arc<OwnedFd>,
    reply_bytes: usize,
    held: BinaryHeap<Reverse<Held>>,
    order: u64,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl UdpWorker {
    pub(crate) fn new(
        ctx: WorkerCtx,
        sock: Arc<OwnedFd>,
        cfg: &ServeConfig,
    ) -> std::io::Result<UdpWorker> {
        let flags = EventFlags::IN | EventFlags::EXCLUSIVE;
        epoll::add(&ctx.epoll, &*sock, EventData::new_u64(TOKEN_SOCKET), flags)?;
        Ok(UdpWorker {
            ctx,
            sock,
            reply_bytes: cfg.reply_bytes.max(wire::RESPONSE_MIN_BODY),
            held: BinaryHeap::new(),
            order: 0,
            buf: vec![0; 65_536],
            out: Vec::with_capacity(cfg.reply_bytes.max(wire::RESPONSE_MIN_BODY)),
        })
    }

    /// Serves until the stop flag is set.
    pub(crate) fn run(mut self) {
        self.ctx.on_thread_start();
        let mut events = Vec::with_capacity(64);
        while !self.ctx.shared.stopping() {
            if self.ctx.wait(&mut events).is_err() {
                break;
            }
            for event in &events {
                match event.data.u64() {
                    TOKEN_SOCKET => self.receive(),
                    TOKEN_TIMER => self.ctx.timer.fired(),
                    TOKEN_WAKE => self.ctx.inboxes[self.ctx.id].take(&mut Vec::new()),
                    _ => {}
                }
            }
            self.run_due();
        }
    }

    fn receive(&mut self) {
        for _ in 0..RECV_BATCH {
            let (n, peer, rx_kernel_ns) = match self
                .ctx
                .recv_from_with_rx_time(&*self.sock, &mut self.buf[..])
            {
                Ok((n, Some(peer), rx)) => (n, peer, rx),
                Ok((_, None, _)) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                // Interrupted, or errors queued for earlier datagrams (e.g. ICMP): nothing
                // to answer.
                Err(_) => continue,
            };
            let Some(seq) = wire::body_seq(&self.buf[..n]) else {
                Counters::bump(&self.ctx.counters.bad_requests, 1);
                continue;
            };
            Counters::bump(&self.ctx.counters.requests, 1);
            let times = ServerTimes {
                rx_kernel_ns,
                app_recv_ns: self.ctx.stamp(),
                app_send_ns: 0,
            };
            let now = mono_ns();
            let wait = self
                .ctx
                .think
                .sample_ns()
                .saturating_add(self.ctx.inject.extra_ns(now, false));
            let due = now.saturating_add(wait);
            if due <= now && self.held.is_empty() && self.ctx.shared.paused_until(now).is_none() {
                self.send(seq, &peer, times);
            } else {
                self.order += 1;
                self.held.push(Reverse(Held {
                    due,
                    order: self.order,
                    seq,
                    peer,
                    times,
                }));
            }
        }
    }

    fn send(&mut self, seq: u64, peer: &SocketAddrAny, times: ServerTimes) {
        self.out.clear();
        let times = ServerTimes {
            app_send_ns: self.ctx.stamp(),
            ..times
        };
        wire::put_response_body(&mut self.out, seq, times, self.reply_bytes);
        loop {
            match rustix::net::sendto(&*self.sock, &self.out, SendFlags::NOSIGNAL, peer) {
                Ok(_) => return Counters::bump(&self.ctx.counters.replies, 1),
                Err(Errno::INTR) => {}
                Err(_) => return,
            }
        }
    }

    /// Sends the held replies that are due (none during a pause), then re-arms the timer.
    fn run_due(&mut self) {
        let now = mono_ns();
        if let Some(end) = self.ctx.shared.paused_until(now) {
            if !self.held.is_empty() {
                let _ = self.ctx.timer.arm(end);
            }
            return;
        }
        while self.held.peek().is_some_and(|h| h.0.due <= now) {
            let Some(Reverse(h)) = self.held.pop() else {
                break;
            };
            self.send(h.seq, &h.peer, h.times);
        }
        if let Some(h) = self.held.peek() {
            let _ = self.ctx.timer.arm(h.0.due);
        }
    }
}
