//! `tailhunt load` for people: one row per step, then its warnings and findings.

use std::fmt::Write;

use super::{render_duration, render_findings, table, thousands};
use crate::doc::LoadDoc;

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
    out.push_str(&lateness_table(d));
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

/// Where each step's latency went: the client's own lateness (intended to actual send) and the
/// service time after it, so a reader sees which side was late. Empty for runs stored before
/// the split was kept.
fn lateness_table(d: &LoadDoc) -> String {
    let pair = |x: Option<&tailhunt_model::evidence::sweep::StepLatency>| match x {
        Some(x) => [render_duration(x.p50), render_duration(x.p99)],
        None => ["-".to_string(), "-".to_string()],
    };
    let rows: Vec<Vec<String>> = d
        .steps
        .iter()
        .filter(|s| s.client_lateness_ns.is_some())
        .map(|s| {
            let [l50, l99] = pair(s.client_lateness_ns.as_ref());
            let [s50, s99] = pair(s.service_ns.as_ref());
            vec![
                tailhunt_model::format_rate(s.rate_per_s),
                l50,
                l99,
                s50,
                s99,
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out =
        "latency = client lateness (intended -> actual send) + service (actual send -> reply):\n"
            .to_string();
    out.push_str(&table(
        &[
            "rate/s",
            "late p50",
            "late p99",
            "service p50",
            "service p99",
        ],
        &rows,
        "rrrrr",
    ));
    out
}
