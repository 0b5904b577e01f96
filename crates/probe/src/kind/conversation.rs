//! The variants every connection-based kind shares.
//!
//! In: a [`Dialer`] (how to open a connection to an address and make one request on it), the
//! probe's `host:port` and resolver. Out: for each [`Op`], the measurement(s) of the matching
//! variant:
//!
//! | op | variant | what is timed |
//! |---|---|---|
//! | `Default` | `default` | one request on a kept connection (tcp-connect: a new handshake) |
//! | `Fresh` | `fresh` | connect (and log in) + one request, on a new connection |
//! | `Reused` | `reused` | one request on a kept connection |
//! | `Pair` | `first`, `second` | two back-to-back requests on a new connection (connect untimed) |
//! | `ByName` | `by-name` | look the host up + connect + one request |
//! | `ByIp` | `by-ip` | connect to the address looked up at start + one request |
//!
//! A kept connection that failed, or that the server closed while it was kept (found before
//! the request, without waiting), is dropped and opened again (untimed) before the next
//! request on it; when that opening fails, the failure is the sample (timed from when the
//! opening began). The address looked up at start is looked up again after a failure to get
//! one.

use std::net::SocketAddr;
use std::time::Duration;

use super::{dns, measure, now_ns, Deadline, Dialer, Failure, Measured, Op, Probe, Session};
use crate::spec::{ProbeSpec, Resolver};
use crate::ProbeError;

/// A connection-based probe.
pub struct Conversation {
    dialer: Box<dyn Dialer>,
    host: String,
    port: u16,
    resolver: Resolver,
    /// The address looked up at start (`by-ip`, and every other op).
    addr: Option<SocketAddr>,
    kept: Option<Box<dyn Session>>,
    /// tcp-connect: the handshake is the measurement; there is no request.
    connect_only: bool,
}

/// Splits `host:port` (`[v6]:port` too).
pub fn split_host_port(target: &str) -> Option<(String, u16)> {
    let (host, port) = target.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some((host.to_string(), port.parse().ok()?))
}

impl Conversation {
    /// A probe of `spec` through `dialer`.
    pub fn new(
        spec: &ProbeSpec,
        dialer: Box<dyn Dialer>,
        connect_only: bool,
    ) -> Result<Conversation, ProbeError> {
        let (host, port) = split_host_port(&spec.target).ok_or_else(|| {
            ProbeError::Config(format!(
                "probe '{}': target '{}' is not host:port (write e.g. target = \"127.0.0.1:6379\")",
                spec.name, spec.target
            ))
        })?;
        Ok(Conversation {
            dialer,
            host,
            port,
            resolver: spec.resolver.clone(),
            addr: None,
            kept: None,
            connect_only,
        })
    }

    fn lookup(&self, deadline: Deadline) -> Result<SocketAddr, Failure> {
        let ip = dns::resolve(&self.host, &self.resolver, deadline)?;
        Ok(SocketAddr::new(ip, self.port))
    }

    /// The address looked up at start (looked up now when there is none yet).
    fn addr(&mut self, deadline: Deadline) -> Result<SocketAddr, Failure> {
        if let Some(a) = self.addr {
            return Ok(a);
        }
        let a = self.lookup(deadline)?;
        self.addr = Some(a);
        Ok(a)
    }

    /// Connect to `addr` and make one request (none for tcp-connect).
    fn once(&mut self, addr: SocketAddr, deadline: Deadline) -> Result<(), Failure> {
        let mut s = self.dialer.dial(addr, deadline)?;
        if self.connect_only {
            return Ok(());
        }
        s.request(deadline)
    }

    /// A request on the kept connection, opened first (untimed) when there is none.
    fn on_kept(&mut self, variant: &'static str, timeout: Duration, out: &mut Vec<Measured>) {
        // A connection the server closed while it was kept (an HTTP/1.0 or `Connection:
        // close` answer, an idle timeout shorter than the interval) is opened again, as any
        // client's pool does, instead of failing the next request on it.
        if self.kept.as_mut().is_some_and(|s| s.closed()) {
            self.kept = None;
        }
        if self.kept.is_none() {
            let (start, deadline) = (now_ns(), Deadline::after(timeout));
            let opened = self
                .addr(deadline)
                .and_then(|a| self.dialer.dial(a, deadline));
            match opened {
                Ok(s) => self.kept = Some(s),
                Err(f) => return failed_open(variant, start, f, out),
            }
        }
        let Some(s) = self.kept.as_mut() else { return };
        let deadline = Deadline::after(timeout);
        let mut failed = false;
        measure(variant, out, || {
            let r = s.request(deadline);
            failed = r.is_err();
            r
        });
        if failed {
            self.kept = None;
        }
    }

    fn pair(&mut self, timeout: Duration, out: &mut Vec<Measured>) {
        let (start, deadline) = (now_ns(), Deadline::after(timeout));
        let opened = self
            .addr(deadline)
            .and_then(|a| self.dialer.dial(a, deadline));
        let mut s = match opened {
            Ok(s) => s,
            Err(f) => {
                let why = format!(
                    "not sent: the connection could not be opened ({})",
                    f.describe()
                );
                failed_open("first", start, f, out);
                return failed_open("second", now_ns(), Failure::error(why), out);
            }
        };
        let mut first = Ok(());
        measure("first", out, || {
            first = s.request(Deadline::after(timeout));
            first.clone()
        });
        match first {
            Ok(()) => measure("second", out, || s.request(Deadline::after(timeout))),
            Err(f) => {
                let why = format!("not sent: the first request failed ({})", f.describe());
                failed_open("second", now_ns(), Failure::error(why), out);
            }
        }
    }
}

/// A measurement whose connection could not be opened (no address, refused, no answer): it
/// counts as a sample of its variant, from when the opening began (a timeout is censored at
/// the timeout like any other).
fn failed_open(variant: &'static str, start_ns: i64, failure: Failure, out: &mut Vec<Measured>) {
    out.push(Measured {
        variant,
        hop: 0,
        start_ns,
        end_ns: now_ns(),
        failure: Some(failure),
    });
}

impl Probe for Conversation {
    fn run(&mut self, op: Op, timeout: Duration, out: &mut Vec<Measured>) {
        match op {
            Op::Default if self.connect_only => {
                measure("default", out, || {
                    let deadline = Deadline::after(timeout);
                    let a = self.addr(deadline)?;
                    self.once(a, deadline)
                });
            }
            Op::Default => self.on_kept("default", timeout, out),
            Op::Reused => self.on_kept("reused", timeout, out),
            Op::Fresh => measure("fresh", out, || {
                let deadline = Deadline::after(timeout);
                let a = self.addr(deadline)?;
                self.once(a, deadline)
            }),
            Op::Pair => self.pair(timeout, out),
            Op::ByName => measure("by-name", out, || {
                let deadline = Deadline::after(timeout);
                let a = self.lookup(deadline)?;
                self.once(a, deadline)
            }),
            Op::ByIp => measure("by-ip", out, || {
                let deadline = Deadline::after(timeout);
                let a = self.addr(deadline)?;
                self.once(a, deadline)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_splits_names_v4_and_v6() {
        assert_eq!(
            split_host_port("db.local:5432"),
            Some(("db.local".into(), 5432))
        );
        assert_eq!(split_host_port("[::1]:80"), Some(("::1".into(), 80)));
        assert_eq!(split_host_port("127.0.0.1"), None);
        assert_eq!(split_host_port(":80"), None);
    }

    /// An HTTP server that answers one request per connection and closes it (HTTP/1.0 style,
    /// as Python's http.server): each round's request on the kept connection succeeds, on a
    /// connection opened again once the server closed the last. (Before, every other round
    /// failed with "the server closed the connection".) Returns the connections it served.
    #[test]
    fn a_kept_connection_the_server_closed_is_opened_again() {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let served = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&served);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut c) = conn else { return };
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = c.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
                count.fetch_add(1, Ordering::SeqCst);
                // Dropped: the server closes the connection after its answer.
            }
        });
        let url = format!("http://127.0.0.1:{port}/");
        let cfg =
            crate::config::from_urls(&[url], &crate::config::Overrides::default()).expect("probe");
        let mut probe = super::super::build(&cfg.probes[0]).expect("built");
        let mut out = Vec::new();
        for _ in 0..4 {
            probe.run(Op::Default, Duration::from_secs(2), &mut out);
            // The server's FIN arrives while the connection is kept, as between rounds.
            std::thread::sleep(Duration::from_millis(50));
        }
        let failures: Vec<_> = out.iter().filter_map(|m| m.failure.clone()).collect();
        assert_eq!(out.len(), 4);
        assert!(failures.is_empty(), "{failures:?}");
        assert_eq!(served.load(Ordering::SeqCst), 4);
    }
}
