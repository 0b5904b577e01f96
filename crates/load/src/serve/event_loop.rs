//! The worker loop shared by the stream servers (tcp frames, HTTP).
//!
//! In: the shared listening socket (in every worker's epoll with `EPOLLEXCLUSIVE`), connections
//! handed over by other workers, timer expiries. Out: accepted connections spread round-robin
//! over the workers, and each connection driven by [`Conn`] until it is finished or broken.
//! A broken connection (reset, EPIPE) is closed alone; nothing here panics.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::io::Errno;
use rustix::net::SocketFlags;

use super::conn::{Conn, StreamProto};
use super::runtime::{
    mono_ns, would_block, Counters, WorkerCtx, TOKEN_SOCKET, TOKEN_TIMER, TOKEN_WAKE,
};
use super::ServeConfig;

/// How long to stop accepting after running out of file descriptors or memory (instead of
/// spinning on a listener that stays readable).
const ACCEPT_BACKOFF_NS: u64 = 50_000_000;

/// One worker thread of a tcp or HTTP server.
pub(crate) struct StreamWorker<P: StreamProto> {
    ctx: WorkerCtx,
    listener: Arc<OwnedFd>,
    next_owner: Arc<AtomicUsize>,
    proto: P,
    split: bool,
    nodelay: bool,
    conns: Vec<Option<Conn<P::State>>>,
    free: Vec<usize>,
    next_gen: u32,
    /// (due monotonic ns, connection token): connections waiting for think time or a pause.
    due: BinaryHeap<Reverse<(u64, u64)>>,
    handed: Vec<OwnedFd>,
    accept_paused_until: Option<u64>,
}

impl<P: StreamProto> StreamWorker<P> {
    pub(crate) fn new(
        ctx: WorkerCtx,
        listener: Arc<OwnedFd>,
        next_owner: Arc<AtomicUsize>,
        proto: P,
        cfg: &ServeConfig,
    ) -> std::io::Result<StreamWorker<P>> {
        epoll::add(
            &ctx.epoll,
            &*listener,
            EventData::new_u64(TOKEN_SOCKET),
            listen_flags(),
        )?;
        Ok(StreamWorker {
            ctx,
            listener,
            next_owner,
            proto,
            split: cfg.split_writes,
            nodelay: cfg.nodelay,
            conns: Vec::new(),
            free: Vec::new(),
            next_gen: 0,
            due: BinaryHeap::new(),
            handed: Vec::new(),
            accept_paused_until: None,
        })
    }

    /// Serves until the stop flag is set; dropping `self` then closes every connection.
    pub(crate) fn run(mut self) {
        self.ctx.on_thread_start();
        let mut events = Vec::with_capacity(256);
        while !self.ctx.shared.stopping() {
            if self.ctx.wait(&mut events).is_err() {
                break; // the epoll instance itself failed: nothing left to wait on
            }
            if self.ctx.shared.stopping() {
                break;
            }
            for &event in &events {
                let flags = event.flags;
                match event.data.u64() {
                    TOKEN_SOCKET => self.accept(),
                    TOKEN_WAKE => self.take_handed_over(),
                    TOKEN_TIMER => self.ctx.timer.fired(),
                    token => {
                        if let Some(idx) = self.lookup(token) {
                            let ended = flags
                                .intersects(EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR);
                            let readable = ended || flags.intersects(EventFlags::IN);
                            self.drive(idx, readable, ended);
                        }
                    }
                }
            }
            self.run_due();
            self.resume_accept();
        }
    }

    fn accept(&mut self) {
        loop {
            match rustix::net::accept_with(
                &*self.listener,
                SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            ) {
                Ok(fd) => {
                    Counters::bump(&self.ctx.counters.connections, 1);
                    if self.nodelay {
                        let _ = rustix::net::sockopt::set_tcp_nodelay(&fd, true);
                    }
                    let owner =
                        self.next_owner.fetch_add(1, Ordering::Relaxed) % self.ctx.inboxes.len();
                    if owner == self.ctx.id {
                        self.add_conn(fd);
                    } else {
                        self.ctx.inboxes[owner].hand_over(fd);
                    }
                }
                Err(e) if would_block(e) => return,
                // The client gave up before we accepted: try the next one.
                Err(Errno::INTR | Errno::CONNABORTED | Errno::PROTO) => {}
                Err(_) => {
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM: back off instead of spinning.
                    let _ = epoll::delete(&self.ctx.epoll, &*self.listener);
                    self.accept_paused_until = Some(mono_ns() + ACCEPT_BACKOFF_NS);
                    return;
                }
            }
        }
    }

    fn resume_accept(&mut self) {
        if self.accept_paused_until.is_some_and(|t| mono_ns() >= t) {
            let token = EventData::new_u64(TOKEN_SOCKET);
            if epoll::add(&self.ctx.epoll, &*self.listener, token, listen_flags()).is_ok() {
                self.accept_paused_until = None;
            }
        }
    }

    fn take_handed_over(&mut self) {
        let mut handed = std::mem::take(&mut self.handed);
        self.ctx.inboxes[self.ctx.id].take(&mut handed);
        for fd in handed.drain(..) {
            self.add_conn(fd);
        }
        self.handed = handed;
    }

    fn add_conn(&mut self, fd: OwnedFd) {
        // Generation numbers keep a stale timer entry or event from reaching a new connection
        // in a reused slot; u32::MAX is skipped so no token equals the reserved ones.
        self.next_gen = self.next_gen.wrapping_add(1) % u32::MAX;
        let idx = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let token = (u64::from(self.next_gen) << 32) | idx as u64;
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        if epoll::add(&self.ctx.epoll, &fd, EventData::new_u64(token), flags).is_err() {
            self.free.push(idx); // dropping fd closes it
            return;
        }
        let conn = Conn::new(fd, self.next_gen);
        // Data may have arrived before registration; edge-triggered epoll reports it on add.
        self.conns[idx] = Some(conn);
    }

    fn lookup(&self, token: u64) -> Option<usize> {
        let idx = (token & u64::from(u32::MAX)) as usize;
        let gen = (token >> 32) as u32;
        self.conns
            .get(idx)?
            .as_ref()
            .filter(|c| c.gen == gen)
            .map(|_| idx)
    }

    /// Reads (if `read`; to the end of the stream if `ended`: the peer closed), answers what is
    /// due, writes; then schedules the next wake-up or closes the connection.
    fn drive(&mut self, idx: usize, mut read: bool, ended: bool) {
        let Some(conn) = self.conns[idx].as_mut() else {
            return;
        };
        let outcome = loop {
            if read {
                if let Err(gone) = conn.read(&self.proto, &mut self.ctx, ended) {
                    break Err(gone);
                }
            }
            let now = self.ctx.schedule_ns();
            match conn.flush(&self.proto, &mut self.ctx, self.split, now) {
                // The output drained below the limit that stopped reading: read what waited.
                Ok(_) if conn.wants_read() => read = true,
                other => break other,
            }
        };
        match outcome {
            Ok(next) if !conn.finished() => {
                if let Some(due) = next.filter(|&due| conn.armed.is_none_or(|armed| due < armed)) {
                    conn.armed = Some(due);
                    let token = (u64::from(conn.gen) << 32) | idx as u64;
                    self.due.push(Reverse((due, token)));
                    // On failure the 50 ms wait cap still gets the reply out, late.
                    let _ = self.ctx.timer.arm(due);
                }
            }
            _ => self.close(idx),
        }
    }

    fn close(&mut self, idx: usize) {
        if let Some(conn) = self.conns[idx].take() {
            // Half-close first so the last reply is followed by a FIN; closing the fd also
            // removes it from the epoll set.
            let _ = rustix::net::shutdown(conn.fd(), rustix::net::Shutdown::Write);
            self.free.push(idx);
        }
    }

    /// Drives every connection whose wake-up time has come, then re-arms the timer.
    fn run_due(&mut self) {
        let now = mono_ns();
        while let Some(&Reverse((due, token))) = self.due.peek() {
            if due > now {
                break;
            }
            self.due.pop();
            if let Some(idx) = self.lookup(token) {
                if let Some(conn) = self.conns[idx].as_mut().filter(|c| c.armed == Some(due)) {
                    conn.armed = None;
                }
                self.drive(idx, false, false);
            }
        }
        if let Some(&Reverse((due, _))) = self.due.peek() {
            let _ = self.ctx.timer.arm(due);
        }
    }
}

fn listen_flags() -> EventFlags {
    EventFlags::IN | EventFlags::EXCLUSIVE
}
