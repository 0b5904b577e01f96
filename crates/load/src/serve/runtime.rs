//! What every worker thread has, whatever the protocol: clocks, counters, the stop flag and
//! pause window, an epoll instance, a nanosecond timer and a wake-up inbox.
//!
//! In: the server configuration and the state shared with [`super::Server`]. Out: a
//! [`WorkerCtx`] whose [`WorkerCtx::wait`] sleeps until a socket, the timer or the inbox needs
//! attention (at most [`STOP_CHECK`] at a time).

use std::io;
use std::num::NonZeroU64;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::{eventfd, EventfdFlags};
use rustix::io::Errno;
use rustix::net::SocketAddrAny;
use rustix::time::{
    clock_gettime, timerfd_create, timerfd_settime, ClockId, Itimerspec, TimerfdClockId,
    TimerfdFlags, TimerfdTimerFlags, Timespec,
};

use super::inject::InjectSampler;
use super::think::ThinkSampler;
use super::{Injected, ServeConfig, ServeStats, ThinkTime};
use crate::tstamp;

/// Longest sleep in `epoll_wait` between looks at the stop flag.
pub(crate) const STOP_CHECK: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};
/// epoll token of the timerfd.
pub(crate) const TOKEN_TIMER: u64 = u64::MAX;
/// epoll token of the inbox eventfd.
pub(crate) const TOKEN_WAKE: u64 = u64::MAX - 1;
/// epoll token of the listening (tcp/http) or datagram (udp) socket.
pub(crate) const TOKEN_SOCKET: u64 = u64::MAX - 2;

fn ns(ts: Timespec) -> u64 {
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC, ns (vDSO, no syscall).
pub(crate) fn mono_ns() -> u64 {
    ns(clock_gettime(ClockId::Monotonic))
}

/// CLOCK_REALTIME, ns since the Unix epoch (vDSO, no syscall).
pub(crate) fn real_ns() -> u64 {
    ns(clock_gettime(ClockId::Realtime))
}

/// Per-thread counters, on their own cache line so threads do not share one.
#[derive(Default)]
#[repr(align(64))]
pub(crate) struct Counters {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub replies: AtomicU64,
    pub bad_requests: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn add_to(&self, sum: ServeStats) -> ServeStats {
        ServeStats {
            connections: sum.connections + self.connections.load(Ordering::Relaxed),
            requests: sum.requests + self.requests.load(Ordering::Relaxed),
            replies: sum.replies + self.replies.load(Ordering::Relaxed),
            bad_requests: sum.bad_requests + self.bad_requests.load(Ordering::Relaxed),
        }
    }
}

/// State shared by the server handle and all its workers.
pub(crate) struct Shared {
    pub stop: AtomicBool,
    /// When the server started, monotonic ns (the origin of injected steps and waves).
    pub origin_ns: u64,
    /// Monotonic ns window `[start, end)` in which nothing is sent.
    pause: Option<(u64, u64)>,
}

impl Shared {
    pub(crate) fn new(pause: Option<(Duration, Duration)>) -> Shared {
        let now = mono_ns();
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Shared {
            stop: AtomicBool::new(false),
            origin_ns: now,
            pause: pause.map(|(at, dur)| {
                let start = now.saturating_add(ns(at));
                (start, start.saturating_add(ns(dur)))
            }),
        }
    }

    /// When `now` is inside the pause, the time it ends.
    pub(crate) fn paused_until(&self, now: u64) -> Option<u64> {
        self.pause
            .and_then(|(start, end)| (start <= now && now < end).then_some(end))
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// A worker's mailbox: connections handed over by the worker that accepted them, and an eventfd
/// that wakes the worker (also used by `Server::stop`).
pub(crate) struct Inbox {
    pub conns: Mutex<Vec<OwnedFd>>,
    pub wake_fd: OwnedFd,
}

impl Inbox {
    pub(crate) fn new() -> io::Result<Inbox> {
        let wake_fd = eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?;
        Ok(Inbox {
            conns: Mutex::new(Vec::new()),
            wake_fd,
        })
    }

    pub(crate) fn wake(&self) {
        // EAGAIN only when the counter is saturated, i.e. a wake-up is already pending.
        let _ = rustix::io::write(&self.wake_fd, &1u64.to_ne_bytes());
    }

    pub(crate) fn hand_over(&self, fd: OwnedFd) {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(fd);
        self.wake();
    }

    /// Clears the wake-up and takes the connections handed over.
    pub(crate) fn take(&self, into: &mut Vec<OwnedFd>) {
        let mut word = [0u8; 8];
        let _ = rustix::io::read(&self.wake_fd, &mut word);
        into.append(&mut self.conns.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// A one-shot timer at an absolute monotonic time, re-armed only when an earlier deadline comes.
pub(crate) struct Timer {
    fd: OwnedFd,
    armed: Option<u64>,
}

impl Timer {
    fn new() -> io::Result<Timer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        Ok(Timer { fd, armed: None })
    }

    /// Makes sure the timer fires at `due` (monotonic ns) or earlier.
    pub(crate) fn arm(&mut self, due: u64) -> io::Result<()> {
        if self.armed.is_some_and(|t| t <= due) {
            return Ok(());
        }
        // A zero it_value would disarm the timer; any past time fires at once.
        let due = due.max(1);
        let value = Timespec {
            tv_sec: (due / 1_000_000_000) as i64,
            tv_nsec: (due % 1_000_000_000) as i64,
        };
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        timerfd_settime(&self.fd, TimerfdTimerFlags::ABSTIME, &spec)?;
        self.armed = Some(due);
        Ok(())
    }

    /// Acknowledges an expiry.
    pub(crate) fn fired(&mut self) {
        let mut word = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut word);
        self.armed = None;
    }
}

/// Everything a worker needs apart from its protocol state.
pub(crate) struct WorkerCtx {
    pub id: usize,
    pub shared: Arc<Shared>,
    pub counters: Arc<Counters>,
    pub inboxes: Arc<[Inbox]>,
    pub epoll: OwnedFd,
    pub timer: Timer,
    pub think: ThinkSampler,
    /// The planted faults' extra waits.
    pub inject: InjectSampler,
    pub timestamps: bool,
    /// Whether a reply can be due later than its request is read (think time, a planted fault
    /// or a pause): without, replies go out at once and nobody needs the time of day.
    delays: bool,
    /// `recvmsg` with a reused control buffer, for the kernel receive timestamps.
    reader: tstamp::Reader,
}

impl WorkerCtx {
    pub(crate) fn new(
        id: usize,
        cfg: &ServeConfig,
        shared: Arc<Shared>,
        counters: Arc<Counters>,
        inboxes: Arc<[Inbox]>,
    ) -> io::Result<WorkerCtx> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let timer = Timer::new()?;
        epoll::add(
            &epoll,
            &timer.fd,
            EventData::new_u64(TOKEN_TIMER),
            EventFlags::IN,
        )?;
        epoll::add(
            &epoll,
            &inboxes[id].wake_fd,
            EventData::new_u64(TOKEN_WAKE),
            EventFlags::IN,
        )?;
        let inject = InjectSampler::new(cfg.inject, shared.origin_ns);
        Ok(WorkerCtx {
            id,
            shared,
            counters,
            inboxes,
            epoll,
            timer,
            think: ThinkSampler::new(&cfg.think),
            inject,
            timestamps: cfg.timestamps,
            delays: cfg.think != ThinkTime::None
                || cfg.inject != Injected::default()
                || cfg.pause.is_some(),
            reader: tstamp::Reader::new(),
        })
    }

    /// The monotonic time replies are scheduled by: 0 when no reply is ever delayed (every
    /// reply is then due at once, and two clock reads a request, about 3% of a busy server's
    /// CPU, are saved).
    #[inline]
    pub(crate) fn schedule_ns(&self) -> u64 {
        if self.delays {
            mono_ns()
        } else {
            0
        }
    }

    /// Called first on the worker's own thread.
    pub(crate) fn on_thread_start(&self) {
        // A 2 ms think time should be 2 ms, not 2.05 ms (default slack is 50 us).
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    }

    /// Waits for events (into `events`, which keeps its capacity; an epoll event is not `Send`,
    /// so each thread makes its own); an interrupted wait returns no events.
    pub(crate) fn wait(&self, events: &mut Vec<epoll::Event>) -> io::Result<()> {
        events.clear();
        match epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(events),
            Some(&STOP_CHECK),
        ) {
            Ok(_) | Err(Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads from a connected socket; returns the bytes read and the kernel receive timestamp of
    /// the data (ns, CLOCK_REALTIME, 0 = unknown; TCP: of the last segment the read consumed,
    /// i.e. the data that completed whatever requests the read completes).
    ///
    /// With timestamps on this is one `recvmsg` that also carries the `SCM_TIMESTAMPING` control
    /// message (enabled on the listening socket by [`super::listen::bind`] and inherited by
    /// accepted ones); off, a plain `recv`.
    pub(crate) fn recv_with_rx_time(
        &mut self,
        fd: &impl AsFd,
        buf: &mut [u8],
    ) -> io::Result<(usize, u64)> {
        if !self.timestamps {
            let (n, _) = rustix::net::recv(fd, buf, rustix::net::RecvFlags::empty())?;
            return Ok((n, 0));
        }
        let (n, t) = self.reader.recv(fd, buf)?;
        Ok((n, t.software_ns.unwrap_or(0)))
    }

    /// Reads one datagram: its length, its sender and its kernel receive timestamp (as
    /// [`WorkerCtx::recv_with_rx_time`]). `Ok` with no sender is a datagram to skip.
    pub(crate) fn recv_from_with_rx_time(
        &mut self,
        fd: &impl AsFd,
        buf: &mut [u8],
    ) -> io::Result<(usize, Option<SocketAddrAny>, u64)> {
        if !self.timestamps {
            let (n, _, peer) = rustix::net::recvfrom(fd, buf, rustix::net::RecvFlags::empty())?;
            return Ok((n, peer, 0));
        }
        let (n, peer, t) = self.reader.recv_from(fd, buf)?;
        Ok((n, peer.map(SocketAddrAny::from), t.software_ns.unwrap_or(0)))
    }

    /// CLOCK_REALTIME now when timestamps are on, else 0.
    pub(crate) fn stamp(&self) -> u64 {
        if self.timestamps {
            real_ns()
        } else {
            0
        }
    }
}

/// True for errors that mean "try again later" rather than "this socket is broken".
pub(crate) fn would_block(e: Errno) -> bool {
    e == Errno::AGAIN || e == Errno::WOULDBLOCK
}
