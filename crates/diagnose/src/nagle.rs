//! `latency-rises-as-load-falls`: Nagle's algorithm meets the delayed ACK.
//!
//! The story: a service's p99 was ~50 ms at 1k requests/s and under 10 ms at 40k/s. Its clients
//! wrote each request in two pieces without TCP_NODELAY. Nagle's algorithm (RFC 896) holds the
//! second small write until the first is acknowledged; the server, waiting for the whole request
//! before answering, has nothing to piggyback an ACK on, so it acknowledges only when its
//! delayed-ACK timer fires (Linux: 40 ms minimum, `TCP_DELACK_MIN`; Windows: 200 ms). At high
//! rates the stall disappears: queued requests fill segments and the receiver acknowledges every
//! second full-sized segment at once (RFC 1122 4.2.3.2).
//!
//! The detector compares the lowest and highest rates of a sweep: it fires when p50 or p99 at
//! the lowest rate is at least 3x and 1 ms above the highest rate's, comparing the facing ends
//! of their 95% confidence intervals (the low rate's lower bound, the high rate's upper bound),
//! and names a mode near a delayed-ACK timer when there is one.

use std::collections::BTreeMap;

use tailhunt_analyze::Analysis;
use tailhunt_model::{format_duration_ns, format_rate, Evidence, Finding, Verdict};

/// Name of the detector.
pub const DETECTOR: &str = "latency-rises-as-load-falls";
/// How much slower the low rate must be.
const MIN_RATIO: f64 = 3.0;
/// ... and by how much at least, ns.
const MIN_DIFFERENCE_NS: u64 = 1_000_000;
/// Delayed-ACK timers: Linux (40 ms minimum, often seen at 40-48 ms), Windows (200 ms).
const DELACK_WINDOWS: [(&str, u64, u64); 2] = [
    ("Linux", 30_000_000, 60_000_000),
    ("Windows", 150_000_000, 260_000_000),
];
/// A delayed-ACK mode must hold at least this share of the low-rate samples.
const MIN_MODE_SHARE: f64 = 0.05;

/// One step of a sweep, analysed.
#[derive(Debug, Clone)]
pub struct RateStep {
    /// Series it came from (`latency{rate=50}`).
    pub series: String,
    /// Offered rate, requests/s.
    pub rate: f64,
    /// Its analysis.
    pub analysis: Analysis,
}

fn quantile(a: &Analysis, q: f64) -> Option<&tailhunt_analyze::quantiles::QuantileEstimate> {
    a.summary.quantiles.iter().find(|e| (e.q - q).abs() < 1e-9)
}

/// Whether `low` is markedly above `high` at quantile `q`: (low value, high value).
/// Whether quantile `q` at the low rate is markedly above the high rate's, judged on the
/// confidence bounds facing each other: the low rate's lower bound against the high rate's
/// upper bound. (On the point values, one stray stall in 150 samples at 50 req/s can make a p99
/// "3x" while its lower bound is an ordinary value.)
fn rises(low: &Analysis, high: &Analysis, q: f64) -> Option<(u64, u64)> {
    let (l, h) = (quantile(low, q)?, quantile(high, q)?);
    let (lo, hi) = (l.ci_low_ns?, h.ci_high_ns?);
    let big = lo as f64 >= MIN_RATIO * hi as f64 && lo >= hi + MIN_DIFFERENCE_NS;
    big.then_some((l.value_ns, h.value_ns))
}

/// Runs the detector over a sweep's steps (any order; repeats of a rate may be merged by the
/// caller). `None` when it does not fire.
pub fn latency_rises_as_load_falls(steps: &[RateStep]) -> Option<Finding> {
    let low = steps.iter().min_by(|a, b| a.rate.total_cmp(&b.rate))?;
    let high = steps.iter().max_by(|a, b| a.rate.total_cmp(&b.rate))?;
    if high.rate <= low.rate {
        return None;
    }
    let p50 = rises(&low.analysis, &high.analysis, 0.5);
    let p99 = rises(&low.analysis, &high.analysis, 0.99);
    if p50.is_none() && p99.is_none() {
        return None;
    }
    let delack = low.analysis.modes.iter().find_map(|m| {
        DELACK_WINDOWS
            .iter()
            .find(|(_, lo, hi)| (*lo..=*hi).contains(&m.peak_ns) && m.share >= MIN_MODE_SHARE)
            .map(|(os, _, _)| (m, *os))
    });
    let fmt = |ns: u64| format_duration_ns(ns as f64);
    let (which, (lv, hv)) = match (p50, p99) {
        (Some(v), _) => ("p50", v),
        (None, Some(v)) => ("p99", v),
        (None, None) => return None,
    };
    let mut summary = format!(
        "latency rises as load falls: {which} is {} at {} req/s but {} at {} req/s ({:.0}x)",
        fmt(lv),
        format_rate(low.rate),
        fmt(hv),
        format_rate(high.rate),
        lv as f64 / hv.max(1) as f64
    );
    if let Some((m, os)) = delack {
        summary.push_str(&format!(
            "; {:.0}% of low-rate requests sit in a mode at {}, the {os} delayed-ACK timer: Nagle's algorithm is holding small writes until a delayed ACK",
            m.share * 100.0,
            fmt(m.peak_ns)
        ));
    }
    let mut evidence: Vec<Evidence> = sorted(steps)
        .into_iter()
        .map(|s| {
            let mut values = BTreeMap::new();
            values.insert("rate_per_s".to_string(), s.rate);
            for q in [0.5, 0.99] {
                if let Some(e) = quantile(&s.analysis, q) {
                    let name = if q == 0.5 { "p50" } else { "p99" };
                    values.insert(format!("{name}_ns"), e.value_ns as f64);
                    if let Some(v) = e.ci_low_ns {
                        values.insert(format!("{name}_ci_low_ns"), v as f64);
                    }
                    if let Some(v) = e.ci_high_ns {
                        values.insert(format!("{name}_ci_high_ns"), v as f64);
                    }
                }
            }
            Evidence {
                series: s.series.clone(),
                range_ns: None,
                values,
                note: format!("{} req/s", format_rate(s.rate)),
            }
        })
        .collect();
    if let Some((m, os)) = delack {
        evidence.push(Evidence {
            series: low.series.clone(),
            range_ns: None,
            values: BTreeMap::from([
                ("mode_peak_ns".to_string(), m.peak_ns as f64),
                ("mode_share".to_string(), m.share),
            ]),
            note: format!("mode near the {os} delayed-ACK timer"),
        });
    }
    let confidence = 0.6
        + if delack.is_some() { 0.3 } else { 0.0 }
        + if p50.is_some() && p99.is_some() {
            0.05
        } else {
            0.0
        };
    Some(Finding {
        detector: DETECTOR.to_string(),
        verdict: Verdict::Detected,
        confidence,
        summary,
        evidence,
        fix: Some(
            "set TCP_NODELAY on both ends, and send each request and response with one write (build it in a buffer, or use writev / TCP_CORK) instead of write-write-read; re-run the sweep to confirm the low-rate latency falls to the network floor".into(),
        ),
    })
}

fn sorted(steps: &[RateStep]) -> Vec<&RateStep> {
    let mut v: Vec<&RateStep> = steps.iter().collect();
    v.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_analyze::{analyze, AnalyzeOptions, Distribution};
    use tailhunt_synth as synth;

    fn step(rate: f64, median_ns: f64, seed: u64) -> RateStep {
        let v = synth::lognormal(2000, median_ns, 0.1, seed).unwrap();
        RateStep {
            series: format!("latency{{rate={rate}}}"),
            rate,
            analysis: analyze(&Distribution::from_values(v), &AnalyzeOptions::default()),
        }
    }

    #[test]
    fn fires_on_a_nagle_sweep_and_names_the_delayed_ack_mode() {
        let steps = [
            step(50.0, 41e6, 1),
            step(500.0, 40e6, 2),
            step(5000.0, 300e3, 3),
        ];
        let f = latency_rises_as_load_falls(&steps).expect("fires");
        assert!(f.summary.contains("delayed-ACK"), "{}", f.summary);
        assert!(f.confidence > 0.8);
        assert_eq!(f.evidence.len(), 4);
    }

    #[test]
    fn silent_for_a_healthy_server() {
        let steps = [
            step(50.0, 120e3, 1),
            step(500.0, 110e3, 2),
            step(5000.0, 150e3, 3),
        ];
        assert!(latency_rises_as_load_falls(&steps).is_none());
    }

    #[test]
    fn silent_when_latency_rises_with_load() {
        let steps = [step(50.0, 200e3, 1), step(5000.0, 20e6, 3)];
        assert!(latency_rises_as_load_falls(&steps).is_none());
    }

    #[test]
    fn fires_without_a_timer_mode_at_lower_confidence() {
        let steps = [step(50.0, 12e6, 1), step(5000.0, 300e3, 3)];
        let f = latency_rises_as_load_falls(&steps).unwrap();
        assert!(!f.summary.contains("delayed-ACK") && f.confidence < 0.8);
    }

    #[test]
    fn silent_when_a_stray_stall_makes_a_short_steps_p99() {
        // 150 requests at 50 req/s with TCP_NODELAY: ~770 us, two of them late by a host stall.
        let mut v = synth::lognormal(148, 770e3, 0.03, 4).unwrap();
        v.extend([2_400_000, 2_300_000]);
        let low = RateStep {
            series: "latency{rate=50}".into(),
            rate: 50.0,
            analysis: analyze(&Distribution::from_values(v), &AnalyzeOptions::default()),
        };
        let mut steps = vec![low, step(5000.0, 590e3, 3)];
        assert!(latency_rises_as_load_falls(&steps).is_none());
        // The same step with Nagle's 40 ms in most requests still fires.
        steps[0] = step(50.0, 41e6, 1);
        assert!(latency_rises_as_load_falls(&steps).is_some());
    }
}
