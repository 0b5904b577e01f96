//! The datagram worker: UDP sockets, requests matched to replies by sequence number, lost
//! replies ending as timeouts.

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::event::epoll;
use rustix::time::Timespec;
use tailhunt_model::{Outcome, Sample};

use super::{stopped, Live, StepConfig, Window, WorkerResult, MAX_WAIT_NS};
use crate::breakdown::Breakdown;
use crate::clock::mono_ns;
use crate::schedule::Schedule;
use crate::wire;

/// A worker's sockets, connected to the target.
pub(crate) struct Worker {
    socks: Vec<UdpSocket>,
}

fn open(target: SocketAddr) -> std::io::Result<UdpSocket> {
    let local: SocketAddr = if target.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .map_err(std::io::Error::other)?;
    let s = UdpSocket::bind(local)?;
    s.connect(target)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

struct Pending {
    intended: i64,
    start: i64,
}

impl Worker {
    pub fn connect(cfg: &StepConfig, n: usize) -> std::io::Result<Worker> {
        let socks = (0..n)
            .map(|_| open(cfg.target.addr))
            .collect::<Result<_, _>>()?;
        Ok(Worker { socks })
    }

    pub fn run(
        self,
        cfg: &StepConfig,
        w: Window,
        live: &Arc<Live>,
        stop: &Arc<AtomicBool>,
    ) -> WorkerResult {
        let mut r = WorkerResult::default();
        let epoll = match epoll::create(epoll::CreateFlags::CLOEXEC) {
            Ok(e) => e,
            Err(e) => {
                r.note_error(|| format!("epoll: {e}"));
                return r;
            }
        };
        for (i, s) in self.socks.iter().enumerate() {
            if let Err(e) = epoll::add(
                &epoll,
                s.as_fd(),
                epoll::EventData::new_u64(i as u64),
                epoll::EventFlags::IN,
            ) {
                r.note_error(|| format!("epoll: {e}"));
                return r;
            }
        }
        let timeout = cfg.timeout.as_nanos() as i64;
        let mut sched = Schedule::new(cfg.arrival, w.rate, w.start_ns, w.phase_ns, w.seed);
        let mut pending: HashMap<u64, Pending> = HashMap::new();
        let mut order: VecDeque<(u64, i64)> = VecDeque::new(); // (seq, deadline) in send order
        let (mut seq, mut rr) = (0u64, 0usize);
        let mut buf = Vec::with_capacity(2048);
        let mut rbuf = vec![0u8; 65_536];
        let mut events = Vec::with_capacity(64);
        let record = |r: &mut WorkerResult, s: Sample, b: Breakdown| {
            r.samples.push(s);
            if cfg.breakdown {
                r.breakdowns.push(b);
            }
            live.done.fetch_add(1, Ordering::Relaxed);
        };
        loop {
            let now = mono_ns();
            if stopped(stop) {
                r.interrupted = true;
            }
            while sched.peek() <= now && sched.peek() < w.end_ns && !stopped(stop) {
                let intended = sched.peek();
                sched.advance();
                buf.clear();
                wire::put_request_body(&mut buf, seq, cfg.request_bytes);
                let sock = &self.socks[rr % self.socks.len()];
                rr += 1;
                let start = mono_ns();
                match sock.send(&buf) {
                    Ok(_) => {
                        r.counters.sent += 1;
                        live.sent.fetch_add(1, Ordering::Relaxed);
                        pending.insert(seq, Pending { intended, start });
                        order.push_back((seq, intended + timeout));
                    }
                    Err(e) => {
                        // ECONNREFUSED from an earlier ICMP port unreachable, a full buffer...
                        r.note_error(|| format!("send: {}", super::connect_hint(&e)));
                        r.counters.unsent += 1;
                        record(
                            &mut r,
                            Sample::new(intended, start, mono_ns(), Outcome::Error),
                            Breakdown::default(),
                        );
                    }
                }
                seq += 1;
            }
            while let Some(&(s, deadline)) = order.front() {
                if !pending.contains_key(&s) {
                    order.pop_front();
                } else if now >= deadline {
                    order.pop_front();
                    if let Some(p) = pending.remove(&s) {
                        record(
                            &mut r,
                            Sample::new(p.intended, p.start, deadline, Outcome::Timeout),
                            Breakdown::default(),
                        );
                    }
                } else {
                    break;
                }
            }
            let sending = sched.peek() < w.end_ns && !stopped(stop);
            if !sending && pending.is_empty() {
                break;
            }
            let mut wait = MAX_WAIT_NS;
            if sending {
                wait = wait.min(sched.peek() - now);
            }
            if let Some(&(_, d)) = order.front() {
                wait = wait.min(d - now);
            }
            let ts = Timespec {
                tv_sec: 0,
                tv_nsec: wait.clamp(0, 999_999_999),
            };
            events.clear();
            match epoll::wait(
                &epoll,
                rustix::buffer::spare_capacity(&mut events),
                Some(&ts),
            ) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    r.note_error(|| format!("epoll_wait: {e}"));
                    break;
                }
            }
            for ev in events.iter() {
                let data = ev.data; // copy out of the packed struct
                let sock = &self.socks[data.u64() as usize];
                loop {
                    match sock.recv(&mut rbuf) {
                        Ok(k) => {
                            let end = mono_ns();
                            let Some((s, times)) = wire::parse_response_body(&rbuf[..k]) else {
                                r.note_error(|| format!("a {k}-byte reply is not a tailhunt echo (is this a tailhunt udp server?)"));
                                continue;
                            };
                            if let Some(p) = pending.remove(&s) {
                                let b = Breakdown::split(end - p.start, times).unwrap_or_default();
                                record(
                                    &mut r,
                                    Sample::new(p.intended, p.start, end, Outcome::Ok),
                                    b,
                                );
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => {
                            r.note_error(|| format!("recv: {}", super::connect_hint(&e)));
                            break;
                        }
                    }
                }
            }
        }
        r
    }
}
