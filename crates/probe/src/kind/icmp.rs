//! icmp: one ICMP echo request, timed until its reply.
//!
//! In: a host (name or address). Out: one measurement per slot (`by-name` adds a lookup).
//! The socket is an unprivileged ping socket (`SOCK_DGRAM`, allowed for the groups in
//! `net.ipv4.ping_group_range`) and, where that is refused, a raw socket (needs root or
//! CAP_NET_RAW); the probe's start fails naming both when neither is allowed. Replies are
//! matched by sequence number (and identifier on a raw socket, which sees every reply).

use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::{datagram_variant, measure, target_ip, Deadline, Failure, Measured, Op, Probe};
use crate::spec::{ProbeSpec, Resolver};
use crate::ProbeError;

/// The icmp probe.
pub struct IcmpProbe {
    host: String,
    resolver: Resolver,
    addr: Option<IpAddr>,
    sock: Option<(IpAddr, Socket, bool)>,
    ident: u16,
    seq: u16,
}

impl IcmpProbe {
    /// A probe pinging `spec.target`; checks now that a socket can be had.
    pub fn new(spec: &ProbeSpec) -> Result<IcmpProbe, ProbeError> {
        open(false).map_err(ProbeError::Start)?;
        Ok(IcmpProbe {
            host: spec.target.clone(),
            resolver: spec.resolver.clone(),
            addr: None,
            sock: None,
            ident: rand::random(),
            seq: 0,
        })
    }

    fn ping(&mut self, ip: IpAddr, deadline: Deadline) -> Result<(), Failure> {
        if self.sock.as_ref().map(|s| s.0) != Some(ip) {
            let (sock, raw) = open(ip.is_ipv6()).map_err(Failure::Error)?;
            sock.connect(&SockAddr::from(SocketAddr::new(ip, 0)))
                .map_err(|e| Failure::io("connect", &e))?;
            self.sock = Some((ip, sock, raw));
        }
        let Some((_, sock, raw)) = self.sock.as_ref() else {
            return Err(Failure::error("no socket"));
        };
        self.seq = self.seq.wrapping_add(1);
        let v6 = ip.is_ipv6();
        let packet = echo_request(v6, self.ident, self.seq);
        sock.send(&packet).map_err(|e| Failure::io("send", &e))?;
        let mut buf = [0u8; 1500];
        loop {
            sock.set_read_timeout(Some(deadline.remaining()?))
                .map_err(|e| Failure::io("receive", &e))?;
            let n = (&*sock)
                .read(&mut buf)
                .map_err(|e| Failure::io("receive", &e))?;
            // A raw IPv4 socket hands over the IP header too; ping sockets and IPv6 do not.
            let icmp = if *raw && !v6 {
                let ihl = usize::from(buf[0] & 0x0f) * 4;
                &buf[ihl.min(n)..n]
            } else {
                &buf[..n]
            };
            if let Some((ty, id, seq)) = parse(icmp) {
                let reply = if v6 { 129 } else { 0 };
                if ty == reply && seq == self.seq && (!*raw || id == self.ident) {
                    return Ok(());
                }
            }
        }
    }
}

/// A ping socket, or a raw one where ping sockets are not allowed; `true` when raw.
fn open(v6: bool) -> Result<(Socket, bool), String> {
    let (domain, proto) = if v6 {
        (Domain::IPV6, Protocol::ICMPV6)
    } else {
        (Domain::IPV4, Protocol::ICMPV4)
    };
    match Socket::new(domain, Type::DGRAM, Some(proto)) {
        Ok(s) => Ok((s, false)),
        Err(dgram) => Socket::new(domain, Type::RAW, Some(proto))
            .map(|s| (s, true))
            .map_err(|raw| {
                format!(
                    "icmp probe: no ping socket ({dgram}: widen net.ipv4.ping_group_range) and no raw socket ({raw}: run as root or grant CAP_NET_RAW)"
                )
            }),
    }
}

/// An echo request with an 8-byte payload; the checksum is filled for IPv4 (the kernel
/// fills ICMPv6's).
fn echo_request(v6: bool, ident: u16, seq: u16) -> Vec<u8> {
    let mut p = vec![if v6 { 128 } else { 8 }, 0, 0, 0];
    p.extend_from_slice(&ident.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(b"tailhunt");
    if !v6 {
        let sum = checksum(&p);
        p[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    p
}

/// The Internet checksum (RFC 1071).
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Type, identifier and sequence of an echo message.
fn parse(icmp: &[u8]) -> Option<(u8, u16, u16)> {
    let h = icmp.get(..8)?;
    Some((
        h[0],
        u16::from_be_bytes([h[4], h[5]]),
        u16::from_be_bytes([h[6], h[7]]),
    ))
}

impl Probe for IcmpProbe {
    fn run(&mut self, op: Op, timeout: Duration, out: &mut Vec<Measured>) {
        measure(datagram_variant(op), out, || {
            let deadline = Deadline::after(timeout);
            let ip = target_ip(op, &self.host, &self.resolver, &mut self.addr, deadline)?;
            self.ping(ip, deadline)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_of_a_request_verifies_to_zero() {
        let p = echo_request(false, 0x1234, 7);
        assert_eq!(checksum(&p), 0);
        assert_eq!(parse(&p), Some((8, 0x1234, 7)));
    }
}
