//! What to probe, checked: the resolved form of a configuration file or of quick-form URLs.
//!
//! In: [`crate::config`] builds these. Out: [`crate::kind::build`] turns each [`ProbeSpec`]
//! into a live probe, and the run's params keep them as JSON (`probes`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// The probe kinds, by the `kind` label their samples carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// ICMP echo (ping).
    Icmp,
    /// A TCP handshake.
    TcpConnect,
    /// tailhunt's TCP echo (`tailhunt serve tcp`).
    TcpEcho,
    /// tailhunt's UDP echo (`tailhunt serve udp`).
    UdpEcho,
    /// A name lookup.
    Dns,
    /// HTTP/1.1 GET.
    Http,
    /// Redis GET.
    Redis,
    /// memcached get.
    Memcached,
    /// A PostgreSQL one-row SELECT.
    Postgres,
    /// A MySQL/MariaDB one-row SELECT.
    Mysql,
    /// A random O_DIRECT read from a file or block device.
    Disk,
    /// A command's run time.
    Command,
    /// Latency per hop of the route (TTL-limited, mtr-style).
    Path,
}

impl Kind {
    /// Every kind this build probes.
    pub const ALL: [Kind; 13] = [
        Kind::Icmp,
        Kind::TcpConnect,
        Kind::TcpEcho,
        Kind::UdpEcho,
        Kind::Dns,
        Kind::Http,
        Kind::Redis,
        Kind::Memcached,
        Kind::Postgres,
        Kind::Mysql,
        Kind::Disk,
        Kind::Command,
        Kind::Path,
    ];

    /// The name in configurations and in the `kind` label.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Icmp => "icmp",
            Kind::TcpConnect => "tcp-connect",
            Kind::TcpEcho => "tcp-echo",
            Kind::UdpEcho => "udp-echo",
            Kind::Dns => "dns",
            Kind::Http => "http",
            Kind::Redis => "redis",
            Kind::Memcached => "memcached",
            Kind::Postgres => "postgres",
            Kind::Mysql => "mysql",
            Kind::Disk => "disk",
            Kind::Command => "command",
            Kind::Path => "path",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether the kind talks to a `host:port` over a connection (so it has `target` and the
    /// connection variants).
    pub fn is_conversation(self) -> bool {
        matches!(
            self,
            Kind::TcpConnect
                | Kind::TcpEcho
                | Kind::Http
                | Kind::Redis
                | Kind::Memcached
                | Kind::Postgres
                | Kind::Mysql
        )
    }

    /// The comparisons this kind can make.
    pub fn comparisons(self) -> &'static [Compare] {
        match self {
            Kind::TcpConnect => &[Compare::Name],
            k if k.is_conversation() => &[Compare::Name, Compare::Connection, Compare::Pair],
            Kind::Icmp | Kind::UdpEcho => &[Compare::Name],
            _ => &[],
        }
    }
}

/// A comparison: a pair of variants measured in every round, so rounds pair them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compare {
    /// `by-name` (look the host name up, then connect) against `by-ip` (the address looked up
    /// once at start): what a lookup adds.
    Name,
    /// `fresh` (a new connection, connect included) against `reused` (a kept connection):
    /// what a cold connection adds.
    Connection,
    /// `first` and `second` of two back-to-back requests on one new connection: what a first
    /// request adds.
    Pair,
}

impl Compare {
    /// The name in configurations (`compare = ["name", "connection", "pair"]`).
    pub fn name(self) -> &'static str {
        match self {
            Compare::Name => "name",
            Compare::Connection => "connection",
            Compare::Pair => "pair",
        }
    }

    /// Every comparison.
    pub const ALL: [Compare; 3] = [Compare::Name, Compare::Connection, Compare::Pair];

    /// The variants it measures.
    pub fn variants(self) -> [&'static str; 2] {
        match self {
            Compare::Name => ["by-name", "by-ip"],
            Compare::Connection => ["fresh", "reused"],
            Compare::Pair => ["first", "second"],
        }
    }
}

/// Where names are looked up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resolver {
    /// The system resolver (getaddrinfo: /etc/hosts, nsswitch, resolv.conf).
    System,
    /// A direct UDP query to this server.
    Server(std::net::SocketAddr),
}

/// The kind-specific part of a probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Detail {
    /// Nothing beyond the target.
    None,
    /// Redis/memcached key.
    Key(String),
    /// HTTP path.
    Path(String),
    /// A database login and query.
    Database(Database),
    /// The name a `dns` probe looks up.
    Query(String),
    /// A file or block device a `disk` probe reads; the read size in bytes.
    Disk {
        /// Path.
        path: std::path::PathBuf,
        /// Bytes per read (a multiple of 512).
        bytes: usize,
    },
    /// The program and its arguments.
    Command(Vec<String>),
    /// The most hops a path probe tries.
    Hops(u8),
}

/// What a database probe logs in with and asks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Database {
    /// User name.
    pub user: String,
    /// Password (empty: none). Never stored in the run's params.
    #[serde(skip)]
    pub password: String,
    /// Database name.
    pub database: String,
    /// The query; it must return a row.
    pub query: String,
}

/// One probe, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeSpec {
    /// Its name (the `probe` label); unique in a run.
    pub name: String,
    /// Its kind.
    pub kind: Kind,
    /// `host:port` (conversations, udp-echo), a host (icmp); empty otherwise.
    pub target: String,
    /// Where `by-name` and `dns` look names up.
    pub resolver: Resolver,
    /// What the kind needs beyond the target.
    pub detail: Detail,
    /// The comparisons asked for (empty: the one `default` variant).
    pub compare: Vec<Compare>,
    /// Per-measurement timeout.
    #[serde(serialize_with = "as_ns")]
    pub timeout: Duration,
    /// The user's own labels.
    pub labels: BTreeMap<String, String>,
}

impl ProbeSpec {
    /// The host of its target (`[::1]:80` -> `::1`, `db:5432` -> `db`), if it has a target.
    pub fn host(&self) -> Option<String> {
        let t = self.target.trim();
        if t.is_empty() {
            return None;
        }
        let host = match t.rsplit_once(':') {
            // `host:port`, `[v6]:port`; a bare IPv6 address has more than one ':'.
            Some((h, port)) if port.parse::<u16>().is_ok() && !h.ends_with(':') => h,
            _ => t,
        };
        Some(
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
        )
    }
}

fn as_ns<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl ProbeSpec {
    /// The variant names its samples carry, in order.
    pub fn variants(&self) -> Vec<&'static str> {
        if self.compare.is_empty() {
            return vec!["default"];
        }
        self.compare.iter().flat_map(|c| c.variants()).collect()
    }

    /// How many timed measurements one round of this probe makes at most (each bounded by
    /// the timeout), so a round's work is bounded.
    pub fn measurements_per_round(&self) -> u32 {
        if let Detail::Hops(n) = self.detail {
            return u32::from(n);
        }
        if self.compare.is_empty() {
            1
        } else {
            2 * self.compare.len() as u32
        }
    }
}
