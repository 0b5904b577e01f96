//! TCP_INFO over time, per sampled connection: the window against the bytes in flight, and the
//! delivery rate against what the window allows (window / RTT).
//!
//! In: a transfer or sockets run's `tcp_*{flow,role}` values series. Out: one [`Chart`] per
//! connection end (senders first).

use std::collections::BTreeMap;

use tailhunt_model::Labels;
use tailhunt_store::{SeriesInfo, StoreError};

use crate::html::decimate::{min_max, COLUMNS};
use crate::html::format::{fmt_value, Fmt};
use crate::html::run::{Chart, ChartKind, RunData};
use crate::html::svg::{colour, Axis, Kind, Plot, Scale};

/// Connection ends drawn.
const MAX_ENDS: usize = 4;

/// Readings of a byte counter are this far apart at least before a slope is taken (TCP_INFO is
/// read every few ms; a slope over one reading is mostly noise).
const SLOPE_S: f64 = 0.1;

/// The slope of a byte counter in bits per second, over steps of at least [`SLOPE_S`].
fn slope_bits(counter: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let Some(mut last) = counter.first().copied() else {
        return out;
    };
    for &p in &counter[1..] {
        if p.0 - last.0 >= SLOPE_S {
            out.push((
                (p.0 + last.0) / 2.0,
                (p.1 - last.1).max(0.0) * 8.0 / (p.0 - last.0),
            ));
            last = p;
        }
    }
    out
}

/// The TCP_INFO charts of the run.
pub fn charts(
    rd: &RunData<'_>,
    out: &mut Vec<Chart>,
    missing: &mut Vec<String>,
) -> Result<(), StoreError> {
    let mut ends: BTreeMap<Labels, BTreeMap<String, &SeriesInfo>> = BTreeMap::new();
    for s in rd.infos.iter().filter(|s| s.name.starts_with("tcp_")) {
        ends.entry(s.labels.clone())
            .or_default()
            .insert(s.name.clone(), s);
    }
    if ends.is_empty() {
        missing.push("TCP_INFO: the run sampled no connection that moved data".into());
        return Ok(());
    }
    // Senders (bytes in flight) first: their window is the one that can hold them back.
    let mut ordered: Vec<(Labels, BTreeMap<String, &SeriesInfo>)> = ends.into_iter().collect();
    ordered.sort_by_key(|(_, m)| {
        std::cmp::Reverse(m.get("tcp_bytes_in_flight").map_or(0, |s| s.count))
    });
    for (k, (labels, series)) in ordered.into_iter().take(MAX_ENDS).enumerate() {
        if let Some(c) = one_end(rd, k, &labels, &series)? {
            out.push(c);
        }
    }
    Ok(())
}

fn one_end(
    rd: &RunData<'_>,
    k: usize,
    labels: &Labels,
    series: &BTreeMap<String, &SeriesInfo>,
) -> Result<Option<Chart>, StoreError> {
    let load = |name: &str| -> Result<Vec<(f64, f64)>, StoreError> {
        Ok(match series.get(name) {
            Some(s) => rd
                .points(s)?
                .iter()
                .map(|p| (rd.secs(p.t_ns), p.value as f64))
                .collect(),
            None => Vec::new(),
        })
    };
    let snd_wnd = load("tcp_snd_wnd")?;
    let rcv_wnd = load("tcp_rcv_wnd")?;
    let inflight = load("tcp_bytes_in_flight")?;
    let rate = load("tcp_delivery_rate_bytes_per_s")?;
    let rtt = load("tcp_rtt")?;
    let all = [&snd_wnd, &rcv_wnd, &inflight];
    let (t0, t1) = all
        .iter()
        .flat_map(|v| v.iter().map(|p| p.0))
        .fold((f64::MAX, f64::MIN), |(a, b), t| (a.min(t), b.max(t)));
    if t1 <= t0 {
        return Ok(None);
    }
    let x = Scale::new(Kind::Linear, t0, t1);
    let top = all
        .iter()
        .flat_map(|v| v.iter().map(|p| p.1))
        .fold(1.0, f64::max);
    let mut p = Plot::new(
        240.0,
        Axis::new(x, Fmt::Seconds, "time from the start of the run"),
        Axis::new(Scale::from_zero(top * 1.1), Fmt::Bytes, "bytes"),
    );
    for (i, (name, pts)) in [
        ("peer's advertised window (snd_wnd)", &snd_wnd),
        ("own receive window (rcv_wnd)", &rcv_wnd),
        ("bytes in flight", &inflight),
    ]
    .into_iter()
    .enumerate()
    {
        if pts.iter().any(|p| p.1 > 0.0) {
            p.series(name, colour(i + 1));
            p.line(&min_max(pts, t0, t1, COLUMNS), false);
        }
    }
    let id = rd.id(ChartKind::TcpInfo, k);
    let mut svg = p.finish(&id);
    // What the window allows (window / RTT) beside what moved: a sender's window is its
    // peer's advertisement, a receiver's its own; what moved is the byte counter's slope.
    let sender = inflight.iter().any(|p| p.1 > 0.0);
    let (window, counter) = if sender {
        (&snd_wnd, load("tcp_bytes_acked")?)
    } else {
        (&rcv_wnd, load("tcp_bytes_received")?)
    };
    let bound: Vec<(f64, f64)> = window
        .iter()
        .zip(&rtt)
        .filter(|(w, r)| w.1 > 0.0 && r.1 > 0.0)
        .map(|(w, r)| (w.0, w.1 * 8.0 / (r.1 / 1e9)))
        .collect();
    let bits = slope_bits(&counter);
    let delivered: Vec<(f64, f64)> = rate.iter().map(|p| (p.0, p.1 * 8.0)).collect();
    if bits.iter().chain(&delivered).any(|p| p.1 > 0.0) {
        let top = bits
            .iter()
            .chain(&bound)
            .chain(&delivered)
            .map(|p| p.1)
            .fold(1.0, f64::max);
        let mut q = Plot::new(
            220.0,
            Axis::new(x, Fmt::Seconds, "time from the start of the run"),
            Axis::new(Scale::from_zero(top * 1.1), Fmt::Bits, "rate"),
        );
        q.series(
            if sender {
                "bytes acknowledged per s"
            } else {
                "bytes received per s"
            },
            colour(0),
        );
        q.line(&min_max(&bits, t0, t1, COLUMNS), false);
        if sender && delivered.iter().any(|p| p.1 > 0.0) {
            q.series("kernel's delivery rate", colour(4));
            q.line(&min_max(&delivered, t0, t1, COLUMNS), false);
        }
        if !bound.is_empty() {
            q.series("window / RTT", colour(3));
            q.line(&min_max(&bound, t0, t1, COLUMNS), true);
        }
        svg.push_str(&q.finish(&format!("{id}-rate")));
    }
    let who: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Ok(Some(Chart {
        svg,
        id,
        kind: ChartKind::TcpInfo,
        title: format!("TCP_INFO of {}", who.join(", ")),
        caption: format!(
            "Read from the kernel every few ms. Bytes in flight riding the peer's advertised window, and data moving at window / RTT, mean the receiver's buffer sets the speed. Mean RTT {}.",
            fmt_value(Fmt::Duration, rtt.iter().map(|p| p.1).sum::<f64>() / rtt.len().max(1) as f64)
        ),
        series: series.keys().cloned().collect(),
    }))
}
