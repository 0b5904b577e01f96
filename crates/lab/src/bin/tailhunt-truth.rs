//! `tailhunt-truth`: runs the ground-truth cases against the real `tailhunt` binary and scores
//! its detectors (see `tailhunt_lab::truth`).
//!
//! ```text
//! tailhunt-truth matrix --quick --seed 1 --out /tmp/truth     # a few minutes, needs root
//! tailhunt-truth case runq-neighbour-system --out /tmp/truth  # one case
//! tailhunt-truth list --full
//! ```
//!
//! Exit status: 0, 1 when `--assert` finds a detector below its target, 2 on an error, 130
//! when interrupted (everything the cases created is removed first).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use tailhunt_lab::truth::abandon::{Ask, Ending};
use tailhunt_lab::truth::table::{detector_table, markdown, misses, summarize};
use tailhunt_lab::truth::work::{self, WorkKind, WorkSpec};
use tailhunt_lab::truth::{matrix, run_case, stopping, Case, CaseScore, Scale, Tools, TruthError};

/// A line on stdout, dropped when stdout has gone away (`tailhunt-truth list | head`):
/// `println!` panics there.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// A line on stderr, dropped when stderr has gone away, as [`say!`] does for stdout.
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

#[derive(Parser)]
#[command(
    name = "tailhunt-truth",
    version,
    about = "Score tailhunt's detectors on cases with independent ground truth"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Args)]
struct Common {
    /// Seed of the matrix (parameters it draws: round trips, rates, connection counts).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for each case's captures, truth.json, tailhunt's outputs and score.json.
    #[arg(long, default_value = "truth-out")]
    out: PathBuf,
    /// The tailhunt binary under test (default: $TAILHUNT_BIN, beside this one, or
    /// target/release/tailhunt).
    #[arg(long)]
    tailhunt: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the cases of a matrix.
    List {
        /// The full matrix instead of the quick one.
        #[arg(long)]
        full: bool,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Run one case (by name, from the full matrix of the seed) and print its score.
    Case {
        /// The case's name (`tailhunt-truth list --full`).
        name: String,
        #[command(flatten)]
        common: Common,
    },
    /// Run a matrix and print per-detector precision and recall, then every miss.
    Matrix {
        /// The quick matrix (the default): one case per class and its twin, a few minutes.
        #[arg(long, conflicts_with = "full")]
        quick: bool,
        /// The full matrix.
        #[arg(long)]
        full: bool,
        /// Only cases whose name starts with this.
        #[arg(long)]
        only: Option<String>,
        /// Fail (exit 1) when a detector's precision or recall is below this, a healthy twin
        /// has a finding at or above medium confidence, or a case does not run.
        #[arg(long)]
        assert: Option<f64>,
        /// Also write the results as Markdown sections here (bench/detectors.sh adds the
        /// heading and the machine).
        #[arg(long)]
        markdown: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Download from a `tailhunt transfer server` (or send one request to `tailhunt serve
    /// tcp`) and give up at the timeout with a reset (the RST timeout cases start this).
    #[command(hide = true)]
    Abandon {
        /// The server, HOST:PORT.
        addr: std::net::SocketAddr,
        /// Bytes to ask a transfer server for.
        #[arg(long, required_unless_present = "frame")]
        bytes: Option<u64>,
        /// Send one request frame to `tailhunt serve tcp` instead.
        #[arg(long, conflicts_with = "bytes")]
        frame: bool,
        /// Abort at the timeout (SO_LINGER 0) instead of closing with data unread.
        #[arg(long)]
        abort: bool,
        /// The timeout, ms.
        #[arg(long)]
        timeout_ms: u64,
        /// Where to write its record.
        #[arg(long)]
        out: PathBuf,
    },
    /// Run one CPU workload (the CPU cases start these).
    #[command(hide = true)]
    Work {
        /// hog, half-hog, sleeper or worker.
        kind: String,
        /// How long.
        #[arg(long)]
        seconds: f64,
        /// CPU to pin to.
        #[arg(long)]
        cpu: Option<usize>,
        /// Cgroup directory to join first (repeatable).
        #[arg(long)]
        cgroup: Vec<PathBuf>,
        /// Where to write its record.
        #[arg(long)]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Cmd::Work {
            kind,
            seconds,
            cpu,
            cgroup,
            out,
        } => run_work(&kind, seconds, cpu, cgroup, &out),
        Cmd::Abandon {
            addr,
            bytes,
            frame,
            abort,
            timeout_ms,
            out,
        } => {
            let ask = match (frame, bytes) {
                (false, Some(b)) => Ask::Download(b),
                _ => Ask::Frame,
            };
            let ending = if abort { Ending::Abort } else { Ending::Unread };
            abandon(addr, ask, ending, timeout_ms, &out)
        }
        Cmd::List { full, seed } => {
            for c in matrix(scale(full), seed) {
                say!("{}{}", c.name, if c.twin { "  (healthy twin)" } else { "" });
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Case { name, common } => {
            let Some(case) = matrix(Scale::Full, common.seed)
                .into_iter()
                .find(|c| c.name == name)
            else {
                tell!("error: no case '{name}' in the matrix of seed {}: see `tailhunt-truth list --full`", common.seed);
                return ExitCode::from(2);
            };
            run_cases(&[case], &common, None, None)
        }
        Cmd::Matrix {
            quick: _,
            full,
            only,
            assert,
            markdown,
            common,
        } => {
            let cases: Vec<Case> = matrix(scale(full), common.seed)
                .into_iter()
                .filter(|c| only.as_ref().is_none_or(|o| c.name.starts_with(o.as_str())))
                .collect();
            run_cases(&cases, &common, assert, markdown)
        }
    };
    r.unwrap_or_else(|e| {
        tell!("error: {e}");
        ExitCode::from(if matches!(e, TruthError::Interrupted) {
            130
        } else {
            2
        })
    })
}

fn scale(full: bool) -> Scale {
    if full {
        Scale::Full
    } else {
        Scale::Quick
    }
}

fn run_work(
    kind: &str,
    seconds: f64,
    cpu: Option<usize>,
    cgroups: Vec<PathBuf>,
    out: &PathBuf,
) -> Result<ExitCode, TruthError> {
    let kind = WorkKind::from_name(kind).ok_or_else(|| {
        TruthError::Work(format!(
            "unknown workload '{kind}': hog, half-hog, sleeper or worker"
        ))
    })?;
    let record = work::run(&WorkSpec {
        kind,
        seconds,
        cpu,
        cgroups,
    })?;
    std::fs::write(out, record.to_string()).map_err(|source| TruthError::Io {
        path: out.clone(),
        source,
    })?;
    Ok(ExitCode::SUCCESS)
}

fn abandon(
    addr: std::net::SocketAddr,
    ask: Ask,
    ending: Ending,
    timeout_ms: u64,
    out: &PathBuf,
) -> Result<ExitCode, TruthError> {
    let record = tailhunt_lab::truth::abandon::abandon(
        addr,
        ask,
        ending,
        std::time::Duration::from_millis(timeout_ms),
    )?;
    std::fs::write(out, record.to_string()).map_err(|source| TruthError::Io {
        path: out.clone(),
        source,
    })?;
    Ok(ExitCode::SUCCESS)
}

fn run_cases(
    cases: &[Case],
    common: &Common,
    assert: Option<f64>,
    md: Option<PathBuf>,
) -> Result<ExitCode, TruthError> {
    let tools = Tools::locate(common.tailhunt.clone())?;
    let _ = tailhunt_lab::truth::stop_on_signals();
    let mut scores: Vec<CaseScore> = Vec::new();
    let mut failed = Vec::new();
    let began = Instant::now();
    for (i, case) in cases.iter().enumerate() {
        let t = Instant::now();
        eprint!("[{}/{}] {} ... ", i + 1, cases.len(), case.name);
        // A case that fails to run (a program late on a loaded host) gets a second chance.
        let r = run_case(case, &tools, &common.out).or_else(|e| match e {
            _ if stopping() => Err(TruthError::Interrupted),
            TruthError::Interrupted => Err(e),
            e => {
                eprint!("({e}; again) ");
                run_case(case, &tools, &common.out)
            }
        });
        match r {
            Ok(r) => {
                let mut sum = tailhunt_lab::truth::Counts::default();
                r.score.counts.values().for_each(|c| sum.add(*c));
                tell!(
                    "{:.1} s: TP {} FP {} FN {}{}",
                    t.elapsed().as_secs_f64(),
                    sum.tp,
                    sum.fp,
                    sum.fn_,
                    if r.score.twin_failures.is_empty() {
                        ""
                    } else {
                        ", twin failure"
                    }
                );
                scores.push(r.score);
            }
            Err(_) if stopping() => return Err(TruthError::Interrupted),
            Err(e) => {
                tell!("did not run: {e}");
                failed.push((case.name.clone(), e.to_string()));
            }
        }
    }
    let s = summarize(&scores, &failed);
    say!("{}", detector_table(&s));
    let m = misses(&scores);
    if !m.is_empty() {
        say!("Misses, false positives and contradictions:\n\n{m}");
    }
    tell!(
        "{} case(s), seed {}, in {:.0} s",
        cases.len(),
        common.seed,
        began.elapsed().as_secs_f64()
    );
    if let Some(path) = md {
        let text = markdown(&s, &scores);
        std::fs::write(&path, text).map_err(|source| TruthError::Io { path, source })?;
    }
    let all = serde_json::json!({"scores": scores, "failed": failed});
    let _ = std::fs::write(common.out.join("scores.json"), all.to_string());
    let below = assert.map(|t| s.below(t)).unwrap_or_default();
    if !below.is_empty() {
        say!("Below target:");
        for b in &below {
            say!("- {b}");
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
