//! Turning the analysis' events and bins into series.
//!
//! | series | kind | what |
//! |---|---|---|
//! | `latency{server_port}` | samples | each request/response exchange: first request byte -> last response byte; unanswered requests are `timeout` samples ending at the flow's last packet |
//! | `server_time{server_port}` | samples | last request segment -> first response segment, less the server leg's round trip |
//! | `rtt{leg,server_port}` | samples | RTT samples of each leg (`server`: capture point -> server -> capture point) |
//! | `bytes{dir,host,bin}` | values | wire bytes per bin of the busiest channels (to/from a host) |
//! | `inflight{flow}`, `window{flow}` | values | bytes in flight and the receiver's advertised window of the largest TCP flows, one point per bin |
//!
//! Sample times are epoch nanoseconds (a capture run's clock origin has `mono = wall`).

use std::collections::HashMap;

use tailhunt_model::{Outcome, Point, Sample, SeriesKind, SeriesMeta, SeriesSink, SinkError, Unit};

use crate::analysis::{Analyzer, CaptureReport};
use crate::tcp::{Exchange, FlowEvents, Leg};

/// Channels stored as `bytes` series (the busiest).
pub const MAX_CHANNEL_SERIES: usize = 16;
/// TCP flows whose window and bytes in flight are stored (the largest).
pub const MAX_WINDOW_SERIES: usize = 8;

/// Samples buffered per series before one push to the sink.
const BATCH: usize = 4096;

/// Writes series into a sink as the analysis goes.
pub struct Recorder<'a> {
    sink: &'a mut dyn SeriesSink,
    handles: HashMap<(&'static str, String), usize>,
    /// Samples waiting per series handle (pushed in batches: one sink call per sample costs
    /// more than the analysis of the packet).
    pending: HashMap<usize, Vec<Sample>>,
}

impl<'a> Recorder<'a> {
    /// Records into `sink`.
    pub fn new(sink: &'a mut dyn SeriesSink) -> Recorder<'a> {
        Recorder {
            sink,
            handles: HashMap::new(),
            pending: HashMap::new(),
        }
    }

    fn handle(
        &mut self,
        name: &'static str,
        labels: &[(&str, String)],
        kind: SeriesKind,
        unit: Unit,
    ) -> Result<usize, SinkError> {
        let key = labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        if let Some(&h) = self.handles.get(&(name, key.clone())) {
            return Ok(h);
        }
        let mut meta = SeriesMeta::latency(name);
        meta.kind = kind;
        meta.unit = unit;
        for (k, v) in labels {
            meta.labels.insert(k.to_string(), v.clone());
        }
        let h = self.sink.open_series(&meta)?;
        self.handles.insert((name, key), h);
        Ok(h)
    }

    fn sample(
        &mut self,
        name: &'static str,
        labels: &[(&str, String)],
        s: Sample,
    ) -> Result<(), SinkError> {
        let h = self.handle(name, labels, SeriesKind::Samples, Unit::Nanoseconds)?;
        let buf = self.pending.entry(h).or_default();
        buf.push(s);
        if buf.len() >= BATCH {
            self.sink.push_samples(h, buf)?;
            buf.clear();
        }
        Ok(())
    }

    /// Pushes every buffered sample.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        let mut handles: Vec<usize> = self.pending.keys().copied().collect();
        handles.sort_unstable();
        for h in handles {
            if let Some(buf) = self.pending.get_mut(&h) {
                if !buf.is_empty() {
                    self.sink.push_samples(h, buf)?;
                    buf.clear();
                }
            }
        }
        Ok(())
    }

    /// Drains the analysis' events into series; `flow_last_ns` gives a flow's last packet (an
    /// unanswered request ends there).
    pub fn drain(
        &mut self,
        events: &mut FlowEvents,
        flow_last_ns: impl Fn(usize) -> i64,
    ) -> Result<(), SinkError> {
        for r in events.rtt.drain(..) {
            let leg = match r.leg {
                Leg::Server => "server",
                Leg::Client => "client",
            };
            let s = Sample::new(r.ts_ns - r.rtt_ns, r.ts_ns - r.rtt_ns, r.ts_ns, Outcome::Ok);
            self.sample("rtt", &[("leg", leg.to_string())], s)?;
        }
        let exchanges: Vec<Exchange> = events.exchanges.drain(..).collect();
        for x in exchanges {
            let port = ("server_port", x.server_port.to_string());
            match (x.response_end_ns, x.server_ns()) {
                (Some(end), server) => {
                    let s = Sample::new(x.request_start_ns, x.request_start_ns, end, Outcome::Ok);
                    self.sample("latency", std::slice::from_ref(&port), s)?;
                    if let Some(ns) = server {
                        let t = x.request_end_ns;
                        self.sample(
                            "server_time",
                            &[port],
                            Sample::new(t, t, t + ns, Outcome::Ok),
                        )?;
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
                    self.sample("latency", &[port], s)?;
                }
            }
        }
        events.stalls.clear();
        Ok(())
    }

    /// Writes the bins of the busiest channels and the window series of the largest flows.
    pub fn finish(&mut self, an: &Analyzer, report: &CaptureReport) -> Result<(), SinkError> {
        self.flush()?;
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
            let h = self.handle("bytes", &labels, SeriesKind::Values, Unit::Bytes)?;
            let points: Vec<Point> = bins
                .bins()
                .iter()
                .map(|b| Point {
                    t_ns: b.index * report.bin_ns,
                    value: b.bytes as i64,
                })
                .collect();
            self.sink.push_values(h, &points)?;
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
            let hi = self.handle("inflight", &label, SeriesKind::Values, Unit::Bytes)?;
            let hw = self.handle("window", &label, SeriesKind::Values, Unit::Bytes)?;
            let inflight: Vec<Point> = pts
                .iter()
                .map(|&(t, i, _)| Point {
                    t_ns: t,
                    value: i as i64,
                })
                .collect();
            let window: Vec<Point> = pts
                .iter()
                .map(|&(t, _, w)| Point {
                    t_ns: t,
                    value: w as i64,
                })
                .collect();
            self.sink.push_values(hi, &inflight)?;
            self.sink.push_values(hw, &window)?;
        }
        Ok(())
    }
}
