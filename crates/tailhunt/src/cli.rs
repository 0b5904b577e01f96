//! Flags and subcommands.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tailhunt_import::Format;
use tailhunt_load::schedule::Arrival;
use tailhunt_load::serve::ServeProto;
use tailhunt_load::sweep::Order;
use tailhunt_model::evidence::runq::{Attach, Hierarchy, TimestampStore};
use tailhunt_report::export::ExportFormat;

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

    /// Tag the runs this command records (their params get `"tag"`; `runs` shows it): `lab
    /// run` tags every run with its scenario.
    #[arg(long, global = true, env = "TAILHUNT_TAG", value_name = "NAME")]
    pub tag: Option<String>,

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
    /// Open-loop load: requests on a fixed or Poisson timetable, latency from the intended send
    /// time, one rate or a sweep of rates (low ones too).
    Load(LoadArgs),
    /// Reference ("do nothing") servers to measure against: tcp frames, udp echo, http.
    Serve(ServeArgs),
    /// Run the detectors on a run and print what they found.
    Diagnose(DiagnoseArgs),
    /// One self-contained HTML file with the findings first and the charts that show their
    /// evidence (histograms, latency against rate, bytes per millisecond, TCP windows,
    /// run-queue latency per cgroup); several runs are drawn together for comparison.
    Report(ReportArgs),
    /// Analyse packet captures in one streaming pass: bandwidth per millisecond and bursts,
    /// TCP flows (RTT, windows, retransmissions, closes), request latency from data turns,
    /// and the capture detectors (microburst, link-saturated, nagle-stall,
    /// receive-window-limited, application-timeout).
    Pcap(PcapArgs),
    /// Capture from a live interface (libpcap), analyse on the fly like `pcap`, and optionally
    /// write the packets to a file.
    Capture(CaptureArgs),
    /// Run-queue latency per cgroup, traced in the kernel with eBPF: percentiles per interval,
    /// who took the CPU (preemptions and waits by cgroup), CPU-quota throttling and pressure,
    /// and the noisy-neighbor / cpu-throttled detectors.
    Runq(RunqArgs),
    /// The lab: scenarios that plant each root cause, measure it with tailhunt's own commands
    /// and validate the fix (`lab run`), synthetic data sets with known ground truth, and a
    /// wide-area link emulator between network namespaces.
    Lab(LabArgs),
    /// Bulk-transfer test: a download with chosen socket options (SO_RCVBUF, SO_SNDBUF,
    /// TCP_NODELAY) and a client timeout, each end sampling its TCP_INFO every few ms.
    Transfer(TransferArgs),
    /// Sample every TCP socket through inet_diag (what `ss -ti` shows), with the setsockopt
    /// audit (eBPF): window-limited, sndbuf-limited and zero-window connections and who set
    /// their buffers.
    Sockets(SocketsArgs),
    /// The method as one command: the network floor, a rate sweep from low rates up until
    /// latency or errors climb, meanwhile a capture, TCP_INFO and (local targets) run-queue
    /// tracing as root, then every detector and one ranked verdict.
    Hunt(HuntArgs),
    /// Probe services continuously: every probe once per round (TCP connect, echo, DNS, HTTP,
    /// Redis, memcached, PostgreSQL, MySQL, ICMP, per-hop path, disk, a command) in random order on a fixed
    /// cadence, every sample kept (timeouts too), variants side by side (by name / by IP, fresh /
    /// reused connection, first / second request).
    Probe(ProbeArgs),
    /// The agent: the configured probes (and a mesh), run-queue tracing and the socket sampler
    /// run continuously into a rolling store, detectors on each window, and /metrics
    /// (OpenMetrics text or native histograms), /findings, /healthz and remote write with an
    /// on-disk queue.
    Agent(AgentArgs),
    /// The mesh's latency matrix (p50/p99 per pair of agents) from a Prometheus-API server
    /// that holds the agents' series, the worst pairs named.
    Mesh(MeshArgs),
}

/// `tailhunt mesh`.
#[derive(Debug, Args)]
pub struct MeshArgs {
    /// The Prometheus-API server's base URL, e.g. http://127.0.0.1:9090.
    #[arg(long = "from", value_name = "URL")]
    pub from: String,
    /// How far back the quantiles look (a PromQL range: 30s, 5m, 1h).
    #[arg(long, default_value = "5m")]
    pub range: String,
    /// Which echo: tcp-echo or udp-echo.
    #[arg(long, default_value = "tcp-echo", value_parser = ["tcp-echo", "udp-echo"])]
    pub kind: String,
    /// How many of the worst pairs to name.
    #[arg(long, default_value_t = 5)]
    pub worst: usize,
}

/// `tailhunt agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The configuration file, agent.toml (its sections and keys: docs/agent.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Listen address, instead of the file's (port 0 picks a free one and prints it).
    #[arg(long)]
    pub listen: Option<String>,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = crate::flags::duration)]
    pub duration: Option<Duration>,
}

/// `tailhunt probe`.
#[derive(Debug, Args)]
#[command(
    after_help = "Quick form: tcp://H:P (connect), tcp-echo://H:P, udp://H:P (echo), http://H:P/PATH, redis://H:P/KEY, memcached://H:P/KEY, postgres://USER[:PASS]@H:P/DB, mysql://USER[:PASS]@H:P/DB, dns://SERVER:PORT/NAME (dns:///NAME: the system resolver), icmp://HOST, path://HOST (per hop), disk:///PATH. The file format: docs/probe.md."
)]
pub struct ProbeArgs {
    /// Probes as URLs (instead of --config).
    #[arg(value_name = "URL", conflicts_with = "config")]
    pub urls: Vec<String>,
    /// The probes' TOML file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// One round every this long (default: the file's `interval`, else 10s).
    #[arg(long, value_parser = crate::flags::duration)]
    pub interval: Option<Duration>,
    /// Per-measurement timeout of probes that set none (default: the file's, else 1s).
    #[arg(long, value_parser = crate::flags::duration)]
    pub timeout: Option<Duration>,
    /// One round, then stop.
    #[arg(long, conflicts_with = "duration")]
    pub once: bool,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = crate::flags::duration)]
    pub duration: Option<Duration>,
    /// Seed of the order and jitter (default: the file's, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Longest time samples wait before they are committed to the store: what a `kill -9`
    /// can lose (10ms .. 10s).
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = crate::flags::commit_interval)]
    pub commit_interval: Duration,
}

/// `tailhunt hunt`.
#[derive(Debug, Args)]
pub struct HuntArgs {
    /// Target, as for `load`: tcp://HOST:PORT, udp://HOST:PORT, http://HOST:PORT/PATH or
    /// https://... (GET, or --method/--header/--body; --ca-file for a private CA),
    /// redis://HOST:PORT/KEY or redis://HOST:PORT/CMD/ARG/..., memcached://HOST:PORT/KEY or
    /// memcached://HOST:PORT/set/KEY. More: docs/hunt.md.
    pub target: String,
    /// Everything, the floor to the verdict, fits in this.
    #[arg(long, default_value = "2m", value_parser = crate::flags::duration)]
    pub budget: Duration,
    /// No step offers more than this many requests per second.
    #[arg(long, default_value = "20k", value_parser = crate::flags::request_rate)]
    pub max_rate: f64,
    /// Connections of the sweep. One by default: what a connection sees depends on its own
    /// request rate (Nagle's algorithm meets the delayed ACK only when a connection's requests
    /// come less than ~40 ms apart), and one connection sweeps the widest range of it.
    #[arg(long, default_value_t = 1)]
    pub conns: usize,
    /// The store to write the hunt's runs to (default: --db).
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// Seed of the random step order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The HTML report of the hunt's runs (findings first, then the charts) [default:
    /// tailhunt-hunt-ID.html beside the store].
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write no HTML report.
    #[arg(long)]
    pub no_report: bool,
    #[command(flatten)]
    pub request: RequestArgs,
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
    pub format: Option<Format>,
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
    /// Percentiles to report, comma-separated, as quantiles or percentiles (0.9 or 90; above 1
    /// is a percent). Each is the nearest-rank one, its rank ceil(q·n) computed exactly.
    #[arg(long, value_delimiter = ',', default_value = "50,90,99,99.9")]
    pub percentiles: Vec<tailhunt_histogram::Quantile>,
    /// Also over time: p50/p90/p99 per interval (a sparkline each), with the change points
    /// (E-divisive over the three at once, permutation test) and periods (a minute to a day)
    /// marked. Timed series only (probe runs, imports with timestamps).
    #[arg(long)]
    pub over_time: bool,
    /// Interval width for --over-time, e.g. 1m (default: about 100 samples per interval).
    #[arg(long, value_name = "DURATION", requires = "over_time")]
    pub interval: Option<String>,
}

/// `tailhunt export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Run to export.
    #[arg(default_value = "latest")]
    pub run: String,
    /// Every flow of a capture run (`pcap`, `capture`) as CSV, one row per flow, instead of
    /// series (the run's report keeps only the flows worth printing).
    #[arg(long, conflicts_with_all = ["series", "format"])]
    pub flows: bool,
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
    /// Emulate a wide-area link (delay, jitter, rate, queue, loss) between two namespaces on
    /// TUN devices, until Ctrl-C or --duration; then print what it forwarded and dropped.
    Link(LinkArgs),
    /// List the scenarios: the cause each plants, what it measures, the fix it validates,
    /// what it needs and how long it takes.
    List,
    /// Reproduce root causes: build each scenario, measure with tailhunt's own commands, run
    /// the detectors without telling them what was planted, apply the fix, measure again, and
    /// print the verdict table. Exit 0 when every scenario passed, 1 when one did not.
    Run(LabRunArgs),
    /// Remove what an earlier `lab run` left after a crash or kill -9 (its namespaces with
    /// their veth/TUN devices and qdiscs, cgroups and processes), found by the lab's own
    /// naming and state files under /run/tailhunt-lab.
    Clean,
    /// One CPU workload of the run-queue scenarios (started by `lab run`).
    #[command(hide = true)]
    Work(LabWorkArgs),
}

/// `tailhunt lab work` (internal).
#[derive(Debug, Args)]
pub struct LabWorkArgs {
    /// hog, half-hog, sleeper or worker.
    pub kind: String,
    /// How long, seconds.
    #[arg(long)]
    pub seconds: f64,
    /// CPU to pin to.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Cgroup directory to join first (repeatable).
    #[arg(long)]
    pub cgroup: Vec<PathBuf>,
    /// Where to write its record (JSON).
    #[arg(long)]
    pub out: PathBuf,
}

/// `tailhunt lab run`.
#[derive(Debug, Args)]
#[command(after_help = "Example: sudo tailhunt lab run all --scale quick")]
pub struct LabRunArgs {
    /// Scenarios to run (`tailhunt lab list`), or `all`.
    #[arg(required = true, value_name = "NAME|all")]
    pub names: Vec<String>,
    /// quick (all in about 5 minutes) or full (the durations a careful engineer would use).
    #[arg(long, value_enum, default_value = "quick")]
    pub scale: LabScale,
    /// Do not apply the fixes (measure and diagnose only).
    #[arg(long)]
    pub no_fix: bool,
    /// Keep the captures and records (in the work directory, printed at the end).
    #[arg(long)]
    pub keep: bool,
    /// The store the scenarios' runs go to (default: --db).
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// Where captures go while a scenario runs (default: a directory beside the store).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// The HTML report of every scenario's runs, each before drawn against its after
    /// [default: STORE-lab-report.html beside the store].
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write no HTML report.
    #[arg(long)]
    pub no_report: bool,
}

/// `--scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LabScale {
    /// Short steps.
    Quick,
    /// Careful durations.
    Full,
}

/// `tailhunt lab link`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: tailhunt lab link --create --delay 40ms --rate 100mbit --duration 60s"
)]
pub struct LinkArgs {
    /// Namespace of end A (`ip netns list`); the link's forward direction is A to B.
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present = "create",
        conflicts_with = "create"
    )]
    pub a_ns: Option<String>,
    /// Namespace of end B.
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present = "create",
        conflicts_with = "create"
    )]
    pub b_ns: Option<String>,
    /// Create two namespaces for the link (deleted on exit) and print how to use them.
    #[arg(long)]
    pub create: bool,
    /// Address of end A, with prefix length.
    #[arg(long, default_value = "198.18.10.1/30", value_name = "CIDR")]
    pub a_addr: String,
    /// Address of end B, with prefix length.
    #[arg(long, default_value = "198.18.10.2/30", value_name = "CIDR")]
    pub b_addr: String,
    /// One-way delay, each direction (the round trip is twice this).
    #[arg(long, default_value = "0ms", value_parser = crate::flags::duration)]
    pub delay: Duration,
    /// Jitter: each packet's delay is uniform in delay +/- jitter; packets are never reordered.
    #[arg(long, default_value = "0ms", value_parser = crate::flags::duration)]
    pub jitter: Duration,
    /// Rate limit each way, e.g. 100mbit, 20mbit (default unlimited).
    #[arg(long, value_parser = crate::flags::bit_rate)]
    pub rate: Option<u64>,
    /// Drop-tail queue in front of the rate limit, e.g. 1MB, 64KiB.
    #[arg(long, default_value = "1MB", value_parser = crate::flags::bytes)]
    pub queue: u64,
    /// Probability of dropping each packet, each way (0..1, e.g. 0.001).
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    /// Seed for loss and jitter.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = crate::flags::duration)]
    pub duration: Option<Duration>,
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

/// `tailhunt load`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("rates").required(true).args(["rate", "sweep"]))]
pub struct LoadArgs {
    /// Target: tcp://HOST:PORT (tailhunt frames), udp://HOST:PORT, http://HOST:PORT/PATH or
    /// https://... (GET, or --method/--header/--body), redis://HOST:PORT/KEY (GET) or
    /// redis://HOST:PORT/CMD/ARG/... (any command; SET/KEY sends --request-bytes),
    /// memcached://HOST:PORT/KEY (get) or memcached://HOST:PORT/set/KEY. More: docs/load.md.
    pub url: String,
    /// Offered rate, requests per second (e.g. 1000, 5k).
    #[arg(long)]
    pub rate: Option<String>,
    /// Several rates, each its own step and series: e.g. 50,200,1k,5k,20k,40k.
    #[arg(long)]
    pub sweep: Option<String>,
    /// Measured time per step.
    #[arg(long, default_value = "10s", value_parser = crate::flags::duration)]
    pub duration: Duration,
    /// Warm-up per step before measuring (kept as its own series, not analysed by default);
    /// default: 1 s, or a fifth of --duration when that is shorter.
    #[arg(long, value_parser = crate::flags::duration)]
    pub warmup: Option<Duration>,
    /// Connections (UDP: sockets).
    #[arg(long, default_value_t = 4)]
    pub conns: usize,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Requests in flight per connection before new ones wait in the client (pipelining).
    #[arg(long, default_value_t = 1000)]
    pub max_inflight: usize,
    /// Give up on a request this long after its intended send time.
    #[arg(long, default_value = "5s", value_parser = crate::flags::duration)]
    pub timeout: Duration,
    /// TCP_NODELAY on the client's sockets (default false: the kernel default most clients get).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub nodelay: bool,
    /// Write each request in two pieces (header, then body): the write-write-read pattern.
    #[arg(long)]
    pub split_writes: bool,
    /// Arrival process.
    #[arg(long, value_enum, default_value = "fixed")]
    pub arrival: Arrival,
    /// Order of sweep steps.
    #[arg(long, value_enum, default_value = "random")]
    pub order: Order,
    /// Run every step this many times.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Seed for the step order and Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Store where each request's time went (needs a tailhunt reference server).
    #[arg(long)]
    pub breakdown: bool,
    /// Longest time finished requests wait before they are committed to the store: what a
    /// `kill -9` (or the OOM killer) can lose (10ms .. 10s).
    #[arg(long, default_value = "500ms", value_name = "DURATION", value_parser = crate::flags::commit_interval)]
    pub commit_interval: Duration,
    /// Poll instead of sleeping this long before each send is due, so wake-ups do not make the
    /// client late; given explicitly, also after each send while its reply is expected (0s:
    /// always sleep; default 50us before sends only, when each worker thread has a CPU of its
    /// own and two are left over (one, with --pin), else 0; at most 10ms).
    #[arg(long, value_name = "DURATION", value_parser = crate::flags::duration)]
    pub spin: Option<Duration>,
    /// Pin the worker threads to these CPUs (e.g. 1 or 2,3; worker i on the i-th, round robin).
    #[arg(long, value_name = "CPU,...", value_delimiter = ',')]
    pub pin: Vec<usize>,
    #[command(flatten)]
    pub request: RequestArgs,
}

/// What each request carries (`load` and `hunt`).
#[derive(Debug, Args)]
#[command(next_help_heading = "What each request carries")]
pub struct RequestArgs {
    /// Request size in bytes (tcp/udp body; http request padded with a header; the value of a
    /// redis SET or a memcached set).
    #[arg(long, default_value_t = 64)]
    pub request_bytes: usize,
    /// HTTP method (http:// targets).
    #[arg(long, value_name = "METHOD", default_value = "GET")]
    pub method: String,
    /// An HTTP header, `Name: value` (repeat for more).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// HTTP request body (sent with its Content-Length).
    #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// HTTP request body read from a file.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<std::path::PathBuf>,
    /// https://: trust the PEM certificates in FILE (a private CA) instead of the system's
    /// roots.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub ca_file: Option<std::path::PathBuf>,
    /// https://: do not check the server's certificate (a self-signed test server).
    #[arg(long)]
    pub insecure: bool,
}

/// `tailhunt serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Protocol.
    #[arg(value_enum)]
    pub proto: ServeProto,
    /// Address to listen on (port 0 picks a free one and prints it).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub listen: String,
    /// TCP_NODELAY on accepted connections.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub nodelay: bool,
    /// Reply body size in bytes.
    #[arg(long, default_value_t = 64)]
    pub reply_bytes: usize,
    /// Server "application" time per request: 2ms, exp:1ms, uniform:1ms:3ms, lognormal:1ms:0.5.
    #[arg(long, default_value = "0")]
    pub think_time: String,
    /// Never answer faster than this: a latency floor, like an RPC layer's fixed cost (the
    /// same as --think-time D).
    #[arg(long, value_parser = crate::flags::duration, conflicts_with = "think_time")]
    pub floor: Option<Duration>,
    /// Write each reply in two pieces (header, then body).
    #[arg(long)]
    pub split_writes: bool,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Put the server's receive and send times in every reply (what `load --breakdown`
    /// splits a round trip with). Off, a request costs the server a plain `recv` instead of a
    /// `recvmsg` with its control message and no clock reads: about 6% less CPU per request,
    /// for a reference server that must not be the bottleneck.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub timestamps: bool,
    /// Fault injection: stop answering for DUR after AT, e.g. 5s+1s (checks load generators for
    /// coordinated omission).
    #[arg(long, value_name = "AT+DUR")]
    pub pause: Option<String>,
    /// Fault injection: the first request on each connection waits this much more (a cold
    /// connection: a session looked up, a pool connection checked out).
    #[arg(long, value_name = "DURATION", value_parser = crate::flags::duration)]
    pub first_request: Option<Duration>,
    /// Fault injection: from AT after start every reply waits DELAY more, e.g. 90s+3ms (a
    /// step on one date).
    #[arg(long, value_name = "AT+DELAY")]
    pub step: Option<String>,
    /// Fault injection: in the first half of every PERIOD, SHARE of the replies wait DELAY
    /// more, e.g. 60s:15%:8ms (a tail that comes and goes; the median stays).
    #[arg(long, value_name = "PERIOD:SHARE:DELAY")]
    pub tail_wave: Option<String>,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = crate::flags::duration)]
    pub duration: Option<Duration>,
}

/// `tailhunt diagnose`.
#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// Run to examine: `latest`, an id, or a unique prefix.
    #[arg(default_value = "latest")]
    pub run: String,
}

/// `tailhunt report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Runs to draw, in order (`latest`, ids or unique prefixes); several are compared (before
    /// and after a fix).
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<String>,
    /// The HTML file to write [default: tailhunt-report-FIRST_RUN.html].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// A name per run for headings and legends, in the order of the runs (`--label before
    /// --label after`).
    #[arg(long, value_name = "NAME")]
    pub label: Vec<String>,
    /// The page title.
    #[arg(long, default_value = "tailhunt report")]
    pub title: String,
    /// Which runs are drawn together: `all` compares every run with the others of its kind,
    /// `tag` only runs with the same `--tag` (a lab scenario's before and after).
    #[arg(long, value_enum, default_value_t = CompareBy::All)]
    pub compare_by: CompareBy,
}

/// `report --compare-by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareBy {
    /// Every run with the others of its kind.
    All,
    /// Runs with the same tag.
    Tag,
}

/// How a capture is analysed (shared by `pcap` and `capture`).
#[derive(Debug, Args)]
pub struct CaptureAnalysisArgs {
    /// Bandwidth bin width (10us .. 1s).
    #[arg(long, default_value = "1ms", value_parser = crate::flags::duration)]
    pub bin: Duration,
    /// Link rate, for utilisation and bursts: 1gbit, 100mbit, 10g, 2.5gbit, or bits/s.
    #[arg(long, value_name = "RATE", value_parser = crate::flags::bit_rate)]
    pub link_rate: Option<u64>,
    /// Share of the link rate a bin must reach to count as a burst.
    #[arg(long, default_value_t = 0.8, value_name = "SHARE")]
    pub burst_threshold: f64,
    /// Write one CSV row per flow to this file.
    #[arg(long, value_name = "FILE")]
    pub flows_csv: Option<PathBuf>,
    /// Write one CSV row per non-empty bin of every channel, host pair and flow direction to
    /// this file. To have them, the pass keeps every flow's bins to its end (about 40 bytes a
    /// bin each way), so memory then grows with the capture's connections and length.
    #[arg(long, value_name = "FILE")]
    pub bins_csv: Option<PathBuf>,
    /// Request latencies measured elsewhere (a load run, or an import of a client's log with
    /// timestamps), put on the capture's time axis for the microburst detector: RUN or
    /// RUN:SERIES (default: its `latency` series).
    #[arg(long, value_name = "RUN[:SERIES]")]
    pub requests: Option<String>,
    /// Rows per table in the text output.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

/// `tailhunt pcap`.
#[derive(Debug, Args)]
pub struct PcapArgs {
    /// Capture files (pcap or pcapng, plain, gzip or zstd), read in order as one capture; `-`
    /// alone reads one from standard input (`tcpdump -w - | tailhunt pcap -`).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Another capture of the same traffic taken elsewhere (e.g. the server side, behind a
    /// NAT): pair the flows and report one-way delay, loss and FIN/RST origin per hop.
    #[arg(long = "match", value_name = "OTHER")]
    pub match_with: Option<PathBuf>,
    /// Analysis threads, the reader among them (default: one per CPU this process may use).
    /// With more than one, the files are read and decoded (and the results stored) on one
    /// thread; with two the other analyses every frame, with more the connections are split
    /// over the other N-1. The text, the JSON, the CSVs and the stored run are the same as
    /// with 1, which takes the least CPU time in all.
    /// A gzip or zstd file is decompressed on a thread of its own besides, whatever N (unless
    /// the process may use only one CPU).
    /// (`capture`, live, analyses on one thread.)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// How to analyse.
    #[command(flatten)]
    pub analysis: CaptureAnalysisArgs,
}

/// `tailhunt capture`.
#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Interface to capture on.
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    pub interface: String,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = crate::flags::duration)]
    pub duration: Option<Duration>,
    /// Also write the packets to this pcap file (nanosecond timestamps).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Bytes kept of each packet (headers are enough for the analysis).
    #[arg(short = 's', long, default_value_t = 256)]
    pub snaplen: u32,
    /// BPF filter, as for tcpdump (`tcp port 80`).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// How to analyse.
    #[command(flatten)]
    pub analysis: CaptureAnalysisArgs,
}

/// `tailhunt runq`.
#[derive(Debug, Args)]
pub struct RunqArgs {
    /// Stop after this long (`30s`, `5m`); default: until Ctrl-C, which then ends the run
    /// normally.
    #[arg(long, value_parser = crate::flags::duration)]
    pub duration: Option<Duration>,
    /// Reporting interval: one histogram per cgroup per interval.
    #[arg(long, default_value = "1s", value_parser = crate::flags::duration)]
    pub interval: Duration,
    /// Only tasks in this cgroup and its descendants (a cgroup directory, e.g.
    /// /sys/fs/cgroup/unified/system.slice/docker-ID.scope); repeatable. Others are still
    /// named when they take these tasks' CPU.
    #[arg(long = "cgroup", value_name = "PATH")]
    pub cgroups: Vec<PathBuf>,
    /// Which cgroup hierarchy waits are charged to.
    #[arg(long, value_enum, default_value = "v2")]
    pub hierarchy: Hierarchy,
    /// Also time kernel threads' own waits (they are always named when they preempt).
    #[arg(long)]
    pub kernel_threads: bool,
    /// Waits at least this long are recorded as outlier events with the thread they waited
    /// behind (at most 8 at once and 50/s per cgroup per CPU).
    #[arg(long, default_value = "1ms", value_name = "DURATION", value_parser = crate::flags::duration)]
    pub outlier: Duration,
    /// Record every wait as an event (validation: ~2 us of extra cost per wait).
    #[arg(long)]
    pub all_events: bool,
    /// BPF program kind.
    #[arg(long, value_enum, default_value = "auto")]
    pub attach: Attach,
    /// Where wakeup timestamps are kept (default: the array, the cheapest per hook).
    #[arg(long, value_enum)]
    pub store: Option<TimestampStore>,
    /// Cgroups the kernel keeps histograms for; waits of more are counted as lost.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_cgroups: u32,
    /// An earlier `runq` run taken when things were fine: each cgroup is compared with its
    /// waits there, so a run that is slow from its first second can still be judged.
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Use /proc/PID/schedstat instead of BPF (mean waits per cgroup only).
    #[arg(long, conflicts_with = "require_bpf")]
    pub degraded: bool,
    /// Fail instead of falling back to the degraded mode when BPF is not available.
    #[arg(long)]
    pub require_bpf: bool,
    /// Cgroups shown per interval and in the totals.
    #[arg(long, default_value_t = 6, value_name = "N")]
    pub top: usize,
    /// Print only the summary at the end, not every interval.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `tailhunt transfer`.
#[derive(Debug, Args)]
pub struct TransferArgs {
    /// Which end.
    #[command(subcommand)]
    pub side: TransferSide,
}

/// The two ends.
#[derive(Debug, Subcommand)]
pub enum TransferSide {
    /// Listen and send each client the bytes it asks for (one connection at a time).
    Server(TransferServerArgs),
    /// Connect, download, report (and give up after --timeout like a real client).
    Client(TransferClientArgs),
}

/// Options either end may set.
#[derive(Debug, Args)]
pub struct SocketOptionArgs {
    /// SO_RCVBUF to set before connect/listen (64k = 64KiB = 65536, 64KB = 64000). Setting it turns
    /// the kernel's receive-buffer autotuning off for the socket; leave it out to autotune.
    #[arg(long, value_name = "SIZE", value_parser = crate::flags::bytes)]
    pub rcvbuf: Option<u64>,
    /// SO_SNDBUF to set (same units); leave it out to autotune.
    #[arg(long, value_name = "SIZE", value_parser = crate::flags::bytes)]
    pub sndbuf: Option<u64>,
    /// Set TCP_NODELAY.
    #[arg(long)]
    pub nodelay: bool,
    /// How often each end reads its socket's TCP_INFO.
    #[arg(long, default_value = "5ms", value_name = "D", value_parser = crate::flags::duration)]
    pub sample_interval: Duration,
}

/// `tailhunt transfer server`.
#[derive(Debug, Args)]
pub struct TransferServerArgs {
    /// Address to listen on (port 0 picks one; it is printed on stderr).
    #[arg(long, default_value = "0.0.0.0:7400", value_name = "ADDR")]
    pub listen: String,
    /// Serve this many connections, then exit (default: until Ctrl-C).
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    #[command(flatten)]
    pub opts: SocketOptionArgs,
}

/// `tailhunt transfer client`.
#[derive(Debug, Args)]
pub struct TransferClientArgs {
    /// The server, `HOST:PORT`.
    #[arg(value_name = "ADDR")]
    pub server: String,
    /// Bytes to download (10M = 10 MiB = 10,485,760; 10MB = 10,000,000: sizes count as `dd` does).
    #[arg(long, default_value = "10MB", value_name = "SIZE", value_parser = crate::flags::bytes)]
    pub bytes: u64,
    /// Give up this long after the request and close the connection, as a client's request
    /// timeout does.
    #[arg(long, value_name = "D", value_parser = crate::flags::duration)]
    pub timeout: Option<Duration>,
    #[command(flatten)]
    pub opts: SocketOptionArgs,
}

/// `tailhunt sockets`.
#[derive(Debug, Args)]
pub struct SocketsArgs {
    /// How long to sample.
    #[arg(long, default_value = "10s", value_name = "D", value_parser = crate::flags::duration)]
    pub duration: Duration,
    /// How often.
    #[arg(long, default_value = "100ms", value_name = "D", value_parser = crate::flags::duration)]
    pub interval: Duration,
    /// Only sockets of this process.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Only connections with this port at either end.
    #[arg(long, value_name = "N")]
    pub port: Option<u16>,
    /// Sample this network namespace (`ip netns` name) instead of the current one; repeat
    /// for several (both ends of a connection, say).
    #[arg(long, value_name = "NAME")]
    pub netns: Vec<String>,
    /// Do not run the setsockopt audit (eBPF; needs root or CAP_BPF + CAP_PERFMON).
    #[arg(long)]
    pub no_audit: bool,
}
