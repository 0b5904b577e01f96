//! `tailhunt analyze` for people: percentiles with their intervals, the log-axis histogram,
//! modes and gap warnings, the floor, the breakdown and a comparison.

use std::fmt::Write;

use tailhunt_analyze::floor::FloorVerdict;
use tailhunt_analyze::loghist::LogBin;
use tailhunt_analyze::quantiles::Summary;
use tailhunt_analyze::Analysis;

use super::{render_duration, table, thousands};
use crate::doc::{AnalyzeDoc, ComparisonDoc, SeriesAnalysis};

fn ci(lo: Option<u64>, hi: Option<u64>) -> String {
    match (lo, hi) {
        (Some(l), Some(h)) => format!("[{}, {}]", render_duration(l), render_duration(h)),
        (Some(l), None) => format!("[{}, too few samples above]", render_duration(l)),
        (None, Some(h)) => format!("[too few samples below, {}]", render_duration(h)),
        (None, None) => "(too few samples)".to_string(),
    }
}

fn render_summary(s: &Summary, out: &mut String) {
    let o = &s.outcomes;
    let _ = write!(out, "{} samples", thousands(s.count));
    if o.error + o.timeout > 0 {
        let _ = write!(
            out,
            " ({} ok, {} errors, {} timeouts)",
            thousands(o.ok),
            thousands(o.error),
            thousands(o.timeout)
        );
    }
    if s.exact {
        let _ = writeln!(
            out,
            "; quantiles exact, {:.0}% confidence intervals",
            s.confidence * 100.0
        );
    } else {
        let _ = writeln!(
            out,
            "; from histograms: values within {:.2}%, {:.0}% confidence intervals",
            s.relative_error_bound * 100.0,
            s.confidence * 100.0
        );
    }
    let mut rows = Vec::new();
    if let Some(min) = s.min_ns {
        rows.push(vec!["min".into(), render_duration(min), String::new()]);
    }
    if let Some(mean) = s.mean_ns {
        rows.push(vec![
            "mean".into(),
            render_duration(mean as u64),
            String::new(),
        ]);
    }
    for q in &s.quantiles {
        rows.push(vec![
            q.label.clone(),
            render_duration(q.value_ns),
            ci(q.ci_low_ns, q.ci_high_ns),
        ]);
    }
    if let Some(max) = s.max_ns {
        rows.push(vec!["max".into(), render_duration(max), String::new()]);
    }
    let header = format!("{:.0}% CI", s.confidence * 100.0);
    for l in table(&["", "value", &header], &rows, "lrl").lines() {
        let _ = writeln!(out, "  {}", l.trim_end());
    }
}

fn render_histogram(bins: &[LogBin], total: u64, out: &mut String) {
    const WIDTH: usize = 40;
    let max = bins.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut i = 0;
    while i < bins.len() {
        let b = &bins[i];
        // Two or more empty bins in a row fold into one line: gaps stay visible, not long.
        let empty_run = bins[i..].iter().take_while(|x| x.count == 0).count();
        if empty_run >= 2 {
            let last = &bins[i + empty_run - 1];
            rows.push(vec![
                render_duration(b.lower_ns),
                render_duration(last.upper_ns),
                format!("|{:<WIDTH$}|", " (empty)"),
                "0".into(),
                "0.0%".into(),
            ]);
            i += empty_run;
            continue;
        }
        let len = (b.count as f64 / max as f64 * WIDTH as f64).round() as usize;
        let bar = if b.count > 0 && len == 0 {
            ".".to_string()
        } else {
            "#".repeat(len)
        };
        rows.push(vec![
            render_duration(b.lower_ns),
            render_duration(b.upper_ns),
            format!("|{bar:<WIDTH$}|"),
            thousands(b.count),
            format!("{:.1}%", b.count as f64 * 100.0 / total.max(1) as f64),
        ]);
        i += 1;
    }
    let _ = writeln!(
        out,
        "histogram (log axis; '.' marks a non-empty bin too small for a '#'):"
    );
    for l in table(&["from", "to", "", "count", "share"], &rows, "rrlrr")
        .lines()
        .skip(1)
    {
        let _ = writeln!(out, "  {l}");
    }
}

fn render_analysis(a: &Analysis, out: &mut String) {
    render_summary(&a.summary, out);
    if !a.modes.is_empty() {
        let _ = writeln!(out, "\nmodes (on a log axis; shares add up to 100%):");
        let rows: Vec<Vec<String>> = a
            .modes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                vec![
                    (i + 1).to_string(),
                    render_duration(m.peak_ns),
                    render_duration(m.median_ns),
                    format!(
                        "{} - {}",
                        render_duration(m.lower_ns),
                        render_duration(m.upper_ns)
                    ),
                    thousands(m.count),
                    format!("{:.1}%", m.share * 100.0),
                ]
            })
            .collect();
        for l in table(
            &["#", "peak", "median", "range", "count", "share"],
            &rows,
            "rrrrrr",
        )
        .lines()
        {
            let _ = writeln!(out, "  {l}");
        }
    }
    if !a.histogram.is_empty() {
        out.push('\n');
        render_histogram(&a.histogram, a.summary.count, out);
    }
    for w in &a.warnings {
        let _ = writeln!(out, "\nwarning: {}", w.message);
    }
    if let Some(f) = &a.floor {
        let _ = writeln!(
            out,
            "\n{}: {}",
            match f.verdict {
                FloorVerdict::AtFloor => "floor",
                FloorVerdict::AboveFloor | FloorVerdict::BelowFloor => "warning",
            },
            f.message
        );
    }
}

fn render_comparison(c: &ComparisonDoc, out: &mut String) {
    let _ = writeln!(
        out,
        "\ncompared with run {} series {} (before) -> {} (after):",
        c.baseline_run, c.baseline_series, c.series
    );
    let rows: Vec<Vec<String>> = c
        .comparison
        .quantiles
        .iter()
        .map(|q| {
            vec![
                q.label.clone(),
                render_duration(q.before_ns),
                render_duration(q.after_ns),
                format!("{:.2}x", q.ratio),
                if q.significant {
                    "yes".into()
                } else {
                    "no".into()
                },
            ]
        })
        .collect();
    for l in table(
        &["", "before", "after", "ratio", "significant"],
        &rows,
        "lrrrr",
    )
    .lines()
    {
        let _ = writeln!(out, "  {}", l.trim_end());
    }
    if !c.comparison.modes.is_empty() {
        let _ = writeln!(out, "  modes present in both:");
        for m in &c.comparison.modes {
            let _ = writeln!(
                out,
                "    {} -> {}: {:.1}% -> {:.1}% ({:+.1} points)",
                render_duration(m.peak_before_ns),
                render_duration(m.peak_after_ns),
                m.share_before * 100.0,
                m.share_after * 100.0,
                (m.share_after - m.share_before) * 100.0
            );
        }
    }
    for q in &c.comparison.quantiles {
        if let Some(why) = &q.explanation {
            let _ = writeln!(out, "  why: {why}");
        }
    }
}

fn render_series(s: &SeriesAnalysis, out: &mut String) {
    let _ = writeln!(
        out,
        "series {} ({}, {})",
        s.series.display_name,
        s.series.kind.name(),
        match s.series.timing {
            tailhunt_model::Timing::Timed => "timed",
            tailhunt_model::Timing::Untimed => "untimed",
        }
    );
    render_analysis(&s.analysis, out);
    if let Some(t) = &s.p99_over_time {
        let known: Vec<u64> = t.values_ns.iter().flatten().copied().collect();
        if let (Some(lo), Some(hi)) = (known.iter().min(), known.iter().max()) {
            let _ = writeln!(
                out,
                "\np99 over time ({} windows of {}): {}  {} .. {}",
                t.values_ns.len(),
                render_duration(t.window_ns.max(0) as u64),
                super::sparkline(&t.values_ns),
                render_duration(*lo),
                render_duration(*hi)
            );
        }
    }
    if let Some(t) = &s.timeline {
        super::over_time::render_timeline(t, out);
    }
    if let Some(parts) = &s.breakdown {
        let _ = writeln!(
            out,
            "\nwhere the time goes (requests at p99 and slower vs all):"
        );
        let rows: Vec<Vec<String>> = parts
            .iter()
            .map(|p| {
                vec![
                    p.part.clone(),
                    render_duration(p.mean_ns.max(0.0) as u64),
                    render_duration(p.tail_mean_ns.max(0.0) as u64),
                    format!("{:.0}%", p.share_of_tail_excess * 100.0),
                ]
            })
            .collect();
        for l in table(
            &["part", "mean", "tail mean", "share of tail excess"],
            &rows,
            "lrrr",
        )
        .lines()
        {
            let _ = writeln!(out, "  {l}");
        }
    }
}

/// `tailhunt analyze` for people.
pub fn render_analyze(d: &AnalyzeDoc) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} ({}, {}{})",
        d.run.id,
        d.run.kind,
        d.run.status.name(),
        if d.run.status == tailhunt_model::RunStatus::Partial {
            ": its writer stopped early; results cover what was recorded"
        } else {
            ""
        }
    );
    for (i, s) in d.series.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        render_series(s, &mut out);
    }
    if let Some(c) = &d.comparison {
        render_comparison(c, &mut out);
    }
    out
}
