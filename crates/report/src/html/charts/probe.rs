//! Probe runs (and timestamped imports) over time, and the variants of a probe side by side.
//!
//! In: a probe run's `probe_latency{probe,kind,variant}` sample series (an import's timed
//! `latency` series), the run's round cadence (`interval_ns`). Out: per probe, a
//! [`ChartKind::ProbeOverTime`] chart (p50/p90/p99 per interval, one panel per variant on one
//! time axis shared by every probe of the run, the change points as dashed rules labelled with
//! the levels before and after, the high phase of each detected period shaded), and for each
//! probe with a cold/warm pair a [`ChartKind::ProbeVariants`] chart (each variant's median and
//! p99 with 95% intervals, and the paired difference with its interval).
//!
//! The numbers are the detectors' own: the over-time analysis is
//! `tailhunt_diagnose::stored::time_analysis` (what `step-change` and `periodic-tail` read) and
//! the paired difference is `tailhunt_diagnose::probe::cold::compare` (what `cold-path`
//! cites); nothing statistical is computed here beyond placing the period's phase with
//! `tailhunt_analyze::period::seasonal_fit`.

use tailhunt_analyze::period::seasonal_fit;
use tailhunt_analyze::quantiles::{summarize, QuantileEstimate};
use tailhunt_analyze::timeline::TimeAnalysis;
use tailhunt_analyze::Distribution;
use tailhunt_diagnose::probe::{cold, ProbeSeries};
use tailhunt_diagnose::stored::{round_interval_ns, time_analysis, PROBE_SERIES};
use tailhunt_model::{format_duration_ns, RunKind, SeriesKind, Timing};
use tailhunt_store::StoreError;

use crate::html::format::Fmt;
use crate::html::run::{Chart, ChartKind, RunData};
use crate::html::svg::{colour, Axis, Kind, Plot, Scale};

/// Height of one variant's panel.
const PANEL: f64 = 190.0;
/// Runs with fewer intervals than this draw each interval's level as a step.
const STEPS_BELOW: usize = 20;
/// Change points labelled on one panel before the rest are left to the hover titles.
const MAX_SHIFT_LABELS: usize = 4;

/// The time axis of a run's probe charts: its range in the chosen unit, the unit in seconds,
/// and its name (a four-hour run reads in minutes, a month in days).
#[derive(Clone, Copy)]
struct TimeAxis {
    lo: f64,
    hi: f64,
    unit_s: f64,
    name: &'static str,
}

impl TimeAxis {
    fn new(lo_s: f64, hi_s: f64) -> TimeAxis {
        let span = hi_s - lo_s;
        let (unit_s, name) = match span {
            s if s <= 900.0 => (1.0, "seconds"),
            s if s <= 15.0 * 3600.0 => (60.0, "minutes"),
            s if s <= 15.0 * 86_400.0 => (3600.0, "hours"),
            _ => (86_400.0, "days"),
        };
        TimeAxis {
            lo: lo_s / unit_s,
            hi: hi_s / unit_s,
            unit_s,
            name,
        }
    }

    /// `t_ns` on the run's clock, in the axis' unit from the run's start.
    fn at(&self, rd: &RunData<'_>, t_ns: i64) -> f64 {
        rd.secs(t_ns) / self.unit_s
    }

    fn axis(&self) -> Axis {
        let fmt = if self.unit_s == 1.0 {
            Fmt::Seconds
        } else {
            Fmt::Count
        };
        Axis::new(
            Scale::new(Kind::Linear, self.lo, self.hi),
            fmt,
            format!("{} from the start of the run", self.name),
        )
    }
}

/// One probe: its name in headings and its variants' series with their analyses.
struct Probe {
    name: String,
    variants: Vec<(ProbeSeries, Option<TimeAnalysis>)>,
}

/// The probe charts the run's series allow; series too short to read over time go to
/// `missing`.
pub fn charts(
    rd: &RunData<'_>,
    out: &mut Vec<Chart>,
    missing: &mut Vec<String>,
) -> Result<(), StoreError> {
    let probe_run = rd.is(&RunKind::Probe);
    let probes = load(rd)?;
    if probes.is_empty() {
        if probe_run {
            missing.push("probes over time: the run stored no probe samples".into());
        }
        return Ok(());
    }
    let (t_lo, t_hi) = probes
        .iter()
        .flat_map(|p| &p.variants)
        .flat_map(|(s, _)| s.samples.iter().map(|x| rd.secs(x.intended_ns)))
        .fold((f64::MAX, f64::MIN), |(a, b), t| (a.min(t), b.max(t)));
    let time = TimeAxis::new(t_lo, t_hi);
    for (k, p) in probes.iter().enumerate() {
        // An import's series is drawn over time only when the analysis found something the
        // generic percentiles chart does not mark; a probe run's always.
        let marked = p.variants.iter().any(|(_, a)| {
            a.as_ref()
                .is_some_and(|a| !a.shifts.is_empty() || !a.periods.is_empty())
        });
        if !probe_run && !marked {
            continue;
        }
        match over_time(rd, p, k, time) {
            Some(c) => out.push(c),
            None => missing.push(format!(
                "{} over time: too few samples to read percentiles per interval",
                p.name
            )),
        }
    }
    if let Some(interval) = round_interval_ns(&rd.run).filter(|_| probe_run) {
        let all: Vec<ProbeSeries> = probes
            .iter()
            .flat_map(|p| p.variants.iter().map(|(s, _)| s.clone()))
            .collect();
        let mut k = 0;
        for s in &all {
            let Some((warm, what, _)) = cold::sibling(s, &all) else {
                continue;
            };
            match cold::compare(s, warm, rd.run.origin.mono_ns, interval) {
                Some(c) => {
                    out.push(variants(rd, k, s, warm, what, &c));
                    k += 1;
                }
                None => missing.push(format!(
                    "{} against {}: fewer than {} rounds with both, so no paired comparison",
                    s.who(),
                    warm.label("variant"),
                    tailhunt_analyze::ab::MIN_ROUNDS
                )),
            }
        }
    }
    Ok(())
}

/// The run's timed latency series with samples, grouped by probe (an import's series each
/// alone), in the order they were stored.
fn load(rd: &RunData<'_>) -> Result<Vec<Probe>, StoreError> {
    let name = if rd.is(&RunKind::Probe) {
        PROBE_SERIES
    } else {
        "latency"
    };
    let mut probes: Vec<Probe> = Vec::new();
    for info in rd
        .infos
        .iter()
        .filter(|i| i.name == name && i.timing == Timing::Timed && i.kind == SeriesKind::Samples)
    {
        let samples = rd.samples(info)?;
        if samples.is_empty() {
            continue;
        }
        let s = ProbeSeries {
            display_name: info.display_name.clone(),
            labels: info.labels.clone(),
            samples,
        };
        let analysis = time_analysis(&rd.run, &s, None);
        let heading = probe_name(&s);
        match probes.iter_mut().find(|p| p.name == heading) {
            Some(p) => p.variants.push((s, analysis)),
            None => probes.push(Probe {
                name: heading,
                variants: vec![(s, analysis)],
            }),
        }
    }
    Ok(probes)
}

/// How a variant is named in a panel: its `variant` label, or nothing for the only one.
fn variant_name(s: &ProbeSeries) -> &str {
    match s.label("variant") {
        "" | "default" => "",
        v => v,
    }
}

fn over_time(rd: &RunData<'_>, p: &Probe, k: usize, t: TimeAxis) -> Option<Chart> {
    let id = rd.id(ChartKind::ProbeOverTime, k);
    let mut svg = String::new();
    let mut notes: Vec<String> = Vec::new();
    let mut width = 0;
    let mut drawn = 0;
    for (s, a) in &p.variants {
        // Two intervals at least; a variant that failed throughout is drawn too (its bands).
        let Some(a) = a.as_ref().filter(|a| a.over_time.intervals.len() >= 2) else {
            continue;
        };
        width = a.over_time.interval_ns;
        let panel = panel(rd, s, a, t, &format!("{id}-{drawn}"), &mut notes);
        svg.push_str(&panel);
        drawn += 1;
    }
    if drawn == 0 {
        return None;
    }
    let mut series = vec![PROBE_SERIES.to_string(), "latency".to_string()];
    series.extend(p.variants.iter().map(|(s, _)| s.display_name.clone()));
    let found =
        |f: fn(&TimeAnalysis) -> bool| p.variants.iter().any(|(_, a)| a.as_ref().is_some_and(f));
    let mut caption = format!(
        "p50, p90 and p99 of every {} interval (log scale; over the answered samples, a timeout at the timeout; errors are counted, not drawn as latency), one panel per variant, every probe of the run on the same time axis.",
        format_duration_ns(width as f64)
    );
    if found(|a| !a.shifts.is_empty()) {
        caption.push_str(
            " Dashed rules: change points in the percentiles, labelled with the levels before -> after.",
        );
    }
    for n in &notes {
        caption.push(' ');
        caption.push_str(n);
    }
    if !found(|a| !a.shifts.is_empty() || !a.periods.is_empty()) {
        caption.push_str(" No change point or period was found.");
    }
    Some(Chart {
        svg,
        id,
        kind: ChartKind::ProbeOverTime,
        title: format!("{} over time", p.name),
        caption,
        series,
    })
}

/// One variant's panel: its percentiles, change points and period.
fn panel(
    rd: &RunData<'_>,
    s: &ProbeSeries,
    a: &TimeAnalysis,
    t: TimeAxis,
    plot_id: &str,
    notes: &mut Vec<String>,
) -> String {
    let ot = &a.over_time;
    let (lo, hi) = ot
        .intervals
        .iter()
        .flat_map(|i| i.values_ns.iter().flatten())
        .fold((u64::MAX, 0u64), |(a, b), &v| (a.min(v), b.max(v)));
    // A variant that never answered has no percentiles: its axis spans its samples' times
    // (the time they took to fail), so the failing bands still have a plot to sit in.
    let (lo, hi) = match lo <= hi {
        true => (lo, hi),
        false => s.samples.iter().fold((u64::MAX, 1u64), |(a, b), x| {
            let v = x.latency_ns().max(1) as u64;
            (a.min(v), b.max(v))
        }),
    };
    let variant = variant_name(s);
    let y_title = if variant.is_empty() {
        "latency (log)".to_string()
    } else {
        format!("{variant} (log)")
    };
    let mut plot = Plot::new(
        PANEL,
        t.axis(),
        Axis::new(
            Scale::new(Kind::Log, lo.max(1) as f64 / 1.3, hi.max(1) as f64 * 1.3),
            Fmt::Duration,
            y_title,
        ),
    );
    let who = if variant.is_empty() {
        String::new()
    } else {
        format!("{variant}: ")
    };
    if let Some(o) = a
        .periods
        .iter()
        .max_by(|x, y| x.r.total_cmp(&y.r))
        .filter(|o| o.period_ns >= ot.interval_ns)
    {
        let bands = high_phases(a, o.quantile, o.period_ns);
        let label = format!(
            "{} period {}",
            o.label,
            tailhunt_analyze::timeline::format_offset(o.period_ns)
        );
        // The label goes on a band wholly inside the plot (the first may start at its edge).
        let labelled = usize::from(bands.len() > 1);
        for (i, (x0, x1)) in bands.iter().enumerate() {
            let title = format!(
                "{label}: high phase (autocorrelation {:.2}, highest/lowest phase {:.1}x)",
                o.r, o.amplitude_ratio
            );
            plot.band(
                t.at(rd, *x0),
                t.at(rd, *x1),
                "period",
                if i == labelled { label.as_str() } else { "" },
                &title,
            );
        }
        notes.push(format!(
            "{who}{} repeats every {} (autocorrelation {:.2}, highest/lowest phase {:.1}x); shaded: the phases of each cycle where it runs above its fitted mean.",
            o.label,
            tailhunt_analyze::timeline::format_offset(o.period_ns),
            o.r,
            o.amplitude_ratio
        ));
    }
    let failed: u64 = ot.intervals.iter().map(|i| i.errors + i.timeouts).sum();
    if failed > 0 {
        for (i, (x0, x1)) in failing(a).iter().enumerate() {
            plot.band(
                t.at(rd, *x0),
                t.at(rd, *x1),
                "failing",
                if i == 0 { "failing" } else { "" },
                "most samples of these intervals failed (errors or timeouts)",
            );
        }
        let total: u64 = ot.intervals.iter().map(|i| i.count).sum();
        notes.push(format!(
            "{who}{failed} of {total} samples failed ({} errors, {} timeouts){}.",
            ot.intervals.iter().map(|i| i.errors).sum::<u64>(),
            ot.intervals.iter().map(|i| i.timeouts).sum::<u64>(),
            if failing(a).is_empty() {
                ""
            } else {
                "; red bands: intervals where most failed"
            }
        ));
    }
    for (i, q) in ot.quantiles.iter().enumerate() {
        let name = tailhunt_analyze::percentile_label(*q);
        // Few intervals are drawn as steps across each interval (two points at their middles
        // would read as a trend); many as a line through their middles.
        let steps = ot.intervals.len() < STEPS_BELOW;
        let pts: Vec<(f64, f64)> = ot
            .column(i)
            .into_iter()
            .flat_map(|(j, v)| {
                let iv = &ot.intervals[j];
                let y = v.max(1) as f64;
                if steps {
                    vec![(t.at(rd, iv.start_ns), y), (t.at(rd, iv.end_ns), y)]
                } else {
                    vec![(t.at(rd, (iv.start_ns + iv.end_ns) / 2), y)]
                }
            })
            .collect();
        plot.series(&name, colour(i));
        plot.line(&pts, false);
    }
    for (i, sh) in a.shifts.iter().enumerate() {
        let levels: Vec<String> = ot
            .quantiles
            .iter()
            .enumerate()
            .filter_map(|(k, q)| {
                Some(format!(
                    "{} {} -> {}",
                    tailhunt_analyze::percentile_label(*q),
                    format_duration_ns(*sh.before_ns.get(k)? as f64),
                    format_duration_ns(*sh.after_ns.get(k)? as f64)
                ))
            })
            .collect();
        // The rule names the lowest and highest percentile; the caption has every one.
        let label = if i < MAX_SHIFT_LABELS && !levels.is_empty() {
            let ends = [&levels[0], &levels[levels.len() - 1]];
            if levels.len() > 1 {
                format!("{}, {}", ends[0], ends[1])
            } else {
                ends[0].clone()
            }
        } else {
            String::new()
        };
        plot.vrule(t.at(rd, sh.at_ns), "change", &label, i % 3);
        notes.push(format!(
            "{who}change at {} (p = {:.3}): {}.",
            tailhunt_analyze::timeline::format_offset((rd.secs(sh.at_ns) * 1e9) as i64),
            sh.p_value,
            levels.join(", ")
        ));
    }
    plot.finish(plot_id)
}

/// The stretches (ns on the run's clock) in which percentile `k`'s fitted period runs above
/// its mean: one per cycle.
fn high_phases(a: &TimeAnalysis, k: usize, period_ns: i64) -> Vec<(i64, i64)> {
    let ot = &a.over_time;
    let (Some(first), Some(last)) = (ot.intervals.first(), ot.intervals.last()) else {
        return Vec::new();
    };
    let w = ot.interval_ns.max(1);
    let n = ((last.start_ns - first.start_ns) / w + 1) as usize;
    let mut grid: Vec<Option<f64>> = vec![None; n];
    for iv in &ot.intervals {
        if let Some(Some(v)) = iv.values_ns.get(k) {
            grid[((iv.start_ns - first.start_ns) / w) as usize] =
                Some(((*v).max(1) as f64).log10());
        }
    }
    let fit = seasonal_fit(&grid, period_ns as f64 / w as f64);
    let mean = fit.iter().sum::<f64>() / fit.len().max(1) as f64;
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    // One past the end closes a stretch still open at the last interval.
    let high = fit.iter().map(|v| *v > mean).chain(std::iter::once(false));
    for (i, high) in high.enumerate() {
        match (high, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((first.start_ns + s as i64 * w, first.start_ns + i as i64 * w));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Runs of intervals in which most samples failed, ns on the run's clock.
fn failing(a: &TimeAnalysis) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for iv in &a.over_time.intervals {
        if (iv.errors + iv.timeouts) * 2 <= iv.count {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.1 == iv.start_ns => last.1 = iv.end_ns,
            _ => out.push((iv.start_ns, iv.end_ns)),
        }
    }
    out
}

/// The median and p99 of a series with their 95% intervals.
fn levels(s: &ProbeSeries) -> Vec<QuantileEstimate> {
    summarize(
        &Distribution::from_samples(&s.samples, false),
        &[0.5, 0.99],
        cold::CONFIDENCE,
    )
    .quantiles
}

fn variants(
    rd: &RunData<'_>,
    k: usize,
    cold_s: &ProbeSeries,
    warm: &ProbeSeries,
    what: &str,
    c: &tailhunt_analyze::ab::PairedComparison,
) -> Chart {
    let (cn, wn) = (cold_s.label("variant"), warm.label("variant"));
    let id = rd.id(ChartKind::ProbeVariants, k);
    let sides = [
        (cn, levels(cold_s), colour(1)),
        (wn, levels(warm), colour(0)),
    ];
    let hi = sides
        .iter()
        .flat_map(|s| &s.1)
        .map(|q| q.ci_high_ns.unwrap_or(q.value_ns) as f64)
        .fold(1.0, f64::max);
    // Linear from zero: two variants' levels read as lengths, side by side per percentile.
    let mut top = Plot::new(
        230.0,
        Axis::new(
            Scale::new(Kind::Linear, 0.5, 3.5),
            Fmt::Count,
            "each variant over the whole run",
        ),
        Axis::new(Scale::from_zero(hi * 1.1), Fmt::Duration, "latency"),
    );
    let mut labels = Vec::new();
    for (j, (name, qs, col)) in sides.iter().enumerate() {
        top.series(name, col);
        for (m, q) in qs.iter().enumerate() {
            let x = 1.0 + 0.5 * j as f64 + 1.5 * m as f64;
            labels.push((x, format!("{name} {}", q.label)));
            let (l, h) = (
                q.ci_low_ns.unwrap_or(q.value_ns) as f64,
                q.ci_high_ns.unwrap_or(q.value_ns) as f64,
            );
            let text = format!(
                "{} [{}, {}]",
                format_duration_ns(q.value_ns as f64),
                format_duration_ns(l),
                format_duration_ns(h)
            );
            top.error_bar(
                x,
                q.value_ns as f64,
                l,
                h,
                &format!(
                    "{name} {}: {text} (95% CI, {} samples)",
                    q.label,
                    if j == 0 {
                        cold_s.samples.len()
                    } else {
                        warm.samples.len()
                    }
                ),
            );
            top.note(x + 0.04, q.value_ns as f64, &text);
        }
    }
    top.x_categories(labels);
    let diffs = [("median", &c.median_diff), ("p99", &c.p99_diff)];
    let d_lo = diffs.iter().map(|d| d.1.low_ns).fold(0f64, f64::min);
    let d_hi = diffs.iter().map(|d| d.1.high_ns).fold(0f64, f64::max);
    let pad = (d_hi - d_lo).max(1.0) * 0.1;
    let mut bottom = Plot::new(
        200.0,
        Axis::new(
            Scale::new(Kind::Linear, 0.5, 2.5),
            Fmt::Count,
            format!("{cn} minus {wn}, paired by round"),
        ),
        Axis::new(
            Scale::new(Kind::Linear, d_lo - pad, d_hi + pad),
            Fmt::Duration,
            "difference",
        ),
    );
    bottom.hrule(0.0, "zero", "no difference");
    bottom.series("paired difference", colour(2));
    let mut labels = Vec::new();
    for (j, (name, d)) in diffs.iter().enumerate() {
        let x = 1.0 + j as f64;
        labels.push((x, format!("{name}: {cn} - {wn}")));
        bottom.note(
            x + 0.04,
            d.ns,
            &format!(
                "{} [{}, {}]",
                format_duration_ns(d.ns),
                format_duration_ns(d.low_ns),
                format_duration_ns(d.high_ns)
            ),
        );
        bottom.error_bar(
            x,
            d.ns,
            d.low_ns,
            d.high_ns,
            &format!(
                "{name} {cn} - {wn}: {} [{}, {}] ({:.0}% CI, {} rounds)",
                format_duration_ns(d.ns),
                format_duration_ns(d.low_ns),
                format_duration_ns(d.high_ns),
                c.confidence * 100.0,
                c.rounds
            ),
        );
    }
    bottom.x_categories(labels);
    let id_top = format!("{id}-levels");
    let id_bottom = format!("{id}-difference");
    let verdict = if c.median_diff.excludes_zero() {
        "the interval excludes zero"
    } else {
        "the interval includes zero: no difference shown"
    };
    Chart {
        svg: top.finish(&id_top) + &bottom.finish(&id_bottom),
        id,
        kind: ChartKind::ProbeVariants,
        title: format!("{}: {cn} against {wn}", probe_name(cold_s)),
        caption: format!(
            "Top: each variant's median and p99 over the whole run with 95% intervals. Bottom: {what} costs {} [{}, {}] at the median and {} [{}, {}] at p99 ({:.0}% bootstrap intervals over {} rounds where both ran; {verdict}).",
            format_duration_ns(c.median_diff.ns),
            format_duration_ns(c.median_diff.low_ns),
            format_duration_ns(c.median_diff.high_ns),
            format_duration_ns(c.p99_diff.ns),
            format_duration_ns(c.p99_diff.low_ns),
            format_duration_ns(c.p99_diff.high_ns),
            c.confidence * 100.0,
            c.rounds
        ),
        series: vec![
            PROBE_SERIES.to_string(),
            cold_s.display_name.clone(),
            warm.display_name.clone(),
        ],
    }
}

/// `resolver (dns)`: the probe without its variant (an import's series by its name).
fn probe_name(s: &ProbeSeries) -> String {
    match (s.label("probe"), s.label("kind")) {
        ("", _) => s.display_name.clone(),
        (p, "") => p.to_string(),
        (p, k) => format!("{p} ({k})"),
    }
}
