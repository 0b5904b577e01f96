//! One direction's thread: read packets from one TUN device, pass them through the
//! [`Shaper`], hold them until due, write them to the other device.
//!
//! In: the two devices (non-blocking), the direction's config, its counters and the stop flag.
//! Out: packets written at their due time; counts in the counters.
//!
//! Timing: the thread asks for real-time scheduling ([`raise_to_realtime`]) so that busy
//! neighbours on a small machine cannot hold it off the CPU for milliseconds, sets its timer
//! slack to 1 ns (the default 50 µs would let the kernel coalesce wake-ups that late), waits in
//! `ppoll` on the input device until `SPIN_NS` before the next packet is due, then spins on the
//! monotonic clock for the rest. The spin is short because at 100 Mbit/s a packet is due every
//! 120 µs and a long spin would eat the CPU the endpoints need. The delay line is a FIFO
//! because release times never decrease.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::event::{poll, PollFd, PollFlags};
use rustix::time::{clock_gettime, ClockId, Timespec};
use tun_rs::SyncDevice;

use super::shaper::{Shaper, Verdict};
use super::stats::{Counters, Event};
use super::LinkConfig;

/// How long before a packet's due time the thread stops sleeping and spins: covers most of
/// the wake-up latency of `ppoll` for a real-time thread (bench/link.sh reports what remains).
const SPIN_NS: u64 = 20_000;
/// Real-time priority of the emulator threads (SCHED_FIFO, 1..99): above ordinary tasks,
/// below the kernel's own threaded interrupts (50).
const RT_PRIORITY: u8 = 20;
/// Longest sleep while nothing is queued, so the stop flag is seen promptly.
const IDLE_WAIT_NS: u64 = 50_000_000;
/// Packets read in one go before the delay line is looked at again.
const READ_BATCH: usize = 64;

/// Now on the monotonic clock, in ns.
pub(crate) fn now_ns() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Moves the calling thread to SCHED_FIFO at `priority` with `chrt` (std and rustix offer no
/// safe `sched_setscheduler`; unsafe code is forbidden here). Returns whether it worked; a
/// failure (no root, no `chrt`) leaves the thread as it was, only less punctual. The kernel's
/// real-time throttling (95% of each second by default) keeps a runaway thread from locking
/// up the machine.
pub fn raise_to_realtime(priority: u8) -> bool {
    let tid = rustix::thread::gettid().as_raw_nonzero().get().to_string();
    std::process::Command::new("chrt")
        .args(["-f", "-p", &priority.to_string(), &tid])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What waiting on the input device found.
enum Input {
    Readable,
    Idle,
    Gone,
}

struct Held {
    release_ns: u64,
    packet: Vec<u8>,
}

pub(crate) struct Pump {
    from: Arc<SyncDevice>,
    to: Arc<SyncDevice>,
    shaper: Shaper,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    line: VecDeque<Held>,
}

impl Pump {
    pub(crate) fn new(
        from: Arc<SyncDevice>,
        to: Arc<SyncDevice>,
        cfg: LinkConfig,
        counters: Arc<Counters>,
        stop: Arc<AtomicBool>,
    ) -> Pump {
        Pump {
            from,
            to,
            shaper: Shaper::new(cfg),
            counters,
            stop,
            line: VecDeque::new(),
        }
    }

    pub(crate) fn run(mut self) {
        raise_to_realtime(RT_PRIORITY);
        // Without this the kernel may fire our timers up to 50 µs late.
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
        let mut buf = vec![0u8; 65_536];
        while !self.stop.load(Ordering::Relaxed) {
            let now = now_ns();
            self.release_due(now);
            match self.line.front().map(|h| h.release_ns) {
                Some(due) if due <= now + SPIN_NS => {
                    while now_ns() < due {
                        std::hint::spin_loop();
                    }
                }
                next => {
                    let wait = next.map_or(IDLE_WAIT_NS, |due| due - now - SPIN_NS);
                    let readable = match self.wait_readable(wait) {
                        Input::Gone => break,
                        Input::Readable => true,
                        Input::Idle => false,
                    };
                    if readable && self.read_batch(&mut buf).is_err() {
                        break;
                    }
                }
            }
        }
    }

    /// Writes every packet due by `now`.
    fn release_due(&mut self, now: u64) {
        while self.line.front().is_some_and(|h| h.release_ns <= now) {
            let Some(held) = self.line.pop_front() else {
                break;
            };
            let late_ns = now_ns().saturating_sub(held.release_ns);
            let event = match self.to.send(&held.packet) {
                Ok(_) => Event::Forwarded {
                    bytes: held.packet.len() as u64,
                    late_ns,
                },
                Err(_) => Event::WriteError,
            };
            self.counters.record(event);
        }
    }

    /// Sleeps up to `wait_ns` or until the input device has a packet.
    fn wait_readable(&self, wait_ns: u64) -> Input {
        let timeout = Timespec {
            tv_sec: (wait_ns / 1_000_000_000) as _,
            tv_nsec: (wait_ns % 1_000_000_000) as _,
        };
        let mut fds = [PollFd::new(&*self.from, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 => {
                let r = fds[0].revents();
                if r.intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) {
                    self.input_gone()
                } else {
                    Input::Readable
                }
            }
            _ => Input::Idle,
        }
    }

    /// The sending end's device is gone (its namespace was deleted under the link): this
    /// direction stops rather than spin on a dead descriptor at real-time priority.
    fn input_gone(&self) -> Input {
        self.counters.record(Event::InputGone);
        Input::Gone
    }

    /// Reads up to `READ_BATCH` packets; `Err` when the input device is gone.
    fn read_batch(&mut self, buf: &mut [u8]) -> Result<(), ()> {
        for _ in 0..READ_BATCH {
            let len = match self.from.recv(buf) {
                Ok(len) => len,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(_) => {
                    self.input_gone();
                    return Err(());
                }
            };
            let now = now_ns();
            self.counters.record(Event::In(len as u64));
            match self.shaper.offer(now, len as u64) {
                Verdict::Deliver(release_ns) => self.line.push_back(Held {
                    release_ns,
                    packet: buf[..len].to_vec(),
                }),
                Verdict::DropQueue => self.counters.record(Event::DroppedQueue),
                Verdict::DropLoss => self.counters.record(Event::DroppedLoss),
            }
        }
        Ok(())
    }
}
