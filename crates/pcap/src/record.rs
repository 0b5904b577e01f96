//! Turning the analysis' events and bins into series.
//!
//! | series | kind | what |
//! |---|---|---|
//! | `latency{server_port}` | samples | each request/response exchange: first request byte -> last response byte; unanswered requests are `timeout` samples ending at the flow's last packet |
//! | `server_time{server_port}` | samples | last request segment -> first response segment, less the server leg's round trip |
//! | `rtt{leg}` | samples | RTT samples of each leg (`server`: capture point -> server -> capture point) |
//! | `queue_delay` | samples | the upstream queueing delay of packets that made no burst (their TCP timestamps against the capture clock): `start` when the packet would have arrived without waiting, `end` when it did; one per flow direction and bin, its most delayed packet |
//! | `bytes{dir,host,bin}` | values | wire bytes per bin of the busiest channels (to/from a host) |
//! | `inflight{flow}`, `window{flow}` | values | bytes in flight and the receiver's advertised window of the largest TCP flows' main sender (a flow under 1 MiB keeps none once closed), one point per bin, as the sender knew them (the receiver's ACKs replayed one capture-to-sender leg late, see `tcp::view`) |
//! | `seq{flow}`, `ack{flow}` | values | same flows, bins and view: just past the highest sequence number sent, and the highest ACK that had reached the sender, bytes from the sender's initial sequence number (its first sequence number seen when the capture missed the SYN), unwrapped past 2^32; `ack + window` is the window's right edge, `seq - ack` the bytes in flight (SACKed bytes included) |
//!
//! Sample times are epoch nanoseconds (a capture run's clock origin has `mono = wall`).

use tailhunt_model::{Outcome, Point, Sample, SeriesKind, SeriesMeta, SeriesSink, SinkError, Unit};

use tailhunt_model::evidence::capture::{CaptureReport, FlowSummary};

use crate::analysis::Analyzer;
use crate::fxhash::FxHashMap;
use crate::tcp::{FlowEvents, Leg, WindowPoint};

/// Channels stored as `bytes` series (the busiest).
pub const MAX_CHANNEL_SERIES: usize = 16;
/// TCP flows whose time-sequence series (bytes in flight, window, sequence, ACK) are stored
/// (the largest).
pub const MAX_WINDOW_SERIES: usize = 8;

/// The series of bystanders' upstream queueing delays (see the table above).
pub const QUEUE_DELAY_SERIES: &str = "queue_delay";

/// A flow's time-sequence series: each name and the field of a [`WindowPoint`] it stores (the
/// series are opened in this order).
type Line = (&'static str, fn(&WindowPoint) -> i64);
const TIME_SEQUENCE: [Line; 4] = [
    ("inflight", |p| p.inflight as i64),
    ("window", |p| p.window as i64),
    ("seq", |p| p.seq),
    ("ack", |p| p.ack),
];

/// Points or samples per push to the sink when a whole list is written at the end.
const BATCH: usize = 4096;

/// Samples buffered per series during the pass before one push to the sink: enough to make
/// the push's cost per sample small, few enough not to hold a second copy of what the sink
/// buffers for its open block (4,096 here held 0.5 MB at 100,000 connections).
const SAMPLE_BATCH: usize = 512;

/// Finished flows stored per push to the sink: the recorder holds fewer than this many
/// between calls ([`Recorder::flows`]) and stores the rest at the end. What waits is what
/// grows with a capture's connections once they are many (their summaries, about 2 kB each,
/// and the chunk's encoding). Until 2026-12-01 callers handed over 256 or more at once and
/// the recorder stored them 256 at a time with the remainder as a short chunk; on
/// bench/pcap.sh's 100,000-connection capture (two threads, five runs each) exact chunks of
/// 128 peaked at 24.3 MiB against 24.9, and the store file was 4.6 MB against 6.2 (chunks
/// nearer a database page; the compressed rows themselves 2% larger).
pub const FLOW_BATCH: usize = 128;

/// A sample series the recorder writes, told apart by its one label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SampleSeries {
    Rtt(Leg),
    Latency(u16),
    ServerTime(u16),
}

impl SampleSeries {
    fn meta(self) -> SeriesMeta {
        let (name, label, value) = match self {
            SampleSeries::Rtt(Leg::Server) => ("rtt", "leg", "server".to_string()),
            SampleSeries::Rtt(Leg::Client) => ("rtt", "leg", "client".to_string()),
            SampleSeries::Latency(port) => ("latency", "server_port", port.to_string()),
            SampleSeries::ServerTime(port) => ("server_time", "server_port", port.to_string()),
        };
        let mut meta = SeriesMeta::latency(name);
        meta.labels.insert(label.to_string(), value);
        meta
    }
}

/// Writes series into a sink as the analysis goes.
pub struct Recorder<'a> {
    sink: &'a mut dyn SeriesSink,
    /// Each sample series' handle and the samples waiting for it (pushed in batches: one sink
    /// call per sample costs more than the analysis of the packet).
    /// Looked up for every sample (FxHash: SipHash here was 1.5% of the 1 GB capture's command).
    samples: FxHashMap<SampleSeries, (usize, Vec<Sample>)>,
    /// The flow rows' batch buffer, kept from batch to batch
    /// ([`tailhunt_model::evidence::put_rows_in`]).
    rows: Vec<u8>,
    /// Finished flows not stored yet: fewer than [`FLOW_BATCH`] between calls.
    flows: Vec<FlowSummary>,
}

impl<'a> Recorder<'a> {
    /// Records into `sink`.
    pub fn new(sink: &'a mut dyn SeriesSink) -> Recorder<'a> {
        Recorder {
            sink,
            samples: FxHashMap::default(),
            rows: Vec::new(),
            flows: Vec::new(),
        }
    }

    /// Opens a values series (each is written once, at the end).
    fn open_values(&mut self, name: &str, labels: &[(&str, String)]) -> Result<usize, SinkError> {
        let mut meta = SeriesMeta::latency(name);
        meta.kind = SeriesKind::Values;
        meta.unit = Unit::Bytes;
        for (k, v) in labels {
            meta.labels.insert(k.to_string(), v.clone());
        }
        self.sink.open_series(&meta)
    }

    /// Adds `s` to `series` (opened on its first sample).
    pub(crate) fn sample(&mut self, series: SampleSeries, s: Sample) -> Result<(), SinkError> {
        let (h, buf) = match self.samples.get_mut(&series) {
            Some(e) => e,
            None => {
                let h = self.sink.open_series(&series.meta())?;
                self.samples.entry(series).or_insert((h, Vec::new()))
            }
        };
        buf.push(s);
        if buf.len() >= SAMPLE_BATCH {
            self.sink.push_samples(*h, buf)?;
            buf.clear();
        }
        Ok(())
    }

    /// Pushes every buffered sample, in the order the series were opened.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        let mut open: Vec<&mut (usize, Vec<Sample>)> = self.samples.values_mut().collect();
        open.sort_unstable_by_key(|(h, _)| *h);
        for (h, buf) in open {
            if !buf.is_empty() {
                self.sink.push_samples(*h, buf)?;
                buf.clear();
            }
        }
        Ok(())
    }

    /// Takes finished flows' summaries (emptying `flows`) to store as rows of the run's
    /// `flows` list, [`FLOW_BATCH`] at a time; [`Recorder::finish`] stores the rest.
    pub fn flows(&mut self, flows: &mut Vec<FlowSummary>) -> Result<(), SinkError> {
        self.flows.append(flows);
        if self.flows.len() >= FLOW_BATCH {
            let full = self.flows.len() / FLOW_BATCH * FLOW_BATCH;
            for chunk in self.flows[..full].chunks(FLOW_BATCH) {
                tailhunt_model::evidence::put_rows_in(self.sink, chunk, &mut self.rows)?;
            }
            self.flows.drain(..full);
        }
        Ok(())
    }

    /// Stores the finished flows still held.
    fn flows_left(&mut self) -> Result<(), SinkError> {
        let left = std::mem::take(&mut self.flows);
        tailhunt_model::evidence::put_rows_in(self.sink, &left, &mut self.rows)
    }

    /// Drains the analysis' events into series; `flow_last_ns` gives a flow's last packet (an
    /// unanswered request ends there).
    pub fn drain(
        &mut self,
        events: &mut FlowEvents,
        flow_last_ns: impl Fn(usize) -> i64,
    ) -> Result<(), SinkError> {
        samples_of(events, flow_last_ns, |series, s, _| self.sample(series, s))
    }

    /// Writes the bins of the busiest channels and the time-sequence series of the largest
    /// flows.
    pub fn finish(&mut self, an: &Analyzer, report: &CaptureReport) -> Result<(), SinkError> {
        self.flush()?;
        self.flows_left()?;
        // No sample comes after the pass: the sink's open blocks are written and freed before
        // the report is stored and diagnosed.
        let mut open: Vec<usize> = self.samples.values().map(|(h, _)| *h).collect();
        open.sort_unstable();
        for h in open {
            self.sink.close_series(h)?;
        }
        self.samples = FxHashMap::default();
        let mut delays = an
            .bystander_delays(report)
            .map(crate::analysis::queue_delay_sample)
            .peekable();
        if delays.peek().is_some() {
            let h = self
                .sink
                .open_series(&SeriesMeta::latency(QUEUE_DELAY_SERIES))?;
            let mut samples = Vec::with_capacity(BATCH);
            loop {
                samples.clear();
                samples.extend(delays.by_ref().take(BATCH));
                if samples.is_empty() {
                    break;
                }
                self.sink.push_samples(h, &samples)?;
            }
            self.sink.close_series(h)?;
        }
        let bin = tailhunt_model::format_duration_ns(report.bin_ns as f64);
        for ch in report.channels.iter().take(MAX_CHANNEL_SERIES) {
            let Ok(host) = ch.host.parse() else { continue };
            let Some(bins) = an.channel_bins(ch.dir, host) else {
                continue;
            };
            let labels = [
                ("dir", ch.dir.name().to_string()),
                ("host", ch.host.clone()),
                ("bin", bin.clone()),
            ];
            let h = self.open_values("bytes", &labels)?;
            // A chunk at a time: a day-long channel has tens of millions of bins.
            let mut points = Vec::with_capacity(BATCH);
            for b in bins {
                points.push(Point {
                    t_ns: b.index * report.bin_ns,
                    value: b.bytes as i64,
                });
                if points.len() == BATCH {
                    self.sink.push_values(h, &points)?;
                    points.clear();
                }
            }
            if !points.is_empty() {
                self.sink.push_values(h, &points)?;
            }
            self.sink.close_series(h)?;
        }
        let mut tcp: Vec<_> = report.flows.iter().filter(|f| f.tcp.is_some()).collect();
        tcp.sort_by_key(|f| {
            std::cmp::Reverse(f.client_to_server.payload_bytes + f.server_to_client.payload_bytes)
        });
        for f in tcp.into_iter().take(MAX_WINDOW_SERIES) {
            let Some(pts) = an.window_points(f.id) else {
                continue;
            };
            if pts.is_empty() {
                continue;
            }
            let label = [("flow", f.id.to_string())];
            let handles = TIME_SEQUENCE
                .iter()
                .map(|(name, _)| self.open_values(name, &label))
                .collect::<Result<Vec<_>, _>>()?;
            for (h, (_, value)) in handles.into_iter().zip(TIME_SEQUENCE) {
                // A chunk at a time: a long bulk flow has a point per bin, most of them in the
                // scratch file.
                let mut points = Vec::with_capacity(BATCH);
                for p in pts.iter() {
                    points.push(Point {
                        t_ns: p.ts_ns,
                        value: value(&p),
                    });
                    if points.len() == BATCH {
                        self.sink.push_values(h, &points)?;
                        points.clear();
                    }
                }
                if !points.is_empty() {
                    self.sink.push_values(h, &points)?;
                }
                self.sink.close_series(h)?;
            }
        }
        Ok(())
    }
}

/// Which event a sample came from, as far as the order of the series needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// An RTT sample.
    Rtt,
    /// An exchange of flow `.0`.
    Exchange(usize),
}

/// Drains `events` into `(series, sample)` pairs, in the order the recorder stores them (the
/// RTT samples first, then the exchanges); `flow_last_ns` gives a flow's last packet (an
/// unanswered request ends there).
pub(crate) fn samples_of<E>(
    events: &mut FlowEvents,
    flow_last_ns: impl Fn(usize) -> i64,
    mut out: impl FnMut(SampleSeries, Sample, Origin) -> Result<(), E>,
) -> Result<(), E> {
    for r in events.rtt.drain(..) {
        let s = Sample::new(r.ts_ns - r.rtt_ns, r.ts_ns - r.rtt_ns, r.ts_ns, Outcome::Ok);
        out(SampleSeries::Rtt(r.leg), s, Origin::Rtt)?;
    }
    for x in events.exchanges.drain(..) {
        let port = x.server_port;
        let from = Origin::Exchange(x.flow);
        match (x.response_end_ns, x.server_ns()) {
            (Some(end), server) => {
                let s = Sample::new(x.request_start_ns, x.request_start_ns, end, Outcome::Ok);
                out(SampleSeries::Latency(port), s, from)?;
                if let Some(ns) = server {
                    let t = x.request_end_ns;
                    let s = Sample::new(t, t, t + ns, Outcome::Ok);
                    out(SampleSeries::ServerTime(port), s, from)?;
                }
            }
            (None, _) => {
                let end = flow_last_ns(x.flow).max(x.request_end_ns);
                let s = Sample::new(
                    x.request_start_ns,
                    x.request_start_ns,
                    end,
                    Outcome::Timeout,
                );
                out(SampleSeries::Latency(port), s, from)?;
            }
        }
    }
    events.stalls.clear();
    Ok(())
}

/// The report as a run stores it: every flow, with the totals filled in. A caller that owns
/// the report stores it as it is; this copy is for one that must keep its own.
pub fn stored_copy(report: &CaptureReport) -> CaptureReport {
    CaptureReport {
        flows_total: report.flow_count(),
        tcp_flows_total: report.tcp_flow_count(),
        ..report.clone()
    }
}

#[cfg(test)]
mod tests {
    use tailhunt_model::evidence::capture::{FlowName, Proto, Traffic};
    use tailhunt_model::evidence::RowChunk;
    use tailhunt_model::{IntervalHistogram, SeriesMeta};

    use super::*;

    /// Keeps the ids of every chunk of flow rows it is given, as stored.
    #[derive(Default)]
    struct Chunks(Vec<Vec<usize>>);

    impl SeriesSink for Chunks {
        fn open_series(&mut self, _meta: &SeriesMeta) -> Result<usize, SinkError> {
            Ok(0)
        }
        fn push_samples(&mut self, _series: usize, _samples: &[Sample]) -> Result<(), SinkError> {
            Ok(())
        }
        fn push_histogram(&mut self, _s: usize, _h: &IntervalHistogram) -> Result<(), SinkError> {
            Ok(())
        }
        fn put_rows(&mut self, _name: &str, v: u32, rows: &RowChunk) -> Result<(), SinkError> {
            let flows: Vec<FlowSummary> = rows.encoding.decode(v, &rows.data)?;
            assert_eq!(flows.len(), rows.rows);
            self.0.push(flows.iter().map(|f| f.id).collect());
            Ok(())
        }
    }

    fn flow(id: usize) -> FlowSummary {
        FlowSummary {
            id,
            name: FlowName {
                proto: Proto::Udp,
                client: format!("10.0.0.1:{}", 1000 + id),
                server: "10.0.0.2:53".into(),
            },
            first_ns: id as i64,
            last_ns: id as i64 + 10,
            client_to_server: Traffic::default(),
            server_to_client: Traffic::default(),
            tcp: None,
        }
    }

    /// Regression: flows handed over a few at a time were stored as whatever the caller had
    /// gathered (256 or more, split into 256 and a short remainder each time). Now the
    /// recorder stores full chunks of FLOW_BATCH as they fill and the rest once, at the end,
    /// and every flow exactly once.
    #[test]
    fn flows_are_stored_in_full_chunks_and_the_rest_at_the_end() {
        let mut sink = Chunks::default();
        let mut rec = Recorder::new(&mut sink);
        let total = 2 * FLOW_BATCH + 44;
        // Finished out of order, seven at a time.
        let mut ids: Vec<usize> = (0..total).rev().collect();
        ids.swap(3, total - 5);
        for group in ids.chunks(7) {
            let mut finished: Vec<FlowSummary> = group.iter().map(|&i| flow(i)).collect();
            rec.flows(&mut finished).unwrap();
            assert!(finished.is_empty(), "the recorder takes them all");
            assert!(rec.flows.len() < FLOW_BATCH, "{} held", rec.flows.len());
        }
        rec.flows_left().unwrap();
        drop(rec);
        let sizes: Vec<usize> = sink.0.iter().map(Vec::len).collect();
        assert_eq!(sizes, [FLOW_BATCH, FLOW_BATCH, 44]);
        // Each chunk in id order, and every flow once.
        assert!(sink.0.iter().all(|c| c.is_sorted()));
        let mut all: Vec<usize> = sink.0.concat();
        all.sort_unstable();
        assert_eq!(all, (0..total).collect::<Vec<_>>());
    }
}
