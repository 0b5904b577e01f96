//! Rendering documents for a terminal: aligned tables, times, counts and findings, shared by
//! every command's renderer; one file per command's document where it is long (`analyze`,
//! `load`; captures, run queues and sockets have their own modules at the crate's root).

use std::fmt::Write;

use crate::doc::{DiagnoseDoc, ImportDoc, RunsDoc};

mod analyze;
mod load;
mod over_time;

pub use analyze::render_analyze;
pub use load::render_load;

/// `450us`, `10.2ms`.
pub fn render_duration(ns: u64) -> String {
    tailhunt_model::format_duration_ns(ns as f64)
}

/// Values as a line of block characters on a log scale (latency spans decades), lowest `▁`,
/// highest `█`; a window without values is a space.
pub fn sparkline(values: &[Option<u64>]) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let known = values.iter().flatten().map(|&v| (v.max(1) as f64).ln());
    let (lo, hi) = known.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    values
        .iter()
        .map(|v| match v {
            None => ' ',
            Some(v) if hi <= lo => BLOCKS[(v > &0) as usize * 3],
            Some(v) => {
                let u = ((*v).max(1) as f64).ln() - lo;
                BLOCKS[((u / (hi - lo)) * 7.0).round().clamp(0.0, 7.0) as usize]
            }
        })
        .collect()
}

/// Terminal lines are kept to this many columns.
pub const COLUMNS: usize = 100;

/// `text` broken at spaces into lines of at most `width` columns, for a caller that prints
/// `indent` spaces before it: every line after the first gets the same indent (a word longer
/// than a line stays whole).
pub fn wrap(text: &str, width: usize, indent: usize) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut col = indent;
    let mut line_start = true;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if !line_start && col + 1 + len > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
            line_start = true;
        }
        if !line_start {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += len;
        line_start = false;
    }
    out
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
pub fn table(header: &[&str], rows: &[Vec<String>], align: &str) -> String {
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
            // A tagged run (a lab scenario's) says so first.
            let source = match r.params.get("tag").and_then(|t| t.as_str()) {
                Some(tag) => format!("[{tag}] {source}").trim_end().to_string(),
                None => source,
            };
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

/// Findings, most confident first.
pub fn render_findings(findings: &[tailhunt_model::Finding], out: &mut String) {
    let mut sorted: Vec<_> = findings.iter().collect();
    sorted.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    for f in sorted {
        render_finding(f, out);
    }
}

/// One finding: verdict, detector and confidence, the summary, each piece of evidence with its
/// numbers, and the fix.
pub fn render_finding(f: &tailhunt_model::Finding, out: &mut String) {
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
    let _ = writeln!(out, "  {}", wrap(&f.summary, COLUMNS, 2));
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
        let line = format!("{}: {} [{}]", e.series, e.note, nums.join(", "));
        let _ = writeln!(out, "  - {}", wrap(&line, COLUMNS, 4));
    }
    if let Some(fix) = &f.fix {
        let _ = writeln!(out, "  fix: {}", wrap(fix, COLUMNS, 7));
    }
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
mod wrap_tests {
    use super::*;

    #[test]
    fn lines_fit_the_width_with_a_hanging_indent() {
        let text = "latency rises as load falls: p50 is 23.5ms at 50 req/s but 852us at 5k req/s (28x); 67% of low-rate requests sit in a mode at 32.0ms";
        let w = wrap(text, 40, 2);
        for (i, l) in w.lines().enumerate() {
            let full = if i == 0 {
                format!("  {l}")
            } else {
                l.to_string()
            };
            assert!(full.chars().count() <= 40, "{full:?}");
            if i > 0 {
                assert!(l.starts_with("  ") && !l.starts_with("   "), "{l:?}");
            }
        }
        assert_eq!(
            w.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        assert_eq!(wrap("short", 40, 2), "short");
    }

    #[test]
    fn a_sparkline_climbs_with_its_values_on_a_log_scale() {
        let s = sparkline(&[Some(1_000), Some(10_000), None, Some(1_000_000)]);
        assert_eq!(s.chars().collect::<Vec<_>>(), vec!['▁', '▃', ' ', '█']);
    }
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
