//! Ground truth for the detectors: cases that plant a cause (or none), made by tailhunt's own
//! traffic commands, recorded by the programs that made them, and scored against what the
//! real `tailhunt` binary concludes.
//!
//! # Brief overview
//!
//! In: a [`Case`] (from [`matrix`]: a seeded quick or full set) and a directory. Out: a
//! [`CaseResult`]: the case's `truth.json` (what was planted, by whom and when, and what the
//! traffic programs measured themselves), the captures and documents tailhunt wrote when it
//! analysed them (`<view>.json`), and the [`score`] of every detector on every view.
//!
//! The cases vary what the lab's scenarios hold fixed:
//!
//! - `window`: a download with SO_RCVBUF=64k (or autotuned, its healthy twin) over the link
//!   emulator at several round trips and rates, or through a shared tbf queue that fills after
//!   the handshake, captured at the receiver (queue upstream of the capture) and at the sender
//!   (queue downstream), plus the transfer's own TCP_INFO view;
//! - `timeout`: a client timeout closed with FIN (a slow response read as it comes), with RST
//!   ([`abandon`]: data left unread, or an SO_LINGER 0 abort on a server still thinking), by
//!   `tailhunt transfer client --timeout` (a transfer slower than the timeout), a server slower
//!   than the timeout, and twins that finish in time; captured on both sides of a shaped queue;
//! - `burst`: several bulk sources at once in both directions of a shaped link shared with
//!   small requests, sustained saturation (planted as `link-saturated`), and a twin whose
//!   sources answer small; captured on
//!   both sides of the queues, and analysed with and without the client's own latencies;
//! - `nagle`: requests (or replies) written in two pieces without TCP_NODELAY, and a sweep of
//!   rates; the twin sets TCP_NODELAY;
//! - `cpu`: a 1 kHz sleeper with CPU hogs in other cgroups of unequal and equal weights, in
//!   the root cgroup, on a busy host, an equal-weights control, a CPU quota cut, and twins.
//!
//! Traffic comes from `tailhunt serve`, `tailhunt load`, `tailhunt transfer` and the lab's link
//! emulator and `tc tbf` shaping, captured with `tcpdump`; the CPU workloads are this crate's
//! own ([`work`]), run by the `tailhunt-truth` binary. Truth is never taken from tailhunt's
//! analysis: it is what the case did (addresses, ports, options, times) and what the programs
//! measured on their own side (a load run's samples, a transfer's byte counts, a sleeper's own
//! lateness, each workload's CPU time from `/proc/self/schedstat`).
//!
//! Every namespace, qdisc, cgroup and process a case creates is removed by a guard when the
//! case ends, fails, panics or is interrupted ([`request_stop`], for a Ctrl-C handler).
//!
//! ```no_run
//! use tailhunt_lab::truth::{matrix, run_case, Scale, Tools};
//! let tools = Tools::locate(None)?;
//! for case in matrix(Scale::Quick, 1) {
//!     let r = run_case(&case, &tools, std::path::Path::new("/tmp/truth"))?;
//!     println!("{} {:?}", case.name, r.score.counts);
//! }
//! # Ok::<(), tailhunt_lab::truth::TruthError>(())
//! ```

pub mod abandon;
pub(crate) mod burst;
pub(crate) mod cgroup;
pub(crate) mod cpu;
mod nagle;
pub(crate) mod net;
pub mod score;
pub(crate) mod spec;
pub mod table;
pub(crate) mod tap;
mod timeout;
pub(crate) mod tool;
pub(crate) mod window;
pub mod work;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use score::{CaseScore, Counts, Unit};
pub use spec::{
    matrix, BurstSpec, Case, NagleSpec, RunqSpec, RunqVariant, Scale, Spec, Split, TimeoutSpec,
    TimeoutStyle, WindowSpec,
};
pub use tool::Tools;

use crate::scenario::ScenarioError;

/// Errors running a case. Each says what failed and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TruthError {
    /// Building the network, starting a program or capturing failed.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// Building the namespaces or veths failed (or not root).
    #[error("building the case's network: {0}")]
    Netns(#[from] tailhunt_netlab::netns::NetnsError),
    /// A file could not be written or read.
    #[error("cannot use '{path}': {source} (give a writable output directory)")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A program's output is not the JSON expected.
    #[error("{what} printed no usable JSON ({detail}); it said on stderr: {stderr}")]
    Output {
        /// Which program.
        what: String,
        /// What is wrong.
        detail: String,
        /// Its stderr.
        stderr: String,
    },
    /// The tailhunt binary is missing.
    #[error("no tailhunt binary at '{0}': build it (cargo build --release -p tailhunt) or set TAILHUNT_BIN")]
    NoBinary(PathBuf),
    /// A cgroup could not be created or written.
    #[error("cgroup '{path}': {source} (the CPU cases need root and a cgroup2 mount plus the v1 cpu controller)")]
    Cgroup {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A workload could not run as asked.
    #[error("workload: {0}")]
    Work(String),
    /// Stopped by [`request_stop`] (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
}

static STOP: std::sync::LazyLock<std::sync::Arc<AtomicBool>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(AtomicBool::new(false)));

/// Asks running cases to stop at their next wait; their guards then clean up. For a Ctrl-C
/// handler.
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether [`request_stop`] was called.
pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Makes SIGINT, SIGTERM and SIGHUP request a stop (cases end their waits and clean up).
pub fn stop_on_signals() -> std::io::Result<()> {
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&STOP))?;
    }
    Ok(())
}

/// Sleeps `d`, waking early with [`TruthError::Interrupted`] when a stop was requested.
pub(crate) fn pause(d: Duration) -> Result<(), TruthError> {
    let end = Instant::now() + d;
    loop {
        if stopping() {
            return Err(TruthError::Interrupted);
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// The current time on the realtime clock (what packets and runq intervals are stamped with),
/// epoch ns.
pub(crate) fn wall_ns() -> i64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// What a case planted, for one detector: the unit it must name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Planted {
    /// The detector that should fire.
    pub detector: String,
    /// What it should name.
    pub unit: Unit,
    /// How many distinct units of this pattern exist (several connections to one server).
    pub count: u32,
    /// Why this is the truth, in words.
    pub note: String,
}

/// What kind of evidence a view is, which decides the detectors that can speak on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViewKind {
    /// A packet capture (`tailhunt pcap`): microburst, link-saturated, nagle-stall,
    /// receive-window-limited, application-timeout.
    Capture,
    /// A transfer's own TCP_INFO (`tailhunt transfer client`): receive-window-limited,
    /// application-timeout.
    TcpInfo,
    /// A load run (`tailhunt load`): latency-rises-as-load-falls.
    Load,
    /// A run-queue trace (`tailhunt runq`): noisy-neighbor, cpu-throttled.
    Runq,
    /// A traffic program's own record (a single-rate load run), kept for its warnings; no
    /// detector is scored on it.
    Record,
}

impl ViewKind {
    /// Whether `detector` runs on this kind of view.
    pub fn runs(self, detector: &str) -> bool {
        let on: &[&str] = match self {
            ViewKind::Capture => &[
                "microburst",
                "link-saturated",
                "nagle-stall",
                "receive-window-limited",
                "application-timeout",
            ],
            ViewKind::TcpInfo => &["receive-window-limited", "application-timeout"],
            ViewKind::Load => &["latency-rises-as-load-falls"],
            ViewKind::Runq => &["noisy-neighbor", "cpu-throttled"],
            ViewKind::Record => &[],
        };
        on.contains(&detector)
    }
}

/// One capture, run-queue trace or load run of a case that tailhunt analyses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// Its name in the results (`receiver`, `sender`, `cache+requests`, `runq`).
    pub name: String,
    /// What kind of evidence it is.
    pub kind: ViewKind,
    /// Where it was taken and what it can see, in words.
    pub position: String,
    /// The tailhunt command line that analysed it (after `tailhunt --db DB --json`).
    pub analysis: Vec<String>,
    /// The load target a sweep's findings are about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The truth of one case, as written to `truth.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    /// Case name.
    pub case: String,
    /// Seed of the matrix it came from.
    pub seed: u64,
    /// A healthy twin: nothing planted.
    pub twin: bool,
    /// The case's parameters.
    pub spec: Spec,
    /// What was planted (empty for a twin).
    pub planted: Vec<Planted>,
    /// Causes the case set up but that had no effect by the programs' own records (a shaper
    /// the machine could not fill, a victim that did not get slower): not scored, listed.
    #[serde(default)]
    pub unplanted: Vec<Planted>,
    /// Cgroups that took a contended CPU on purpose, with when they started (epoch ns): a
    /// finding blaming one of them for another cgroup's wait is a side effect, not an error.
    #[serde(default)]
    pub takers: Vec<(String, i64)>,
    /// The views tailhunt analysed.
    pub views: Vec<View>,
    /// What the programs recorded themselves (their own JSON outputs and measurements).
    pub programs: Value,
    /// Facts derived from the programs' records that the scoring checks explanations against
    /// (e.g. `response_bytes_before_close`).
    pub facts: Value,
}

impl Truth {
    /// The truth of `case` (no takers).
    pub(crate) fn of(
        case: &Case,
        planted: Vec<Planted>,
        views: Views,
        programs: Value,
        facts: Value,
    ) -> (Truth, Vec<(String, Value)>) {
        let truth = Truth {
            case: case.name.clone(),
            seed: case.seed,
            twin: case.twin,
            spec: case.spec.clone(),
            planted,
            unplanted: Vec::new(),
            takers: Vec::new(),
            views: views.views,
            programs,
            facts,
        };
        (truth, views.outputs)
    }

    /// Moves the planted units for which `no_effect` holds to `unplanted`, saying `why`.
    pub(crate) fn set_aside(&mut self, no_effect: impl Fn(&Planted) -> bool, why: &str) {
        let (out, keep): (Vec<Planted>, Vec<Planted>) = std::mem::take(&mut self.planted)
            .into_iter()
            .partition(no_effect);
        self.planted = keep;
        self.unplanted.extend(out.into_iter().map(|mut p| {
            p.note = format!("{}; not scored: {why}", p.note);
            p
        }));
    }
}

/// A case's views and tailhunt's document for each, in order.
#[derive(Debug, Default)]
pub(crate) struct Views {
    pub(crate) views: Vec<View>,
    pub(crate) outputs: Vec<(String, Value)>,
}

impl Views {
    /// Adds a view and its document.
    pub(crate) fn add(&mut self, view: View, doc: Value) {
        self.outputs.push((view.name.clone(), doc));
        self.views.push(view);
    }

    /// Adds a program's own document as a view (`kind` says which detectors speak on it).
    pub(crate) fn program(
        &mut self,
        name: &str,
        kind: ViewKind,
        position: &str,
        target: Option<String>,
        doc: Value,
    ) {
        let view = View {
            name: name.into(),
            kind,
            position: position.into(),
            analysis: Vec::new(),
            target,
        };
        self.add(view, doc);
    }
}

/// A case that ran: its truth, what tailhunt said per view, and the score.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The truth.
    pub truth: Truth,
    /// Per view: tailhunt's JSON document (`findings` inside).
    pub outputs: Vec<(String, Value)>,
    /// The score.
    pub score: CaseScore,
}

/// Runs `case` in `out/<case name>/`, writing `truth.json`, the captures, tailhunt's outputs
/// (`<view>.json`) and `score.json`.
pub fn run_case(case: &Case, tools: &Tools, out: &Path) -> Result<CaseResult, TruthError> {
    let dir = out.join(&case.name);
    let io = |path: &Path, source| TruthError::Io {
        path: path.to_path_buf(),
        source,
    };
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let dir = dir.canonicalize().map_err(|e| io(&dir, e))?;
    let ctx = tools.for_case(&dir);
    let (truth, outputs) = match &case.spec {
        Spec::Window(s) => window::run(case, s, &ctx)?,
        Spec::Timeout(s) => timeout::run(case, s, &ctx)?,
        Spec::Burst(s) => burst::run(case, s, &ctx)?,
        Spec::Nagle(s) => nagle::run(case, s, &ctx)?,
        Spec::Runq(v) => cpu::run(case, v.variant, &ctx)?,
    };
    let score = score::score(&truth, &outputs);
    write_json(&dir.join("truth.json"), &truth)?;
    write_json(&dir.join("score.json"), &score)?;
    for (view, doc) in &outputs {
        write_json(&dir.join(format!("{view}.json")), doc)?;
    }
    Ok(CaseResult {
        truth,
        outputs,
        score,
    })
}

/// Writes `value` as pretty JSON.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), TruthError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| TruthError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(path, text).map_err(|source| TruthError::Io {
        path: path.to_path_buf(),
        source,
    })
}
