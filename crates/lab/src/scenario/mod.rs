//! Packet captures with ground truth: the root causes, planted on real sockets and recorded.
//!
//! # Brief overview
//!
//! In: a [`CaptureScenario`] and an output directory. Out: a [`GeneratedCapture`]: a pcap file
//! (`<scenario>.pcap`, nanosecond timestamps) and a ground-truth JSON (`<scenario>.truth.json`).
//!
//! [`generate`] builds network namespaces (addresses in 198.18.0.0/15), runs real TCP traffic
//! between them with small Python 3 programs (embedded in the library and written to
//! `OUT_DIR/py/` at run time), captures it with `tcpdump` on the interface named in the truth,
//! and removes everything it started (processes by PID, namespaces) even when it fails. Each
//! scenario takes a few seconds (under 20 s). Needs root, `python3`, `tcpdump`, `tc`, `ethtool`.
//!
//! The truth is recorded **by the generating programs themselves**: every time is
//! `time.time_ns()` in the program that did the thing, the same realtime clock that stamps the
//! packets. Times are epoch nanoseconds (integers); durations end in `_ns`, sizes in `_bytes`.
//! A flow is `{"client": "198.18.x.y:port", "server": "198.18.x.y:port"}`.
//!
//! ```no_run
//! use tailhunt_lab::scenario::{generate, CaptureScenario};
//! let g = generate(CaptureScenario::Nagle, std::path::Path::new("/tmp/lab"))?;
//! println!("{} {}", g.pcap.display(), g.truth["median_latency_ns"]);
//! # Ok::<(), tailhunt_lab::scenario::ScenarioError>(())
//! ```
//!
//! # Truth schema
//!
//! Every truth has `"scenario"` (the [`CaptureScenario::name`]) and `"capture"`:
//! `{"pcap": file name, "iface", "host": the namespace role it was taken in, "snaplen" (0 =
//! whole packets), "packets_captured", "packets_dropped_by_kernel"}`. Scenarios that also
//! record the other end list those captures, same shape, in `"extra_captures"`; their files
//! sit next to [`GeneratedCapture::pcap`].
//!
//! **`microburst`** (root cause #1). Hosts: the cache `198.18.2.2` on a link from the far
//! side (`198.18.2.1`), which holds four dbs `198.18.2.11-14` and routes to the api client
//! `198.18.7.2` (on its own veth). The link into the cache is shaped on the far side with
//! `tbf rate 100mbit burst 4kb latency 200ms` (deep queue: bursts delay, never drop). Every
//! 300 ms the cache asks every db at once and each answers 120 000 bytes; meanwhile the api sends
//! a 100-byte request every 2 ms (open loop, TCP_NODELAY) and gets 100 bytes back. Captured on
//! the cache's interface (the bursts at ~100% of the link; the api requests only after they
//! left the queue, so their wait is not visible there) and, listed in `extra_captures`, on the
//! api host's interface (`microburst.api.pcap`: each request's whole wait is visible).
//! - `link`: `{"rate_bps", "shaper", "shaped_iface", "direction": "far -> cache",
//!   "shaper_counts": {"sent_packets", "dropped_packets"}}` (from `tc -s`; drops should be 0)
//! - `cache`: `"198.18.2.2:7000"`; `db_flows`: flows (client = cache); `api_flow`: flow
//! - `bursts`: `[{"request_ns", "start_ns", "end_ns", "bytes", "per_db": [flow +
//!   "first_byte_ns", "last_byte_ns"]}]`: start/end are the first and last reply bytes the
//!   cache application read
//! - `api_requests`: `[{"seq", "intended_ns", "send_ns", "reply_ns", "latency_ns"}]`
//!   (`reply_ns`/`latency_ns` null if unanswered), `median_latency_ns`,
//!   `slow_threshold_ns` (5 x median), `slow_seqs`, `slow_during_burst` (slow requests whose
//!   send..reply overlaps a burst's request..end)
//!
//! **`nagle`** (root cause #2). Client `198.18.3.1`, server `198.18.3.2:7200` over a veth; each
//! request is written as 20 bytes then 80 bytes (two `send()` calls), no TCP_NODELAY and no
//! quickack on either side, 20 requests/s for 3 s, one at a time on one connection; the server
//! answers 100 bytes in one send. Captured on the server's interface.
//! - `flow`, `server`, `header_bytes`, `body_bytes`, `reply_bytes`, `client_nodelay`,
//!   `server_nodelay` (both false), `client_pid`, `server_pid`
//! - `requests`: `[{"seq", "write1_ns", "write2_ns" (after each send returned), "reply_ns",
//!   "latency_ns" (reply - write1), "server_header_recv_ns", "server_body_recv_ns",
//!   "body_stall_ns" (server_body_recv - write1: how long the body was held)}]`
//! - `median_latency_ns`, `median_body_stall_ns`
//!
//! **`small-rcvbuf`** (root cause #4) and **`clean-bulk`** (its healthy twin). Client
//! `198.18.4.1` on a veth to a gateway (`198.18.4.254`), which reaches the server
//! `198.18.6.2:7400` through the link emulator ([`tailhunt_netlab::link`]: 40 ms each way, 100 Mbit/s,
//! 2 MB drop-tail queue). The client downloads `bytes` (4 MB) with `SO_RCVBUF` set to 65536
//! before `connect()` (small-rcvbuf) or left to autotuning (clean-bulk). Captured on the
//! client's veth (Ethernet) with `-s 128`, and in `extra_captures` on the server's TUN device
//! (`<scenario>.server.pcap`, raw IP link type, `-s 128`): the sender's view, where bytes in
//! flight sit at the advertised window.
//! - `link`: `{"rtt_ns", "rate_bps", "queue_bytes", "emulator", "stats": the emulator's
//!   [`tailhunt_netlab::link::LinkStats`] ("forward" = gw -> server, "reverse" = server -> gw: packets,
//!   bytes, drops, its own lateness)}`
//! - `flow`, `client_pid`, `rcvbuf_requested` (65536 or null), `rcvbuf_effective` (what
//!   `getsockopt` returned), `bytes`, `bytes_received`, `request_ns`, `first_byte_ns`,
//!   `last_byte_ns`, `transfer_ns` (last byte - request)
//! - clean-bulk only, before the download: `rr_flow` and `rr_requests` (`[{"seq", "send_ns",
//!   "reply_ns", "latency_ns"}]`: 20 healthy 100-byte exchanges with TCP_NODELAY, 20 per second)
//! - `flows`: every flow of the scenario
//!
//! **`client-timeout`** (root cause #4's ending). Client `198.18.5.1`, server `198.18.5.2:7500`;
//! the server's side of the link is shaped `tbf rate 2mbit burst 16kb latency 5s` (a 1.25 MB
//! queue: no drops). The client asks for 8 MB, gives up 2 s after the request and `close()`s
//! (after reading what had arrived, so normally a FIN); the server keeps sending and the
//! client's kernel answers with resets. Captured on the client's interface.
//! - `flow`, `client_pid`, `request_ns`, `timeout_ns` (the configured 2 s), `timeout_fired_ns`,
//!   `close_ns`, `bytes_requested`, `bytes_received`, `unread_bytes_at_close` (non-zero: the
//!   close sent a RST instead of a FIN), `link` (as microburst's)
//! - `server`: `{"pid", "bytes_sent", "send_error" (e.g. "ConnectionResetError"),
//!   "send_error_ns"}`

mod bulk;
mod microburst;
mod nagle;
pub(crate) mod procs;
mod timeout;

use std::path::{Path, PathBuf};

use serde_json::Value;

use tailhunt_netlab::netns::NetnsError;

/// A scenario that plants one root cause (or none) in a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureScenario {
    /// Root cause #1: db replies fill the cache's shaped link while small api requests wait.
    Microburst,
    /// Root cause #2: a two-piece request without TCP_NODELAY meets the delayed ACK.
    Nagle,
    /// Root cause #4: a bulk download with SO_RCVBUF=64k over a long round trip.
    SmallRcvbuf,
    /// Root cause #4's ending: the client's timeout fires, it closes, its kernel resets.
    ClientTimeout,
    /// Nothing wrong: a bulk download with autotuning and a few healthy exchanges.
    CleanBulk,
}

impl CaptureScenario {
    /// Every scenario.
    pub const ALL: [CaptureScenario; 5] = [
        CaptureScenario::Microburst,
        CaptureScenario::Nagle,
        CaptureScenario::SmallRcvbuf,
        CaptureScenario::ClientTimeout,
        CaptureScenario::CleanBulk,
    ];

    /// The name used in file names and in the truth's `"scenario"`.
    pub fn name(self) -> &'static str {
        match self {
            CaptureScenario::Microburst => "microburst",
            CaptureScenario::Nagle => "nagle",
            CaptureScenario::SmallRcvbuf => "small-rcvbuf",
            CaptureScenario::ClientTimeout => "client-timeout",
            CaptureScenario::CleanBulk => "clean-bulk",
        }
    }
}

/// A generated capture and its ground truth.
#[derive(Debug, Clone)]
pub struct GeneratedCapture {
    /// The pcap file (nanosecond timestamps).
    pub pcap: PathBuf,
    /// Where the truth JSON was written.
    pub truth_path: PathBuf,
    /// The truth (schema in the module docs).
    pub truth: Value,
}

/// Errors generating a capture. Each names what failed and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Building the namespaces or links failed (or not root).
    #[error("building the lab network: {0}")]
    Netns(#[from] NetnsError),
    /// The link emulator would not start.
    #[error("starting the link emulator: {0}")]
    Link(#[from] tailhunt_netlab::link::LinkError),
    /// A file in the output directory could not be written or read.
    #[error("cannot use '{path}': {source} (give a writable output directory)")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A program could not be started.
    #[error(
        "cannot run `{program}`: {source} (install it: python3 and tcpdump are Debian packages)"
    )]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A program exited with an error.
    #[error("{what} failed ({status}); it said: {stderr}")]
    Failed {
        /// Which program ("nagle client").
        what: String,
        /// Its exit status.
        status: String,
        /// Its stderr.
        stderr: String,
    },
    /// A program did not get somewhere in time.
    #[error(
        "{what} did not {event} within {secs} s (is the machine overloaded?); it said: {stderr}"
    )]
    Timeout {
        /// Which program.
        what: String,
        /// What it should have done.
        event: String,
        /// The limit.
        secs: f64,
        /// Its stderr so far.
        stderr: String,
    },
    /// A program's truth file is missing or not the JSON expected.
    #[error("ground truth '{path}' is unusable: {detail} (a bug in the scenario program)")]
    Truth {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// Runs scenario `s`, writing `<name>.pcap`, `<name>.truth.json` and the programs' own files
/// (`<name>.<role>.json`, `py/*.py`) into `out_dir` (created if missing).
pub fn generate(s: CaptureScenario, out_dir: &Path) -> Result<GeneratedCapture, ScenarioError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ScenarioError::Io { path, source }
    };
    std::fs::create_dir_all(out_dir.join("py")).map_err(io(out_dir))?;
    // Absolute, so the programs and tcpdump find their files whatever their directory.
    let dir = out_dir.canonicalize().map_err(io(out_dir))?;
    let out = Out {
        dir,
        name: s.name(),
    };
    let pcap = out.file("pcap");
    let truth_path = out.file("truth.json");
    for stale in [&pcap, &truth_path] {
        let _ = std::fs::remove_file(stale);
    }
    let mut truth = match s {
        CaptureScenario::Microburst => microburst::run(&out)?,
        CaptureScenario::Nagle => nagle::run(&out)?,
        CaptureScenario::SmallRcvbuf => bulk::run(&out, Some(65536))?,
        CaptureScenario::CleanBulk => bulk::run(&out, None)?,
        CaptureScenario::ClientTimeout => timeout::run(&out)?,
    };
    truth["scenario"] = Value::from(s.name());
    let text = serde_json::to_string_pretty(&truth).map_err(|e| ScenarioError::Truth {
        path: truth_path.clone(),
        detail: e.to_string(),
    })?;
    std::fs::write(&truth_path, text).map_err(io(&truth_path))?;
    Ok(GeneratedCapture {
        pcap,
        truth_path,
        truth,
    })
}

/// The output directory of one scenario run.
pub(crate) struct Out {
    dir: PathBuf,
    name: &'static str,
}

impl Out {
    /// `DIR/<scenario>.<suffix>`.
    pub(crate) fn file(&self, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}.{suffix}", self.name))
    }

    /// A program's truth file `DIR/<scenario>.<role>.json`, removed first so a stale one is
    /// never read.
    pub(crate) fn part(&self, role: &str) -> Result<String, ScenarioError> {
        let p = self.file(&format!("{role}.json"));
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(ScenarioError::Io { path: p, source: e })
            }
            _ => {}
        }
        Ok(p.to_string_lossy().into_owned())
    }

    /// Writes an embedded program to `DIR/py/<file>` and returns its path.
    pub(crate) fn script(&self, file: &str, text: &str) -> Result<String, ScenarioError> {
        let p = self.dir.join("py").join(file);
        std::fs::write(&p, text).map_err(|source| ScenarioError::Io {
            path: p.clone(),
            source,
        })?;
        Ok(p.to_string_lossy().into_owned())
    }
}

/// Reads a program's truth file.
pub(crate) fn read_part(path: &str) -> Result<Value, ScenarioError> {
    let err = |detail: String| ScenarioError::Truth {
        path: PathBuf::from(path),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| err(e.to_string()))
}

/// The Python interpreter: Debian's, or the first `python3` on PATH.
pub(crate) fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// The median of integer values (the lower middle one for an even count); None if empty.
pub(crate) fn median(mut v: Vec<i64>) -> Option<i64> {
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied()
}
