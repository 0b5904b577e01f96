//! The agent's configuration file (`agent.toml`), checked with errors that name the line
//! and the key.
//!
//! In: the file's text. Out: an [`AgentConfig`] with every default filled in and every
//! value checked, or a [`ConfigError`] saying what to change.
//!
//! ```toml
//! listen = "127.0.0.1:9465"        # default; another address exposes the endpoints
//! token_file = "/etc/tailhunt/token" # optional: bearer token for /metrics and /findings
//! tls_cert = "/etc/tailhunt/cert.pem"  # optional, with tls_key: serve the endpoints over HTTPS
//! tls_key = "/etc/tailhunt/key.pem"
//! interval = "10s"                 # how often a snapshot is taken and queued
//! instance = "web-1"               # `instance` label of remote-written series (default: host name)
//! queue_dir = "/var/lib/tailhunt/queue"  # one sub-directory per endpoint
//!
//! [[remote_write]]
//! name = "prom"
//! url = "http://10.0.0.5:9090/api/v1/write"
//! histograms = "native"            # classic (default) | vmrange | native
//! queue_max_bytes = 67108864       # default 64 MiB
//! token_file = "/etc/tailhunt/prom-token"  # optional
//! ca_file = "/etc/tailhunt/ca.pem"  # https:// only: the CA of the receiver (default: system roots)
//!
//! # The prober, run continuously (optional): `[[probe]]` tables in the probe file's format
//! # (docs/probe.md), read by the prober's own parser, with its top-level `timeout`, `seed`
//! # and `labels`. The probe file's `interval` is `probe_interval` here.
//! probe_interval = "1s"            # one round of every probe per this (default 10s)
//! store = "/var/lib/tailhunt/agent.db"  # the rolling local store
//! window = "10m"                   # one stored run per window; detectors run on each
//! retention = "24h"                # windows older than this are deleted
//! retention_bytes = 1073741824     # and the oldest while the store holds more (default 1 GiB)
//! findings_clear_after = 3         # a finding stays active until this many windows in a row lack it
//!
//! [[probe]]
//! name = "cache"
//! kind = "tcp-connect"
//! target = "10.0.0.7:6379"
//!
//! # Mesh mode (optional): answer TCP/UDP echo, probe every peer's echo (tcp-echo and udp-echo,
//! # labelled from = instance, to = the peer).
//! [mesh]
//! listen = "0.0.0.0:7470"          # default
//! peers = ["web-2=10.0.0.2:7470", "web-3=10.0.0.3:7470"]  # name= sets the `to` label
//! timeout = "1s"                   # default
//!
//! # Run-queue tracing (eBPF, needs root and kernel BTF; on by default, switched off with the
//! # reason where either is missing). Each window is also stored as a runq run.
//! [runq]
//! enabled = true                   # default
//! interval = "5s"                  # default: how often the kernel maps are read
//! max_cgroups = 50                 # default: cgroup labels exported; the rest as "other"
//! store = true                     # a runq run per window beside the store, detectors on each
//!                                  # (default: true when `store` is given or there are probes)
//!
//! # The socket sampler (inet_diag over the agent's network namespace; no root needed).
//! [sockets]
//! enabled = true                   # default
//! interval = "10s"                 # default
//! max_ports = 20                   # default: port labels exported; the rest as "other"
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::mesh::{mesh_probes, MeshConfig, DEFAULT_MESH_LISTEN};
use crate::remote_write::{EndpointConfig, HistogramMode};
use crate::rolling::Retention;
use crate::runq::RunqSettings;
use crate::sockets::SocketSettings;

/// A configuration the exporter cannot run with.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The checked configuration.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Where the HTTP endpoints listen.
    pub listen: SocketAddr,
    /// Bearer token for `/metrics` and `/findings`, read from `token_file`.
    pub token: Option<String>,
    /// Serve the endpoints over HTTPS with this certificate and key (`tls_cert`, `tls_key`).
    pub tls: Option<crate::http::TlsIdentity>,
    /// Snapshot interval.
    pub interval: Duration,
    /// `instance` label of remote-written series.
    pub instance: String,
    /// Remote-write endpoints, their queues under `queue_dir/NAME`.
    pub remote_write: Vec<EndpointConfig>,
    /// The probes to run continuously (`None`: the file has no `[[probe]]`).
    pub probes: Option<tailhunt_probe::config::Config>,
    /// The rolling store of the probes' windows.
    pub retention: Retention,
    /// Mesh mode (its probes are in `probes` too).
    pub mesh: Option<MeshConfig>,
    /// Run-queue tracing (`[runq]`).
    pub runq: RunqSettings,
    /// The socket sampler (`[sockets]`).
    pub sockets: SocketSettings,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    listen: Option<String>,
    token_file: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    interval: Option<String>,
    instance: Option<String>,
    queue_dir: Option<PathBuf>,
    #[serde(default)]
    remote_write: Vec<EndpointDoc>,
    probe_interval: Option<String>,
    store: Option<PathBuf>,
    window: Option<String>,
    retention: Option<String>,
    retention_bytes: Option<u64>,
    findings_clear_after: Option<u32>,
    // The prober's keys: read by its own parser (`tailhunt_probe::config::parse_embedded`).
    mesh: Option<MeshDoc>,
    runq: Option<RunqDoc>,
    sockets: Option<SocketsDoc>,
    #[serde(rename = "timeout")]
    _timeout: Option<toml::Value>,
    #[serde(rename = "seed")]
    _seed: Option<toml::Value>,
    #[serde(rename = "labels")]
    _labels: Option<toml::Value>,
    #[serde(rename = "probe")]
    _probe: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointDoc {
    name: String,
    url: String,
    #[serde(default = "classic")]
    histograms: HistogramMode,
    queue_max_bytes: Option<u64>,
    token_file: Option<PathBuf>,
    timeout: Option<String>,
    ca_file: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MeshDoc {
    listen: Option<String>,
    peers: Vec<String>,
    timeout: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunqDoc {
    enabled: Option<bool>,
    interval: Option<String>,
    max_cgroups: Option<usize>,
    store: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SocketsDoc {
    enabled: Option<bool>,
    interval: Option<String>,
    max_ports: Option<usize>,
}

/// Checks `[runq]`. Windows are stored by default only when the agent keeps a store anyway
/// (the file names one, or has probes): an agent that only exports writes no file unasked.
fn runq(doc: Option<RunqDoc>, has_store: bool) -> Result<RunqSettings, ConfigError> {
    let mut out = RunqSettings {
        store_windows: has_store,
        ..RunqSettings::default()
    };
    let Some(d) = doc else { return Ok(out) };
    out.enabled = d.enabled.unwrap_or(out.enabled);
    out.store_windows = d.store.unwrap_or(out.store_windows);
    if let Some(t) = &d.interval {
        out.interval = duration("[runq] interval", t)?;
        if out.interval < Duration::from_millis(100) {
            return Err(ConfigError(format!(
                "[runq] interval = \"{t}\": give at least 100ms"
            )));
        }
    }
    if let Some(n) = d.max_cgroups {
        if !(1..=10_000).contains(&n) {
            return Err(ConfigError(format!(
                "[runq] max_cgroups = {n}: give 1 to 10000 (each label is a histogram of up to 8 KiB)"
            )));
        }
        out.max_cgroups = n;
    }
    Ok(out)
}

/// Checks `[sockets]`.
fn sockets(doc: Option<SocketsDoc>) -> Result<SocketSettings, ConfigError> {
    let mut out = SocketSettings::default();
    let Some(d) = doc else { return Ok(out) };
    out.enabled = d.enabled.unwrap_or(out.enabled);
    if let Some(t) = &d.interval {
        out.interval = duration("[sockets] interval", t)?;
        if out.interval < Duration::from_millis(100) {
            return Err(ConfigError(format!(
                "[sockets] interval = \"{t}\": give at least 100ms"
            )));
        }
    }
    if let Some(n) = d.max_ports {
        if !(1..=10_000).contains(&n) {
            return Err(ConfigError(format!(
                "[sockets] max_ports = {n}: give 1 to 10000"
            )));
        }
        out.max_ports = n;
    }
    Ok(out)
}

fn classic() -> HistogramMode {
    HistogramMode::Classic
}

/// Default queue directory when the file gives none.
pub const DEFAULT_QUEUE_DIR: &str = "/var/lib/tailhunt/queue";
/// Default rolling store when the file gives none.
pub const DEFAULT_STORE: &str = "/var/lib/tailhunt/agent.db";
/// Default window length.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(600);
/// Default age bound of the windows.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// Default size bound of the store.
pub const DEFAULT_RETENTION_BYTES: u64 = 1 << 30;

fn duration(key: &str, text: &str) -> Result<Duration, ConfigError> {
    let ns = tailhunt_model::parse_duration_ns(text, None).map_err(|e| {
        ConfigError(format!(
            "{key} = \"{text}\": {e} (write a duration such as \"10s\" or \"250ms\")"
        ))
    })?;
    if ns == 0 {
        return Err(ConfigError(format!(
            "{key} = \"{text}\": must be above zero"
        )));
    }
    Ok(Duration::from_nanos(ns as u64))
}

fn read_token(key: &str, path: &PathBuf) -> Result<String, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError(format!(
            "{key} = \"{}\": cannot read it: {e}",
            path.display()
        ))
    })?;
    let token = text.trim().to_string();
    if token.is_empty() {
        return Err(ConfigError(format!(
            "{key} = \"{}\": the file is empty; put the token in it or remove the key",
            path.display()
        )));
    }
    Ok(token)
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Reads and checks a configuration file's text.
pub fn parse(text: &str) -> Result<AgentConfig, ConfigError> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        ConfigError(format!(
            "{}{} (keys at the top: listen, token_file, tls_cert, tls_key, interval, instance, queue_dir, probe_interval, store, window, retention, retention_bytes, findings_clear_after, timeout, seed, labels, [[remote_write]], [[probe]], [mesh], [runq], [sockets]; in a [[remote_write]]: name, url, histograms, queue_max_bytes, token_file, timeout, ca_file; in [mesh]: listen, peers, timeout; in [runq]: enabled, interval, max_cgroups, store; in [sockets]: enabled, interval, max_ports)",
            line.map(|l| format!("line {l}: ")).unwrap_or_default(),
            e.message().trim_end().replace('\n', " ")
        ))
    })?;
    let listen_text = doc
        .listen
        .unwrap_or_else(|| crate::http::DEFAULT_LISTEN.to_string());
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        ConfigError(format!(
            "listen = \"{listen_text}\": not an IP:PORT address (e.g. \"127.0.0.1:9465\")"
        ))
    })?;
    let token = doc
        .token_file
        .as_ref()
        .map(|p| read_token("token_file", p))
        .transpose()?;
    let tls = match (&doc.tls_cert, &doc.tls_key) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some(
            crate::http::TlsIdentity::read(cert, key).map_err(|e| ConfigError(e.to_string()))?,
        ),
        (Some(_), None) => {
            return Err(ConfigError(
                "tls_cert is given without tls_key: give both (PEM files) or neither".into(),
            ))
        }
        (None, Some(_)) => {
            return Err(ConfigError(
                "tls_key is given without tls_cert: give both (PEM files) or neither".into(),
            ))
        }
    };
    let interval = match &doc.interval {
        Some(t) => duration("interval", t)?,
        None => Duration::from_secs(10),
    };
    let queue_dir = doc
        .queue_dir
        .unwrap_or_else(|| PathBuf::from(DEFAULT_QUEUE_DIR));
    let mut remote_write: Vec<EndpointConfig> = Vec::new();
    for (i, e) in doc.remote_write.into_iter().enumerate() {
        let at = format!("[[remote_write]] #{} ({})", i + 1, e.name);
        let ok_name = !e.name.is_empty()
            && e.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok_name {
            return Err(ConfigError(format!(
                "{at}: name must be letters, digits, '-' or '_' (it names the queue directory)"
            )));
        }
        if remote_write.iter().any(|r| r.name == e.name) {
            return Err(ConfigError(format!(
                "{at}: the name is used twice; give each endpoint its own"
            )));
        }
        if !e.url.starts_with("http://") && !e.url.starts_with("https://") {
            return Err(ConfigError(format!(
                "{at}: url = \"{}\" must start with http:// or https://",
                e.url
            )));
        }
        let mut c = EndpointConfig::new(&e.name, &e.url, e.histograms, queue_dir.join(&e.name));
        c.ca_file = e.ca_file;
        if let Some(max) = e.queue_max_bytes {
            if max < 4096 {
                return Err(ConfigError(format!(
                    "{at}: queue_max_bytes = {max} is too small: give at least 4096"
                )));
            }
            c.queue_max_bytes = max;
        }
        if let Some(t) = &e.timeout {
            c.timeout = duration("timeout", t)?;
        }
        c.bearer_token = e
            .token_file
            .as_ref()
            .map(|p| read_token("token_file", p))
            .transpose()?;
        remote_write.push(c);
    }
    let over = tailhunt_probe::config::Overrides {
        interval: Some(match &doc.probe_interval {
            Some(t) => duration("probe_interval", t)?,
            None => tailhunt_probe::config::DEFAULT_INTERVAL,
        }),
        ..Default::default()
    };
    let mut probes = tailhunt_probe::config::parse_embedded(text, &over)
        .map_err(|e| ConfigError(format!("[[probe]]: {e}")))?;
    let instance = doc.instance.unwrap_or_else(host_name);
    let sockets = sockets(doc.sockets)?;
    let mesh = match doc.mesh {
        Some(m) => Some(mesh(m, &instance, over.interval, &mut probes)?),
        None => None,
    };
    let runq = runq(doc.runq, doc.store.is_some() || probes.is_some())?;
    let retention = Retention {
        store: doc.store.unwrap_or_else(|| PathBuf::from(DEFAULT_STORE)),
        window: match &doc.window {
            Some(t) => duration("window", t)?,
            None => DEFAULT_WINDOW,
        },
        max_age: match &doc.retention {
            Some(t) => duration("retention", t)?,
            None => DEFAULT_RETENTION,
        },
        max_bytes: doc.retention_bytes.unwrap_or(DEFAULT_RETENTION_BYTES),
        findings_clear_after: doc
            .findings_clear_after
            .unwrap_or(crate::rolling::DEFAULT_CLEAR_AFTER),
    };
    if retention.findings_clear_after == 0 {
        return Err(ConfigError(
            "findings_clear_after = 0: give at least 1 (1: a finding is cleared by the first window without it)".into(),
        ));
    }
    if let Some(p) = &probes {
        if retention.window < p.interval * 2 {
            return Err(ConfigError(format!(
                "window = \"{}\": give at least two probe rounds (probe_interval is {})",
                doc.window.as_deref().unwrap_or("10m"),
                tailhunt_model::format_duration_ns(p.interval.as_nanos() as f64)
            )));
        }
        if retention.max_age < retention.window {
            return Err(ConfigError(
                "retention is shorter than one window: give retention >= window".into(),
            ));
        }
    }
    if retention.max_bytes < 1 << 20 {
        return Err(ConfigError(format!(
            "retention_bytes = {}: give at least 1048576 (1 MiB)",
            retention.max_bytes
        )));
    }
    Ok(AgentConfig {
        listen,
        token,
        tls,
        interval,
        instance,
        remote_write,
        probes,
        retention,
        mesh,
        runq,
        sockets,
    })
}

/// Checks `[mesh]` and adds its probes to `probes` (the probe interval is theirs too).
fn mesh(
    m: MeshDoc,
    instance: &str,
    interval: Option<Duration>,
    probes: &mut Option<tailhunt_probe::config::Config>,
) -> Result<MeshConfig, ConfigError> {
    let text = m.listen.unwrap_or_else(|| DEFAULT_MESH_LISTEN.to_string());
    let listen: SocketAddr = text.parse().map_err(|_| {
        ConfigError(format!(
            "[mesh] listen = \"{text}\": not an IP:PORT address (e.g. \"{DEFAULT_MESH_LISTEN}\")"
        ))
    })?;
    if m.peers.is_empty() {
        return Err(ConfigError(
            "[mesh] peers is empty: list the other agents' echo addresses, e.g. peers = [\"10.0.0.2:7470\"]".into(),
        ));
    }
    let cfg = MeshConfig {
        listen,
        peers: m.peers,
        timeout: match &m.timeout {
            Some(t) => duration("[mesh] timeout", t)?,
            None => tailhunt_probe::config::DEFAULT_TIMEOUT,
        },
    };
    let interval = interval.unwrap_or(tailhunt_probe::config::DEFAULT_INTERVAL);
    if cfg.timeout * 4 > interval {
        return Err(ConfigError(format!(
            "[mesh] timeout: {} is over a quarter of probe_interval ({}); shorten it or lengthen probe_interval",
            tailhunt_model::format_duration_ns(cfg.timeout.as_nanos() as f64),
            tailhunt_model::format_duration_ns(interval.as_nanos() as f64)
        )));
    }
    let specs = mesh_probes(&cfg, instance, interval).map_err(|e| ConfigError(e.to_string()))?;
    match probes {
        Some(p) => {
            if let Some(s) = specs
                .iter()
                .find(|s| p.probes.iter().any(|q| q.name == s.name))
            {
                return Err(ConfigError(format!(
                    "[[probe]] '{}': the name is the mesh's; rename the probe",
                    s.name
                )));
            }
            p.probes.extend(specs);
        }
        None => {
            *probes = Some(tailhunt_probe::config::Config {
                interval,
                probes: specs,
                seed: 1,
            })
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_is_read_with_its_defaults() {
        let c = parse(
            "interval = \"2s\"\nqueue_dir = \"/tmp/q\"\n[[remote_write]]\nname = \"vm\"\nurl = \"http://127.0.0.1:8428/api/v1/write\"\nhistograms = \"vmrange\"\n",
        )
        .unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:9465");
        assert_eq!(c.interval, Duration::from_secs(2));
        assert_eq!(c.remote_write[0].mode, HistogramMode::Vmrange);
        assert_eq!(c.remote_write[0].queue_dir, PathBuf::from("/tmp/q/vm"));
        assert!(c.token.is_none());
        assert!(c.probes.is_none());
    }

    #[test]
    fn probes_are_read_by_the_probers_parser() {
        let c = parse(
            "probe_interval = \"100ms\"\nwindow = \"1m\"\nstore = \"/tmp/a.db\"\ntimeout = \"20ms\"\n[[probe]]\nname = \"web\"\nkind = \"tcp-connect\"\ntarget = \"127.0.0.1:1\"\n",
        )
        .unwrap();
        let p = c.probes.unwrap();
        assert_eq!(p.interval, Duration::from_millis(100));
        assert_eq!(p.probes[0].name, "web");
        assert_eq!(p.probes[0].timeout, Duration::from_millis(20));
        assert_eq!(c.retention.window, Duration::from_secs(60));
        assert_eq!(c.retention.store, PathBuf::from("/tmp/a.db"));
        // A wrong key inside a [[probe]] names its line, from the prober's own checks.
        let e =
            parse("[[probe]]\nname = \"web\"\nkind = \"tcp-connect\"\ntargt = \"127.0.0.1:1\"\n")
                .unwrap_err()
                .to_string();
        assert!(e.contains("line 4") && e.contains("targt"), "{e}");
        let e = parse("[[probe]]\nkind = \"tcp-connect\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("target") && e.contains("missing"), "{e}");
        let e = parse("probe_interval = \"1m\"\nwindow = \"1m\"\n[[probe]]\nkind = \"tcp-connect\"\ntarget = \"127.0.0.1:1\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("window") && e.contains("two probe rounds"),
            "{e}"
        );
    }

    #[test]
    fn runq_and_sockets_sections_are_read_and_checked() {
        let c = parse("").unwrap();
        assert!(c.runq.enabled && c.sockets.enabled);
        assert!(
            !c.runq.store_windows,
            "no store named, no probes: export only"
        );
        let c = parse("store = \"/tmp/a.db\"\n").unwrap();
        assert_eq!(c.runq, RunqSettings::default());
        let c = parse("[runq]\nenabled = false\ninterval = \"2s\"\nmax_cgroups = 3\nstore = false\n[sockets]\ninterval = \"1s\"\nmax_ports = 4\n")
            .unwrap();
        assert!(!c.runq.enabled && !c.runq.store_windows);
        assert_eq!(c.runq.interval, Duration::from_secs(2));
        assert_eq!((c.runq.max_cgroups, c.sockets.max_ports), (3, 4));
        let e = parse("[runq]\nmax_cgroup = 3\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("max_cgroup"), "{e}");
        let e = parse("[runq]\nmax_cgroups = 0\n").unwrap_err().to_string();
        assert!(e.contains("max_cgroups = 0"), "{e}");
        let e = parse("[sockets]\ninterval = \"1ms\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[sockets] interval") && e.contains("100ms"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_line_and_the_key() {
        let e = parse("interval = \"2s\"\n\n[[remote_write]]\nname = \"a\"\nurl = \"http://x:1/w\"\nhistogram = \"native\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 6") && e.contains("histogram"), "{e}");
        let e = parse(
            "[[remote_write]]\nname = \"a\"\nurl = \"http://x:1/w\"\nhistograms = \"sparse\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 4") && e.contains("sparse"), "{e}");
        let e = parse("interval = \"soon\"\n").unwrap_err().to_string();
        assert!(e.contains("interval") && e.contains("soon"), "{e}");
        let e = parse("listen = \"localhost\"\n").unwrap_err().to_string();
        assert!(e.contains("listen") && e.contains("IP:PORT"), "{e}");
        let two = "[[remote_write]]\nname = \"a\"\nurl = \"http://x:1/w\"\n";
        let e = parse(&two.repeat(2)).unwrap_err().to_string();
        assert!(e.contains("used twice"), "{e}");
        let e = parse("[[remote_write]]\nname = \"a\"\nurl = \"ftp://x/w\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("http://") && e.contains("https://"), "{e}");
        let c = parse(
            "[[remote_write]]\nname = \"a\"\nurl = \"https://x/w\"\nca_file = \"/etc/ca.pem\"\n",
        )
        .unwrap();
        assert_eq!(
            c.remote_write[0].ca_file,
            Some(PathBuf::from("/etc/ca.pem"))
        );
        let e = parse("tls_cert = \"/nonexistent/cert.pem\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("without tls_key"), "{e}");
        let e = parse("tls_cert = \"/nonexistent/cert.pem\"\ntls_key = \"/nonexistent/key.pem\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tls_cert")
                && e.contains("/nonexistent/cert.pem")
                && e.contains("cannot read"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = parse(&format!(
            "tls_cert = \"{}\"\ntls_key = \"{}\"\n",
            cert.display(),
            cert.display()
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("tls_key") && e.contains("no PEM private key"),
            "{e}"
        );
        let e = parse("token_file = \"/nonexistent/token\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("token_file") && e.contains("/nonexistent/token"),
            "{e}"
        );
    }
}
