//! `tailhunt analyze --over-time` for people: a sparkline per percentile, the change points
//! marked under them, and the periods.

use std::fmt::Write as _;

use tailhunt_analyze::percentile_label;
use tailhunt_analyze::timeline::{format_offset, TimeAnalysis};

use super::{render_duration, sparkline, wrap, COLUMNS};

/// Most characters a sparkline takes; longer series are drawn with several intervals per
/// character (the largest value of each group, so a tail spike is never averaged away).
const SPARK_WIDTH: usize = 72;

fn grouped(values: &[Option<u64>], per: usize) -> Vec<Option<u64>> {
    values
        .chunks(per)
        .map(|c| c.iter().flatten().max().copied())
        .collect()
}

/// Appends the over-time section of one series.
pub fn render_timeline(t: &TimeAnalysis, out: &mut String) {
    let ot = &t.over_time;
    let (Some(first), Some(last)) = (ot.intervals.first(), ot.intervals.last()) else {
        return;
    };
    let slots = ((last.start_ns - first.start_ns) / ot.interval_ns) as usize + 1;
    let per = slots.div_ceil(SPARK_WIDTH).max(1);
    let slot = |start: i64| ((start - first.start_ns) / ot.interval_ns) as usize;
    let _ = writeln!(
        out,
        "\nover time ({} intervals of {}{}, {} in all):",
        ot.intervals.len(),
        if ot.interval_ns >= 1_000_000_000 {
            format_offset(ot.interval_ns)
        } else {
            render_duration(ot.interval_ns as u64)
        },
        if per > 1 {
            format!(", {per} per character")
        } else {
            String::new()
        },
        format_offset(last.end_ns - first.start_ns)
    );
    for (k, q) in ot.quantiles.iter().enumerate() {
        let mut values = vec![None; slots];
        for i in &ot.intervals {
            values[slot(i.start_ns)] = i.values_ns.get(k).copied().flatten();
        }
        let known: Vec<u64> = values.iter().flatten().copied().collect();
        let (Some(lo), Some(hi)) = (known.iter().min(), known.iter().max()) else {
            continue;
        };
        let _ = writeln!(
            out,
            "  {:>5}  {}  {} .. {}",
            percentile_label(*q),
            sparkline(&grouped(&values, per)),
            render_duration(*lo),
            render_duration(*hi)
        );
    }
    if !t.shifts.is_empty() {
        let mut marks = vec![' '; slots.div_ceil(per)];
        for s in &t.shifts {
            marks[slot(ot.intervals[s.interval].start_ns) / per] = '^';
        }
        let _ = writeln!(
            out,
            "         {}",
            marks.iter().collect::<String>().trim_end()
        );
    }
    let qs: Vec<String> = ot.quantiles.iter().map(|q| percentile_label(*q)).collect();
    if t.shifts.is_empty() {
        let _ = writeln!(
            out,
            "  change points: none ({} tested at once)",
            qs.join("/")
        );
    }
    for s in &t.shifts {
        let levels: Vec<String> = (0..qs.len())
            .map(|k| {
                format!(
                    "{} {} -> {} ({:.2}x)",
                    qs[k],
                    render_duration(s.before_ns[k]),
                    render_duration(s.after_ns[k]),
                    s.ratio(k)
                )
            })
            .collect();
        let line = format!(
            "^ change point at {} (p <= {:.3}): {}",
            format_offset(s.at_ns - first.start_ns),
            s.p_value,
            levels.join(", ")
        );
        let _ = writeln!(out, "  {}", wrap(&line, COLUMNS - 2, 4));
    }
    if t.periods.is_empty() {
        let _ = writeln!(out, "  periods: none between a minute and a day");
    }
    for p in &t.periods {
        let _ = writeln!(
            out,
            "  period: {} every {} ({:.2}x peak to trough, autocorrelation {:.2})",
            p.label,
            format_offset(p.period_ns),
            p.amplitude_ratio,
            p.r
        );
    }
}
