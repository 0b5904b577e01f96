//! Every TCP socket of a network namespace through netlink `inet_diag` (what `ss -ti` reads).
//!
//! In: nothing (the calling thread's network namespace). Out: one [`DiagSocket`] per TCP
//! socket, IPv4 and IPv6, with its addresses, state, inode (the `socket:[inode]` in
//! `/proc/PID/fd`), `struct tcp_info`, socket memory (`SO_RCVBUF`/`SO_SNDBUF` as the kernel
//! holds them) and congestion control. The messages are built by hand from
//! `include/uapi/linux/{netlink,sock_diag,inet_diag}.h`; listening sockets are left out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use rustix::net::{netlink, AddressFamily, RecvFlags, SendFlags, SocketType};
use serde::{Deserialize, Serialize};

use crate::error::SockError;
use crate::tcp_info::TcpInfo;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const IPPROTO_TCP: u8 = 6;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_CONG: u16 = 4;
const INET_DIAG_SKMEMINFO: u16 = 7;
const TCP_LISTEN: u8 = 10;
/// `struct inet_diag_msg`: family, state, timer, retrans, the 48-byte id, expires, rqueue,
/// wqueue, uid, inode.
const DIAG_MSG_LEN: usize = 72;

/// One TCP socket as inet_diag reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiagSocket {
    /// TCP state (1 established ... 11 closing).
    pub state: u8,
    /// Local address.
    pub local: SocketAddr,
    /// Remote address.
    pub peer: SocketAddr,
    /// The socket's inode (0 for sockets no file refers to, e.g. TIME_WAIT).
    pub inode: u64,
    /// Owner's uid.
    pub uid: u32,
    /// The kernel's socket cookie (unique while the socket lives).
    pub cookie: u64,
    /// TCP_INFO.
    pub info: Option<TcpInfo>,
    /// sk_rcvbuf, bytes (what SO_RCVBUF reads back).
    pub rcvbuf: Option<u32>,
    /// sk_sndbuf, bytes.
    pub sndbuf: Option<u32>,
    /// Bytes waiting in the receive queue.
    pub rmem_alloc: Option<u32>,
    /// Congestion control algorithm.
    pub cong: Option<String>,
}

/// Dumps every non-listening TCP socket of the calling thread's namespace.
pub fn dump_tcp() -> Result<Vec<DiagSocket>, SockError> {
    Diag::open()?.dump()
}

/// A sock_diag netlink socket; it stays in the namespace it was opened in.
#[derive(Debug)]
pub struct Diag {
    fd: std::os::fd::OwnedFd,
}

impl Diag {
    /// Opens one in the calling thread's network namespace.
    pub fn open() -> Result<Diag, SockError> {
        let fd = rustix::net::socket(
            AddressFamily::NETLINK,
            SocketType::RAW,
            Some(netlink::SOCK_DIAG),
        )
        .map_err(|e| SockError::Netlink(e.into()))?;
        Ok(Diag { fd })
    }

    /// Every non-listening TCP socket of the socket's namespace.
    pub fn dump(&self) -> Result<Vec<DiagSocket>, SockError> {
        dump_on(&self.fd)
    }
}

fn dump_on(fd: &std::os::fd::OwnedFd) -> Result<Vec<DiagSocket>, SockError> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    for (seq, family) in [(1u32, AF_INET), (2, AF_INET6)] {
        let msg = request(seq, family);
        rustix::net::sendto(
            fd,
            &msg,
            SendFlags::empty(),
            &netlink::SocketAddrNetlink::new(0, 0),
        )
        .map_err(|e| SockError::Netlink(e.into()))?;
        'recv: loop {
            let (n, _) = rustix::net::recv(fd, &mut buf[..], RecvFlags::empty())
                .map_err(|e| SockError::Netlink(e.into()))?;
            let mut off = 0;
            while off + 16 <= n {
                let len = u32_at(&buf, off) as usize;
                let kind = u16_at(&buf, off + 4);
                if len < 16 || off + len > n {
                    break;
                }
                let body = &buf[off + 16..off + len];
                match kind {
                    NLMSG_DONE => break 'recv,
                    NLMSG_ERROR => {
                        let errno = i32::from_ne_bytes(
                            body.get(..4)
                                .and_then(|b| b.try_into().ok())
                                .unwrap_or_default(),
                        );
                        if errno != 0 {
                            return Err(SockError::Netlink(std::io::Error::from_raw_os_error(
                                -errno,
                            )));
                        }
                        break 'recv;
                    }
                    SOCK_DIAG_BY_FAMILY => {
                        if let Some(s) = parse(body) {
                            if s.state != TCP_LISTEN {
                                out.push(s);
                            }
                        }
                    }
                    _ => {}
                }
                off += (len + 3) & !3;
            }
            if n == 0 {
                break;
            }
        }
    }
    Ok(out)
}

/// `nlmsghdr` + `inet_diag_req_v2` asking for every state, with TCP_INFO, memory and
/// congestion control.
fn request(seq: u32, family: u8) -> Vec<u8> {
    let mut m = Vec::with_capacity(72);
    m.extend_from_slice(&72u32.to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    let ext: u8 = (1 << (INET_DIAG_INFO - 1))
        | (1 << (INET_DIAG_CONG - 1))
        | (1 << (INET_DIAG_SKMEMINFO - 1));
    m.extend_from_slice(&[family, IPPROTO_TCP, ext, 0]);
    m.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    m.extend_from_slice(&[0u8; 48]); // inet_diag_sockid: no filter
    m
}

fn parse(b: &[u8]) -> Option<DiagSocket> {
    if b.len() < DIAG_MSG_LEN {
        return None;
    }
    let family = b[0];
    let sport = u16::from_be_bytes([b[4], b[5]]);
    let dport = u16::from_be_bytes([b[6], b[7]]);
    let addr = |o: usize, port: u16| -> SocketAddr {
        let ip = if family == AF_INET {
            IpAddr::V4(Ipv4Addr::new(b[o], b[o + 1], b[o + 2], b[o + 3]))
        } else {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[o..o + 16]);
            IpAddr::V6(Ipv6Addr::from(a))
        };
        SocketAddr::new(ip, port)
    };
    let cookie = u64::from(u32_at(b, 44)) | (u64::from(u32_at(b, 48)) << 32);
    let mut s = DiagSocket {
        state: b[1],
        local: addr(8, sport),
        peer: addr(24, dport),
        inode: u64::from(u32_at(b, 68)),
        uid: u32_at(b, 64),
        cookie,
        info: None,
        rcvbuf: None,
        sndbuf: None,
        rmem_alloc: None,
        cong: None,
    };
    let mut off = DIAG_MSG_LEN;
    while off + 4 <= b.len() {
        let len = usize::from(u16_at(b, off));
        let kind = u16_at(b, off + 2);
        if len < 4 || off + len > b.len() {
            break;
        }
        let payload = &b[off + 4..off + len];
        match kind {
            INET_DIAG_INFO => s.info = TcpInfo::parse(payload),
            INET_DIAG_SKMEMINFO if payload.len() >= 16 => {
                s.rmem_alloc = Some(u32_at(payload, 0));
                s.rcvbuf = Some(u32_at(payload, 4));
                s.sndbuf = Some(u32_at(payload, 12));
            }
            INET_DIAG_CONG => {
                let text = payload.split(|c| *c == 0).next().unwrap_or_default();
                s.cong = Some(String::from_utf8_lossy(text).into_owned());
            }
            _ => {}
        }
        off += (len + 3) & !3;
    }
    Some(s)
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_ne_bytes)
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    b.get(o..o + 2)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u16::from_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// A loopback connection shows up with both ends, its inode, TCP_INFO and buffers, and
    /// agrees with getsockopt on the same socket.
    #[test]
    fn sees_a_loopback_connection_like_getsockopt_does() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        let all = dump_tcp().unwrap();
        let local = c.local_addr().unwrap();
        let mine = all
            .iter()
            .find(|d| d.local == local && d.peer == l.local_addr().unwrap())
            .expect("client socket listed");
        assert!(mine.inode > 0);
        let info = mine.info.expect("tcp_info");
        assert_eq!(info.state, crate::tcp_info::TCP_ESTABLISHED);
        assert_eq!(info.bytes_acked, Some(6)); // 5 bytes + the SYN
        let own = crate::read_tcp_info(c.as_fd()).unwrap();
        assert_eq!(own.snd_mss, info.snd_mss);
        let rcvbuf = rustix::net::sockopt::socket_recv_buffer_size(&c).unwrap() as u32;
        assert_eq!(mine.rcvbuf, Some(rcvbuf));
        assert!(mine.cong.as_deref().is_some_and(|c| !c.is_empty()));
        assert!(all
            .iter()
            .any(|d| d.local == s.local_addr().unwrap() && d.peer == local));
    }
}
