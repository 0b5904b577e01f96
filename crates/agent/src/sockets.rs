//! The socket sampler: every TCP socket of the agent's network namespace read through
//! `inet_diag` (`tailhunt-sock`, what `tailhunt sockets` reads; no root needed) every interval,
//! folded into a bounded set of exported series.
//!
//! In: the checked [`SocketSettings`], a shared [`SocketState`] and a stop flag. Out, in the
//! state, cumulative since the agent started, per `port`:
//!
//! | metric | kind | what |
//! |---|---|---|
//! | `tailhunt_tcp_rtt_seconds` | histogram | each established socket's smoothed RTT, once per round |
//! | `tailhunt_tcp_rwnd_limited_seconds_total` | counter | time sending was held back by the peer's receive window |
//! | `tailhunt_tcp_retransmits_total` | counter | segments retransmitted |
//! | `tailhunt_tcp_sockets` | gauge | established sockets in the last round |
//!
//! `port` is the lower of a connection's two ports: the service's side, since the kernel hands
//! out ephemeral ports from the high range; so a client's connections to a cache and the
//! cache's own accepted connections both land on the cache's port. Cardinality is bounded by
//! [`SocketSettings::max_ports`]: the first that many ports seen get their own label, later
//! ones are exported as `port="other"` (each such socket reading counted in
//! `tailhunt_tcp_ports_folded_total`). Memory: one histogram per label, plus the last reading
//! of each live socket (to turn the kernel's per-socket totals into deltas).
//!
//! Counters: a socket's totals are counted from the first round that sees it; sockets that
//! existed before the agent's first round count only what happens after it. A connection
//! opened and closed between two rounds is not seen at all.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tailhunt_histogram::Histogram;
use tailhunt_sock::diag::{Diag, DiagSocket};
use tailhunt_sock::tcp_info::TCP_ESTABLISHED;

use crate::exposition::{HistogramMetric, ScalarMetric, Snapshot};

/// The label value ports past the cap are exported under.
pub const OTHER: &str = "other";

/// Name of the exported RTT histogram.
pub const RTT_METRIC: &str = "tailhunt_tcp_rtt_seconds";

/// The `[sockets]` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SocketSettings {
    /// Sample at all.
    pub enabled: bool,
    /// How often every socket is read.
    pub interval: Duration,
    /// Port label values exported; the rest are `other`.
    pub max_ports: usize,
}

impl Default for SocketSettings {
    fn default() -> Self {
        SocketSettings {
            enabled: true,
            interval: Duration::from_secs(10),
            max_ports: 20,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct PortTotals {
    rtt: Histogram,
    rwnd_limited_ns: u64,
    retransmits: u64,
    sockets: u64,
}

/// The last reading of one socket: (rwnd-limited ns, total retransmits).
type Reading = (u64, u64);

/// What the sampler thread shares with the exporter.
#[derive(Debug, Clone, Default)]
pub struct SocketStatus {
    /// Whether the sampler runs.
    pub running: bool,
    /// Why it is off (`None` while it runs).
    pub off_reason: Option<String>,
    /// Rounds folded in.
    pub rounds: u64,
    /// Socket readings exported under `port="other"`.
    pub folded: u64,
    /// The last failed round's error.
    pub last_error: Option<String>,
    ports: BTreeMap<String, PortTotals>,
    last: HashMap<u64, Reading>,
}

/// Shared [`SocketStatus`]; clones share it.
pub type SocketState = crate::Shared<SocketStatus>;

/// The port a connection is labelled with: the lower of its two.
pub fn service_port(s: &DiagSocket) -> u16 {
    s.local.port().min(s.peer.port())
}

impl SocketStatus {
    /// Folds one round of readings in, with at most `max` port labels.
    pub fn fold(&mut self, sockets: &[DiagSocket], max: usize) {
        let first_round = self.rounds == 0;
        self.rounds += 1;
        for t in self.ports.values_mut() {
            t.sockets = 0;
        }
        let mut now: HashMap<u64, Reading> = HashMap::with_capacity(sockets.len());
        for s in sockets {
            let Some(info) = &s.info else { continue };
            let port = service_port(s).to_string();
            let label = if self.ports.contains_key(&port) || self.ports.len() < max {
                port
            } else {
                self.folded += 1;
                OTHER.to_string()
            };
            let reading = (
                info.rwnd_limited_ns.unwrap_or(0),
                u64::from(info.total_retrans),
            );
            // A socket not seen before counts from zero, except those older than the agent.
            let before = match self.last.get(&s.cookie) {
                Some(r) => *r,
                None if first_round => reading,
                None => (0, 0),
            };
            now.insert(s.cookie, reading);
            let t = self.ports.entry(label).or_default();
            t.rwnd_limited_ns += reading.0.saturating_sub(before.0);
            t.retransmits += reading.1.saturating_sub(before.1);
            if s.state == TCP_ESTABLISHED {
                t.sockets += 1;
                t.rtt.record(info.rtt_ns);
            }
        }
        self.last = now;
    }

    /// Port labels exported now.
    pub fn exported_ports(&self) -> Vec<String> {
        self.ports.keys().cloned().collect()
    }

    /// Adds the socket metrics to `snapshot`.
    pub fn fill(&self, snapshot: &mut Snapshot) {
        let scalar = |name: &str, help: &str, port: &str, value: f64| ScalarMetric {
            name: name.into(),
            help: help.into(),
            labels: vec![("port".to_string(), port.to_string())],
            value,
        };
        for (port, t) in &self.ports {
            snapshot.histograms.push(HistogramMetric {
                name: RTT_METRIC.into(),
                help: "Smoothed RTT of each established TCP socket, one reading per socket per round, by service port.".into(),
                labels: vec![("port".to_string(), port.clone())],
                histogram: t.rtt.clone(),
            });
            snapshot.counters.push(scalar(
                "tailhunt_tcp_rwnd_limited_seconds",
                "Time sending was limited by the peer's receive window (tcpi_rwnd_limited), by service port.",
                port,
                t.rwnd_limited_ns as f64 / 1e9,
            ));
            snapshot.counters.push(scalar(
                "tailhunt_tcp_retransmits",
                "TCP segments retransmitted (tcpi_total_retrans), by service port.",
                port,
                t.retransmits as f64,
            ));
            snapshot.gauges.push(scalar(
                "tailhunt_tcp_sockets",
                "Established TCP sockets in the last round, by service port.",
                port,
                t.sockets as f64,
            ));
        }
        let own = |name: &str, help: &str, v: u64| ScalarMetric {
            name: name.into(),
            help: help.into(),
            labels: vec![],
            value: v as f64,
        };
        snapshot.counters.push(own(
            "tailhunt_tcp_rounds",
            "Socket sampling rounds.",
            self.rounds,
        ));
        snapshot.counters.push(own(
            "tailhunt_tcp_ports_folded",
            "Socket readings exported as port=\"other\" because the cap on port labels was reached.",
            self.folded,
        ));
    }
}

/// Reads every socket once and folds the readings in.
pub fn sample_once(diag: &Diag, state: &SocketState, max_ports: usize) -> Result<(), String> {
    let sockets = diag.dump().map_err(|e| e.to_string())?;
    state.lock().fold(&sockets, max_ports);
    Ok(())
}

/// Samples every `settings.interval` until `stop` is set. A round that fails is reported in
/// the state and the next one is tried; only a netlink socket that cannot be opened stops it.
pub fn run(settings: &SocketSettings, state: &SocketState, stop: &AtomicBool) {
    let diag = match Diag::open() {
        Ok(d) => d,
        Err(e) => {
            let mut s = state.lock();
            s.off_reason = Some(format!("cannot open an inet_diag socket: {e}"));
            return;
        }
    };
    state.lock().running = true;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() >= next {
            next += settings.interval;
            let r = sample_once(&diag, state, settings.max_ports);
            state.lock().last_error = r.err();
        }
        std::thread::sleep(Duration::from_millis(50).min(settings.interval));
    }
    let mut s = state.lock();
    s.running = false;
    s.off_reason = Some("stopped".into());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn loopback_connections_are_counted_by_the_service_port() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        // Here both ports are ephemeral: the label is the lower, on both ends.
        let port = listener
            .local_addr()
            .unwrap()
            .port()
            .min(client.local_addr().unwrap().port());
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        server.read_exact(&mut buf).unwrap();
        let diag = Diag::open().unwrap();
        let state = SocketState::default();
        sample_once(&diag, &state, 10_000).unwrap();
        let s = state.lock();
        let t = s.ports.get(&port.to_string()).expect("the listener's port");
        // Both ends of the connection are this host's: two sockets, two RTT readings.
        assert_eq!(t.sockets, 2, "{:?}", s.exported_ports());
        assert_eq!(t.rtt.count(), 2);
        let mut snap = Snapshot::default();
        s.fill(&mut snap);
        assert!(snap
            .histograms
            .iter()
            .any(|h| h.name == RTT_METRIC && h.labels[0].1 == port.to_string()));
    }

    #[test]
    fn ports_past_the_cap_are_other_and_counted() {
        let listeners: Vec<TcpListener> = (0..3)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let conns: Vec<(TcpStream, TcpStream)> = listeners
            .iter()
            .map(|l| {
                let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                (c, l.accept().unwrap().0)
            })
            .collect();
        let diag = Diag::open().unwrap();
        let mut sockets = diag.dump().unwrap();
        let ours: Vec<u16> = conns
            .iter()
            .map(|(c, _)| {
                let (a, b) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
                a.port().min(b.port())
            })
            .collect();
        sockets.retain(|s| ours.contains(&service_port(s)));
        assert_eq!(sockets.len(), 6);
        let mut st = SocketStatus::default();
        st.fold(&sockets, 2);
        assert_eq!(st.ports.len(), 3, "two ports and other");
        assert_eq!(st.ports[OTHER].sockets, 2);
        assert_eq!(st.folded, 2);
        // The next round keeps the same labels: the admitted ports stay, the third stays other.
        st.fold(&sockets, 2);
        assert_eq!(st.ports.len(), 3);
        assert_eq!(st.folded, 4);
        assert_eq!(st.ports[OTHER].rtt.count(), 4);
    }
}
