//! Flags and subcommands.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Find out why a service's tail latency is bad.
///
/// Exit status: 0 on success, 2 on any error (bad input, missing run, unreadable store).
/// A closed output pipe (`tailhunt runs | head -1`) counts as success.
#[derive(Debug, Parser)]
#[command(name = "tailhunt", version, about, long_about = None, after_help = "Start with: tailhunt lab synth trimodal -o t.csv && tailhunt import t.csv && tailhunt analyze latest")]
pub struct Cli {
    /// The store (SQLite file) to read and write.
    #[arg(
        long,
        global = true,
        env = "TAILHUNT_DB",
        default_value = "tailhunt.db",
        value_name = "PATH"
    )]
    pub db: PathBuf,

    /// Print one JSON document instead of text (schemas in schema/).
    #[arg(long, global = true)]
    pub json: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Import latencies from CSV, JSON lines or an HdrHistogram interval log as a new run.
    Import(ImportArgs),
    /// List the runs in the store.
    Runs(RunsArgs),
    /// Distribution of a run's latencies: percentiles with confidence intervals, modes, gap
    /// warnings, floor check, comparison with another run.
    Analyze(AnalyzeArgs),
    /// Write a run's samples out as CSV, JSON lines or an HdrHistogram interval log.
    Export(ExportArgs),
    /// The lab: synthetic data sets (and, later, reproduction scenarios).
    Lab(LabArgs),
}

/// Input formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum InputFormat {
    /// Comma/tab/semicolon-separated values.
    Csv,
    /// One JSON object per line.
    Jsonl,
    /// HdrHistogram interval log.
    Hlog,
}

/// `tailhunt import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// File to read (`-` for standard input).
    ///
    /// CSV: one latency per line (`12ms`, `450us`, or bare numbers with --unit or a header such
    /// as `latency_ms`), or `timestamp,latency`; optional `outcome` and `series` columns.
    /// JSON lines: objects with `latency`/`latency_ms`/..., optional `ts`, `outcome`, `series`.
    /// HdrHistogram interval logs (`.hlog`, wrk2 -U, jHiccup).
    pub file: PathBuf,
    /// Format; detected from the extension and content when absent.
    #[arg(long, value_enum)]
    pub format: Option<InputFormat>,
    /// Unit of bare numbers (ns, us, ms, s); for .hlog, the unit the log's values are in
    /// (default ns; wrk2 writes us).
    #[arg(long)]
    pub unit: Option<String>,
    /// Name of the series when the file does not name it.
    #[arg(long, default_value = "latency")]
    pub name: String,
    /// Print only the new run id (for scripts).
    #[arg(short, long, conflicts_with = "json")]
    pub quiet: bool,
}

/// `tailhunt runs`.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Delete this run (`latest`, an id or a unique prefix) and everything in it.
    #[arg(long, value_name = "RUN")]
    pub delete: Option<String>,
}

/// `tailhunt analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Run to analyse: `latest`, an id, or a unique prefix of one. A path to a file imports it
    /// first (as `tailhunt import FILE` would) and analyses the new run.
    #[arg(default_value = "latest", value_name = "RUN|FILE")]
    pub run: String,
    /// With a FILE: unit of bare numbers in it (as `import --unit`).
    #[arg(long)]
    pub unit: Option<String>,
    /// Only series with this name (or `name{labels}`); default all.
    #[arg(long)]
    pub series: Vec<String>,
    /// Expected latency floor, e.g. 450us (a ping or "do nothing" server RTT).
    #[arg(long, value_name = "DURATION")]
    pub expect_floor: Option<String>,
    /// Take the expected floor from another run's minimum: RUN or RUN:SERIES.
    #[arg(long, value_name = "RUN[:SERIES]", conflicts_with = "expect_floor")]
    pub floor_from: Option<String>,
    /// Compare with a baseline: RUN or RUN:SERIES (the "before").
    #[arg(long, value_name = "RUN[:SERIES]")]
    pub compare: Option<String>,
    /// Leave errors and timeouts out of the distribution (they are still counted).
    #[arg(long)]
    pub ok_only: bool,
    /// Percentiles to report, comma-separated, as quantiles or percentiles (0.9 or 90).
    #[arg(long, value_delimiter = ',', default_value = "50,90,99,99.9")]
    pub percentiles: Vec<f64>,
}

/// Export formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    /// One sample per line with a header.
    Csv,
    /// One JSON object per sample.
    Jsonl,
    /// HdrHistogram interval log (one histogram per second; values in ns).
    Hlog,
}

/// `tailhunt export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Run to export.
    #[arg(default_value = "latest")]
    pub run: String,
    /// Only these series.
    #[arg(long)]
    pub series: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "csv")]
    pub format: ExportFormat,
    /// Output file (default standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// `tailhunt lab`.
#[derive(Debug, Args)]
pub struct LabArgs {
    /// Lab subcommand.
    #[command(subcommand)]
    pub command: LabCommand,
}

/// Lab subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Write a synthetic latency data set with known ground truth as CSV (latency_ns).
    Synth(SynthArgs),
}

/// Shapes `lab synth` can generate.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shape {
    /// Modes near 0.45 ms, 10 ms and 20 ms holding 88/8/4% (--shift moves mass down).
    Trimodal,
    /// One log-normal mode (--median, --sigma).
    Lognormal,
    /// Pareto tail from --median as its minimum (--shape).
    Pareto,
}

/// `tailhunt lab synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Which distribution.
    #[arg(value_enum)]
    pub shape: Shape,
    /// Number of samples.
    #[arg(long, default_value_t = 100_000)]
    pub count: usize,
    /// Random seed (same seed, same data).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Trimodal: share of samples (0..0.12, e.g. 0.02) moved from the upper modes to the lowest.
    #[arg(long, default_value_t = 0.0)]
    pub shift: f64,
    /// Log-normal median / Pareto minimum.
    #[arg(long, default_value = "1ms")]
    pub median: String,
    /// Log-normal: standard deviation of ln(latency).
    #[arg(long, default_value_t = 0.5)]
    pub sigma: f64,
    /// Pareto: tail index (smaller is heavier).
    #[arg(long, default_value_t = 1.5)]
    pub tail: f64,
    /// Output file (default standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}
