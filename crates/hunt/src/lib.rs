//! `tailhunt hunt TARGET`: the method an engineer follows by hand, as one call.
//!
//! # Brief overview
//!
//! In: a [`HuntConfig`] (the target as for `tailhunt load`, the time budget, the highest rate
//! allowed, the store), a stop flag (the binary's signal flag) and a [`Progress`] the caller
//! implements. Out: a [`Hunt`] — the [`Plan`], the network floor, every sweep step, which
//! evidence was collected (each as a stored run tagged with the hunt) and which is missing and
//! why, and every detector's findings over all of it, ranked.
//!
//! The order is the method's:
//! 1. the network floor ([`floor`]): TCP connects to the target, which also ends the hunt
//!    within a few seconds, before anything is stored, when the target refuses or cannot be
//!    reached;
//! 2. a rate sweep ([`ramp`]): low rates first, ramping up until latency or errors climb,
//!    never past the maximum, then the rates reached again in random order;
//! 3. meanwhile ([`watch`], [`runq`]): a capture on the interface of the route to the target
//!    and the TCP_INFO of the connections to it, and, when the target listens on this host,
//!    run-queue tracing of its cgroup;
//! 4. every detector on every run (`tailhunt_diagnose::diagnose_run`), one ranked list
//!    ([`verdict`]).
//!
//! This crate never prints: [`Progress`] hears what happens, the binary shows it.

pub mod buffer;
pub mod floor;
pub mod plan;
pub mod ramp;
pub mod runq;
pub mod text;
pub mod verdict;
pub mod watch;

mod orchestrate;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use tailhunt_model::evidence::sweep::SweepStep;
use tailhunt_model::RunStatus;

pub use orchestrate::run;
pub use plan::Plan;
pub use verdict::Ranked;

/// What to hunt and within what.
#[derive(Debug, Clone)]
pub struct HuntConfig {
    /// The target, as for `tailhunt load` (`tcp://`, `udp://`, `http://`, `redis://`,
    /// `memcached://`).
    pub url: String,
    /// All of it, the floor to the verdict, fits in this.
    pub budget: Duration,
    /// No step offers more than this, requests/s.
    pub max_rate: f64,
    /// Connections of the sweep (see [`plan::DEFAULT_CONNS`]).
    pub conns: usize,
    /// The store file.
    pub store: PathBuf,
    /// Seed of the random step order.
    pub seed: u64,
    /// Where to write the HTML report of the hunt's runs: a file, or a directory to write
    /// `tailhunt-hunt-<id>.html` in (`None`: no report).
    pub report: Option<PathBuf>,
    /// What each request of the sweep carries, as for `tailhunt load`.
    pub request: RequestShape,
}

/// What each request carries: the size of a tcp/udp body or a redis/memcached value, an
/// HTTP request's method, headers and body, and how an https:// certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestShape {
    /// Request (or value) size in bytes.
    pub bytes: usize,
    /// The HTTP request (the default: GET with no headers or body).
    pub http: tailhunt_load::proto::HttpRequest,
    /// Certificate checks of an https:// target.
    pub tls: tailhunt_load::engine::tls::TlsOptions,
}

impl Default for RequestShape {
    fn default() -> Self {
        RequestShape {
            bytes: 64,
            http: Default::default(),
            tls: Default::default(),
        }
    }
}

/// The least budget a hunt can do something useful with.
pub const MIN_BUDGET: Duration = Duration::from_secs(5);

/// A kind of evidence a hunt collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// TCP connect times to the target.
    Floor,
    /// The rate sweep's latencies.
    Sweep,
    /// Packets on the interface of the route to the target.
    Capture,
    /// TCP_INFO of the connections to the target.
    Sockets,
    /// Run-queue latency of the target's cgroup.
    Runq,
}

impl Source {
    /// Its name in messages and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Source::Floor => "floor",
            Source::Sweep => "sweep",
            Source::Capture => "capture",
            Source::Sockets => "sockets",
            Source::Runq => "runq",
        }
    }
}

/// A source that stored a run.
#[derive(Debug, Clone)]
pub struct Collected {
    /// The run.
    pub run_id: String,
    /// Cut short (a signal, an error): kept and marked partial.
    pub partial: bool,
    /// What it holds, in a few words.
    pub note: String,
}

/// What became of one source.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceReport {
    /// Which source.
    pub source: Source,
    /// `collected`, `partial` or `missing`.
    pub status: &'static str,
    /// The run it stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// What it holds, or why it is missing.
    pub note: String,
}

impl EvidenceReport {
    /// From a source's outcome.
    pub fn of(source: Source, r: Result<Collected, String>) -> EvidenceReport {
        match r {
            Ok(c) => EvidenceReport {
                source,
                status: if c.partial { "partial" } else { "collected" },
                run_id: Some(c.run_id),
                note: c.note,
            },
            Err(why) => EvidenceReport {
                source,
                status: "missing",
                run_id: None,
                note: why,
            },
        }
    }
}

/// The outcome of a hunt.
#[derive(Debug, Clone, Serialize)]
pub struct Hunt {
    /// The tag every run of this hunt carries (`hunt` in their parameters).
    pub hunt_id: String,
    /// The target as written.
    pub target: String,
    /// `partial` when a signal or a failure cut it short.
    pub status: RunStatus,
    /// What was planned.
    pub plan: Plan,
    /// The network floor (none for UDP targets).
    pub floor: Option<floor::Floor>,
    /// Every sweep step, in the order it ran.
    pub steps: Vec<SweepStep>,
    /// Why the ramp stopped where it did.
    pub ramp_stop: String,
    /// Each source: its run, or why it is missing.
    pub evidence: Vec<EvidenceReport>,
    /// Every finding of every run, ranked: detected causes first, highest confidence first.
    pub findings: Vec<Ranked>,
    /// The first request error the sweep saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Why the sweep ended before its plan (the server went away).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// A signal stopped it; what was measured is kept.
    pub interrupted: bool,
    /// The HTML report of the hunt's runs, when one was asked for and written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// Why the report could not be written (the verdict stands without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_error: Option<String>,
}

/// What the caller hears while a hunt runs.
pub trait Progress {
    /// The plan, before anything runs against the target beyond the first connect.
    fn planned(&mut self, plan: &Plan);
    /// A phase begins (`network floor`, `diagnosing`).
    fn phase(&mut self, what: &str);
    /// A sweep step begins.
    fn step_started(&mut self, rate: f64, repeat: usize);
    /// A sweep step ended.
    fn step_done(&mut self, step: &SweepStep);
}

/// Why a hunt could not run.
#[derive(Debug, thiserror::Error)]
pub enum HuntError {
    /// The target does not parse or resolve.
    #[error(transparent)]
    Target(#[from] tailhunt_load::target::TargetError),
    /// The target refused or did not answer.
    #[error("cannot reach {target}: {reason}")]
    Unreachable {
        /// The target as written.
        target: String,
        /// What happened, with a hint.
        reason: String,
    },
    /// A signal stopped the hunt before the sweep's first step ran: there is no verdict. What
    /// was measured by then (the floor, packets, socket samples) is kept as the hunt's runs.
    #[error(
        "stopped before the rate sweep's first step, so there is no verdict; {}",
        kept_runs(hunt_id, kept)
    )]
    Interrupted {
        /// The hunt's id (its runs' `hunt` tag).
        hunt_id: String,
        /// The runs kept, by id.
        kept: Vec<String>,
    },
    /// A flag out of range.
    #[error("{0}")]
    Flag(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] tailhunt_store::StoreError),
    /// Writing a run failed.
    #[error("storing the hunt's runs: {0}")]
    Sink(String),
    /// A detector could not read a run.
    #[error(transparent)]
    Diagnose(#[from] tailhunt_diagnose::DiagnoseError),
}

/// What an interrupted hunt kept, in words.
fn kept_runs(hunt_id: &str, kept: &[String]) -> String {
    match kept {
        [] => "nothing was measured yet".into(),
        runs => format!(
            "kept what was measured as run(s) {} of hunt {hunt_id}",
            runs.join(", ")
        ),
    }
}

impl From<tailhunt_model::SinkError> for HuntError {
    fn from(e: tailhunt_model::SinkError) -> Self {
        HuntError::Sink(e.to_string())
    }
}
