//! One run as the report reads it: its series by name, loaded on demand, times made relative to
//! the run's start, and what its charts and notes add up to.

use tailhunt_model::evidence::capture::CaptureReport;
use tailhunt_model::evidence::sock::{SocketsReport, TransferReport};
use tailhunt_model::evidence::Document;
use tailhunt_model::{Finding, IntervalHistogram, Point, Run, RunKind, Sample, SeriesKind};
use tailhunt_store::{SeriesInfo, Store, StoreError};

/// What a chart shows, by name (the page's `data-kind`, and what findings link to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChartKind {
    /// One probe's (or timed import series') p50/p90/p99 per interval, change points and
    /// periods marked, one panel per variant.
    ProbeOverTime,
    /// A probe's cold and warm variants side by side with their intervals, and the paired
    /// difference.
    ProbeVariants,
    /// Latency histogram on a log axis, modes and percentiles marked.
    Histogram,
    /// Cumulative distribution on a log axis.
    Cdf,
    /// p50/p90/p99/p99.9 over time.
    PercentilesOverTime,
    /// Time x log-latency counts.
    Heatmap,
    /// Latency against offered rate.
    LatencyVsRate,
    /// Stacked shares of the request path, median and tail.
    Breakdown,
    /// Slow-request odds for a page fanning out to N backends.
    Fanout,
    /// Bytes per bin per channel over request latency (the microburst picture).
    Bytes,
    /// One TCP connection: sequence, ACK, window, bytes in flight.
    Flow,
    /// RTT samples over time.
    Rtt,
    /// Run-queue latency per cgroup over time.
    Runq,
    /// Wait time and preemptions by the cgroup waited behind.
    RunqWaits,
    /// TCP_INFO over time: window against bytes in flight, delivery rate.
    TcpInfo,
    /// Several runs' histograms over each other.
    CompareHistogram,
    /// Several runs' latency-vs-rate curves.
    CompareRate,
}

impl ChartKind {
    /// Every kind, in page order.
    pub const ALL: [ChartKind; 17] = [
        ChartKind::ProbeOverTime,
        ChartKind::ProbeVariants,
        ChartKind::Histogram,
        ChartKind::Cdf,
        ChartKind::PercentilesOverTime,
        ChartKind::Heatmap,
        ChartKind::LatencyVsRate,
        ChartKind::Breakdown,
        ChartKind::Fanout,
        ChartKind::Bytes,
        ChartKind::Flow,
        ChartKind::Rtt,
        ChartKind::Runq,
        ChartKind::RunqWaits,
        ChartKind::TcpInfo,
        ChartKind::CompareHistogram,
        ChartKind::CompareRate,
    ];

    /// The kind's name in the page.
    pub fn name(self) -> &'static str {
        match self {
            ChartKind::ProbeOverTime => "probe-over-time",
            ChartKind::ProbeVariants => "probe-variants",
            ChartKind::Histogram => "histogram",
            ChartKind::Cdf => "cdf",
            ChartKind::PercentilesOverTime => "percentiles-over-time",
            ChartKind::Heatmap => "heatmap",
            ChartKind::LatencyVsRate => "latency-vs-rate",
            ChartKind::Breakdown => "breakdown",
            ChartKind::Fanout => "fanout",
            ChartKind::Bytes => "bytes",
            ChartKind::Flow => "flow",
            ChartKind::Rtt => "rtt",
            ChartKind::Runq => "runq",
            ChartKind::RunqWaits => "runq-waits",
            ChartKind::TcpInfo => "tcp-info",
            ChartKind::CompareHistogram => "compare-histogram",
            ChartKind::CompareRate => "compare-rate",
        }
    }
}

/// One chart (one figure; it may stack several SVG panels on one time axis).
#[derive(Debug, Clone)]
pub struct Chart {
    /// Element id, unique in the page.
    pub id: String,
    /// What it shows.
    pub kind: ChartKind,
    /// Heading.
    pub title: String,
    /// One or two sentences on how to read it.
    pub caption: String,
    /// The SVG panels.
    pub svg: String,
    /// Series (base names) it draws, for linking findings to it.
    pub series: Vec<String>,
}

/// One run's section of the page.
#[derive(Debug, Clone)]
pub struct RunSection {
    /// The run.
    pub run: Run,
    /// Its findings.
    pub findings: Vec<Finding>,
    /// Its charts.
    pub charts: Vec<Chart>,
    /// What could not be drawn and why.
    pub missing: Vec<String>,
    /// Parameters, host health, kernel context and the tool's own cost, as label/value rows.
    pub facts: Vec<(String, String)>,
}

/// A stored run opened for drawing.
pub struct RunData<'s> {
    /// The store.
    pub store: &'s Store,
    /// The run.
    pub run: Run,
    /// Its series.
    pub infos: Vec<SeriesInfo>,
    /// Time zero of the run's charts, on the clock its series use.
    pub t0_ns: i64,
    /// Index of the run in the report (for ids).
    pub index: usize,
}

impl<'s> RunData<'s> {
    /// Opens `run_id`.
    pub fn open(store: &'s Store, run_id: &str, index: usize) -> Result<RunData<'s>, StoreError> {
        let run = store.run(run_id)?;
        let infos = store.series(run_id)?;
        let mut data = RunData {
            store,
            t0_ns: run.origin.mono_ns,
            run,
            infos,
            index,
        };
        // Sources whose series do not start at the run's clock origin say where they start.
        let start = match data.run.kind {
            RunKind::Pcap | RunKind::Capture => {
                data.evidence::<CaptureReport>().map(|c| c.first_ns)
            }
            RunKind::Transfer => data.evidence::<TransferReport>().map(|t| t.range_ns.0),
            // A connection listed without a reading has no range: it does not start the axis.
            RunKind::Sockets => data.evidence::<SocketsReport>().and_then(|s| {
                s.connections
                    .iter()
                    .filter_map(|c| c.range_ns.map(|r| r.0))
                    .min()
            }),
            _ => None,
        };
        if let Some(t) = start {
            data.t0_ns = t;
        }
        Ok(data)
    }

    /// Series named `name` (any labels), warm-up phases left out.
    pub fn named(&self, name: &str) -> Vec<&SeriesInfo> {
        self.infos
            .iter()
            .filter(|s| s.name == name && s.labels.get("phase").is_none_or(|p| p != "warmup"))
            .collect()
    }

    /// Seconds from the run's start.
    pub fn secs(&self, t_ns: i64) -> f64 {
        (t_ns - self.t0_ns) as f64 / 1e9
    }

    /// A samples series' samples.
    pub fn samples(&self, info: &SeriesInfo) -> Result<Vec<Sample>, StoreError> {
        if info.kind != SeriesKind::Samples {
            return Ok(Vec::new());
        }
        self.store.load_samples(info.id)
    }

    /// A values series' points.
    pub fn points(&self, info: &SeriesInfo) -> Result<Vec<Point>, StoreError> {
        if info.kind != SeriesKind::Values {
            return Ok(Vec::new());
        }
        self.store.load_points(info.id)
    }

    /// An interval-histogram series' histograms.
    pub fn histograms(&self, info: &SeriesInfo) -> Result<Vec<IntervalHistogram>, StoreError> {
        if info.kind != SeriesKind::Histograms {
            return Ok(Vec::new());
        }
        self.store.load_histograms(info.id)
    }

    /// An evidence document, or `None` when the run has none (or it cannot be read: the
    /// charts that need it say what is missing).
    pub fn evidence<D: Document>(&self) -> Option<D> {
        self.store.evidence::<D>(&self.run.id).ok().flatten()
    }

    /// A chart id unique in the page.
    pub fn id(&self, kind: ChartKind, k: usize) -> String {
        format!("r{}-{}-{k}", self.index, kind.name())
    }

    /// Whether the run is of `kind`.
    pub fn is(&self, kind: &RunKind) -> bool {
        &self.run.kind == kind
    }
}
