//! The probe kinds behind one small trait, one file per kind.
//!
//! In: a checked [`ProbeSpec`]. Out: a [`Probe`] that, asked to run one [`Op`] with a
//! timeout, appends what it measured ([`Measured`]: variant, start, end, failure) — one
//! measurement per op, two for [`Op::Pair`]. Probes never sleep for the schedule, never print
//! and never decide outcomes beyond their own request: the runner turns measurements into
//! samples (censoring at the timeout).
//!
//! Kinds that talk over a connection (tcp-connect, tcp-echo, http, redis, memcached, postgres,
//! mysql) share the variants through [`conversation::Conversation`]; each only says how to
//! open a connection ([`Dialer`]) and make one request on it ([`Session`]).

use std::io;
use std::time::{Duration, Instant};

use crate::spec::{Compare, Detail, Kind, ProbeSpec};
use crate::ProbeError;

pub mod command;
pub mod conversation;
pub mod disk;
pub mod dns;
pub mod icmp;
pub mod mysql;
pub mod path;
pub mod postgres;
pub mod stream;
pub mod udp;

/// Why a measurement did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No answer before the deadline.
    Timeout,
    /// Refused, reset, garbage, an error reply, nothing resolved: the message says which.
    Error(String),
}

impl Failure {
    /// An error with a message.
    pub fn error(msg: impl Into<String>) -> Failure {
        Failure::Error(msg.into())
    }

    /// What went wrong, in words.
    pub fn describe(&self) -> String {
        match self {
            Failure::Timeout => "no answer within the timeout".to_string(),
            Failure::Error(m) => m.clone(),
        }
    }

    /// An I/O error of step `what` (`connect`, `read`): a timed-out socket is a timeout.
    pub fn io(what: &str, e: &io::Error) -> Failure {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Failure::Timeout,
            _ => Failure::Error(format!("{what}: {e}")),
        }
    }
}

/// When a measurement must end.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub Instant);

impl Deadline {
    /// `timeout` from now.
    pub fn after(timeout: Duration) -> Deadline {
        Deadline(Instant::now() + timeout)
    }

    /// Time left, or a timeout when none is (socket timeouts of zero mean "forever").
    pub fn remaining(&self) -> Result<Duration, Failure> {
        let left = self.0.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(Failure::Timeout)
        } else {
            Ok(left)
        }
    }
}

/// One timed measurement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measured {
    /// The variant it belongs to (`default`, `by-name`, `first`, ...).
    pub variant: &'static str,
    /// The hop (TTL) of a path probe's measurement; 0 for every other kind.
    pub hop: u8,
    /// When it started (monotonic ns).
    pub start_ns: i64,
    /// When it ended (monotonic ns).
    pub end_ns: i64,
    /// `None` when it succeeded.
    pub failure: Option<Failure>,
}

/// What a probe does in one slot of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// The probe's plain measurement (variant `default`).
    Default,
    /// Look the name up, connect, request (`by-name`).
    ByName,
    /// Connect to the address looked up at start, request (`by-ip`).
    ByIp,
    /// A new connection, connect included (`fresh`).
    Fresh,
    /// A request on a kept connection (`reused`).
    Reused,
    /// Two back-to-back requests on a new connection (`first`, `second`).
    Pair,
}

impl Op {
    /// The ops one round of `spec` runs, each in its own slot.
    pub fn for_spec(spec: &ProbeSpec) -> Vec<Op> {
        if spec.compare.is_empty() {
            return vec![Op::Default];
        }
        spec.compare
            .iter()
            .flat_map(|c| match c {
                Compare::Name => vec![Op::ByName, Op::ByIp],
                Compare::Connection => vec![Op::Fresh, Op::Reused],
                Compare::Pair => vec![Op::Pair],
            })
            .collect()
    }
}

/// A probe of one kind.
pub trait Probe: Send {
    /// Runs `op` once, each measurement bounded by `timeout`, appending to `out`.
    fn run(&mut self, op: Op, timeout: Duration, out: &mut Vec<Measured>);
}

/// An open connection to a target that answers one request at a time.
pub trait Session: Send {
    /// Sends one request and reads its whole answer before `deadline`.
    fn request(&mut self, deadline: Deadline) -> Result<(), Failure>;

    /// Whether the server has closed this kept connection since its last answer (checked,
    /// untimed, before the next request on it). Sessions that cannot tell say no.
    fn closed(&mut self) -> bool {
        false
    }
}

/// Whether the server has closed (or reset) the connection on socket `fd` while no request
/// was outstanding: a read that does not wait finds its FIN (or an error) already there. Bytes
/// waiting are no answer to anything either (a server's farewell, such as MySQL's error packet
/// before it closes an idle connection): such a connection is not fit for a request.
pub fn peer_gone(fd: std::os::fd::RawFd) -> bool {
    use nix::errno::Errno;
    use nix::sys::socket::{recv, MsgFlags};
    match recv(
        fd,
        &mut [0u8; 1],
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(_) => true,
        Err(Errno::EAGAIN | Errno::EINTR) => false,
        Err(_) => true,
    }
}

/// Opens [`Session`]s to an address.
pub trait Dialer: Send {
    /// Connects (and logs in, for databases) before `deadline`.
    fn dial(
        &mut self,
        addr: std::net::SocketAddr,
        deadline: Deadline,
    ) -> Result<Box<dyn Session>, Failure>;
}

/// The monotonic clock, ns (the run's clock).
pub fn now_ns() -> i64 {
    tailhunt_load::clock::mono_ns()
}

/// Times `f` as one measurement of `variant`.
pub fn measure(
    variant: &'static str,
    out: &mut Vec<Measured>,
    f: impl FnOnce() -> Result<(), Failure>,
) {
    let start_ns = now_ns();
    let r = f();
    out.push(Measured {
        variant,
        hop: 0,
        start_ns,
        end_ns: now_ns(),
        failure: r.err(),
    });
}

/// The variant a datagram probe (udp-echo, icmp) measures for `op`.
pub fn datagram_variant(op: Op) -> &'static str {
    match op {
        Op::ByName => "by-name",
        Op::ByIp => "by-ip",
        _ => "default",
    }
}

/// The address a datagram probe sends to for `op`: looked up now for `by-name`, else the one
/// looked up at start (`at_start`, filled on first use).
pub fn target_ip(
    op: Op,
    host: &str,
    resolver: &crate::spec::Resolver,
    at_start: &mut Option<std::net::IpAddr>,
    deadline: Deadline,
) -> Result<std::net::IpAddr, Failure> {
    match (op, *at_start) {
        (Op::ByName, _) => dns::resolve(host, resolver, deadline),
        (_, Some(ip)) => Ok(ip),
        (_, None) => {
            let ip = dns::resolve(host, resolver, deadline)?;
            *at_start = Some(ip);
            Ok(ip)
        }
    }
}

/// The live probe for `spec`.
pub fn build(spec: &ProbeSpec) -> Result<Box<dyn Probe>, ProbeError> {
    let conversation = |dialer: Box<dyn Dialer>, connect_only: bool| {
        conversation::Conversation::new(spec, dialer, connect_only)
            .map(|c| Box::new(c) as Box<dyn Probe>)
    };
    match (spec.kind, &spec.detail) {
        (Kind::TcpConnect, _) => conversation(Box::new(stream::Connect), true),
        (Kind::TcpEcho | Kind::Http | Kind::Redis | Kind::Memcached, _) => {
            conversation(Box::new(stream::StreamDialer::new(spec)), false)
        }
        (Kind::Postgres, Detail::Database(_)) => {
            conversation(Box::new(postgres::PgDialer::new(spec)), false)
        }
        (Kind::Mysql, Detail::Database(_)) => {
            conversation(Box::new(mysql::MyDialer::new(spec)), false)
        }
        (Kind::UdpEcho, _) => Ok(Box::new(udp::UdpEcho::new(spec)?)),
        (Kind::Dns, Detail::Query(name)) => Ok(Box::new(dns::DnsProbe::new(spec, name))),
        (Kind::Command, Detail::Command(argv)) => Ok(Box::new(command::CommandProbe::new(argv))),
        (Kind::Disk, Detail::Disk { path, bytes }) => {
            Ok(Box::new(disk::DiskProbe::open(path, *bytes)?))
        }
        (Kind::Icmp, _) => Ok(Box::new(icmp::IcmpProbe::new(spec)?)),
        (Kind::Path, Detail::Hops(n)) => Ok(Box::new(path::PathProbe::new(spec, *n)?)),
        (kind, detail) => Err(ProbeError::Config(format!(
            "probe '{}': kind {} cannot use {detail:?}",
            spec.name,
            kind.name()
        ))),
    }
}
