//! Mesh mode: every agent answers TCP and UDP echo on one port and probes every peer; the
//! per-pair latency matrix is read back from the time-series database.
//!
//! In: the `[mesh]` table (echo `listen` address, `peers` as `host:port`, a `timeout`) and the
//! agent's `instance`. Out: the echo servers ([`EchoServers`]), one tcp-echo and one udp-echo
//! [`ProbeSpec`] per peer labelled `from` (this agent's instance) and `to` (the peer as written),
//! which the prober runs with the other probes, so the pairs are exported as
//! `tailhunt_probe_latency_seconds{from,to,kind,...}`. [`query_matrix`] asks a Prometheus-API
//! server for p50 and p99 per (from, to) pair and [`render_matrix`] lays them out, the worst
//! pairs named.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use tailhunt_load::serve::{ServeConfig, ServeProto, Server};
use tailhunt_probe::config::{self, Overrides};
use tailhunt_probe::spec::ProbeSpec;

/// The checked `[mesh]` table.
#[derive(Debug, Clone)]
pub struct MeshConfig {
    /// Where this agent answers echo (TCP and UDP on the same port).
    pub listen: SocketAddr,
    /// The peers' echo addresses, `host:port` or `name=host:port` (the name is the `to`
    /// label; give the peer's `instance` so the matrix's rows and columns match).
    pub peers: Vec<String>,
    /// Per-measurement timeout of the mesh probes.
    pub timeout: Duration,
}

/// Default echo port of the mesh.
pub const DEFAULT_MESH_LISTEN: &str = "0.0.0.0:7470";

/// What mesh mode could not do.
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    /// A peer is not a probe target.
    #[error("[mesh] peers: {0}")]
    Peer(String),
    /// An echo server did not start.
    #[error("[mesh] listen = \"{addr}\": cannot answer echo there: {reason} (is the port taken? pick another)")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The metrics server did not answer as expected.
    #[error("{0}")]
    Query(String),
}

/// The mesh probes of an agent named `from`: tcp-echo and udp-echo to every peer.
pub fn mesh_probes(
    mesh: &MeshConfig,
    from: &str,
    interval: Duration,
) -> Result<Vec<ProbeSpec>, MeshError> {
    let mut out = Vec::new();
    for written in &mesh.peers {
        // `name=host:port` names the peer in the `to` label (its agent's instance, so rows and
        // columns of the matrix match); a bare `host:port` is its own name.
        let (to, peer) = match written.split_once('=') {
            Some((name, addr)) if !name.trim().is_empty() => (name.trim(), addr.trim()),
            _ => (written.as_str(), written.as_str()),
        };
        let has_port = peer
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if !has_port {
            return Err(MeshError::Peer(format!(
                "'{peer}' is not host:port (write e.g. \"10.0.0.2:7470\", the peer's [mesh] listen port)"
            )));
        }
        if out
            .iter()
            .any(|s: &ProbeSpec| s.labels.get("to").map(String::as_str) == Some(to))
        {
            return Err(MeshError::Peer(format!("'{to}' is listed twice")));
        }
        for (scheme, short) in [("tcp-echo", "tcp"), ("udp", "udp")] {
            let over = Overrides {
                interval: Some(interval),
                timeout: Some(mesh.timeout),
                seed: None,
            };
            let cfg = config::from_urls(&[format!("{scheme}://{peer}")], &over)
                .map_err(|e| MeshError::Peer(format!("'{peer}': {e}")))?;
            for mut spec in cfg.probes {
                spec.name = format!("mesh-{short}-{to}");
                spec.labels.insert("from".into(), from.to_string());
                spec.labels.insert("to".into(), to.to_string());
                out.push(spec);
            }
        }
    }
    Ok(out)
}

/// The mesh's echo servers; they stop when dropped.
pub struct EchoServers {
    tcp: Option<Server>,
    udp: Option<Server>,
}

impl EchoServers {
    /// Starts TCP and UDP echo on `listen` (port 0: a free port, the same for both when it
    /// can be had).
    pub fn start(listen: SocketAddr) -> Result<EchoServers, MeshError> {
        let err = |e: tailhunt_load::serve::ServeError| MeshError::Listen {
            addr: listen.to_string(),
            reason: e.to_string(),
        };
        let tcp = Server::start(ServeConfig::new(ServeProto::Tcp, listen)).map_err(err)?;
        let udp_addr = SocketAddr::new(listen.ip(), tcp.local_addr().port());
        let udp = Server::start(ServeConfig::new(ServeProto::Udp, udp_addr)).map_err(err)?;
        Ok(EchoServers {
            tcp: Some(tcp),
            udp: Some(udp),
        })
    }

    /// The address both answer on.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().map(Server::local_addr)
    }
}

impl Drop for EchoServers {
    fn drop(&mut self) {
        if let Some(s) = self.tcp.take() {
            s.stop();
        }
        if let Some(s) = self.udp.take() {
            s.stop();
        }
    }
}

/// A (from, to) pair of the mesh.
pub type Pair = (String, String);

/// p50 and p99 (seconds) per (from, to) pair.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matrix {
    /// (from, to) -> (p50, p99); NaN where the server had no answer for that quantile.
    pub cells: BTreeMap<Pair, (f64, f64)>,
}

fn quantile_by_pair(
    base: &str,
    q: f64,
    kind: &str,
    range: &str,
) -> Result<Vec<(Pair, f64)>, MeshError> {
    let promql = format!(
        "histogram_quantile({q}, sum by (from, to, le) (rate(tailhunt_probe_latency_seconds_bucket{{from!=\"\",kind=\"{kind}\"}}[{range}])))"
    );
    let url = format!("{}/api/v1/query", base.trim_end_matches('/'));
    let mut resp = ureq::get(&url)
        .query("query", &promql)
        .call()
        .map_err(|e| MeshError::Query(format!("{url}: {e} (is it a Prometheus-API server?)")))?;
    let body = resp
        .body_mut()
        .read_to_string()
        .map_err(|e| MeshError::Query(format!("{url}: {e}")))?;
    let v: serde_json::Value = serde_json::from_str(&body)
        .map_err(|e| MeshError::Query(format!("{url}: not a query answer: {e}")))?;
    if v["status"] != "success" {
        return Err(MeshError::Query(format!(
            "{url}: the query failed: {}",
            v["error"].as_str().unwrap_or("no reason given")
        )));
    }
    let rows = v["data"]["result"].as_array().cloned().unwrap_or_default();
    Ok(rows
        .iter()
        .filter_map(|r| {
            let from = r["metric"]["from"].as_str()?.to_string();
            let to = r["metric"]["to"].as_str()?.to_string();
            let value = r["value"][1].as_str()?.parse::<f64>().ok()?;
            Some(((from, to), value))
        })
        .collect())
}

/// Reads the matrix of `kind` (`tcp-echo` or `udp-echo`) over the last `range` (a PromQL
/// duration such as `5m`) from the Prometheus-API server at `base`.
pub fn query_matrix(base: &str, kind: &str, range: &str) -> Result<Matrix, MeshError> {
    let mut m = Matrix::default();
    for (pair, v) in quantile_by_pair(base, 0.5, kind, range)? {
        m.cells.entry(pair).or_insert((f64::NAN, f64::NAN)).0 = v;
    }
    for (pair, v) in quantile_by_pair(base, 0.99, kind, range)? {
        m.cells.entry(pair).or_insert((f64::NAN, f64::NAN)).1 = v;
    }
    Ok(m)
}

fn ms(v: f64) -> String {
    if v.is_finite() {
        format!("{:.2}", v * 1e3)
    } else {
        "-".into()
    }
}

/// The matrix as text: rows `from`, columns `to`, each cell `p50/p99` in ms, then the `worst`
/// pairs by p99.
pub fn render_matrix(m: &Matrix, worst: usize) -> String {
    let froms: BTreeSet<&str> = m.cells.keys().map(|(f, _)| f.as_str()).collect();
    let tos: BTreeSet<&str> = m.cells.keys().map(|(_, t)| t.as_str()).collect();
    let cell = |f: &str, t: &str| {
        m.cells.get(&(f.to_string(), t.to_string())).map_or_else(
            || "-".to_string(),
            |(p50, p99)| format!("{}/{}", ms(*p50), ms(*p99)),
        )
    };
    let w0 = froms
        .iter()
        .map(|f| f.len())
        .max()
        .unwrap_or(4)
        .max("from \\ to".len());
    let widths: Vec<usize> = tos
        .iter()
        .map(|t| {
            froms
                .iter()
                .map(|f| cell(f, t).len())
                .max()
                .unwrap_or(1)
                .max(t.len())
        })
        .collect();
    let mut out = String::from("p50/p99 in ms, rows probe the columns\n\n");
    out.push_str(&format!("{:<w0$}", "from \\ to"));
    for (t, w) in tos.iter().zip(&widths) {
        out.push_str(&format!("  {t:>w$}"));
    }
    out.push('\n');
    for f in &froms {
        out.push_str(&format!("{f:<w0$}"));
        for (t, w) in tos.iter().zip(&widths) {
            out.push_str(&format!("  {:>w$}", cell(f, t)));
        }
        out.push('\n');
    }
    let mut ranked: Vec<(&Pair, &(f64, f64))> = m
        .cells
        .iter()
        .filter(|(_, (_, p99))| p99.is_finite())
        .collect();
    ranked.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    if !ranked.is_empty() {
        out.push_str("\nworst pairs by p99:\n");
        for ((f, t), (p50, p99)) in ranked.into_iter().take(worst) {
            out.push_str(&format!(
                "  {f} -> {t}: p99 {} ms, p50 {} ms\n",
                ms(*p99),
                ms(*p50)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_become_labelled_probes_and_a_bad_peer_is_named() {
        let mesh = MeshConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            peers: vec!["10.0.0.2:7470".into(), "db=10.0.0.3:7470".into()],
            timeout: Duration::from_millis(200),
        };
        let p = mesh_probes(&mesh, "web-1", Duration::from_secs(1)).unwrap();
        let names: Vec<&str> = p.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "mesh-tcp-10.0.0.2:7470",
                "mesh-udp-10.0.0.2:7470",
                "mesh-tcp-db",
                "mesh-udp-db"
            ]
        );
        assert_eq!(p[2].labels["from"], "web-1");
        assert_eq!(p[2].labels["to"], "db");
        assert_eq!(p[2].target, "10.0.0.3:7470");
        assert_eq!(p[0].timeout, Duration::from_millis(200));
        let bad = MeshConfig {
            peers: vec!["no-port".into()],
            ..mesh
        };
        let e = mesh_probes(&bad, "a", Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no-port"), "{e}");
    }

    #[test]
    fn the_matrix_names_the_worst_pairs() {
        let mut m = Matrix::default();
        m.cells.insert(("a".into(), "b:1".into()), (0.0002, 0.0005));
        m.cells.insert(("b".into(), "a:1".into()), (0.0101, 0.0201));
        m.cells
            .insert(("a".into(), "a:1".into()), (0.0001, f64::NAN));
        let text = render_matrix(&m, 1);
        assert!(text.contains("10.10/20.10"), "{text}");
        assert!(text.contains("0.10/-"), "{text}");
        assert!(
            text.contains("worst pairs by p99:\n  b -> a:1: p99 20.10 ms"),
            "{text}"
        );
        assert!(!text.contains("a -> b:1"), "{text}");
    }
}
