//! Several runs drawn together: one histogram overlay and one latency-vs-rate chart with a
//! curve per run (before and after a fix).
//!
//! In: each run's label, its main latency distribution and its sweep points. Out: the
//! comparison [`Chart`]s (none when fewer than two runs have the data).

use tailhunt_histogram::Histogram;

use crate::html::charts::sweep::{latency_vs_rate, RatePoint};
use crate::html::format::{fmt_value, Fmt};
use crate::html::run::{Chart, ChartKind};
use crate::html::svg::{colour, Axis, Kind, Plot, Scale};

/// Log bins per decade of the overlay.
const PER_DECADE: f64 = 10.0;

/// One run's share of the comparison.
pub struct Compared<'a> {
    /// How the run is called in the legend.
    pub label: String,
    /// Its main latency distribution, when it has one.
    pub histogram: Option<&'a Histogram>,
    /// Its sweep, when it has one.
    pub rates: Vec<RatePoint>,
}

/// The comparison charts of `runs` (one group of the same kind, called `name` in titles);
/// `k` makes their ids unique in the page.
pub fn charts(runs: &[&Compared<'_>], k: usize, name: &str) -> Vec<Chart> {
    let mut out = Vec::new();
    let hists: Vec<(&str, &Histogram)> = runs
        .iter()
        .filter_map(|r| Some((r.label.as_str(), r.histogram.filter(|h| !h.is_empty())?)))
        .collect();
    if hists.len() >= 2 {
        out.push(overlay(&hists, &format!("compare-histogram-{k}"), name));
    }
    let curves: Vec<(String, Vec<RatePoint>)> = runs
        .iter()
        .filter(|r| r.rates.len() >= 2)
        .map(|r| (r.label.clone(), r.rates.clone()))
        .collect();
    if curves.len() >= 2 {
        let id = format!("compare-rate-{k}");
        if let Some(svg) = latency_vs_rate(&id, &curves) {
            out.push(Chart {
                svg,
                id,
                kind: ChartKind::CompareRate,
                title: format!("Latency against offered rate: {name}"),
                caption: "p50 (dashed) and p99 of each run at each rate, with 95% confidence intervals: where the intervals do not overlap, the runs differ.".into(),
                series: vec!["latency".into()],
            });
        }
    }
    out
}

fn overlay(hists: &[(&str, &Histogram)], id: &str, name: &str) -> Chart {
    let lo = hists
        .iter()
        .filter_map(|h| h.1.min())
        .min()
        .unwrap_or(1)
        .max(1) as f64;
    let hi = hists
        .iter()
        .filter_map(|h| h.1.max())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let x = Scale::new(Kind::Log, lo / 1.3, hi * 1.3);
    let (a, b) = (
        (x.lo.log10() * PER_DECADE).floor() as i64,
        (x.hi.log10() * PER_DECADE).ceil() as i64,
    );
    let edge = |i: i64| 10f64.powf(i as f64 / PER_DECADE);
    let curves: Vec<(&str, Vec<(f64, f64)>)> = hists
        .iter()
        .map(|(label, h)| {
            let n = h.count().max(1) as f64;
            let pts = (a..b)
                .map(|i| {
                    let below = h.count_at_or_below(edge(i) as u64);
                    let upto = h.count_at_or_below(edge(i + 1) as u64);
                    ((edge(i) * edge(i + 1)).sqrt(), (upto - below) as f64 / n)
                })
                .collect();
            (*label, pts)
        })
        .collect();
    let top = curves
        .iter()
        .flat_map(|c| c.1.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let mut p = Plot::new(
        300.0,
        Axis::new(x, Fmt::Duration, "latency (log)"),
        Axis::new(
            Scale::from_zero(top * 1.15),
            Fmt::Share,
            "share of requests per bin",
        ),
    );
    let mut row = 0;
    for (i, (label, pts)) in curves.iter().enumerate() {
        p.series(label, colour(i));
        p.line(pts, false);
        let h = hists[i].1;
        if let Some(v) = h.quantile(0.99) {
            p.vrule(
                v as f64,
                "pct",
                &format!("{label} p99 {}", fmt_value(Fmt::Duration, v as f64)),
                row,
            );
            row += 1;
        }
    }
    Chart {
        svg: p.finish(id),
        id: id.to_string(),
        kind: ChartKind::CompareHistogram,
        title: format!("Latency histograms: {name}"),
        caption: format!(
            "The share of each run's requests per latency bin ({PER_DECADE} bins per decade, log x), with each run's p99. A fix that works moves the tail mode left or empties it."
        ),
        series: vec!["latency".into()],
    }
}
