//! The exporter's configuration file (`agent.toml`), checked with errors that name the line
//! and the key.
//!
//! In: the file's text. Out: an [`AgentConfig`] with every default filled in and every
//! value checked, or a [`ConfigError`] saying what to change.
//!
//! ```toml
//! listen = "127.0.0.1:9465"        # default; another address exposes the endpoints
//! token_file = "/etc/tailhunt/token" # optional: bearer token for /metrics and /findings
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
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::remote_write::{EndpointConfig, HistogramMode};

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
    /// Snapshot interval.
    pub interval: Duration,
    /// `instance` label of remote-written series.
    pub instance: String,
    /// Remote-write endpoints, their queues under `queue_dir/NAME`.
    pub remote_write: Vec<EndpointConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    listen: Option<String>,
    token_file: Option<PathBuf>,
    interval: Option<String>,
    instance: Option<String>,
    queue_dir: Option<PathBuf>,
    #[serde(default)]
    remote_write: Vec<EndpointDoc>,
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
}

fn classic() -> HistogramMode {
    HistogramMode::Classic
}

/// Default queue directory when the file gives none.
pub const DEFAULT_QUEUE_DIR: &str = "/var/lib/tailhunt/queue";

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
            "{}{} (keys at the top: listen, token_file, interval, instance, queue_dir, [[remote_write]]; in a [[remote_write]]: name, url, histograms, queue_max_bytes, token_file, timeout)",
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
        if !e.url.starts_with("http://") {
            return Err(ConfigError(format!(
                "{at}: url = \"{}\" must start with http:// (TLS is not supported yet)",
                e.url
            )));
        }
        let mut c = EndpointConfig::new(&e.name, &e.url, e.histograms, queue_dir.join(&e.name));
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
    Ok(AgentConfig {
        listen,
        token,
        interval,
        instance: doc.instance.unwrap_or_else(host_name),
        remote_write,
    })
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
        let e = parse("[[remote_write]]\nname = \"a\"\nurl = \"https://x/w\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("http://"), "{e}");
        let e = parse("token_file = \"/nonexistent/token\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("token_file") && e.contains("/nonexistent/token"),
            "{e}"
        );
    }
}
