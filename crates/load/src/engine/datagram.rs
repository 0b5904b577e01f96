//! The datagram worker: UDP sockets, requests matched to replies by sequence number, lost
//! replies ending as timeouts.

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::event::epoll;
use tailhunt_model::{Outcome, Sample};

use super::{stopped, Live, StepConfig, Window, WorkerResult, MAX_WAIT_NS};
use crate::breakdown::{Breakdown, ClientTimes};
use crate::clock::{mono_ns, real_ns};
use crate::schedule::Schedule;
use crate::tstamp;
use crate::wire;

/// A worker's sockets, connected to the target.
pub(crate) struct Worker {
    socks: Vec<Sock>,
}

/// One socket and, with `--breakdown`, the bookkeeping that turns its transmit timestamps
/// (numbered per datagram by the kernel) back into sequence numbers.
struct Sock {
    sock: UdpSocket,
    /// Transmit timestamps are on.
    tx_stamps: bool,
    /// Datagrams the kernel accepted since timestamps were enabled: the next one's id.
    sent: u32,
    /// (id, seq) of datagrams whose transmit stamp has not come yet, in id order.
    unstamped: VecDeque<(u32, u64)>,
}

/// Most datagrams of one socket waiting for a transmit stamp; older ones give up on it (the
/// error queue overflowed and dropped it), so a kernel that never stamps costs bounded memory.
const MAX_UNSTAMPED: usize = 4096;

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
    /// Breakdown only: CLOCK_REALTIME at the send, and the kernel's transmit timestamp (0 until
    /// it comes from the error queue).
    send_real_ns: u64,
    kernel_tx_ns: u64,
}

impl Worker {
    pub fn connect(cfg: &StepConfig, n: usize) -> std::io::Result<Worker> {
        let socks = (0..n)
            .map(|_| {
                let sock = open(cfg.target.addr)?;
                let tx_stamps =
                    cfg.breakdown && tstamp::enable(&sock, tstamp::Want::ALL).is_ok_and(|on| on.tx);
                Ok(Sock {
                    sock,
                    tx_stamps,
                    sent: 0,
                    unstamped: VecDeque::new(),
                })
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Worker { socks })
    }

    pub fn run(
        mut self,
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
                s.sock.as_fd(),
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
        let mut reader = tstamp::Reader::new();
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
                let n_socks = self.socks.len();
                let sock = &mut self.socks[rr % n_socks];
                rr += 1;
                let start = mono_ns();
                let send_real_ns = if cfg.breakdown { real_ns() as u64 } else { 0 };
                match sock.sock.send(&buf) {
                    Ok(_) => {
                        r.counters.sent += 1;
                        live.sent.fetch_add(1, Ordering::Relaxed);
                        if sock.tx_stamps {
                            // The kernel numbers only datagrams it accepted (a failed send
                            // gives its id back), as counted here.
                            if sock.unstamped.len() == MAX_UNSTAMPED {
                                sock.unstamped.pop_front();
                            }
                            sock.unstamped.push_back((sock.sent, seq));
                            sock.sent = sock.sent.wrapping_add(1);
                        }
                        pending.insert(
                            seq,
                            Pending {
                                intended,
                                start,
                                send_real_ns,
                                kernel_tx_ns: 0,
                            },
                        );
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
            if let Err(e) = super::wait_events(&epoll, &mut events, wait, w.spin_ns) {
                r.note_error(|| format!("epoll_wait: {e}"));
                break;
            }
            for ev in events.iter() {
                let data = ev.data; // copy out of the packed struct
                let sock = &mut self.socks[data.u64() as usize];
                if sock.tx_stamps {
                    // Before the replies (a request's stamp is queued when it leaves), and
                    // every time: a non-empty error queue keeps EPOLLERR up.
                    take_tx_stamps(&mut reader, sock, &mut pending);
                }
                loop {
                    let got = if cfg.breakdown {
                        reader
                            .recv(&sock.sock, &mut rbuf)
                            .map(|(k, t)| (k, t.software_ns))
                    } else {
                        sock.sock.recv(&mut rbuf).map(|k| (k, None))
                    };
                    match got {
                        Ok((k, kernel_rx_ns)) => {
                            let end = mono_ns();
                            let Some((s, times)) = wire::parse_response_body(&rbuf[..k]) else {
                                r.note_error(|| format!("a {k}-byte reply is not a tailhunt echo (is this a tailhunt udp server?)"));
                                continue;
                            };
                            if let Some(p) = pending.remove(&s) {
                                let b = if cfg.breakdown {
                                    let client = ClientTimes {
                                        app_send_ns: p.send_real_ns,
                                        kernel_tx_ns: p.kernel_tx_ns,
                                        kernel_rx_ns: kernel_rx_ns.unwrap_or(0),
                                        app_recv_ns: real_ns() as u64,
                                    };
                                    Breakdown::split_with_client(end - p.start, times, client)
                                        .unwrap_or_default()
                                } else {
                                    Breakdown::default()
                                };
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

/// Drains `sock`'s error queue and puts each transmit timestamp on its request: datagram ids
/// count the datagrams the kernel accepted, so id `k` is the `k`-th entry of `unstamped` once
/// entries whose stamp never came (ids before it) are dropped.
fn take_tx_stamps(
    reader: &mut tstamp::Reader,
    sock: &mut Sock,
    pending: &mut HashMap<u64, Pending>,
) {
    let unstamped = &mut sock.unstamped;
    let _ = reader.drain_tx(&sock.sock, |stamp| {
        let Some(t) = stamp.time.software_ns else {
            return; // a hardware-only report of a datagram already stamped in software
        };
        while let Some(&(id, seq)) = unstamped.front() {
            if !tstamp::covers(stamp.id, id) {
                break; // a stamp for a datagram already dropped from the list
            }
            unstamped.pop_front();
            if id == stamp.id {
                if let Some(p) = pending.get_mut(&seq) {
                    p.kernel_tx_ns = t;
                }
                break;
            }
        }
    });
}
