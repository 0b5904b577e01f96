//! Reading what to probe: a TOML file, or quick-form URLs on the command line.
//!
//! In: the file's text ([`parse_file`]) or the URLs ([`from_urls`]) and the defaults the
//! command line gives. Out: a [`Config`]: the cadence, the default timeout and one checked
//! [`ProbeSpec`] per probe. Every mistake is refused here, before anything runs, with the key
//! (or URL) named and what to write instead.
//!
//! ```toml
//! interval = "10s"        # one round of every probe per interval
//! timeout = "1s"          # default per-measurement timeout
//!
//! [[probe]]
//! name = "cache"
//! kind = "redis"
//! target = "cache.internal:6379"
//! key = "user:1"
//! compare = ["name", "pair"]   # by-name vs by-ip, first vs second request
//! labels = { zone = "a" }
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use crate::spec::{Compare, Database, Detail, Kind, ProbeSpec, Resolver};
use crate::ProbeError;

/// Everything a run needs to know before it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The round cadence.
    pub interval: Duration,
    /// The probes, in the order written.
    pub probes: Vec<ProbeSpec>,
    /// Seed of the order and jitter.
    pub seed: u64,
}

/// Defaults from the command line; the file's own values win over them except where the
/// command line's flag was given explicitly (`Some`).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--interval`.
    pub interval: Option<Duration>,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// `--seed`.
    pub seed: Option<u64>,
}

/// The default cadence: the DESIGN's long-running benchmark service probed every 10 s.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// The default timeout of a measurement.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// The most hops a path probe tries unless told (the longest routes seen inside one
/// provider's network are around 16).
pub const DEFAULT_HOPS: u8 = 16;
/// The fraction of the interval over which a round's slots are spread (the rest absorbs
/// slow probes before the next round).
pub const SPREAD: f64 = 0.5;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    interval: Option<String>,
    timeout: Option<String>,
    seed: Option<u64>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    probe: Vec<Entry>,
}

/// One `[[probe]]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: Option<String>,
    kind: Option<String>,
    target: Option<String>,
    key: Option<String>,
    path: Option<String>,
    user: Option<String>,
    password: Option<String>,
    database: Option<String>,
    query: Option<String>,
    lookup: Option<String>,
    resolver: Option<String>,
    command: Option<Vec<String>>,
    bytes: Option<usize>,
    hops: Option<u8>,
    compare: Option<Vec<String>>,
    timeout: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

fn duration(key: &str, text: &str) -> Result<Duration, ProbeError> {
    let ns = tailhunt_model::parse_duration_ns(text, None).map_err(|e| {
        ProbeError::Config(format!(
            "{key} = \"{text}\": {e} (write a duration such as \"10s\" or \"250ms\")"
        ))
    })?;
    Ok(Duration::from_nanos(ns as u64))
}

/// The probe part of a larger file (the agent's `agent.toml`): the same keys as a probe file,
/// the file's other top-level keys left to its own reader. `[[probe]]` tables are checked as
/// strictly as in [`parse_file`].
#[derive(Debug, Deserialize)]
struct EmbeddedDoc {
    interval: Option<String>,
    timeout: Option<String>,
    seed: Option<u64>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    probe: Vec<Entry>,
}

fn toml_error(text: &str, e: toml::de::Error) -> ProbeError {
    // One line: where, and toml's own message (its multi-line snippet is left out).
    let line = e
        .span()
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    ProbeError::Config(format!(
        "{}{} (keys at the top: interval, timeout, seed, labels, [[probe]]; in a [[probe]]: name, kind, target, key, path, user, password, database, query, lookup, resolver, command, bytes, hops, compare, timeout, labels)",
        line.map(|l| format!("line {l}: ")).unwrap_or_default(),
        e.message().trim_end().replace('\n', " ")
    ))
}

/// Reads a configuration file's text.
pub fn parse_file(text: &str, over: &Overrides) -> Result<Config, ProbeError> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| toml_error(text, e))?;
    from_doc(doc, over)
}

/// Reads the probes of a file that holds other keys too (the agent's configuration): the
/// top-level `timeout`, `seed`, `labels` and `[[probe]]` tables as in [`parse_file`] (line
/// numbers of the whole file), every other top-level key ignored. `None` when the file has
/// no `[[probe]]` table.
pub fn parse_embedded(text: &str, over: &Overrides) -> Result<Option<Config>, ProbeError> {
    let e: EmbeddedDoc = toml::from_str(text).map_err(|e| toml_error(text, e))?;
    if e.probe.is_empty() {
        return Ok(None);
    }
    let doc = FileDoc {
        interval: e.interval,
        timeout: e.timeout,
        seed: e.seed,
        labels: e.labels,
        probe: e.probe,
    };
    from_doc(doc, over).map(Some)
}

fn from_doc(doc: FileDoc, over: &Overrides) -> Result<Config, ProbeError> {
    let interval = match (over.interval, &doc.interval) {
        (Some(i), _) => i,
        (None, Some(t)) => duration("interval", t)?,
        (None, None) => DEFAULT_INTERVAL,
    };
    let timeout = match (over.timeout, &doc.timeout) {
        (Some(t), _) => t,
        (None, Some(t)) => duration("timeout", t)?,
        (None, None) => DEFAULT_TIMEOUT,
    };
    if doc.probe.is_empty() {
        return Err(ProbeError::Config(
            "the file has no probe: add a [[probe]] table with kind and target (docs/probe.md has an example)".into(),
        ));
    }
    let defaulted = over.timeout.is_none() && doc.timeout.is_none();
    let mut probes = Vec::new();
    for (i, e) in doc.probe.into_iter().enumerate() {
        let own = e.timeout.is_some();
        let mut spec = entry(i, e, timeout)?;
        if defaulted && !own {
            fit_timeout(&mut spec, interval);
        }
        for (k, v) in &doc.labels {
            spec.labels.entry(k.clone()).or_insert_with(|| v.clone());
        }
        probes.push(spec);
    }
    finish(interval, probes, over.seed.or(doc.seed).unwrap_or(1))
}

fn need(i: usize, kind: Kind, key: &'static str, v: Option<String>) -> Result<String, ProbeError> {
    v.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
        ProbeError::Config(format!(
            "probe #{} (kind {}): `{key}` is missing ({})",
            i + 1,
            kind.name(),
            example(kind, key)
        ))
    })
}

fn example(kind: Kind, key: &str) -> &'static str {
    match (kind, key) {
        (Kind::Icmp | Kind::Path, _) => "write e.g. target = \"10.0.0.5\"",
        (Kind::Dns, _) => "write e.g. lookup = \"db.internal\"",
        (Kind::Disk, _) => "write e.g. path = \"/dev/nbd0\"",
        (Kind::Command, _) => "write e.g. command = [\"sh\", \"-c\", \"ls /mnt\"]",
        _ => "write e.g. target = \"127.0.0.1:6379\"",
    }
}

/// Keys each kind takes beyond name, kind, timeout, labels, compare.
fn allowed(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Icmp | Kind::TcpConnect | Kind::TcpEcho | Kind::UdpEcho => &["target", "resolver"],
        Kind::Http => &["target", "resolver", "path"],
        Kind::Redis | Kind::Memcached => &["target", "resolver", "key"],
        Kind::Postgres | Kind::Mysql => &[
            "target", "resolver", "user", "password", "database", "query",
        ],
        Kind::Dns => &["lookup", "resolver"],
        Kind::Disk => &["path", "bytes"],
        Kind::Command => &["command"],
        Kind::Path => &["target", "resolver", "hops"],
    }
}

fn given(e: &Entry) -> Vec<&'static str> {
    let mut v = Vec::new();
    let mut add = |k: &'static str, present: bool| {
        if present {
            v.push(k)
        }
    };
    add("target", e.target.is_some());
    add("key", e.key.is_some());
    add("path", e.path.is_some());
    add("user", e.user.is_some());
    add("password", e.password.is_some());
    add("database", e.database.is_some());
    add("query", e.query.is_some());
    add("lookup", e.lookup.is_some());
    add("resolver", e.resolver.is_some());
    add("command", e.command.is_some());
    add("bytes", e.bytes.is_some());
    add("hops", e.hops.is_some());
    v
}

/// `system`, or a DNS server's `IP:port` (port 53 when left out).
pub fn parse_resolver(text: &str) -> Result<Resolver, String> {
    let t = text.trim();
    if t == "system" {
        return Ok(Resolver::System);
    }
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(Resolver::Server(a));
    }
    if let Ok(ip) = t.parse::<std::net::IpAddr>() {
        return Ok(Resolver::Server(SocketAddr::new(ip, 53)));
    }
    Err(format!(
        "resolver = \"{t}\" is neither \"system\" nor a server's IP:port (write e.g. resolver = \"127.0.0.1:53\")"
    ))
}

fn entry(i: usize, mut e: Entry, default_timeout: Duration) -> Result<ProbeSpec, ProbeError> {
    let kinds = || {
        Kind::ALL
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let kind_text = e.kind.clone().ok_or_else(|| {
        ProbeError::Config(format!(
            "probe #{}: `kind` is missing (one of: {})",
            i + 1,
            kinds()
        ))
    })?;
    let kind = Kind::from_name(&kind_text).ok_or_else(|| {
        ProbeError::Config(format!(
            "probe #{}: kind = \"{kind_text}\" is not a probe kind (one of: {})",
            i + 1,
            kinds()
        ))
    })?;
    if let Some(k) = given(&e).into_iter().find(|k| !allowed(kind).contains(k)) {
        return Err(ProbeError::Config(format!(
            "probe #{} (kind {}): `{k}` does not apply to this kind (its keys: {})",
            i + 1,
            kind.name(),
            allowed(kind).join(", ")
        )));
    }
    let at = |key: &str| format!("probe #{} (kind {}): {key}", i + 1, kind.name());
    let timeout = match &e.timeout {
        Some(t) => duration(&at("timeout"), t)?,
        None => default_timeout,
    };
    let resolver = match &e.resolver {
        Some(r) => parse_resolver(r).map_err(|m| ProbeError::Config(format!("{}: {m}", at(""))))?,
        None => Resolver::System,
    };
    let compare = compare_list(kind, e.compare.as_deref().unwrap_or_default())
        .map_err(|m| ProbeError::Config(format!("{}{m}", at(""))))?;
    let labels = std::mem::take(&mut e.labels);
    let (target, detail) = detail(i, kind, &mut e)?;
    let name = e.name.unwrap_or_else(|| match &detail {
        Detail::Query(n) => format!("dns-{n}"),
        Detail::Disk { path, .. } => format!("disk-{}", path.display()),
        Detail::Command(argv) => argv.join(" "),
        _ => format!("{}-{target}", kind.name()),
    });
    Ok(ProbeSpec {
        name,
        kind,
        target,
        resolver,
        detail,
        compare,
        timeout,
        labels,
    })
}

/// The target and the kind-specific part of entry `i`.
fn detail(i: usize, kind: Kind, e: &mut Entry) -> Result<(String, Detail), ProbeError> {
    let need = |key, v: Option<String>| need(i, kind, key, v);
    Ok(match kind {
        Kind::Dns => (
            String::new(),
            Detail::Query(need("lookup", e.lookup.take())?),
        ),
        Kind::Disk => {
            let bytes = e.bytes.unwrap_or(4096);
            if bytes == 0 || !bytes.is_multiple_of(512) || bytes > 1 << 24 {
                return Err(ProbeError::Config(format!(
                    "probe #{} (kind disk): bytes = {bytes} is not a multiple of 512 up to 16 MiB (O_DIRECT reads whole blocks; write e.g. bytes = 4096)",
                    i + 1
                )));
            }
            let path = need("path", e.path.take())?.into();
            (String::new(), Detail::Disk { path, bytes })
        }
        Kind::Command => {
            let argv = e.command.take().unwrap_or_default();
            if argv.first().is_none_or(|p| p.trim().is_empty()) {
                need("command", None)?;
            }
            (String::new(), Detail::Command(argv))
        }
        _ => {
            let target = need("target", e.target.take())?;
            let detail = match kind {
                Kind::Path => {
                    let hops = e.hops.unwrap_or(DEFAULT_HOPS);
                    if !(1..=64).contains(&hops) {
                        return Err(ProbeError::Config(format!(
                            "probe #{} (kind path): hops = {hops} is not 1 to 64 (write e.g. hops = 16)",
                            i + 1
                        )));
                    }
                    Detail::Hops(hops)
                }
                Kind::Http => Detail::Path(e.path.take().unwrap_or_else(|| "/".into())),
                Kind::Redis | Kind::Memcached => {
                    Detail::Key(e.key.take().unwrap_or_else(|| "tailhunt-probe".into()))
                }
                Kind::Postgres | Kind::Mysql => Detail::Database(Database {
                    user: e.user.take().unwrap_or_else(|| default_user(kind).into()),
                    password: e.password.take().unwrap_or_default(),
                    database: e.database.take().unwrap_or_default(),
                    query: e.query.take().unwrap_or_else(|| "SELECT 1".into()),
                }),
                _ => Detail::None,
            };
            (target, detail)
        }
    })
}

fn default_user(kind: Kind) -> &'static str {
    if kind == Kind::Postgres {
        "postgres"
    } else {
        "root"
    }
}

fn compare_list(kind: Kind, names: &[String]) -> Result<Vec<Compare>, String> {
    let mut out = Vec::new();
    for n in names {
        let c = Compare::ALL
            .into_iter()
            .find(|c| c.name() == n)
            .ok_or_else(|| {
                format!("compare: \"{n}\" is not a comparison (name, connection or pair)")
            })?;
        if !kind.comparisons().contains(&c) {
            let can: Vec<_> = kind.comparisons().iter().map(|c| c.name()).collect();
            return Err(format!(
                "compare: \"{n}\" does not apply to this kind ({})",
                if can.is_empty() {
                    "it has no variants".to_string()
                } else {
                    format!("it can compare: {}", can.join(", "))
                }
            ));
        }
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

/// Labels the prober sets itself.
const RESERVED: [&str; 4] = ["probe", "kind", "variant", "hop"];

/// Checks what holds across probes: unique names, no reserved label, each probe's round
/// within the interval.
fn finish(interval: Duration, probes: Vec<ProbeSpec>, seed: u64) -> Result<Config, ProbeError> {
    if interval < Duration::from_millis(1) {
        return Err(ProbeError::Config(format!(
            "interval {}: give 1ms or more (write e.g. interval = \"10s\")",
            tailhunt_model::format_duration_ns(interval.as_nanos() as f64)
        )));
    }
    let show = |d: Duration| tailhunt_model::format_duration_ns(d.as_nanos() as f64);
    for (i, p) in probes.iter().enumerate() {
        if probes[..i].iter().any(|q| q.name == p.name) {
            return Err(ProbeError::Config(format!(
                "two probes are named '{}': give each its own name = \"...\"",
                p.name
            )));
        }
        if let Some(l) = p.labels.keys().find(|l| RESERVED.contains(&l.as_str())) {
            return Err(ProbeError::Config(format!(
                "probe '{}': label `{l}` is set by the prober (rename it)",
                p.name
            )));
        }
        if p.timeout.is_zero() {
            return Err(ProbeError::Config(format!(
                "probe '{}': timeout must be above 0",
                p.name
            )));
        }
        // Every measurement of a round may last the whole timeout; the probe must still be
        // done within half the interval, or it would fall ever further behind its schedule.
        let worst = p.timeout * p.measurements_per_round();
        if worst * 2 > interval {
            return Err(ProbeError::Config(format!(
                "probe '{}': {} measurement(s) of up to {} each do not fit in half of the {} interval: raise the interval to at least {} or lower its timeout",
                p.name,
                p.measurements_per_round(),
                show(p.timeout),
                show(interval),
                show(worst * 2)
            )));
        }
    }
    Ok(Config {
        interval,
        probes,
        seed,
    })
}

/// A probe given no timeout anywhere gets the default, shortened so that its measurements fit
/// in half the interval: `--interval 200ms` alone must not be refused for a timeout nobody set.
fn fit_timeout(spec: &mut ProbeSpec, interval: Duration) {
    let per_round = spec.measurements_per_round().max(1);
    let fitted = interval / (2 * per_round);
    if !fitted.is_zero() {
        spec.timeout = DEFAULT_TIMEOUT.min(fitted);
    }
}

/// Builds probes from quick-form URLs: `tcp://H:P` (a TCP connect), `tcp-echo://H:P`,
/// `udp://H:P` (udp-echo), `http://H:P/PATH`, `redis://H:P/KEY`, `memcached://H:P/KEY`,
/// `postgres://USER[:PASS]@H:P/DB`, `mysql://USER[:PASS]@H:P/DB`, `dns://SERVER:PORT/NAME`
/// (`dns:///NAME`: the system resolver), `icmp://HOST`, `path://HOST`, `disk:///PATH`, each probe named by
/// its URL (without a password).
pub fn from_urls(urls: &[String], over: &Overrides) -> Result<Config, ProbeError> {
    let timeout = over.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let mut probes = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let mut e = url_entry(url)?;
        e.timeout = None;
        let mut spec =
            entry(i, e, timeout).map_err(|err| ProbeError::Config(format!("{url}: {err}")))?;
        if over.timeout.is_none() {
            fit_timeout(&mut spec, over.interval.unwrap_or(DEFAULT_INTERVAL));
        }
        spec.name = url_name(url);
        probes.push(spec);
    }
    if probes.is_empty() {
        return Err(ProbeError::Config(
            "nothing to probe: give --config FILE or URLs such as tcp://127.0.0.1:6379".into(),
        ));
    }
    finish(
        over.interval.unwrap_or(DEFAULT_INTERVAL),
        probes,
        over.seed.unwrap_or(1),
    )
}

/// The URL without its password.
fn url_name(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, rest)), Some((_, host))) => {
            let user = rest.split('@').next().unwrap_or("");
            let user = user.split(':').next().unwrap_or("");
            format!("{scheme}://{user}@{host}")
        }
        _ => url.to_string(),
    }
}

fn url_entry(url: &str) -> Result<Entry, ProbeError> {
    let bad = |why: &str| {
        ProbeError::Config(format!(
            "'{url}': {why} (write e.g. tcp://127.0.0.1:6379, redis://127.0.0.1:6379/key, dns://127.0.0.1:53/example.com; docs/probe.md lists every form)"
        ))
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("not scheme://..."))?;
    let (authority, path) = match rest.split_once('/') {
        Some((a, p)) => (a, Some(p.to_string())),
        None => (rest, None),
    };
    let mut e = Entry::default();
    let kind = match scheme {
        "tcp" => Kind::TcpConnect,
        "udp" => Kind::UdpEcho,
        "http" => Kind::Http,
        "dns" => Kind::Dns,
        "disk" => Kind::Disk,
        other => Kind::from_name(other).ok_or_else(|| bad("unknown scheme"))?,
    };
    e.kind = Some(kind.name().to_string());
    match kind {
        Kind::Dns => {
            e.lookup = path;
            if !authority.is_empty() {
                e.resolver = Some(authority.to_string());
            }
        }
        Kind::Disk => e.path = Some(format!("/{}", path.unwrap_or_default())),
        Kind::Http => {
            e.target = Some(authority.to_string());
            e.path = Some(format!("/{}", path.unwrap_or_default()));
        }
        Kind::Redis | Kind::Memcached => {
            e.target = Some(authority.to_string());
            e.key = path.filter(|p| !p.is_empty());
        }
        Kind::Postgres | Kind::Mysql => {
            let (login, host) = authority.rsplit_once('@').unwrap_or(("", authority));
            let (user, pass) = login.split_once(':').unwrap_or((login, ""));
            e.target = Some(host.to_string());
            e.user = (!user.is_empty()).then(|| user.to_string());
            e.password = (!pass.is_empty()).then(|| pass.to_string());
            e.database = path.filter(|p| !p.is_empty());
        }
        Kind::Command => return Err(bad("a command cannot be a URL: use a configuration file")),
        _ => {
            if path.as_deref().is_some_and(|p| !p.is_empty()) {
                return Err(bad("this kind takes no path"));
            }
            e.target = Some(authority.to_string());
        }
    }
    Ok(e)
}

#[cfg(test)]
mod tests;
