//! Name lookups: the `dns` kind, and the lookup behind every `by-name` variant.
//!
//! In: a name and a [`Resolver`]: the system resolver (getaddrinfo, so /etc/hosts, nsswitch
//! and resolv.conf apply, as for any program on the host) or a given DNS server, asked
//! directly with one UDP query for the name's A record (AAAA when the server is IPv6),
//! recursion desired. Out: the first address, or a failure: a timeout, "resolves to nothing"
//! (NXDOMAIN, an empty answer), a server failure (its response code), or garbage.
//!
//! getaddrinfo has no timeout of its own: it runs on a helper thread and the probe stops
//! waiting at the deadline (a timeout sample). One system lookup may be outstanding; while
//! an abandoned one still runs, the next is an error rather than a second stuck thread.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

use super::{measure, Deadline, Failure, Measured, Op, Probe};
use crate::spec::{ProbeSpec, Resolver};

/// Looks `host` up (an IP literal is its own answer).
pub fn resolve(host: &str, resolver: &Resolver, deadline: Deadline) -> Result<IpAddr, Failure> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    match resolver {
        Resolver::System => system(host, deadline, &SYSTEM_BUSY),
        Resolver::Server(server) => direct(host, *server, deadline),
    }
}

/// Set while a getaddrinfo call abandoned at its deadline still runs (process-wide: the
/// system resolver is one shared thing).
static SYSTEM_BUSY: AtomicBool = AtomicBool::new(false);

fn system(host: &str, deadline: Deadline, busy: &'static AtomicBool) -> Result<IpAddr, Failure> {
    let wait = deadline.remaining()?;
    if busy.swap(true, Ordering::SeqCst) {
        return Err(Failure::error(
            "the system resolver has not answered an earlier lookup yet",
        ));
    }
    let (tx, rx) = mpsc::channel();
    let name = host.to_string();
    let spawned = std::thread::Builder::new()
        .name("probe-getaddrinfo".into())
        .spawn(move || {
            let r = (name.as_str(), 0).to_socket_addrs().map(|mut a| a.next());
            busy.store(false, Ordering::SeqCst);
            let _ = tx.send(r);
        });
    if let Err(e) = spawned {
        busy.store(false, Ordering::SeqCst);
        return Err(Failure::error(format!("cannot start a lookup: {e}")));
    }
    match rx.recv_timeout(wait) {
        Ok(Ok(Some(a))) => Ok(a.ip()),
        Ok(Ok(None)) => Err(Failure::error(format!("'{host}' resolves to nothing"))),
        Ok(Err(e)) => Err(Failure::error(format!("'{host}' resolves to nothing: {e}"))),
        Err(_) => Err(Failure::Timeout),
    }
}

/// One UDP query to `server`.
fn direct(host: &str, server: SocketAddr, deadline: Deadline) -> Result<IpAddr, Failure> {
    let name = Name::from_ascii(host)
        .map_err(|e| Failure::error(format!("'{host}' is not a DNS name: {e}")))?;
    let rtype = if server.is_ipv6() {
        RecordType::AAAA
    } else {
        RecordType::A
    };
    let id: u16 = rand::random();
    let mut q = Message::new();
    q.set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(name, rtype));
    let bytes = q
        .to_vec()
        .map_err(|e| Failure::error(format!("cannot encode the query: {e}")))?;
    let bind: SocketAddr = if server.is_ipv6() {
        "[::]:0".parse().map_err(|_| Failure::error("bad bind"))?
    } else {
        "0.0.0.0:0"
            .parse()
            .map_err(|_| Failure::error("bad bind"))?
    };
    let sock = UdpSocket::bind(bind).map_err(|e| Failure::io("bind", &e))?;
    sock.connect(server)
        .map_err(|e| Failure::io("connect", &e))?;
    sock.send(&bytes).map_err(|e| Failure::io("send", &e))?;
    let mut buf = [0u8; 4096];
    loop {
        sock.set_read_timeout(Some(deadline.remaining()?))
            .map_err(|e| Failure::io("receive", &e))?;
        let n = sock
            .recv(&mut buf)
            .map_err(|e| Failure::io("receive", &e))?;
        let answer = Message::from_vec(&buf[..n])
            .map_err(|e| Failure::error(format!("garbage from {server}: {e}")))?;
        if answer.id() != id {
            continue; // a late answer to an earlier query
        }
        return first_address(host, server, &answer);
    }
}

fn first_address(host: &str, server: SocketAddr, answer: &Message) -> Result<IpAddr, Failure> {
    match answer.response_code() {
        ResponseCode::NoError => {}
        ResponseCode::NXDomain => {
            return Err(Failure::error(format!(
                "'{host}' resolves to nothing (NXDOMAIN from {server})"
            )))
        }
        code => {
            return Err(Failure::error(format!(
                "{server} answered {code} for '{host}'"
            )))
        }
    }
    answer
        .answers()
        .iter()
        .find_map(|r| match r.data() {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .ok_or_else(|| {
            Failure::error(format!(
                "'{host}' resolves to nothing (no address in {server}'s answer)"
            ))
        })
}

/// The `dns` kind: one lookup of a name per slot.
pub struct DnsProbe {
    name: String,
    resolver: Resolver,
}

impl DnsProbe {
    /// A probe looking `name` up as `spec` says.
    pub fn new(spec: &ProbeSpec, name: &str) -> DnsProbe {
        DnsProbe {
            name: name.to_string(),
            resolver: spec.resolver.clone(),
        }
    }
}

impl Probe for DnsProbe {
    fn run(&mut self, _op: Op, timeout: Duration, out: &mut Vec<Measured>) {
        measure("default", out, || {
            resolve(&self.name, &self.resolver, Deadline::after(timeout)).map(|_| ())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ip_literal_needs_no_lookup_and_a_bad_name_is_an_error() {
        let d = Deadline::after(Duration::from_secs(1));
        let server: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(
            resolve("10.1.2.3", &Resolver::Server(server), d),
            Ok("10.1.2.3".parse().unwrap())
        );
        let e = resolve("bad name..x", &Resolver::Server(server), d).unwrap_err();
        assert!(matches!(e, Failure::Error(m) if m.contains("not a DNS name")));
    }

    #[test]
    fn the_system_resolver_finds_localhost() {
        let ip = resolve(
            "localhost",
            &Resolver::System,
            Deadline::after(Duration::from_secs(5)),
        )
        .unwrap();
        assert!(ip.is_loopback());
    }
}
