//! udp-echo: one datagram to tailhunt's UDP echo server (`tailhunt serve udp`), timed until
//! the reply carrying the same sequence number arrives.
//!
//! In: `host:port`. Out: one measurement per slot; `by-name` adds a lookup before the send.
//! A reply to an earlier, timed-out request is skipped (its sequence number is older); a
//! datagram that is not an echo reply is an error; an ICMP port-unreachable (nothing listens)
//! is an error ("connection refused").

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Duration;

use tailhunt_load::wire;

use super::conversation::split_host_port;
use super::{datagram_variant, measure, target_ip, Deadline, Failure, Measured, Op, Probe};
use crate::spec::{ProbeSpec, Resolver};
use crate::ProbeError;

/// The udp-echo probe.
pub struct UdpEcho {
    host: String,
    port: u16,
    resolver: Resolver,
    addr: Option<IpAddr>,
    sock: Option<UdpSocket>,
    seq: u64,
    out: Vec<u8>,
}

impl UdpEcho {
    /// A probe of `spec`'s `host:port`.
    pub fn new(spec: &ProbeSpec) -> Result<UdpEcho, ProbeError> {
        let (host, port) = split_host_port(&spec.target).ok_or_else(|| {
            ProbeError::Config(format!(
                "probe '{}': target '{}' is not host:port (write e.g. target = \"127.0.0.1:7001\")",
                spec.name, spec.target
            ))
        })?;
        Ok(UdpEcho {
            host,
            port,
            resolver: spec.resolver.clone(),
            addr: None,
            sock: None,
            seq: 0,
            out: Vec::new(),
        })
    }

    fn exchange(&mut self, ip: IpAddr, deadline: Deadline) -> Result<(), Failure> {
        let to = SocketAddr::new(ip, self.port);
        if self.sock.as_ref().and_then(|s| s.peer_addr().ok()) != Some(to) {
            let any: SocketAddr = if ip.is_ipv6() {
                (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
            } else {
                (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
            };
            let s = UdpSocket::bind(any).map_err(|e| Failure::io("bind", &e))?;
            s.connect(to).map_err(|e| Failure::io("connect", &e))?;
            self.sock = Some(s);
        }
        let Some(sock) = self.sock.as_ref() else {
            return Err(Failure::error("no socket"));
        };
        self.seq += 1;
        self.out.clear();
        wire::put_request_body(&mut self.out, self.seq, 0);
        sock.send(&self.out).map_err(|e| Failure::io("send", &e))?;
        let mut buf = [0u8; 2048];
        loop {
            sock.set_read_timeout(Some(deadline.remaining()?))
                .map_err(|e| Failure::io("receive", &e))?;
            let n = sock
                .recv(&mut buf)
                .map_err(|e| Failure::io("receive", &e))?;
            match wire::parse_response_body(&buf[..n]) {
                Some((seq, _)) if seq == self.seq => return Ok(()),
                Some((seq, _)) if seq < self.seq => continue,
                _ => {
                    return Err(Failure::error(format!(
                        "garbage: a {n}-byte datagram that is not an echo reply"
                    )))
                }
            }
        }
    }
}

impl Probe for UdpEcho {
    fn run(&mut self, op: Op, timeout: Duration, out: &mut Vec<Measured>) {
        measure(datagram_variant(op), out, || {
            let deadline = Deadline::after(timeout);
            let ip = target_ip(op, &self.host, &self.resolver, &mut self.addr, deadline)?;
            self.exchange(ip, deadline)
        });
    }
}
