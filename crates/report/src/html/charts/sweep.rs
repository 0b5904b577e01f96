//! Latency against offered rate (a sweep), and the per-request breakdown.
//!
//! In: a load run's `latency{rate}` series (and its breakdown part series). Out: the
//! latency-vs-rate chart with each percentile's confidence interval as an error bar (one curve
//! per run when several runs are compared), and stacked shares of the request path for the
//! median requests and the tail.

use std::collections::BTreeMap;

use tailhunt_analyze::quantiles::{summarize, QuantileEstimate};
use tailhunt_analyze::Distribution;
use tailhunt_model::evidence::sweep::SweepRecord;
use tailhunt_model::Sample;
use tailhunt_store::StoreError;

use crate::html::format::{fmt_value, Fmt};
use crate::html::run::{Chart, ChartKind, RunData};
use crate::html::svg::{colour, Axis, Kind, Plot, Scale};

/// One rate of a sweep: the rate asked for and the p50 and p99 with their intervals.
#[derive(Debug, Clone)]
pub struct RatePoint {
    /// Requests per second asked for.
    pub rate: f64,
    /// Requests measured.
    pub count: u64,
    /// p50 and p99 with 95% intervals.
    pub quantiles: Vec<QuantileEstimate>,
}

/// The sweep's rates (repeats pooled), lowest first; empty when the run has fewer than two.
pub fn rate_points(rd: &RunData<'_>) -> Result<Vec<RatePoint>, StoreError> {
    let steps = rd
        .evidence::<SweepRecord>()
        .map(|s| s.steps)
        .unwrap_or_default();
    let mut by_rate: BTreeMap<u64, (f64, Vec<Sample>)> = BTreeMap::new();
    for info in rd.named("latency") {
        // The sweep record has each step's exact rate; older runs' labels were rounded for
        // people (`1.23k`), so they are only the fallback.
        let from_steps = steps
            .iter()
            .find(|s| s.series == info.display_name)
            .map(|s| s.rate_per_s);
        let Some(rate) = from_steps.or_else(|| info.labels.get("rate").and_then(|r| parse_rate(r)))
        else {
            continue;
        };
        let entry = by_rate
            .entry((rate * 1000.0) as u64)
            .or_insert((rate, Vec::new()));
        entry.1.extend(rd.samples(info)?);
    }
    if by_rate.len() < 2 {
        return Ok(Vec::new());
    }
    Ok(by_rate
        .into_values()
        .filter(|(_, s)| !s.is_empty())
        .map(|(rate, s)| {
            let dist = Distribution::from_samples(&s, false);
            let summary = summarize(&dist, &[0.5, 0.99], 0.95);
            RatePoint {
                rate,
                count: dist.count(),
                quantiles: summary.quantiles,
            }
        })
        .collect())
}

/// `50`, `1.5k`, `2m` (how older runs labelled their rates).
fn parse_rate(label: &str) -> Option<f64> {
    let (num, mult) = match label.chars().last()? {
        'k' => (&label[..label.len() - 1], 1e3),
        'm' | 'M' => (&label[..label.len() - 1], 1e6),
        _ => (label, 1.0),
    };
    num.parse::<f64>().ok().map(|v| v * mult)
}

/// The latency-vs-rate chart of one or more curves (`(name, points)`).
pub fn latency_vs_rate(id: &str, curves: &[(String, Vec<RatePoint>)]) -> Option<String> {
    let all = curves.iter().flat_map(|(_, c)| c.iter());
    let (mut rlo, mut rhi, mut llo, mut lhi) = (f64::MAX, 0f64, f64::MAX, 0f64);
    for p in all {
        rlo = rlo.min(p.rate);
        rhi = rhi.max(p.rate);
        for q in &p.quantiles {
            llo = llo.min(q.ci_low_ns.unwrap_or(q.value_ns) as f64);
            lhi = lhi.max(q.ci_high_ns.unwrap_or(q.value_ns) as f64);
        }
    }
    if rhi <= 0.0 || lhi <= 0.0 {
        return None;
    }
    let mut p = Plot::new(
        320.0,
        Axis::new(
            Scale::new(Kind::Log, rlo / 1.5, rhi * 1.5),
            Fmt::Rate,
            "offered rate (log)",
        ),
        Axis::new(
            Scale::new(Kind::Log, llo.max(1.0) / 1.5, lhi * 1.5),
            Fmt::Duration,
            "latency (log)",
        ),
    );
    let mut colour_at = 0;
    for (name, points) in curves {
        for (qi, label) in ["p50", "p99"].iter().enumerate() {
            let series = if curves.len() > 1 {
                format!("{name} {label}")
            } else {
                (*label).to_string()
            };
            p.series(&series, colour(colour_at));
            colour_at += 1;
            let line: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|pt| pt.quantiles.get(qi).map(|q| (pt.rate, q.value_ns as f64)))
                .collect();
            p.line(&line, qi == 0);
            for pt in points {
                let Some(q) = pt.quantiles.get(qi) else {
                    continue;
                };
                let (lo, hi) = (
                    q.ci_low_ns.unwrap_or(q.value_ns),
                    q.ci_high_ns.unwrap_or(q.value_ns),
                );
                p.error_bar(
                    pt.rate,
                    q.value_ns as f64,
                    lo as f64,
                    hi as f64,
                    &format!(
                        "{series} at {}: {} [{}, {}] 95% CI, {} requests",
                        fmt_value(Fmt::Rate, pt.rate),
                        fmt_value(Fmt::Duration, q.value_ns as f64),
                        fmt_value(Fmt::Duration, lo as f64),
                        fmt_value(Fmt::Duration, hi as f64),
                        pt.count
                    ),
                );
            }
        }
    }
    Some(p.finish(id))
}

/// The latency-vs-rate chart of one run.
pub fn sweep_chart(rd: &RunData<'_>, points: Vec<RatePoint>) -> Option<Chart> {
    if points.len() < 2 {
        return None;
    }
    let id = rd.id(ChartKind::LatencyVsRate, 0);
    let rising = rises_as_rate_falls(&points);
    let svg = latency_vs_rate(&id, &[(String::new(), points)])?;
    Some(Chart {
        svg,
        id,
        kind: ChartKind::LatencyVsRate,
        title: "Latency against offered rate".into(),
        caption: format!(
            "p50 (dashed) and p99 at each rate of the sweep, bars are 95% confidence intervals. {}",
            if rising {
                "Here the p99 is higher at the lowest rate than at the highest: latency that rises as load falls is the mark of Nagle's algorithm meeting delayed ACKs."
            } else {
                "Latency that climbs with the rate is queueing; latency that rises as the rate falls is Nagle meeting delayed ACKs."
            }
        ),
        series: vec!["latency".into()],
    })
}

fn rises_as_rate_falls(points: &[RatePoint]) -> bool {
    let p99 = |p: &RatePoint| p.quantiles.get(1).map_or(0, |q| q.value_ns);
    match (points.first(), points.last()) {
        (Some(a), Some(b)) => p99(a) > p99(b).saturating_mul(2),
        _ => false,
    }
}

/// The parts of the request path, in path order, and how each reads from a sample.
const PARTS: [&str; 4] = ["client_stack", "network", "server_stack", "server_app"];

/// Stacked shares of the path for the median requests (p45-p55) and the tail (p99 and above).
pub fn breakdown(rd: &RunData<'_>) -> Result<Option<Chart>, StoreError> {
    let mut totals: Vec<Sample> = Vec::new();
    let mut parts: Vec<Vec<Sample>> = vec![Vec::new(); PARTS.len()];
    for info in rd.named("latency") {
        let mut own = Vec::with_capacity(PARTS.len());
        for name in PARTS {
            let twin = rd
                .infos
                .iter()
                .find(|s| s.name == name && s.labels == info.labels);
            own.push(twin);
        }
        if own.iter().any(|t| t.is_none()) {
            continue;
        }
        let lat = rd.samples(info)?;
        let mut loaded = Vec::with_capacity(PARTS.len());
        for t in own.into_iter().flatten() {
            loaded.push(rd.samples(t)?);
        }
        if loaded.iter().any(|l| l.len() != lat.len()) {
            continue;
        }
        totals.extend(lat);
        for (i, l) in loaded.into_iter().enumerate() {
            parts[i].extend(l);
        }
    }
    if totals.len() < 20 {
        return Ok(None);
    }
    let mut order: Vec<usize> = (0..totals.len()).collect();
    order.sort_unstable_by_key(|&i| totals[i].latency_ns());
    let n = order.len();
    let median = &order[n * 45 / 100..(n * 55 / 100).max(n * 45 / 100 + 1)];
    let tail = &order[(n * 99 / 100).min(n - 1)..];
    let names = [
        "send lag",
        "client stack",
        "network",
        "server stack",
        "server app",
    ];
    let means = |idx: &[usize]| -> Vec<f64> {
        let k = idx.len().max(1) as f64;
        let mut m = vec![0.0; names.len()];
        for &i in idx {
            m[0] += totals[i].send_lag_ns().max(0) as f64;
            for (p, part) in parts.iter().enumerate() {
                m[p + 1] += part[i].latency_ns().max(0) as f64;
            }
        }
        m.iter_mut().for_each(|v| *v /= k);
        m
    };
    let rows = [
        ("median requests (p45-p55)", means(median)),
        ("tail (p99 and above)", means(tail)),
    ];
    let mut p = Plot::new(
        200.0,
        Axis::new(
            Scale::new(Kind::Linear, 0.0, 1.0),
            Fmt::Share,
            "share of the request's latency",
        ),
        Axis::new(Scale::new(Kind::Linear, 0.0, 2.0), Fmt::Count, ""),
    );
    p.hide_y_ticks();
    for (part, name) in names.iter().enumerate() {
        p.series(name, colour(part));
        for (row, (label, m)) in rows.iter().enumerate() {
            let total: f64 = m.iter().sum::<f64>().max(1.0);
            let before: f64 = m[..part].iter().sum::<f64>() / total;
            let share = m[part] / total;
            let y0 = 1.55 - row as f64;
            p.bar(
                before,
                before + share,
                Some(y0),
                y0 + 0.35,
                &format!(
                    "{label}: {name} {} ({} mean)",
                    fmt_value(Fmt::Share, share),
                    fmt_value(Fmt::Duration, m[part])
                ),
            );
        }
    }
    for (row, (label, m)) in rows.iter().enumerate() {
        p.note(
            0.005,
            1.97 - row as f64,
            &format!("{label}: {} mean", fmt_value(Fmt::Duration, m.iter().sum())),
        );
    }
    let id = rd.id(ChartKind::Breakdown, 0);
    Ok(Some(Chart {
        svg: p.finish(&id),
        id,
        kind: ChartKind::Breakdown,
        title: "Where the time goes: median against tail".into(),
        caption: "Each bar splits the mean latency of a group of requests into send lag (late sends), the client's stack, the network, the server's stack and the server's application. The part that grows from the median bar to the tail bar owns the tail.".into(),
        series: PARTS.iter().map(|s| s.to_string()).collect(),
    }))
}
