//! The distribution charts of a run's request latency: histogram with modes and percentiles,
//! CDF, percentiles over time, the heatmap, and the fan-out odds.
//!
//! In: a run's latency series (raw samples or interval histograms, the warm-up left out; a
//! sweep's rates together). Out: [`Chart`]s, and a note for each series that holds nothing.

use std::collections::BTreeMap;

use tailhunt_analyze::{analyze, Analysis, AnalyzeOptions, Distribution};
use tailhunt_histogram::Histogram;
use tailhunt_model::{Labels, RunKind, Sample, SeriesKind, Timing, Unit};
use tailhunt_store::{SeriesInfo, StoreError};

use crate::html::format::{fmt_value, Fmt};
use crate::html::run::{Chart, ChartKind, RunData};
use crate::html::svg::{colour, Axis, Kind, Plot, Scale};

/// Latency groups drawn per run (the largest by count).
const MAX_GROUPS: usize = 3;
/// Windows of the percentiles-over-time chart.
const WINDOWS: usize = 150;
/// Heatmap columns and rows per decade.
const HEAT_COLUMNS: usize = 100;
const HEAT_ROWS_PER_DECADE: f64 = 8.0;

/// One distribution the run measured: its samples (or interval histograms) over time.
pub struct Group {
    /// Label that tells it from the run's other groups (`server_port=7000`), or empty.
    pub label: String,
    /// The series (base name) it came from.
    pub series: String,
    /// Every sample: (time ns on the run's clock, latency ns).
    pub timed: Vec<(i64, u64)>,
    /// Interval histograms, when the series stored those instead of samples.
    pub intervals: Vec<(i64, i64, Histogram)>,
    /// Whether its samples carry real times (an import without timestamps does not).
    pub has_times: bool,
    /// The whole distribution.
    pub dist: Distribution,
    /// Its analysis.
    pub analysis: Analysis,
}

/// Whether a series is a request latency the distribution charts should draw.
fn is_latency(rd: &RunData<'_>, s: &SeriesInfo) -> bool {
    let warmup = s.labels.get("phase").is_some_and(|p| p == "warmup");
    let named = s.name == "latency" || (s.name.ends_with("_latency") && s.name != "runq_latency");
    let imported = matches!(rd.run.kind, RunKind::Import | RunKind::Other(_));
    s.unit == Unit::Nanoseconds
        && s.kind != SeriesKind::Values
        && !warmup
        && (named || (imported && s.name != "runq_event"))
}

/// The run's latency distributions, grouped by their labels less the sweep's `rate` and
/// `repeat` (a sweep is one group; a capture's server ports are one group each), largest first.
pub fn groups(rd: &RunData<'_>) -> Result<Vec<Group>, StoreError> {
    let mut by_key: BTreeMap<(String, String), Vec<&SeriesInfo>> = BTreeMap::new();
    for s in rd.infos.iter().filter(|s| is_latency(rd, s)) {
        let mut labels: Labels = s.labels.clone();
        labels.remove("rate");
        labels.remove("repeat");
        let label: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        by_key
            .entry((s.name.clone(), label.join(",")))
            .or_default()
            .push(s);
    }
    let mut keyed: Vec<_> = by_key.into_iter().collect();
    keyed.sort_by_key(|(_, v)| std::cmp::Reverse(v.iter().map(|s| s.count).sum::<u64>()));
    let mut out = Vec::new();
    for ((name, label), infos) in keyed.into_iter().take(MAX_GROUPS) {
        let mut timed = Vec::new();
        let mut intervals = Vec::new();
        let mut samples: Vec<Sample> = Vec::new();
        let mut merged = Histogram::new();
        let has_times = infos.iter().all(|i| i.timing == Timing::Timed);
        for info in infos {
            if info.kind == SeriesKind::Histograms {
                for ih in rd.histograms(info)? {
                    merged.merge(&ih.histogram);
                    intervals.push((ih.start_ns, ih.end_ns, ih.histogram));
                }
            } else {
                let s = rd.samples(info)?;
                timed.extend(
                    s.iter()
                        .map(|s| (s.intended_ns, s.latency_ns().max(0) as u64)),
                );
                samples.extend(s);
            }
        }
        let dist = if intervals.is_empty() {
            Distribution::from_samples(&samples, false)
        } else {
            Distribution::from_histogram(merged)
        };
        timed.sort_unstable_by_key(|t| t.0);
        intervals.sort_unstable_by_key(|t| t.0);
        let analysis = analyze(&dist, &AnalyzeOptions::default());
        out.push(Group {
            label,
            series: name,
            timed,
            intervals,
            has_times,
            dist,
            analysis,
        });
    }
    Ok(out)
}

fn suffix(g: &Group) -> String {
    if g.label.is_empty() {
        String::new()
    } else {
        format!(" ({})", g.label)
    }
}

/// Every distribution chart of every group; groups with no samples go to `missing`.
pub fn charts(rd: &RunData<'_>, groups: &[Group], out: &mut Vec<Chart>, missing: &mut Vec<String>) {
    for (k, g) in groups.iter().enumerate() {
        if g.dist.count() == 0 {
            missing.push(format!(
                "{}{}: no samples, so no latency charts",
                g.series,
                suffix(g)
            ));
            continue;
        }
        out.push(histogram(rd, g, k));
        out.push(cdf(rd, g, k));
        if !g.has_times {
            missing.push(format!(
                "{}{}: no timestamps (an untimed import), so no percentiles over time or heatmap",
                g.series,
                suffix(g)
            ));
        } else {
            over_time_charts(rd, g, k, out, missing);
        }
        if k == 0 {
            if let Some(f) = fanout(rd, g) {
                out.push(f);
            }
        }
    }
}

fn over_time_charts(
    rd: &RunData<'_>,
    g: &Group,
    k: usize,
    out: &mut Vec<Chart>,
    missing: &mut Vec<String>,
) {
    {
        match over_time(rd, g) {
            Some(windows) => {
                out.push(percentiles_over_time(rd, g, k, &windows));
                if let Some(h) = heatmap(rd, g, k) {
                    out.push(h);
                }
            }
            None => missing.push(format!(
                "{}{}: too few samples over time for the percentiles-over-time chart and heatmap",
                g.series,
                suffix(g)
            )),
        }
    }
}

/// The log-x range of a distribution, with a little room.
fn latency_scale(h: &Histogram) -> Scale {
    let (lo, hi) = (h.min().unwrap_or(1).max(1), h.max().unwrap_or(1).max(1));
    Scale::new(Kind::Log, lo as f64 / 1.3, hi as f64 * 1.3)
}

fn histogram(rd: &RunData<'_>, g: &Group, k: usize) -> Chart {
    let a = &g.analysis;
    let total = g.dist.count().max(1) as f64;
    let top = a.histogram.iter().map(|b| b.count).max().unwrap_or(1) as f64 / total;
    let mut p = Plot::new(
        300.0,
        Axis::new(
            latency_scale(g.dist.histogram()),
            Fmt::Duration,
            "latency (log)",
        ),
        Axis::new(
            Scale::from_zero(top * 1.25),
            Fmt::Share,
            "share of requests",
        ),
    );
    // One mode is the whole distribution: shading it says nothing.
    for (i, m) in a.modes.iter().enumerate().filter(|_| a.modes.len() > 1) {
        p.band(
            m.lower_ns as f64,
            m.upper_ns.max(m.lower_ns + 1) as f64,
            "mode",
            &format!("mode {}: {}", i + 1, fmt_value(Fmt::Share, m.share)),
            &format!(
                "mode {} from {} to {}, peak {}, {} of requests",
                i + 1,
                fmt_value(Fmt::Duration, m.lower_ns as f64),
                fmt_value(Fmt::Duration, m.upper_ns as f64),
                fmt_value(Fmt::Duration, m.peak_ns as f64),
                fmt_value(Fmt::Share, m.share)
            ),
        );
    }
    p.series("requests", colour(0));
    for b in &a.histogram {
        p.bar(
            b.lower_ns as f64,
            b.upper_ns as f64,
            None,
            b.count as f64 / total,
            &format!(
                "{}-{}: {} requests ({})",
                fmt_value(Fmt::Duration, b.lower_ns as f64),
                fmt_value(Fmt::Duration, b.upper_ns as f64),
                b.count,
                fmt_value(Fmt::Share, b.count as f64 / total)
            ),
        );
    }
    for (row, q) in a.summary.quantiles.iter().enumerate() {
        let fragile = a.warnings.iter().find(|w| w.label == q.label);
        let (class, label) = match fragile {
            Some(w) if w.in_gap => (
                "warn",
                format!(
                    "{} {} in a gap!",
                    q.label,
                    fmt_value(Fmt::Duration, q.value_ns as f64)
                ),
            ),
            Some(_) => (
                "warn",
                format!(
                    "{} {} fragile",
                    q.label,
                    fmt_value(Fmt::Duration, q.value_ns as f64)
                ),
            ),
            None => (
                "pct",
                format!(
                    "{} {}",
                    q.label,
                    fmt_value(Fmt::Duration, q.value_ns as f64)
                ),
            ),
        };
        p.vrule(q.value_ns as f64, class, &label, row);
    }
    let mut caption = format!(
        "{} requests on a log axis; shaded: the modes with their share; lines: the percentiles.",
        g.dist.count()
    );
    for w in &a.warnings {
        caption.push(' ');
        caption.push_str(&w.message);
    }
    Chart {
        id: rd.id(ChartKind::Histogram, k),
        kind: ChartKind::Histogram,
        title: format!("Latency histogram{}", suffix(g)),
        caption,
        svg: p.finish(&rd.id(ChartKind::Histogram, k)),
        series: vec![g.series.clone()],
    }
}

fn cdf(rd: &RunData<'_>, g: &Group, k: usize) -> Chart {
    let h = g.dist.histogram();
    let x = latency_scale(h);
    let n = h.count().max(1) as f64;
    // 400 log-spaced points: the curve's shape without one point per sample.
    let pts: Vec<(f64, f64)> = (0..=400)
        .map(|i| {
            let v = x.lo * (x.hi / x.lo).powf(i as f64 / 400.0);
            (v, h.count_at_or_below(v as u64) as f64 / n)
        })
        .collect();
    let mut p = Plot::new(
        260.0,
        Axis::new(x, Fmt::Duration, "latency (log)"),
        Axis::new(
            Scale::new(Kind::Linear, 0.0, 1.0),
            Fmt::Share,
            "requests at or below",
        ),
    );
    p.series("CDF", colour(0));
    p.line(&pts, false);
    for (row, q) in g.analysis.summary.quantiles.iter().enumerate() {
        p.vrule(
            q.value_ns as f64,
            "pct",
            &format!(
                "{} {}",
                q.label,
                fmt_value(Fmt::Duration, q.value_ns as f64)
            ),
            row,
        );
    }
    let id = rd.id(ChartKind::Cdf, k);
    Chart {
        svg: p.finish(&id),
        id,
        kind: ChartKind::Cdf,
        title: format!("Cumulative distribution{}", suffix(g)),
        caption: "The share of requests at or below each latency (log x). A step is a mode; a long flat stretch is a gap a percentile can jump across.".into(),
        series: vec![g.series.clone()],
    }
}

/// Per window of time: (start ns, end ns, histogram).
type Windows = Vec<(i64, i64, Histogram)>;

fn over_time(rd: &RunData<'_>, g: &Group) -> Option<Windows> {
    let _ = rd;
    if !g.intervals.is_empty() {
        return (g.intervals.len() >= 2).then(|| g.intervals.clone());
    }
    let (first, last) = (g.timed.first()?.0, g.timed.last()?.0);
    if g.timed.len() < 20 || last <= first {
        return None;
    }
    let n = WINDOWS.min(g.timed.len() / 10).max(2);
    let width = ((last - first) as f64 / n as f64).max(1.0);
    let mut w: Windows = (0..n)
        .map(|i| {
            let a = first + (i as f64 * width) as i64;
            (a, first + ((i + 1) as f64 * width) as i64, Histogram::new())
        })
        .collect();
    for &(t, v) in &g.timed {
        let i = (((t - first) as f64 / width) as usize).min(n - 1);
        w[i].2.record(v);
    }
    w.retain(|x| !x.2.is_empty());
    Some(w)
}

fn percentiles_over_time(rd: &RunData<'_>, g: &Group, k: usize, w: &Windows) -> Chart {
    let xs = Scale::new(
        Kind::Linear,
        rd.secs(w.first().map_or(0, |x| x.0)),
        rd.secs(w.last().map_or(1, |x| x.1)),
    );
    let mut p = Plot::new(
        280.0,
        Axis::new(xs, Fmt::Seconds, "time from the start of the run"),
        Axis::new(
            latency_scale(g.dist.histogram()),
            Fmt::Duration,
            "latency (log)",
        ),
    );
    for (i, (q, name)) in [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")]
        .into_iter()
        .enumerate()
    {
        let pts: Vec<(f64, f64)> = w
            .iter()
            .filter_map(|(a, b, h)| {
                let v = h.quantile(q)? as f64;
                Some((rd.secs((a + b) / 2), v))
            })
            .collect();
        p.series(name, colour(i));
        p.line(&pts, false);
    }
    let id = rd.id(ChartKind::PercentilesOverTime, k);
    Chart {
        svg: p.finish(&id),
        id,
        kind: ChartKind::PercentilesOverTime,
        title: format!("Percentiles over time{}", suffix(g)),
        caption: format!(
            "Each point is one of {} windows of the run; a percentile of a window with few requests is its maximum. Click a legend entry to hide it.",
            w.len()
        ),
        series: vec![g.series.clone()],
    }
}

fn heatmap(rd: &RunData<'_>, g: &Group, k: usize) -> Option<Chart> {
    if g.timed.len() < 20 {
        return None;
    }
    let (first, last) = (g.timed.first()?.0, g.timed.last()?.0);
    let y = latency_scale(g.dist.histogram());
    let (lo, hi) = (y.lo.log10(), y.hi.log10());
    let rows = (((hi - lo) * HEAT_ROWS_PER_DECADE).ceil() as usize).clamp(4, 48);
    let width = ((last - first) as f64 / HEAT_COLUMNS as f64).max(1.0);
    let mut counts = vec![0u64; HEAT_COLUMNS * rows];
    for &(t, v) in &g.timed {
        let c = (((t - first) as f64 / width) as usize).min(HEAT_COLUMNS - 1);
        let r =
            ((((v.max(1) as f64).log10() - lo) / (hi - lo) * rows as f64) as usize).min(rows - 1);
        counts[c * rows + r] += 1;
    }
    let max = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let mut p = Plot::new(
        280.0,
        Axis::new(
            Scale::new(Kind::Linear, rd.secs(first), rd.secs(last)),
            Fmt::Seconds,
            "time from the start of the run",
        ),
        Axis::new(y, Fmt::Duration, "latency (log)"),
    );
    p.series("requests", colour(0));
    for c in 0..HEAT_COLUMNS {
        for r in 0..rows {
            let n = counts[c * rows + r];
            if n == 0 {
                continue;
            }
            let t0 = rd.secs(first + (c as f64 * width) as i64);
            let t1 = rd.secs(first + ((c + 1) as f64 * width) as i64);
            let v0 = 10f64.powf(lo + (hi - lo) * r as f64 / rows as f64);
            let v1 = 10f64.powf(lo + (hi - lo) * (r + 1) as f64 / rows as f64);
            p.cell(
                (t0, t1),
                (v0, v1),
                (1.0 + n as f64).ln() / (1.0 + max).ln(),
                &format!(
                    "{n} requests {}-{} at {}",
                    fmt_value(Fmt::Duration, v0),
                    fmt_value(Fmt::Duration, v1),
                    fmt_value(Fmt::Seconds, t0)
                ),
            );
        }
    }
    let id = rd.id(ChartKind::Heatmap, k);
    Some(Chart {
        svg: p.finish(&id),
        id,
        kind: ChartKind::Heatmap,
        title: format!("Latency heatmap{}", suffix(g)),
        caption: "Requests per time column and latency row (log); darker is more (log scale of counts). Bands are modes; a band that comes and goes is a cause that comes and goes.".into(),
        series: vec![g.series.clone()],
    })
}

/// What counts as slow for the fan-out odds: above the gap over the main mode (the one with
/// the most requests) when there is one, so the slow requests are those outside it above;
/// else ten times the median. (The first gap of all was used until 2026-11-30: below a main
/// mode holding 95% of a capture's requests it called those 95% slow.)
fn slow_threshold(g: &Group) -> Option<(u64, String)> {
    let median = g.dist.histogram().quantile(0.5)?;
    Some(slow_threshold_of(&g.analysis, median))
}

fn slow_threshold_of(a: &Analysis, median: u64) -> (u64, String) {
    let main = a
        .modes
        .iter()
        .enumerate()
        .max_by(|x, y| x.1.share.total_cmp(&y.1.share))
        .map(|(i, _)| i);
    if let Some(gap) = a.gaps.iter().find(|g| Some(g.below) == main) {
        return (
            gap.boundary_ns,
            format!(
                "above the gap over the main mode ({})",
                fmt_value(Fmt::Duration, gap.boundary_ns as f64)
            ),
        );
    }
    (
        median * 10,
        format!(
            "over ten times the median ({})",
            fmt_value(Fmt::Duration, (median * 10) as f64)
        ),
    )
}

/// Requests below which the share of slow ones is too coarse for the fan-out odds.
const FANOUT_MIN: u64 = 100;

fn fanout(rd: &RunData<'_>, g: &Group) -> Option<Chart> {
    if g.dist.count() < FANOUT_MIN {
        return None;
    }
    let (threshold, why) = slow_threshold(g)?;
    let h = g.dist.histogram();
    let n = h.count();
    let slow = n - h.count_at_or_below(threshold);
    let share = slow as f64 / n.max(1) as f64;
    let odds = |fan: f64| 1.0 - (1.0 - share).powf(fan);
    let mut p = Plot::new(
        240.0,
        Axis::new(
            Scale::new(Kind::Log, 1.0, 100.0),
            Fmt::Count,
            "backends a page fans out to (log)",
        ),
        Axis::new(
            Scale::new(Kind::Linear, 0.0, 1.0),
            Fmt::Share,
            "pages that meet a slow request",
        ),
    );
    let curve: Vec<(f64, f64)> = (0..=100)
        .map(|i| 10f64.powf(i as f64 / 50.0))
        .map(|x| (x, odds(x)))
        .collect();
    p.series("1-(1-p)^N", colour(1));
    p.line(&curve, false);
    let mut said = Vec::new();
    for fan in [1.0, 10.0, 100.0] {
        p.dots(&[(fan, odds(fan))], 4.5);
        said.push(format!("N={fan}: {}", fmt_value(Fmt::Share, odds(fan))));
    }
    p.note(1.1, 0.92, &said.join(" · "));
    let id = rd.id(ChartKind::Fanout, 0);
    Some(Chart {
        svg: p.finish(&id),
        id,
        kind: ChartKind::Fanout,
        title: "Fan-out amplification".into(),
        caption: format!(
            "{} of requests ({slow} of {n}) are slow, that is {why}. A page that waits for N backends like this one meets at least one slow request with chance 1-(1-p)^N: {} at N=10, {} at N=100.",
            fmt_value(Fmt::Share, share),
            fmt_value(Fmt::Share, odds(10.0)),
            fmt_value(Fmt::Share, odds(100.0))
        ),
        series: vec![g.series.clone()],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` values spread evenly over `lo..hi` ns.
    fn spread(n: u64, lo: u64, hi: u64) -> impl Iterator<Item = u64> {
        (0..n).map(move |i| lo + (hi - lo) * i / n)
    }

    fn threshold(values: Vec<u64>) -> (u64, String) {
        let dist = Distribution::from_values(values);
        let a = analyze(&dist, &AnalyzeOptions::default());
        assert!(a.gaps.len() == 1, "two modes: {:?}", a.modes);
        slow_threshold_of(&a, dist.histogram().quantile(0.5).unwrap())
    }

    #[test]
    fn slow_is_above_the_main_mode_not_above_a_small_fast_one() {
        // 5% answered in 2-3 us, 95% in 25-35 us: the fast few are not the normal case.
        let (t, why) = threshold(
            spread(500, 2_000, 3_000)
                .chain(spread(9_500, 25_000, 35_000))
                .collect(),
        );
        assert!(why.starts_with("over ten times the median"), "{why}");
        assert!(t > 250_000, "{t}");
        // 90% in 1-1.2 ms, 10% in 12-14 ms: the slow ones are the mode above the main one.
        let (t, why) = threshold(
            spread(9_000, 1_000_000, 1_200_000)
                .chain(spread(1_000, 12_000_000, 14_000_000))
                .collect(),
        );
        assert!(why.starts_with("above the gap over the main mode"), "{why}");
        assert!((1_200_000..12_000_000).contains(&t), "{t}");
    }
}
