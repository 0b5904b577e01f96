//! The capture's pictures: bytes per bin over request latency on one time axis (the
//! microburst), each large TCP connection's sequence, ACK, window and bytes in flight, and RTT
//! over time.
//!
//! In: a capture run's `bytes{dir,host,bin}`, `latency{server_port}`, `inflight{flow}`,
//! `window{flow}` (and `seq{flow}`, `ack{flow}` when the run has them), `rtt{leg}` series and
//! its `capture` document (bursts, link rate, flow names). Out: [`Chart`]s, and notes for what
//! the run does not hold.

use tailhunt_model::evidence::capture::CaptureReport;
use tailhunt_model::Point;
use tailhunt_store::{SeriesInfo, StoreError};

use crate::html::charts::Line;
use crate::html::decimate::{min_max, COLUMNS};
use crate::html::format::{fmt_value, Fmt};
use crate::html::run::{Chart, ChartKind, RunData};
use crate::html::svg::{colour, Axis, Kind, Plot, Scale};

/// Channels drawn in the bytes chart (the busiest by peak).
const MAX_CHANNELS: usize = 4;
/// Connections drawn (the largest).
const MAX_FLOWS: usize = 4;
/// Above this many samples, a latency or RTT series is drawn as a min/max line, not dots.
const MAX_DOTS: usize = 3000;
/// Bytes in flight at this share of the window or more count as window-limited.
const WINDOW_LIMITED: f64 = 0.9;

/// Every capture chart the run has the series for.
pub fn charts(
    rd: &RunData<'_>,
    out: &mut Vec<Chart>,
    missing: &mut Vec<String>,
) -> Result<(), StoreError> {
    let Some(report) = rd.evidence::<CaptureReport>() else {
        missing.push("the capture document (bursts, link rate, flows): the run has none, so no bytes-per-bin chart".into());
        return Ok(());
    };
    let span = (
        rd.secs(report.first_ns),
        rd.secs(report.last_ns.max(report.first_ns + 1)),
    );
    match bytes(rd, &report, span)? {
        Some(c) => out.push(c),
        None => missing.push("bytes per bin: the run stored no channel series".into()),
    }
    let flows = flow_charts(rd, &report, span)?;
    if flows.is_empty() {
        missing.push("TCP connections: no flow carried enough data for its window series".into());
    }
    out.extend(flows);
    if let Some(c) = rtt(rd, span)? {
        out.push(c);
    }
    Ok(())
}

/// A series of values as (seconds, value), sorted by time.
fn xy(rd: &RunData<'_>, pts: &[Point]) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = pts
        .iter()
        .map(|p| (rd.secs(p.t_ns), p.value as f64))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// Bins with no traffic are not stored: put the zeros back where a gap is wider than a bin, so
/// a line falls to zero between bursts instead of joining them.
fn with_zeros(pts: &[(f64, f64)], bin_s: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(pts.len() * 2);
    for (i, &p) in pts.iter().enumerate() {
        if i > 0 {
            let prev = pts[i - 1];
            if p.0 - prev.0 > 1.5 * bin_s {
                out.push((prev.0 + bin_s, 0.0));
                out.push((p.0 - bin_s, 0.0));
            }
        }
        out.push(p);
    }
    out
}

/// A state read at the end of each active bin (window, bytes in flight, sequence) holds until
/// the next reading: draw it as steps, not as slopes between readings far apart.
fn steps(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(pts.len() * 2);
    for (i, &p) in pts.iter().enumerate() {
        if i > 0 && pts[i - 1].1 != p.1 {
            out.push((p.0, pts[i - 1].1));
        }
        out.push(p);
    }
    out
}

/// Means over whole seconds, as (second's middle, mean value per bin).
fn per_second_mean(pts: &[(f64, f64)], bins_per_second: f64) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut cur: Option<(i64, f64)> = None;
    for &(t, v) in pts {
        let s = t.floor() as i64;
        match &mut cur {
            Some((sec, sum)) if *sec == s => *sum += v,
            _ => {
                if let Some((sec, sum)) = cur {
                    out.push((sec as f64 + 0.5, sum / bins_per_second));
                }
                cur = Some((s, v));
            }
        }
    }
    if let Some((sec, sum)) = cur {
        out.push((sec as f64 + 0.5, sum / bins_per_second));
    }
    out
}

fn channel_name(s: &SeriesInfo) -> String {
    let dir = s.labels.get("dir").map_or("", String::as_str);
    let host = s.labels.get("host").map_or("?", String::as_str);
    format!("{dir} {host}")
}

fn bytes(
    rd: &RunData<'_>,
    report: &CaptureReport,
    span: (f64, f64),
) -> Result<Option<Chart>, StoreError> {
    let bin_s = report.bin_ns.max(1) as f64 / 1e9;
    let mut channels: Vec<Line> = Vec::new();
    for s in rd.named("bytes") {
        let pts = with_zeros(&xy(rd, &rd.points(s)?), bin_s);
        let peak = pts.iter().map(|p| p.1).fold(0.0, f64::max);
        channels.push((channel_name(s), pts, peak));
    }
    if channels.is_empty() {
        return Ok(None);
    }
    channels.sort_by(|a, b| b.2.total_cmp(&a.2));
    channels.truncate(MAX_CHANNELS);
    let per_bin_at_link = report.link_rate_bps.map(|bps| bps as f64 / 8.0 * bin_s);
    let top = channels[0].2.max(per_bin_at_link.unwrap_or(0.0));
    let x = Scale::new(Kind::Linear, span.0, span.1);
    let mut p = Plot::new(
        300.0,
        Axis::new(x, Fmt::Seconds, "time from the start of the capture"),
        Axis::new(
            Scale::from_zero(top * 1.1),
            Fmt::Bytes,
            format!(
                "bytes per {} bin",
                fmt_value(Fmt::Duration, report.bin_ns as f64)
            ),
        ),
    );
    for b in &report.bursts {
        p.band(
            rd.secs(b.start_ns),
            rd.secs(b.end_ns.max(b.start_ns + report.bin_ns)),
            "burst",
            "",
            &format!(
                "burst {} {}: {} at peak {}; that second averaged {}",
                b.dir.name(),
                b.host,
                fmt_value(Fmt::Bytes, b.bytes as f64),
                b.peak_utilisation
                    .map_or("?".into(), |u| fmt_value(Fmt::Share, u)),
                b.second_utilisation
                    .map_or("?".into(), |u| fmt_value(Fmt::Share, u))
            ),
        );
    }
    if let Some(link) = per_bin_at_link {
        p.hrule(
            link,
            "link",
            &format!(
                "link rate {}",
                fmt_value(Fmt::Bits, report.link_rate_bps.unwrap_or(0) as f64)
            ),
        );
    }
    for (i, (name, pts, _)) in channels.iter().enumerate() {
        p.series(name, colour(i));
        p.line(&min_max(pts, span.0, span.1, COLUMNS), false);
        p.line(&per_second_mean(pts, 1.0 / bin_s), true);
    }
    let mut svg = p.finish(&rd.id(ChartKind::Bytes, 0));
    let mut drawn = vec!["bytes".to_string()];
    if let Some(lat) = latency_panel(rd, x)? {
        svg.push_str(&lat);
        drawn.push("latency".into());
    }
    let worst = report
        .bursts
        .iter()
        .filter_map(|b| b.peak_utilisation)
        .fold(0.0, f64::max);
    let second = report
        .channels
        .iter()
        .filter_map(|c| c.max_second_utilisation)
        .fold(0.0, f64::max);
    let id = rd.id(ChartKind::Bytes, 0);
    Ok(Some(Chart {
        svg,
        id,
        kind: ChartKind::Bytes,
        title: "Bytes per bin against request latency".into(),
        caption: if report.bursts.is_empty() {
            "Wire bytes per bin of the busiest channels (solid), their 1 s averages (dashed), and below, on the same time axis, each request's latency. No bursts were found.".into()
        } else {
            format!(
                "Wire bytes per bin of the busiest channels (solid) and their 1 s averages (dashed); shaded: the {} bursts. The busiest bin reached {} of the link while no second averaged more than {}: a 1-second graph shows none of it. Below, on the same time axis, each request's latency: slow requests line up with the bursts when the bursts cause them.",
                report.bursts.len(),
                fmt_value(Fmt::Share, worst),
                fmt_value(Fmt::Share, second)
            )
        },
        series: drawn,
    }))
}

/// The request-latency panel under the bytes chart (same x scale), when the capture has
/// request latency.
fn latency_panel(rd: &RunData<'_>, x: Scale) -> Result<Option<String>, StoreError> {
    let mut groups = Vec::new();
    for s in rd.named("latency") {
        let samples = rd.samples(s)?;
        if samples.is_empty() {
            continue;
        }
        let port = s.labels.get("server_port").cloned().unwrap_or_default();
        let pts: Vec<(f64, f64)> = samples
            .iter()
            .map(|x| (rd.secs(x.start_ns), x.latency_ns().max(1) as f64))
            .collect();
        groups.push((format!("latency to port {port}"), pts));
    }
    if groups.is_empty() {
        return Ok(None);
    }
    let (lo, hi) = groups
        .iter()
        .flat_map(|g| g.1.iter().map(|p| p.1))
        .fold((f64::MAX, 0f64), |(a, b), v| (a.min(v), b.max(v)));
    let mut p = Plot::new(
        220.0,
        Axis::new(x, Fmt::Seconds, "time from the start of the capture"),
        Axis::new(
            Scale::new(Kind::Log, lo / 1.3, hi * 1.3),
            Fmt::Duration,
            "request latency (log)",
        ),
    );
    for (i, (name, mut pts)) in groups.into_iter().enumerate() {
        p.series(&name, colour(i + 4));
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if pts.len() <= MAX_DOTS {
            p.dots(&pts, 1.8);
        } else {
            p.line(&min_max(&pts, x.lo, x.hi, COLUMNS), false);
        }
    }
    Ok(Some(p.finish(&format!(
        "{}-latency",
        rd.id(ChartKind::Bytes, 0)
    ))))
}

/// Spans of consecutive bins where bytes in flight reached the window.
fn limited_spans(inflight: &[(f64, f64)], window: &[(f64, f64)], bin_s: f64) -> Vec<(f64, f64)> {
    let mut spans: Vec<(f64, f64)> = Vec::new();
    for (f, w) in inflight.iter().zip(window) {
        if w.1 > 0.0 && f.1 >= WINDOW_LIMITED * w.1 {
            match spans.last_mut() {
                Some(last) if f.0 - last.1 <= bin_s * 1.5 => last.1 = f.0 + bin_s,
                _ => spans.push((f.0, f.0 + bin_s)),
            }
        }
    }
    spans
}

fn flow_charts(
    rd: &RunData<'_>,
    report: &CaptureReport,
    span: (f64, f64),
) -> Result<Vec<Chart>, StoreError> {
    let mut out = Vec::new();
    let bin_s = report.bin_ns.max(1) as f64 / 1e9;
    for (k, infl) in rd.named("inflight").into_iter().take(MAX_FLOWS).enumerate() {
        let Some(flow) = infl.labels.get("flow") else {
            continue;
        };
        let find = |name: &str| {
            rd.named(name)
                .into_iter()
                .find(|s| s.labels.get("flow") == Some(flow))
        };
        let Some(win) = find("window") else { continue };
        let inflight = xy(rd, &rd.points(infl)?);
        let window = xy(rd, &rd.points(win)?);
        let (inflight_line, window_line) = (steps(&inflight), steps(&window));
        if inflight.is_empty() {
            continue;
        }
        let name = flow
            .parse::<usize>()
            .ok()
            .and_then(|id| report.flows.iter().find(|f| f.id == id))
            .map_or_else(
                || format!("flow {flow}"),
                |f| format!("{} -> {}", f.name.client, f.name.server),
            );
        let x = Scale::new(Kind::Linear, span.0, span.1);
        let mut svg = String::new();
        let id = rd.id(ChartKind::Flow, k);
        if let (Some(seq), Some(ack)) = (find("seq"), find("ack")) {
            let seq = steps(&xy(rd, &rd.points(seq)?));
            let ack = xy(rd, &rd.points(ack)?);
            let edge: Vec<(f64, f64)> = steps(
                &ack.iter()
                    .zip(&window)
                    .map(|(a, w)| (a.0, a.1 + w.1))
                    .collect::<Vec<_>>(),
            );
            let ack = steps(&ack);
            let top = seq.iter().chain(&edge).map(|p| p.1).fold(1.0, f64::max);
            let mut p = Plot::new(
                260.0,
                Axis::new(x, Fmt::Seconds, "time from the start of the capture"),
                Axis::new(Scale::from_zero(top), Fmt::Bytes, "sequence (relative)"),
            );
            for (i, (label, pts)) in [
                ("sequence sent", &seq),
                ("ACK", &ack),
                ("ACK + window", &edge),
            ]
            .into_iter()
            .enumerate()
            {
                p.series(label, colour(i));
                p.line(&min_max(pts, span.0, span.1, COLUMNS), i == 2);
            }
            svg.push_str(&p.finish(&format!("{id}-seq")));
        }
        let top = inflight
            .iter()
            .chain(&window)
            .map(|p| p.1)
            .fold(1.0, f64::max);
        let mut p = Plot::new(
            240.0,
            Axis::new(x, Fmt::Seconds, "time from the start of the capture"),
            Axis::new(Scale::from_zero(top * 1.1), Fmt::Bytes, "bytes"),
        );
        let spans = limited_spans(&inflight, &window, bin_s);
        for (a, b) in &spans {
            p.band(
                *a,
                *b,
                "limited",
                "",
                "bytes in flight at the advertised window: the receiver's window limits the sender",
            );
        }
        p.series("advertised window", colour(2));
        p.line(&min_max(&window_line, span.0, span.1, COLUMNS), false);
        p.series("bytes in flight", colour(1));
        p.line(&min_max(&inflight_line, span.0, span.1, COLUMNS), false);
        svg.push_str(&p.finish(&id));
        let limited: f64 = spans.iter().map(|(a, b)| (b - a).max(0.0)).sum();
        out.push(Chart {
            svg,
            id,
            kind: ChartKind::Flow,
            title: format!("TCP connection {name}"),
            caption: format!(
                "The receiver's advertised window and the sender's bytes in flight, read at the end of each bin with traffic; shaded: bins where the bytes in flight reached {} of the window ({}). A sender pinned at the window is held back by the receiver's buffer, not by the network.",
                fmt_value(Fmt::Share, WINDOW_LIMITED),
                if spans.is_empty() { "none here".to_string() } else { format!("{} in all", fmt_value(Fmt::Seconds, limited)) }
            ),
            series: vec!["inflight".into(), "window".into(), "seq".into(), "ack".into()],
        });
    }
    Ok(out)
}

fn rtt(rd: &RunData<'_>, span: (f64, f64)) -> Result<Option<Chart>, StoreError> {
    let mut legs = Vec::new();
    for s in rd.named("rtt") {
        let samples = rd.samples(s)?;
        if samples.is_empty() {
            continue;
        }
        let mut pts: Vec<(f64, f64)> = samples
            .iter()
            .map(|x| (rd.secs(x.start_ns), x.latency_ns().max(1) as f64))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let leg = s.labels.get("leg").cloned().unwrap_or_default();
        legs.push((format!("{leg} leg"), pts));
    }
    if legs.is_empty() {
        return Ok(None);
    }
    let (lo, hi) = legs
        .iter()
        .flat_map(|g| g.1.iter().map(|p| p.1))
        .fold((f64::MAX, 0f64), |(a, b), v| (a.min(v), b.max(v)));
    let mut p = Plot::new(
        240.0,
        Axis::new(
            Scale::new(Kind::Linear, span.0, span.1),
            Fmt::Seconds,
            "time from the start of the capture",
        ),
        Axis::new(
            Scale::new(Kind::Log, lo / 1.3, hi * 1.3),
            Fmt::Duration,
            "round-trip time (log)",
        ),
    );
    for (i, (name, pts)) in legs.iter().enumerate() {
        p.series(name, colour(i));
        if pts.len() <= MAX_DOTS {
            p.dots(pts, 1.6);
        } else {
            p.line(&min_max(pts, span.0, span.1, COLUMNS), false);
        }
    }
    let id = rd.id(ChartKind::Rtt, 0);
    Ok(Some(Chart {
        svg: p.finish(&id),
        id,
        kind: ChartKind::Rtt,
        title: "Round-trip time over time".into(),
        caption: "TCP round trips seen from the capture point: the server leg (capture point to server and back) and the client leg. A floor that rises is queueing on the path.".into(),
        series: vec!["rtt".into()],
    }))
}
