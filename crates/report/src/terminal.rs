//! Rendering documents for a terminal: aligned tables, a log-axis histogram, warnings.

use std::fmt::Write;

use tailhunt_analyze::floor::FloorVerdict;
use tailhunt_analyze::loghist::LogBin;
use tailhunt_analyze::quantiles::Summary;
use tailhunt_analyze::Analysis;

use crate::doc::{
    AnalyzeDoc, ComparisonDoc, DiagnoseDoc, ImportDoc, LoadDoc, RunsDoc, SeriesAnalysis,
};

/// `450us`, `10.2ms`.
pub fn render_duration(ns: u64) -> String {
    tailhunt_model::format_duration_ns(ns as f64)
}

/// `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Epoch ns as `2026-11-22T13:23:20Z`.
pub fn render_time(epoch_ns: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(epoch_ns.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A table; `align` has one letter per column, `l` (left) or `r` (right).
pub(crate) fn table(header: &[&str], rows: &[Vec<String>], align: &str) -> String {
    let align = align.as_bytes();
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(cols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = width[i] - c.chars().count();
            if i > 0 {
                l.push_str("  ");
            }
            if align.get(i) == Some(&b'l') {
                l.push_str(c);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str(&" ".repeat(pad));
                l.push_str(c);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for r in rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// `tailhunt import` for people.
pub fn render_import(d: &ImportDoc) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "imported {} samples from {} ({}, {} series) as run {}{}",
        thousands(d.samples),
        d.file,
        d.format,
        d.series,
        d.run_id,
        if d.status == tailhunt_model::RunStatus::Partial {
            " (PARTIAL: stopped at an error, see below)"
        } else {
            ""
        }
    );
    if d.outcomes.error + d.outcomes.timeout > 0 {
        let _ = writeln!(
            out,
            "outcomes: {} ok, {} errors, {} timeouts",
            thousands(d.outcomes.ok),
            thousands(d.outcomes.error),
            thousands(d.outcomes.timeout)
        );
    }
    let _ = writeln!(out, "next: tailhunt analyze {}", d.run_id);
    out
}

/// `tailhunt runs` for people.
pub fn render_runs(d: &RunsDoc) -> String {
    if d.runs.is_empty() {
        return format!(
            "no runs in {} yet (record one with `tailhunt import FILE`)\n",
            d.db
        );
    }
    let rows: Vec<Vec<String>> = d
        .runs
        .iter()
        .map(|r| {
            let source = ["file", "target"]
                .iter()
                .find_map(|k| r.params.get(*k).and_then(|f| f.as_str()))
                .map(str::to_string)
                .or_else(|| {
                    // Captures: their input files (or live:IFACE), joined.
                    let inputs = r.params.get("inputs")?.as_array()?;
                    Some(
                        inputs
                            .iter()
                            .filter_map(|v| v.as_str())
                            .collect::<Vec<_>>()
                            .join(" "),
                    )
                })
                .unwrap_or_default();
            vec![
                r.id.clone(),
                r.kind.to_string(),
                r.status.name().to_string(),
                render_time(r.created_wall_ns),
                r.series.to_string(),
                thousands(r.samples),
                source,
            ]
        })
        .collect();
    table(
        &[
            "id", "kind", "status", "recorded", "series", "samples", "source",
        ],
        &rows,
        "llllrrl",
    )
}

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

/// Findings, most confident first.
pub fn render_findings(findings: &[tailhunt_model::Finding], out: &mut String) {
    let mut sorted: Vec<_> = findings.iter().collect();
    sorted.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    for f in sorted {
        let verdict = serde_json::to_value(f.verdict)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\n[{verdict}] {} (confidence {:.0}%)",
            f.detector,
            f.confidence * 100.0
        );
        let _ = writeln!(out, "  {}", f.summary);
        for e in &f.evidence {
            let nums: Vec<String> = e
                .values
                .iter()
                .map(|(k, v)| {
                    if k.ends_with("_ns") {
                        format!(
                            "{}={}",
                            k.trim_end_matches("_ns"),
                            render_duration(*v as u64)
                        )
                    } else {
                        format!("{k}={v:.3}")
                    }
                })
                .collect();
            let _ = writeln!(out, "  - {}: {} [{}]", e.series, e.note, nums.join(", "));
        }
        if let Some(fix) = &f.fix {
            let _ = writeln!(out, "  fix: {fix}");
        }
    }
}

/// `tailhunt load` for people: one row per step.
pub fn render_load(d: &LoadDoc) -> String {
    let mut out = String::new();
    let rows: Vec<Vec<String>> = d
        .steps
        .iter()
        .map(|s| {
            let l = |f: fn(&tailhunt_model::evidence::sweep::StepLatency) -> u64| {
                s.latency_ns
                    .as_ref()
                    .map_or("-".to_string(), |x| render_duration(f(x)))
            };
            vec![
                format!(
                    "{}{}",
                    tailhunt_model::format_rate(s.rate_per_s),
                    if s.interrupted { "*" } else { "" }
                ),
                thousands(s.sent),
                thousands(s.ok),
                thousands(s.errors),
                thousands(s.timeouts),
                thousands(s.unsent),
                l(|x| x.p50),
                l(|x| x.p90),
                l(|x| x.p99),
                l(|x| x.p999),
                l(|x| x.max),
                tailhunt_model::format_rate(s.achieved_rate),
                render_duration(s.send_lag_p99_ns.max(0) as u64),
            ]
        })
        .collect();
    let _ = writeln!(
        out,
        "run {} ({}), {}: latency from the intended send time",
        d.run_id,
        d.status.name(),
        d.target
    );
    out.push_str(&table(
        &[
            "rate/s",
            "sent",
            "ok",
            "errors",
            "timeouts",
            "never sent",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "achieved/s",
            "lag p99",
        ],
        &rows,
        "rrrrrrrrrrrrr",
    ));
    if d.steps.iter().any(|s| s.interrupted) {
        out.push_str("* cut short by a signal: achieved/s is over the time the step ran\n");
    }
    let warmup: u64 = d.steps.iter().map(|s| s.warmup_samples).sum();
    if warmup > 0 {
        let _ = writeln!(
            out,
            "warm-up: {} requests before the measured windows, in none of the counts above (series phase=warmup)",
            thousands(warmup)
        );
    }
    for lost in d.steps.iter().filter_map(|s| s.server_lost.as_ref()) {
        let _ = writeln!(out, "server lost: {lost}");
    }
    for w in d.steps.iter().flat_map(|s| &s.warnings) {
        let _ = writeln!(out, "warning: {w}");
    }
    if let Some(e) = &d.first_error {
        let _ = writeln!(out, "first error: {e}");
    }
    render_findings(&d.findings, &mut out);
    let _ = writeln!(
        out,
        "\nnext: tailhunt analyze {} ; tailhunt diagnose {}",
        d.run_id, d.run_id
    );
    out
}

/// `tailhunt diagnose` for people.
pub fn render_diagnose(d: &DiagnoseDoc) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} ({}, {}): ran {}",
        d.run.id,
        d.run.kind,
        d.run.status.name(),
        d.detectors.join(", ")
    );
    if d.findings.is_empty() {
        out.push_str("no findings: none of these detectors sees its cause in this run\n");
    }
    render_findings(&d.findings, &mut out);
    if !d.saved {
        out.push_str(
            "\nnote: the findings were not saved: the store is read-only (diagnose a writable copy to keep them)\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn table_aligns_columns() {
        let t = table(
            &["a", "bb"],
            &[
                vec!["long".into(), "1".into()],
                vec!["x".into(), "22".into()],
            ],
            "lr",
        );
        assert_eq!(t, "a     bb\nlong   1\nx     22\n");
    }
}
