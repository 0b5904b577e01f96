//! The datagram worker: UDP sockets, requests matched to replies by sequence number, lost
//! replies ending as timeouts. A request the server's host refused (ICMP port unreachable,
//! reported on the connected socket as ECONNREFUSED) ends as an error when the refusal comes.

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::event::epoll;
use tailhunt_model::{Outcome, Sample};

use super::handoff::Outbox;
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
    /// Sequence numbers sent on this socket, oldest first (answered ones are dropped when
    /// they reach the front): a refusal is the oldest unanswered request's.
    outstanding: VecDeque<u64>,
    /// The refusal seen since this socket's last reply, if any.
    refused: Option<String>,
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
    /// The socket it went out on.
    sock: usize,
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
                    outstanding: VecDeque::new(),
                    refused: None,
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
        out: Outbox,
    ) -> WorkerResult {
        let mut r = WorkerResult::new(out, &w);
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
        let mut st = State {
            cfg,
            live,
            timeout: cfg.timeout.as_nanos() as i64,
            pending: HashMap::new(),
            order: VecDeque::new(),
            seq: 0,
            rr: 0,
            buf: Vec::with_capacity(2048),
            rbuf: vec![0u8; 65_536],
            reader: tstamp::Reader::new(),
            last_send_ns: 0,
        };
        let mut sched = Schedule::new(cfg.arrival, w.rate, w.start_ns, w.phase_ns, w.seed);
        let mut events = Vec::with_capacity(64);
        loop {
            let now = mono_ns();
            r.note_stop(stop, now, w.end_ns);
            while sched.peek() <= now && sched.peek() < w.end_ns && !stopped(stop) {
                let intended = sched.peek();
                sched.advance();
                st.send(&mut self.socks, intended, &mut r);
            }
            st.expire(&mut self.socks, now, &mut r);
            let sending = sched.peek() < w.end_ns && !stopped(stop);
            r.hand_off(now, || {
                let next = if sending { sched.peek() } else { i64::MAX };
                st.earliest_pending().min(next)
            });
            if !sending && st.pending.is_empty() {
                break;
            }
            let mut wait = MAX_WAIT_NS;
            if sending {
                wait = wait.min(sched.peek() - now);
            }
            if let Some(&(_, d)) = st.order.front() {
                wait = wait.min(d - now);
            }
            // A reply is expected while requests are pending and the last went out lately.
            let awaiting =
                w.reply_spin && !st.pending.is_empty() && now - st.last_send_ns < w.spin_ns;
            if let Err(e) = super::wait_events(&epoll, &mut events, wait, w.spin_ns, awaiting) {
                r.note_error(|| format!("epoll_wait: {e}"));
                break;
            }
            for ev in events.iter() {
                let data = ev.data; // copy out of the packed struct
                st.receive(&mut self.socks, data.u64() as usize, &mut r);
            }
        }
        if self.socks.iter().all(|s| s.refused.is_some()) {
            r.lost = self.socks.first().and_then(|s| s.refused.clone());
        }
        r
    }
}

/// A datagram worker's requests in flight and its buffers.
struct State<'a> {
    cfg: &'a StepConfig,
    live: &'a Live,
    timeout: i64,
    pending: HashMap<u64, Pending>,
    /// (seq, deadline) in send order; entries already answered are dropped when at the front.
    order: VecDeque<(u64, i64)>,
    seq: u64,
    rr: usize,
    buf: Vec<u8>,
    rbuf: Vec<u8>,
    reader: tstamp::Reader,
    /// When the last request was sent (a reply is polled for within the spin window).
    last_send_ns: i64,
}

impl State<'_> {
    fn done(&self, r: &mut WorkerResult, s: Sample, sent: bool, b: Option<Breakdown>) {
        r.finish(s, sent, self.cfg.breakdown.then(|| b.unwrap_or_default()));
        self.live.done.fetch_add(1, Ordering::Relaxed);
    }

    /// Sends the request due at `intended` on the next socket, round robin.
    fn send(&mut self, socks: &mut [Sock], intended: i64, r: &mut WorkerResult) {
        self.buf.clear();
        wire::put_request_body(&mut self.buf, self.seq, self.cfg.request_bytes);
        let i = self.rr % socks.len();
        self.rr += 1;
        let start = mono_ns();
        self.last_send_ns = start;
        let send_real_ns = if self.cfg.breakdown {
            real_ns() as u64
        } else {
            0
        };
        let mut sent = socks[i].sock.send(&self.buf);
        if let Err(e) = &sent {
            if e.kind() == ErrorKind::ConnectionRefused {
                // The kernel reports an earlier datagram's refusal on the next call: that
                // request ends as an error, and this one goes out again.
                self.refuse(socks, i, e, r);
                sent = socks[i].sock.send(&self.buf);
            }
        }
        let seq = self.seq;
        self.seq += 1;
        let sock = &mut socks[i];
        match sent {
            Ok(_) => {
                self.live.sent.fetch_add(1, Ordering::Relaxed);
                if sock.tx_stamps {
                    // The kernel numbers only datagrams it accepted (a failed send gives its
                    // id back), as counted here.
                    if sock.unstamped.len() == MAX_UNSTAMPED {
                        sock.unstamped.pop_front();
                    }
                    sock.unstamped.push_back((sock.sent, seq));
                    sock.sent = sock.sent.wrapping_add(1);
                }
                sock.outstanding.push_back(seq);
                let p = Pending {
                    intended,
                    start,
                    sock: i,
                    send_real_ns,
                    kernel_tx_ns: 0,
                };
                self.pending.insert(seq, p);
                self.order.push_back((seq, intended + self.timeout));
            }
            Err(e) => {
                // A full buffer, a refusal again: this request never left.
                r.note_error(|| format!("send: {}", super::connect_hint(&e)));
                let s = Sample::new(intended, start, mono_ns(), Outcome::Error);
                self.done(r, s, false, None);
            }
        }
    }

    /// A refusal (ICMP port unreachable) on socket `i`: its oldest unanswered request ends as
    /// an error now, not as a timeout later.
    fn refuse(&mut self, socks: &mut [Sock], i: usize, e: &std::io::Error, r: &mut WorkerResult) {
        let why = super::connect_hint(e);
        r.note_error(|| format!("refused: {why}"));
        let sock = &mut socks[i];
        sock.refused = Some(format!(
            "its host refused the datagrams (ICMP port unreachable: {why})"
        ));
        while let Some(seq) = sock.outstanding.pop_front() {
            if let Some(p) = self.pending.remove(&seq) {
                let s = Sample::new(p.intended, p.start, mono_ns(), Outcome::Error);
                self.done(r, s, true, None);
                break;
            }
        }
    }

    /// Ends the requests whose deadline passed as timeouts.
    fn expire(&mut self, socks: &mut [Sock], now: i64, r: &mut WorkerResult) {
        while let Some(&(s, deadline)) = self.order.front() {
            if !self.pending.contains_key(&s) {
                self.order.pop_front();
            } else if now >= deadline {
                self.order.pop_front();
                if let Some(p) = self.pending.remove(&s) {
                    prune(&mut socks[p.sock], &self.pending);
                    let sample = Sample::new(p.intended, p.start, deadline, Outcome::Timeout);
                    self.done(r, sample, true, None);
                }
            } else {
                break;
            }
        }
    }

    /// The earliest intended time among requests in flight (`i64::MAX`: none).
    fn earliest_pending(&self) -> i64 {
        // `order` is in send (= intended) order and `expire` has just dropped answered
        // entries from its front.
        self.order
            .iter()
            .find(|(s, _)| self.pending.contains_key(s))
            .map_or(i64::MAX, |&(_, d)| d - self.timeout)
    }

    /// Reads everything socket `i` has: replies, refusals, transmit timestamps.
    fn receive(&mut self, socks: &mut [Sock], i: usize, r: &mut WorkerResult) {
        if socks[i].tx_stamps {
            // Before the replies (a request's stamp is queued when it leaves), and every
            // time: a non-empty error queue keeps EPOLLERR up.
            take_tx_stamps(&mut self.reader, &mut socks[i], &mut self.pending);
        }
        loop {
            let sock = &socks[i].sock;
            let got = if self.cfg.breakdown {
                self.reader
                    .recv(sock, &mut self.rbuf)
                    .map(|(k, t)| (k, t.software_ns))
            } else {
                sock.recv(&mut self.rbuf).map(|k| (k, None))
            };
            match got {
                Ok((k, kernel_rx_ns)) => self.reply(socks, i, k, kernel_rx_ns, r),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => self.refuse(socks, i, &e, r),
                Err(e) => {
                    r.note_error(|| format!("recv: {}", super::connect_hint(&e)));
                    break;
                }
            }
        }
    }

    fn reply(
        &mut self,
        socks: &mut [Sock],
        i: usize,
        k: usize,
        kernel_rx_ns: Option<u64>,
        r: &mut WorkerResult,
    ) {
        let end = mono_ns();
        let Some((s, times)) = wire::parse_response_body(&self.rbuf[..k]) else {
            r.note_error(|| {
                format!("a {k}-byte reply is not a tailhunt echo (is this a tailhunt udp server?)")
            });
            return;
        };
        let Some(p) = self.pending.remove(&s) else {
            return; // a reply after its request timed out
        };
        socks[i].refused = None;
        prune(&mut socks[i], &self.pending);
        let b = self.cfg.breakdown.then(|| {
            let client = ClientTimes {
                app_send_ns: p.send_real_ns,
                kernel_tx_ns: p.kernel_tx_ns,
                kernel_rx_ns: kernel_rx_ns.unwrap_or(0),
                app_recv_ns: real_ns() as u64,
            };
            Breakdown::split_with_client(end - p.start, times, client).unwrap_or_default()
        });
        self.done(
            r,
            Sample::new(p.intended, p.start, end, Outcome::Ok),
            true,
            b,
        );
    }
}

/// Drops answered or expired requests from the front of a socket's outstanding list.
fn prune(sock: &mut Sock, pending: &HashMap<u64, Pending>) {
    while sock
        .outstanding
        .front()
        .is_some_and(|s| !pending.contains_key(s))
    {
        sock.outstanding.pop_front();
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
