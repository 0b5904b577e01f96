//! What a reader needs to judge a run before trusting its charts: its parameters, the host's
//! health while it ran (CPU, steal), the kernel context, and the tool's own cost and losses.
//!
//! In: a run and its evidence documents. Out: label/value rows; a value that should make the
//! reader doubt the run starts with `!` (the page marks it).

use tailhunt_model::evidence::capture::CaptureReport;
use tailhunt_model::evidence::probe::ProbeRecord;
use tailhunt_model::evidence::runq::RunqRecord;
use tailhunt_model::evidence::sock::{KernelContext, SocketsReport, TransferReport};
use tailhunt_model::evidence::sweep::SweepRecord;
use tailhunt_model::RunStatus;

use crate::html::format::{fmt_value, Fmt};
use crate::html::run::RunData;

/// Steal above this share makes every timing of the run suspect.
const STEAL_WARN: f64 = 0.05;
/// Client CPU above this share means the load generator itself may be the bottleneck.
const CPU_WARN: f64 = 0.9;

/// The rows for one run.
pub fn facts(rd: &RunData<'_>) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let run = &rd.run;
    rows.push(("kind".into(), run.kind.name().to_string()));
    rows.push((
        "status".into(),
        match run.status {
            RunStatus::Complete => "complete".into(),
            RunStatus::Partial => {
                "! partial: the run was interrupted; what it measured until then is kept".into()
            }
        },
    ));
    rows.push((
        "series / samples".into(),
        format!("{} / {}", run.series, run.samples),
    ));
    parameters(&run.params, &mut rows);
    if let Some(sweep) = rd.evidence::<SweepRecord>() {
        host_health(&sweep, &mut rows);
    }
    if let Some(c) = rd.evidence::<CaptureReport>() {
        rows.push((
            "capture".into(),
            format!(
                "{} packets, {} on the wire, {} bins of {}",
                c.packets,
                fmt_value(Fmt::Bytes, c.wire_bytes as f64),
                ((c.last_ns - c.first_ns) / c.bin_ns.max(1)).max(1),
                fmt_value(Fmt::Duration, c.bin_ns as f64)
            ),
        ));
        // Frames read but not analysed (not IP, a segment after its connection closed, ...)
        // and out of order: said with their reasons, as the terminal report does; nothing
        // here was lost by the capture itself.
        let skipped: u64 = c.skipped.values().sum();
        if skipped > 0 || c.out_of_order > 0 {
            let reasons: Vec<String> = c.skipped.iter().map(|(k, v)| format!("{v} {k}")).collect();
            let reasons = if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join(", "))
            };
            rows.push((
                "frames not analysed".into(),
                format!("! {skipped}{reasons}; {} out of order", c.out_of_order),
            ));
        }
    }
    if let Some(r) = rd.evidence::<RunqRecord>() {
        tracer_cost(&r, &mut rows);
    }
    if let Some(p) = rd.evidence::<ProbeRecord>() {
        probes(&p, &mut rows);
    }
    if let Some(t) = rd.evidence::<TransferReport>() {
        kernel(&t.kernel, &mut rows);
    }
    if let Some(s) = rd.evidence::<SocketsReport>() {
        kernel(&s.kernel, &mut rows);
        if let Some(a) = &s.audit {
            rows.push((
                "setsockopt audit".into(),
                format!(
                    "{}{}, {} events, {} lost{}",
                    if a.lost > 0 { "! " } else { "" },
                    a.attach,
                    a.events.len(),
                    a.lost,
                    per_call(a.program_runs, a.program_run_time_ns)
                ),
            ));
        }
    }
    rows
}

fn per_call(runs: Option<u64>, ns: Option<u64>) -> String {
    match (runs, ns) {
        (Some(r), Some(t)) if r > 0 => format!(
            ", {} per call",
            fmt_value(Fmt::Duration, t as f64 / r as f64)
        ),
        _ => String::new(),
    }
}

/// Scalar parameters as they were given (lists shortened, nulls left out).
fn parameters(params: &serde_json::Value, rows: &mut Vec<(String, String)>) {
    let Some(map) = params.as_object() else {
        return;
    };
    for (k, v) in map {
        let text = match v {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(a) if a.iter().all(|x| !x.is_object()) => {
                let items: Vec<String> = a
                    .iter()
                    .take(12)
                    .map(|x| x.to_string().trim_matches('"').to_string())
                    .collect();
                let more = if a.len() > 12 {
                    format!(" and {} more", a.len() - 12)
                } else {
                    String::new()
                };
                format!("{}{more}", items.join(", "))
            }
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => continue,
            other => {
                let s = other.to_string();
                match (k.ends_with("_ns"), other.as_f64()) {
                    (true, Some(ns)) => fmt_value(Fmt::Duration, ns),
                    _ => s,
                }
            }
        };
        rows.push((k.clone(), text));
    }
}

fn host_health(sweep: &SweepRecord, rows: &mut Vec<(String, String)>) {
    let max = |f: fn(&tailhunt_model::evidence::sweep::SweepStep) -> f64| {
        sweep.steps.iter().map(f).fold(0.0, f64::max)
    };
    let steal = max(|s| s.steal);
    let busy = max(|s| s.cpu_busy);
    let client = max(|s| s.client_cpu);
    let lag = max(|s| s.send_lag_p99_ns as f64);
    let unsent: u64 = sweep.steps.iter().map(|s| s.unsent).sum();
    rows.push((
        "host while measuring (worst step)".into(),
        format!(
            "{}CPU busy {}, steal {}, load generator CPU {}",
            if steal > STEAL_WARN || client > CPU_WARN {
                "! "
            } else {
                ""
            },
            fmt_value(Fmt::Share, busy),
            fmt_value(Fmt::Share, steal),
            fmt_value(Fmt::Share, client)
        ),
    ));
    rows.push((
        "send lag p99 (worst step)".into(),
        format!(
            "{}{}{}",
            if unsent > 0 { "! " } else { "" },
            fmt_value(Fmt::Duration, lag),
            if unsent > 0 {
                format!(", {unsent} requests never sent")
            } else {
                String::new()
            }
        ),
    ));
}

fn tracer_cost(r: &RunqRecord, rows: &mut Vec<(String, String)>) {
    if let Some(why) = &r.degraded_reason {
        rows.push(("run-queue tracer".into(), format!("! degraded: {why}")));
    }
    let c = &r.counters;
    let lost = c.ring_dropped + c.cgroups_full + c.pairs_full + c.timestamps_full;
    rows.push((
        "tracer events".into(),
        format!(
            "{}{} emitted, {} dropped by the ring, {} rate-limited, {} lost to full maps",
            if lost > 0 { "! " } else { "" },
            c.emitted,
            c.ring_dropped,
            c.rate_limited,
            c.cgroups_full + c.pairs_full + c.timestamps_full
        ),
    ));
    for p in &r.programs {
        rows.push((
            format!("BPF program {}", p.name),
            format!(
                "{} runs{}",
                p.run_cnt,
                per_call(Some(p.run_cnt), Some(p.run_time_ns))
            ),
        ));
    }
}

fn kernel(k: &KernelContext, rows: &mut Vec<(String, String)>) {
    rows.push(("kernel".into(), format!("{} {}", k.release, k.version)));
    if !k.sysctls.is_empty() {
        let s: Vec<String> = k.sysctls.iter().map(|(k, v)| format!("{k}={v}")).collect();
        rows.push(("sysctls".into(), s.join(", ")));
    }
}

/// The schedule's drift, then one row per probe: what it gave, and how it failed (a probe
/// failing at the end of the run, or one that never answered, is marked).
fn probes(p: &ProbeRecord, rows: &mut Vec<(String, String)>) {
    let d = &p.drift;
    let late = p.interval_ns > 0 && d.p99_ns > p.interval_ns / 10;
    rows.push((
        "probe schedule".into(),
        format!(
            "{}{} rounds of {}; start drift p50 {}, p99 {}, max {}; {} late rounds (first probe later than a tenth of the interval)",
            if late || d.late_rounds > 0 { "! " } else { "" },
            p.rounds,
            fmt_value(Fmt::Duration, p.interval_ns as f64),
            fmt_value(Fmt::Duration, d.p50_ns as f64),
            fmt_value(Fmt::Duration, d.p99_ns as f64),
            fmt_value(Fmt::Duration, d.max_ns as f64),
            d.late_rounds
        ),
    ));
    for s in &p.probes {
        let failing = s.failing_now > 0 || (s.samples > 0 && s.ok == 0);
        let mut text = format!(
            "{}{} samples: {} ok, {} errors, {} timeouts (at {})",
            if failing { "! " } else { "" },
            s.samples,
            s.ok,
            s.errors,
            s.timeouts,
            fmt_value(Fmt::Duration, s.timeout_ns as f64)
        );
        if s.longest_failure_run > 0 {
            text += &format!("; longest failure run {}", s.longest_failure_run);
        }
        if s.failing_now > 0 {
            text += &format!("; failing now ({} in a row)", s.failing_now);
        }
        if let Some(e) = &s.last_error {
            text += &format!("; last error: {e}");
        }
        rows.push((format!("probe {} ({})", s.name, s.kind), text));
    }
}
