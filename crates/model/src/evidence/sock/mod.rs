//! Socket evidence: what a transfer test and the inet_diag sampler measured, with the
//! processes, socket options and kernel settings behind it.
//!
//! In: `tailhunt-sock` fills a [`TransferReport`] per end of `tailhunt transfer` (the `transfer`
//! document) and a [`SocketsReport`] per `tailhunt sockets` run (the `sockets` document). Out:
//! the same documents, which the `receive-window-limited` and `application-timeout` detectors
//! and the report read back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Document;

mod state;

pub use state::TcpState;

/// A process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// Command name (`/proc/PID/comm`).
    pub comm: String,
}

impl Process {
    /// `pid 1699 (java)`.
    pub fn describe(&self) -> String {
        format!("pid {} ({})", self.pid, self.comm)
    }
}

/// What the kernel is and how it is tuned.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct KernelContext {
    /// `uname -r`.
    pub release: String,
    /// `uname -v` (build string).
    pub version: String,
    /// `net.ipv4.tcp_rmem` style names to their values (whitespace collapsed).
    pub sysctls: BTreeMap<String, String>,
}

impl KernelContext {
    /// A sysctl by its dotted name (`net.ipv4.tcp_rmem`).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.sysctls.get(name).map(String::as_str)
    }

    /// The largest receive buffer autotuning may grow to (`tcp_rmem`'s third value), bytes.
    pub fn rmem_max_autotune(&self) -> Option<u64> {
        self.get("net.ipv4.tcp_rmem")?
            .split_whitespace()
            .nth(2)?
            .parse()
            .ok()
    }

    /// One line for findings: `kernel 6.18.4; net.ipv4.tcp_rmem=4096 131072 33554432, ...`,
    /// with the sysctls that decide a receive window.
    pub fn cite_window(&self) -> String {
        let keys = [
            "net.ipv4.tcp_rmem",
            "net.core.rmem_max",
            "net.ipv4.tcp_moderate_rcvbuf",
            "net.ipv4.tcp_adv_win_scale",
            "net.ipv4.tcp_window_scaling",
        ];
        let parts: Vec<String> = keys
            .iter()
            .filter_map(|k| Some(format!("{k}={}", self.get(k)?)))
            .collect();
        format!("kernel {}; {}", self.release, parts.join(", "))
    }
}

/// A setsockopt call of interest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SockoptEvent {
    /// When, monotonic ns.
    pub t_ns: i64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Command name of the thread.
    pub comm: String,
    /// The descriptor.
    pub fd: i32,
    /// `SO_RCVBUF`, `TCP_NODELAY`, ...
    pub option: String,
    /// The int passed (None when it was not an int or not readable).
    pub value: Option<i64>,
    /// The socket's inode (0 when unknown).
    pub inode: u64,
    /// The peer when the socket was connected at the time, else found later by inode.
    pub peer: Option<String>,
}

impl SockoptEvent {
    /// `pid 1699 (java) set SO_RCVBUF=65536 on the socket to 10.0.0.2:9092`.
    pub fn describe(&self) -> String {
        let value = self.value.map_or_else(|| "?".into(), |v| v.to_string());
        let to = self.peer.as_ref().map_or_else(
            || format!(" on fd {}", self.fd),
            |p| format!(" on the socket to {p}"),
        );
        format!(
            "pid {} ({}) set {}={value}{to}",
            self.pid, self.comm, self.option
        )
    }
}

/// What the audit saw.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AuditResult {
    /// `tracepoint` (syscalls:sys_enter_setsockopt) or `raw_tp` (sys_enter).
    pub attach: String,
    /// Why the tracepoint was not used, when it was not.
    pub fallback_reason: Option<String>,
    /// The calls, in order.
    pub events: Vec<SockoptEvent>,
    /// Calls not recorded because the ring buffer was full.
    pub lost: u64,
    /// Times the attached program ran (kernel BPF statistics; the raw_tp fallback runs on
    /// every system call of the host, the tracepoint only on setsockopt).
    pub program_runs: Option<u64>,
    /// Its total run time, ns.
    pub program_run_time_ns: Option<u64>,
}

/// One connection over the sampling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionReport {
    /// Namespace (`host` for the caller's own).
    pub netns: String,
    /// `local -> peer`, from this socket's side.
    pub flow: String,
    /// Local address.
    pub local: String,
    /// Remote address.
    pub peer: String,
    /// Socket inode.
    pub inode: u64,
    /// The process holding the socket.
    pub owner: Option<Process>,
    /// TCP state when last seen (a name: `ESTABLISHED`, `TIME_WAIT`, ...).
    pub state: TcpState,
    /// Readings.
    pub readings: u64,
    /// First and last reading, monotonic ns; `None` without a reading (the kernel keeps no
    /// TCP_INFO for TIME_WAIT and request sockets). Version 1 stored `(0, 0)` then.
    pub range_ns: Option<(i64, i64)>,
    /// Bytes the peer acknowledged during the sampling.
    pub bytes_sent: u64,
    /// Bytes received during the sampling.
    pub bytes_received: u64,
    /// Rate while data moved (the busier direction), bits/s.
    pub throughput_bps: Option<f64>,
    /// Mean smoothed RTT, ns.
    pub rtt_mean_ns: Option<u64>,
    /// Mean window the peer advertised, bytes.
    pub snd_wnd_mean_bytes: Option<f64>,
    /// Mean window this end advertised, bytes.
    pub rcv_wnd_mean_bytes: Option<f64>,
    /// sk_rcvbuf at the last reading, bytes.
    pub rcvbuf: Option<u32>,
    /// sk_sndbuf at the last reading, bytes.
    pub sndbuf: Option<u32>,
    /// Share of busy time limited by the receiver's window, over the sampling.
    pub rwnd_limited_share: Option<f64>,
    /// Share of busy time limited by the send buffer.
    pub sndbuf_limited_share: Option<f64>,
    /// The receiver's view: the share of the intervals in which data arrived that brought at
    /// least 75% of this end's advertised window per RTT (a sender cannot send more than the
    /// window per round trip, so those intervals were window-limited, whatever held the sender).
    pub receiver_window_share: Option<f64>,
    /// The receiver's own RTT estimate (tcpi_rcv_rtt) while data arrived, mean, ns.
    pub rcv_rtt_mean_ns: Option<u64>,
    /// Readings with a zero peer window and data outstanding.
    pub zero_window_readings: u64,
    /// `receive-window-limited`, `sndbuf-limited`, `zero-window`.
    pub flags: Vec<String>,
    /// Whether the other end of the connection was sampled too.
    pub peer_sampled: bool,
    /// The process at the other end, when that end was sampled too.
    pub peer_owner: Option<Process>,
    /// The audit's SO_RCVBUF call on the other end's socket, if any.
    pub peer_rcvbuf_set: Option<SockoptEvent>,
    /// The audit's calls on this socket.
    pub options_set: Vec<SockoptEvent>,
}

impl ConnectionReport {
    /// Whether it moved data during the sampling or was flagged: the connections worth
    /// listing.
    pub fn is_active(&self) -> bool {
        self.bytes_sent + self.bytes_received > 0 || !self.flags.is_empty()
    }
}

/// How many connections were seen, and why some have nothing to show.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionCounts {
    /// Connections seen.
    pub seen: u64,
    /// Of those, with at least one TCP_INFO reading.
    pub with_readings: u64,
    /// Of those, moved data or were flagged.
    pub active: u64,
    /// Connections without a single reading, by their last state (`TIME_WAIT`: the kernel
    /// keeps no TCP_INFO for TIME_WAIT and request sockets).
    pub without_readings: BTreeMap<String, u64>,
}

impl ConnectionCounts {
    /// Counts `connections`.
    pub fn of(connections: &[ConnectionReport]) -> ConnectionCounts {
        let mut c = ConnectionCounts {
            seen: connections.len() as u64,
            ..ConnectionCounts::default()
        };
        for x in connections {
            if x.readings == 0 {
                *c.without_readings.entry(x.state.name()).or_default() += 1;
            } else {
                c.with_readings += 1;
                c.active += u64::from(x.is_active());
            }
        }
        c
    }
}

/// What `tailhunt sockets` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SocketsReport {
    /// Namespaces sampled (`host` for the caller's own).
    pub namespaces: Vec<String>,
    /// Interval, ns.
    pub interval_ns: u64,
    /// How long it sampled, ns.
    pub duration_ns: u64,
    /// Sampling rounds.
    pub rounds: u64,
    /// Only this process, when asked.
    pub pid: Option<u32>,
    /// Only this port, when asked.
    pub port: Option<u16>,
    /// Kernel context (of the first namespace).
    pub kernel: KernelContext,
    /// Connections seen, busiest first.
    pub connections: Vec<ConnectionReport>,
    /// How many of them had readings and moved data (empty in runs stored before it).
    #[serde(default)]
    pub counts: ConnectionCounts,
    /// The setsockopt audit, when it ran.
    pub audit: Option<AuditResult>,
}

/// How a transfer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransferOutcome {
    /// Every byte arrived (client) or was sent (server).
    Complete,
    /// The client's timeout fired first; it closed the connection.
    Timeout,
    /// The peer reset the connection (the server's view of a client that gave up).
    Reset,
    /// Another error.
    Error,
}

impl TransferOutcome {
    /// `complete`, `timeout`, `reset`, `error`.
    pub fn name(self) -> &'static str {
        match self {
            TransferOutcome::Complete => "complete",
            TransferOutcome::Timeout => "timeout",
            TransferOutcome::Reset => "reset",
            TransferOutcome::Error => "error",
        }
    }
}

/// What the sender tells the receiver at the end (the trailer).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SenderView {
    /// The server's pid.
    pub pid: u32,
    /// Its command name.
    pub comm: String,
    /// Its socket's effective SO_SNDBUF, bytes.
    pub sndbuf_effective: u32,
    /// Its socket's TCP_INFO while sending.
    pub tcp: TcpInfoSummary,
}

/// The result of one transfer, from one end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferReport {
    /// `client` or `server`.
    pub role: String,
    /// This end's address.
    pub local: String,
    /// The other end's address.
    pub peer: String,
    /// `client -> server`.
    pub flow: String,
    /// This process.
    pub pid: u32,
    /// Its command name (`/proc/self/comm`).
    pub comm: String,
    /// Bytes asked for.
    pub bytes_requested: u64,
    /// Bytes received (client) or sent (server).
    pub bytes_transferred: u64,
    /// How it ended.
    pub outcome: TransferOutcome,
    /// The error, when it ended in one.
    pub error: Option<String>,
    /// The client's timeout, ns.
    pub timeout_ns: Option<u64>,
    /// Request to last byte (or to the close), ns.
    pub transfer_ns: u64,
    /// Achieved rate over `transfer_ns`, bits/s.
    pub throughput_bps: f64,
    /// SO_RCVBUF asked for.
    pub rcvbuf_requested: Option<u32>,
    /// SO_RCVBUF as the kernel reports it (it doubles what is asked for).
    pub rcvbuf_effective: u32,
    /// SO_SNDBUF asked for.
    pub sndbuf_requested: Option<u32>,
    /// SO_SNDBUF as the kernel reports it.
    pub sndbuf_effective: u32,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// This end's TCP_INFO.
    pub tcp: TcpInfoSummary,
    /// The sender's TCP_INFO (client only, when the transfer completed).
    pub sender: Option<SenderView>,
    /// The receive window the bound uses (the receiver's mean advertised window), bytes.
    pub window_bytes: Option<f64>,
    /// The RTT the bound uses, ns: the sender's smoothed RTT averaged over the bytes
    /// acknowledged (its own, or its trailer's), else the receiver's `tcpi_rcv_rtt` averaged
    /// over the bytes received (see `rtt_from`).
    pub rtt_ns: Option<u64>,
    /// Whose round trip `rtt_ns` is: `sender` (the sender's TCP_INFO) or `receiver` (the
    /// receiver's estimate, when the sender's trailer never came).
    #[serde(default)]
    pub rtt_from: Option<String>,
    /// window / RTT, bits/s: the most a window-limited transfer can get.
    pub window_bound_bps: Option<f64>,
    /// Transfer start and end, monotonic ns.
    pub range_ns: (i64, i64),
    /// When the client read its first byte, monotonic ns (none read, a server's report, or
    /// written before it was recorded: absent).
    #[serde(default)]
    pub first_byte_ns: Option<i64>,
    /// When it read its last byte, monotonic ns.
    #[serde(default)]
    pub last_byte_ns: Option<i64>,
    /// The kernel and its TCP sysctls.
    pub kernel: KernelContext,
}

impl TransferReport {
    /// Achieved throughput over the window bound.
    pub fn bound_ratio(&self) -> Option<f64> {
        self.window_bound_bps
            .filter(|b| *b > 0.0)
            .map(|b| self.throughput_bps / b)
    }
}

/// What one end's readings add up to. Means are over the readings taken while data moved.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TcpInfoSummary {
    /// Readings taken.
    pub readings: u64,
    /// Mean smoothed RTT, ns.
    pub rtt_mean_ns: Option<u64>,
    /// The smoothed RTT averaged over the bytes acknowledged (each reading weighted by the
    /// bytes acknowledged since the one before): the mean round trip per window a
    /// window-limited sender moved, what its rate follows however the RTT changed, ns.
    #[serde(default)]
    pub rtt_bytes_mean_ns: Option<u64>,
    /// The receiver's own estimate of the round trip its sender waits through
    /// (`tcpi_rcv_rtt`: from TCP timestamps, the time from its ACK's TSval to the data that
    /// echoes it, queues upstream included), averaged over the bytes received, ns.
    #[serde(default)]
    pub rcv_rtt_bytes_mean_ns: Option<u64>,
    /// The receiver's view of its window: the share of the intervals in which data arrived
    /// that brought at least 75% of its advertised window per `tcpi_rcv_rtt` (a sender cannot
    /// send more than the window per round trip).
    #[serde(default)]
    pub receiver_window_share: Option<f64>,
    /// Minimum RTT the kernel saw, ns.
    pub min_rtt_ns: Option<u64>,
    /// Mean window this end advertised (tcpi_rcv_wnd), bytes.
    pub rcv_wnd_mean_bytes: Option<f64>,
    /// Largest window this end advertised, bytes.
    pub rcv_wnd_max_bytes: Option<u32>,
    /// Mean window the peer advertised (tcpi_snd_wnd), bytes.
    pub snd_wnd_mean_bytes: Option<f64>,
    /// Largest receive space autotuning measured, bytes.
    pub rcv_space_max_bytes: u32,
    /// Largest congestion window, segments.
    pub snd_cwnd_max: u32,
    /// Mean bytes in flight, bytes.
    pub in_flight_mean_bytes: f64,
    /// Largest delivery rate, bytes/s.
    pub delivery_rate_max: Option<u64>,
    /// Busy time (data outstanding), ns, at the last reading.
    pub busy_ns: Option<u64>,
    /// Receive-window-limited time, ns.
    pub rwnd_limited_ns: Option<u64>,
    /// Send-buffer-limited time, ns.
    pub sndbuf_limited_ns: Option<u64>,
    /// rwnd_limited / busy.
    pub rwnd_limited_share: Option<f64>,
    /// sndbuf_limited / busy.
    pub sndbuf_limited_share: Option<f64>,
    /// Retransmissions.
    pub total_retrans: u32,
    /// Readings in which the peer's window was zero.
    pub zero_window_readings: u64,
}

impl Document for TransferReport {
    const NAME: &'static str = "transfer";
    const VERSION: u32 = 1;

    /// Runs written before the document kept the report as `params.transfer`.
    fn from_params(params: &serde_json::Value) -> Option<Result<Self, String>> {
        let v = params.get("transfer")?;
        Some(serde_json::from_value(v.clone()).map_err(|e| e.to_string()))
    }
}

impl Document for SocketsReport {
    const NAME: &'static str = "sockets";
    /// 2: a connection without a reading has no `range_ns` (version 1: `[0, 0]`).
    const VERSION: u32 = 2;

    fn upgrade(version: u32, json: serde_json::Value) -> Result<Self, String> {
        let mut report: SocketsReport = super::read_as_current(version, json)?;
        report.no_range_without_readings();
        Ok(report)
    }

    /// Runs written before the document kept the report as `params.sockets` (version 1).
    fn from_params(params: &serde_json::Value) -> Option<Result<Self, String>> {
        let v = params.get("sockets")?;
        Some(Self::upgrade(1, v.clone()))
    }
}

impl SocketsReport {
    /// Version 1 gave a connection without a reading the range `(0, 0)`: none, now.
    fn no_range_without_readings(&mut self) {
        for c in self.connections.iter_mut().filter(|c| c.readings == 0) {
            c.range_ns = None;
        }
    }
}
