//! path: latency to each hop of the route, mtr-style, to tell which hop adds the tail.
//!
//! In: a host (IPv4) and the most hops to try. Out: one measurement per hop per slot, each
//! with its `hop` (the TTL): a UDP datagram sent with that TTL towards an unused high port,
//! timed until the ICMP error it provokes comes back on the socket's error queue
//! (`IP_RECVERR`): "time exceeded" from a router on the way (ok), "port unreachable" from the
//! destination itself (ok, and the last hop of the slot), any other "unreachable" (an error
//! naming the router and the code, and the last hop). A hop that says nothing within the
//! timeout is a timeout sample (mtr's `???`); the next hop is still tried.
//!
//! The datagram carries the slot's sequence number and the TTL, and the error queue hands the
//! original datagram back, so a late answer for another hop or slot is never mistaken for this
//! one.

use std::io::IoSliceMut;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrIn};
use rustix::event::{poll, PollFd, PollFlags, Timespec};

use super::{now_ns, Deadline, Failure, Measured, Op, Probe};
use crate::spec::{ProbeSpec, Resolver};
use crate::ProbeError;

/// The first destination port (traceroute's tradition: 33434 + hop, unlikely to be in use).
const BASE_PORT: u16 = 33434;
/// `SO_EE_ORIGIN_ICMP` (linux/errqueue.h).
const ORIGIN_ICMP: u8 = 2;
/// ICMP destination unreachable / port unreachable / time exceeded.
const UNREACHABLE: u8 = 3;
const PORT_UNREACHABLE: u8 = 3;
const TIME_EXCEEDED: u8 = 11;

/// The path probe.
pub struct PathProbe {
    host: String,
    resolver: Resolver,
    max_hops: u8,
    addr: Option<IpAddr>,
    seq: u32,
}

impl PathProbe {
    /// A probe of the route to `spec.target`, trying up to `max_hops` hops.
    pub fn new(spec: &ProbeSpec, max_hops: u8) -> Result<PathProbe, ProbeError> {
        Ok(PathProbe {
            host: spec.target.clone(),
            resolver: spec.resolver.clone(),
            max_hops,
            addr: None,
            seq: 0,
        })
    }
}

/// How one hop answered.
enum HopAnswer {
    /// A router on the way.
    OnTheWay,
    /// The destination: the route ends here.
    Destination,
}

fn open() -> Result<UdpSocket, Failure> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| Failure::io("bind", &e))?;
    setsockopt(&s, sockopt::Ipv4RecvErr, &true)
        .map_err(|e| Failure::error(format!("IP_RECVERR: {e}")))?;
    Ok(s)
}

/// Sends the datagram for `ttl` and waits for its answer.
fn hop(
    sock: &UdpSocket,
    dst: Ipv4Addr,
    seq: u32,
    ttl: u8,
    deadline: Deadline,
) -> Result<HopAnswer, Failure> {
    setsockopt(sock, sockopt::Ipv4Ttl, &i32::from(ttl))
        .map_err(|e| Failure::error(format!("IP_TTL: {e}")))?;
    let mut payload = seq.to_be_bytes().to_vec();
    payload.push(ttl);
    let to = SocketAddr::new(IpAddr::V4(dst), BASE_PORT + u16::from(ttl));
    sock.send_to(&payload, to)
        .map_err(|e| Failure::io("send", &e))?;
    loop {
        let left = deadline.remaining()?;
        let mut fds = [PollFd::new(sock, PollFlags::IN | PollFlags::ERR)];
        let wait = Timespec::try_from(left).unwrap_or(Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        });
        poll(&mut fds, Some(&wait)).map_err(|e| Failure::error(format!("poll: {e}")))?;
        let revents = fds[0].revents();
        if revents.contains(PollFlags::ERR) {
            if let Some(answer) = read_error(sock, dst, seq, ttl)? {
                return Ok(answer);
            }
        } else if revents.contains(PollFlags::IN) {
            // Something listens on the port and answered: the destination, reached.
            let mut buf = [0u8; 512];
            let _ = sock.recv_from(&mut buf);
            return Ok(HopAnswer::Destination);
        }
    }
}

/// Reads one error from the queue; `None` when it belongs to another datagram.
fn read_error(
    sock: &UdpSocket,
    dst: Ipv4Addr,
    seq: u32,
    ttl: u8,
) -> Result<Option<HopAnswer>, Failure> {
    let mut data = [0u8; 64];
    let mut cmsg = nix::cmsg_space!(libc::sock_extended_err, libc::sockaddr_in);
    let mut iov = [IoSliceMut::new(&mut data)];
    let msg = recvmsg::<SockaddrIn>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_ERRQUEUE,
    )
    .map_err(|e| Failure::error(format!("reading the error queue: {e}")))?;
    let mut answer = None;
    for c in msg
        .cmsgs()
        .map_err(|e| Failure::error(format!("control message: {e}")))?
    {
        if let ControlMessageOwned::Ipv4RecvErr(err, from) = c {
            if err.ee_origin != ORIGIN_ICMP {
                continue;
            }
            let from = from.map(|a| Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)));
            answer = Some((err.ee_type, err.ee_code, from));
        }
    }
    let n = msg.bytes;
    let ours = n >= 5 && data[..4] == seq.to_be_bytes() && data[4] == ttl;
    match answer {
        _ if !ours => Ok(None),
        Some((TIME_EXCEEDED, _, _)) => Ok(Some(HopAnswer::OnTheWay)),
        Some((UNREACHABLE, PORT_UNREACHABLE, Some(from))) if from == dst => {
            Ok(Some(HopAnswer::Destination))
        }
        Some((ty, code, from)) => Err(Failure::error(format!(
            "hop {ttl}: ICMP type {ty} code {code} from {}",
            from.map_or("?".to_string(), |a| a.to_string())
        ))),
        None => Ok(None),
    }
}

impl Probe for PathProbe {
    fn run(&mut self, _op: Op, timeout: Duration, out: &mut Vec<Measured>) {
        self.seq = self.seq.wrapping_add(1);
        let fail_all = |f: Failure, out: &mut Vec<Measured>| {
            let t = now_ns();
            out.push(Measured {
                variant: "default",
                hop: 1,
                start_ns: t,
                end_ns: t,
                failure: Some(f),
            });
        };
        let dst = match self.addr {
            Some(IpAddr::V4(a)) => a,
            _ => match super::dns::resolve(&self.host, &self.resolver, Deadline::after(timeout)) {
                Ok(IpAddr::V4(a)) => {
                    self.addr = Some(IpAddr::V4(a));
                    a
                }
                Ok(IpAddr::V6(a)) => {
                    return fail_all(
                        Failure::error(format!("{a}: the path probe is IPv4 only")),
                        out,
                    )
                }
                Err(f) => return fail_all(f, out),
            },
        };
        let sock = match open() {
            Ok(s) => s,
            Err(f) => return fail_all(f, out),
        };
        for ttl in 1..=self.max_hops {
            let start_ns = now_ns();
            let r = hop(&sock, dst, self.seq, ttl, Deadline::after(timeout));
            let end = matches!(r, Ok(HopAnswer::Destination) | Err(Failure::Error(_)));
            out.push(Measured {
                variant: "default",
                hop: ttl,
                start_ns,
                end_ns: now_ns(),
                failure: r.err(),
            });
            if end {
                break;
            }
        }
    }
}
