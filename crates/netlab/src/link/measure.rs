//! Measuring a path between namespaces from this process: a UDP echo, an open-loop UDP
//! ping-pong and a bulk TCP transfer. Tests and bench/link.sh use them to check the emulator;
//! scenarios may use them to check their paths.
//!
//! In: namespace names (`ip netns list`), addresses, a rate and a duration. Out: raw round-trip
//! times in ns ([`PingPong`]) and bytes over time ([`Bulk`]).
//!
//! The ping-pong and echo threads ask for real-time scheduling (as the emulator's do), so
//! that other work on a small machine does not show up as round-trip time.
//!
//! Sockets are opened by a short-lived thread that has joined the namespace (`setns`); a socket
//! stays in the namespace it was created in, so any thread may use it afterwards and this
//! process never leaves its own namespace.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::num::NonZeroU64;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
use rustix::time::{ClockId, Timespec};

use super::pump::{now_ns, raise_to_realtime};

/// Real-time priority of the measuring threads: below the emulator's (20), above ordinary
/// tasks, so a busy machine delays neither the probes nor the replies.
const MEASURE_PRIORITY: u8 = 10;

/// Runs `f` on a thread inside network namespace `ns` (a name under /var/run/netns) and
/// returns its result. Sockets `f` creates belong to `ns`.
pub fn in_netns<T, F>(ns: &str, f: F) -> io::Result<T>
where
    T: Send,
    F: FnOnce() -> io::Result<T> + Send,
{
    let file = File::open(format!("/var/run/netns/{ns}")).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("network namespace '{ns}': {e} (see `ip netns list`)"),
        )
    })?;
    std::thread::scope(|s| {
        s.spawn(move || {
            move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network))?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("thread in namespace panicked")))
    })
}

/// A UDP echo server inside a namespace; stops when dropped.
#[derive(Debug)]
pub struct UdpEcho {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl UdpEcho {
    /// Binds `bind` (port 0 picks one) in namespace `ns` and echoes every datagram back.
    pub fn start(ns: &str, bind: SocketAddr) -> io::Result<UdpEcho> {
        let sock = in_netns(ns, || UdpSocket::bind(bind))?;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = sock.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            raise_to_realtime(MEASURE_PRIORITY);
            let mut buf = [0u8; 65_536];
            while !flag.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    let _ = sock.send_to(&buf[..n], from);
                }
            }
        });
        Ok(UdpEcho {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for UdpEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Result of a ping-pong run.
#[derive(Debug, Clone)]
pub struct PingPong {
    /// Datagrams sent.
    pub sent: u64,
    /// Round-trip time of each datagram that came back, in ns, in the order received.
    pub rtt_ns: Vec<u64>,
    /// Replies that arrived after a reply to a later datagram (reordering on the path).
    pub reordered: u64,
}

impl PingPong {
    /// Datagrams that did not come back.
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.rtt_ns.len() as u64)
    }

    /// Nearest-rank quantile of the round-trip times, in ns (0 with no replies).
    pub fn rtt_quantile_ns(&self, q: f64) -> u64 {
        let mut v = self.rtt_ns.clone();
        v.sort_unstable();
        tailhunt_histogram::quantile::of_sorted(&v, q).unwrap_or(0)
    }
}

/// Sends `payload_bytes`-byte datagrams (at least 16) from namespace `ns` to `target` (a UDP
/// echo) on a fixed timetable of `rate_per_s` for `duration`, and times each reply from the
/// moment its datagram was sent. Replies are awaited up to 2 s after the last send.
pub fn udp_ping_pong(
    ns: &str,
    target: SocketAddr,
    rate_per_s: u64,
    duration: Duration,
    payload_bytes: usize,
) -> io::Result<PingPong> {
    let sock = in_netns(ns, || {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        s.connect(target)?;
        Ok(s)
    })?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    let count = (rate_per_s as u128 * duration.as_nanos() / 1_000_000_000) as u64;
    let interval_ns = 1_000_000_000 / rate_per_s.max(1);
    let start = now_ns() + 1_000_000;
    let last_reply_by = start + count * interval_ns + 2_000_000_000;
    let receiver = sock.try_clone()?;
    let rx = std::thread::spawn(move || {
        raise_to_realtime(MEASURE_PRIORITY);
        let mut buf = [0u8; 65_536];
        let mut rtt_ns = Vec::with_capacity(count as usize);
        let (mut next_seq, mut reordered) = (0u64, 0u64);
        while (rtt_ns.len() as u64) < count && now_ns() < last_reply_by {
            if let Ok(n) = receiver.recv(&mut buf) {
                let got = now_ns();
                if n >= 16 {
                    let seq = u64::from_le_bytes(buf[..8].try_into().unwrap_or_default());
                    let sent = u64::from_le_bytes(buf[8..16].try_into().unwrap_or_default());
                    rtt_ns.push(got.saturating_sub(sent));
                    if seq < next_seq {
                        reordered += 1;
                    }
                    next_seq = next_seq.max(seq + 1);
                }
            }
        }
        (rtt_ns, reordered)
    });
    // The sender runs on a thread of its own so the caller's scheduling is left alone.
    let sender = std::thread::spawn(move || {
        raise_to_realtime(MEASURE_PRIORITY);
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
        send_on_timetable(&sock, start, interval_ns, count, payload_bytes)
    });
    let sent = sender
        .join()
        .map_err(|_| io::Error::other("sender thread panicked"))?;
    let (rtt_ns, reordered) = rx
        .join()
        .map_err(|_| io::Error::other("receiver thread panicked"))?;
    Ok(PingPong {
        sent,
        rtt_ns,
        reordered,
    })
}

fn send_on_timetable(
    sock: &UdpSocket,
    start: u64,
    interval_ns: u64,
    count: u64,
    payload_bytes: usize,
) -> u64 {
    let mut payload = vec![0u8; payload_bytes.max(16)];
    let mut sent = 0;
    for seq in 0..count {
        sleep_until(start + seq * interval_ns);
        payload[..8].copy_from_slice(&seq.to_le_bytes());
        payload[8..16].copy_from_slice(&now_ns().to_le_bytes());
        if sock.send(&payload).is_ok() {
            sent += 1;
        }
    }
    sent
}

/// Result of a bulk transfer, seen by the receiver.
#[derive(Debug, Clone, Copy)]
pub struct Bulk {
    /// Bytes received.
    pub bytes: u64,
    /// From the first byte received to the last, in ns.
    pub elapsed_ns: u64,
}

impl Bulk {
    /// Goodput in bits per second (TCP payload; 0 if nothing arrived).
    pub fn goodput_bps(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return 0.0;
        }
        self.bytes as f64 * 8e9 / self.elapsed_ns as f64
    }
}

/// Sends as fast as TCP allows from namespace `sender_ns` to a receiver listening on
/// `receiver_addr` (port 0 picks one) in `receiver_ns`, for `duration`, then closes; returns
/// what the receiver got once everything sent has arrived.
pub fn tcp_bulk(
    sender_ns: &str,
    receiver_ns: &str,
    receiver_addr: SocketAddr,
    duration: Duration,
) -> io::Result<Bulk> {
    let listener = in_netns(receiver_ns, || TcpListener::bind(receiver_addr))?;
    let target = listener.local_addr()?;
    let rx = std::thread::spawn(move || -> io::Result<Bulk> {
        let (mut conn, _) = listener.accept()?;
        let mut buf = vec![0u8; 256 * 1024];
        let (mut bytes, mut first, mut last) = (0u64, 0u64, 0u64);
        loop {
            let n = conn.read(&mut buf)?;
            if n == 0 {
                break;
            }
            last = now_ns();
            if bytes == 0 {
                first = last;
            }
            bytes += n as u64;
        }
        Ok(Bulk {
            bytes,
            elapsed_ns: last - first,
        })
    });
    let mut conn = in_netns(sender_ns, || {
        TcpStream::connect_timeout(&target, Duration::from_secs(5))
    })?;
    let chunk = vec![0x5au8; 64 * 1024];
    let until = now_ns() + duration.as_nanos() as u64;
    while now_ns() < until {
        conn.write_all(&chunk)?;
    }
    conn.shutdown(Shutdown::Write)?;
    rx.join()
        .map_err(|_| io::Error::other("receiver thread panicked"))?
}

/// Time the hypervisor ran other guests while this machine's CPUs wanted to run (`steal` in
/// /proc/stat, summed over CPUs), in ns; `None` when unreadable. On a shared VM, stolen time
/// shows up as delay that neither the emulator nor the measurement can avoid, so benchmarks
/// and tests report it beside their figures.
pub fn cpu_steal_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: u64 = stat
        .lines()
        .find(|l| l.starts_with("cpu "))?
        .split_whitespace()
        .nth(8)?
        .parse()
        .ok()?;
    Some(ticks * 1_000_000_000 / rustix::param::clock_ticks_per_second())
}

/// Sleeps until `due_ns` on the monotonic clock, spinning the last 50 µs.
fn sleep_until(due_ns: u64) {
    const SPIN_NS: u64 = 50_000;
    if due_ns > now_ns() + SPIN_NS {
        let wake = due_ns - SPIN_NS;
        let t = Timespec {
            tv_sec: (wake / 1_000_000_000) as _,
            tv_nsec: (wake % 1_000_000_000) as _,
        };
        let _ = rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &t);
    }
    while now_ns() < due_ns {
        std::hint::spin_loop();
    }
}
