//! A `microburst` finding: the channel, the series whose slow requests its bursts hold, and
//! the sources that made those bursts.

use std::collections::BTreeMap;

use tailhunt_model::evidence::capture::{Burst, CaptureReport};
use tailhunt_model::{format_duration_ns, Evidence, Finding, Verdict};

use super::{Candidate, Held, DETECTOR};
use crate::channels::{
    channel_name, describe_sources, series_brief, sources, Channel, Prepared, Source,
};

/// A channel some series chose, with every series that chose it (the strongest first) and
/// the sources of its bursts that held that series' slow requests.
pub(super) struct Chosen<'a> {
    pub(super) cand: &'a Candidate<'a>,
    /// The chosen channel it coincides with, if that is all its evidence.
    pub(super) with: Option<&'a Channel<'a>>,
    pub(super) series: Vec<(&'a Prepared<'a>, Held)>,
    pub(super) sources: Vec<Source>,
}

impl Chosen<'_> {
    pub(super) fn build(&self, report: &CaptureReport) -> Finding {
        let (p, held) = self.series[0];
        let mut f = build(self.cand, self.with, p, held, &self.sources, report);
        // The other series that chose the channel too (the capture's own exchanges and a
        // client's log, say): each says the same of its own requests.
        let also = self.series[1..].iter().map(|(p, h)| Evidence {
            series: p.requests.series.clone(),
            range_ns: None,
            values: BTreeMap::from([
                ("slow_requests".into(), h.slow as f64),
                ("slow_in_bursts".into(), h.slow_in as f64),
                ("all_share_in_bursts".into(), h.base),
                ("chance".into(), h.tail),
            ]),
            note: format!(
                "also {:.0}% of the {} {} of this series overlap these bursts, against {:.0}% of all",
                h.share() * 100.0,
                h.slow,
                p.what(),
                h.base * 100.0
            ),
        });
        f.evidence.splice(1..1, also);
        f
    }
}

fn build(
    c: &Candidate<'_>,
    with: Option<&Channel<'_>>,
    p: &Prepared<'_>,
    held: Held,
    srcs: &[Source],
    report: &CaptureReport,
) -> Finding {
    let bursts = &c.channel.micro;
    let name = channel_name(c.channel.dir, c.channel.host);
    let peak = bursts
        .iter()
        .filter_map(|b| b.peak_utilisation)
        .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.max(u))));
    let second = bursts
        .iter()
        .filter_map(|b| b.second_utilisation)
        .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.max(u))));
    let longest = bursts
        .iter()
        .map(|b| b.busy_until_ns(report.link_rate_bps) - b.start_ns)
        .max()
        .unwrap_or(0);
    let mut evidence = vec![series_evidence(p, &held, srcs, peak, second, longest)];
    evidence.extend(
        bursts
            .iter()
            .take(5)
            .map(|b| burst_evidence(b, &name, report)),
    );
    let mut confidence = (0.5 + 0.5 * (held.share() - held.base)).clamp(0.5, 0.95);
    let mut coinciding = String::new();
    if let Some(w) = with {
        // Named, but below medium confidence: the evidence fits either channel.
        confidence = confidence.min(0.45);
        coinciding = format!(
            ", at the same times as the bursts {} (which of the two held them this capture cannot tell)",
            channel_name(w.dir, w.host)
        );
    }
    Finding {
        detector: DETECTOR.into(),
        verdict: Verdict::Detected,
        confidence,
        summary: format!(
            "microbursts {name}: {} burst(s) up to {} long fill the link, and {:.0}% of {} ({}) coincide with them{coinciding}; behind the bursts: {}",
            bursts.len(),
            format_duration_ns(longest as f64),
            held.share() * 100.0,
            p.what(),
            series_brief(p),
            describe_sources(srcs)
        ),
        evidence,
        fix: Some("move the bursty bulk traffic off the latency-sensitive path: a separate interface or a priority queue (e.g. an htb/prio class for small requests), or pace the scatter/gather responses; do not add hedged requests, which make bursts worse".into()),
    }
}

/// The series' part: how many slow requests the bursts hold against chance, and what a 1 s
/// graph shows of them.
fn series_evidence(
    p: &Prepared<'_>,
    held: &Held,
    srcs: &[Source],
    peak: Option<f64>,
    second: Option<f64>,
    longest: i64,
) -> Evidence {
    let hidden = match (peak, second) {
        (Some(p), Some(s)) => format!(
            " Bins reach {:.0}% of the link rate while the busiest one-second average is {:.0}%: a 1 s graph hides the bursts.",
            p * 100.0,
            s * 100.0
        ),
        _ => String::new(),
    };
    let mut values = BTreeMap::new();
    values.insert("longest_burst_ns".into(), longest as f64);
    values.insert("slow_requests".into(), held.slow as f64);
    values.insert("slow_in_bursts".into(), held.slow_in as f64);
    values.insert("slow_share_in_bursts".into(), held.share());
    values.insert("all_share_in_bursts".into(), held.base);
    values.insert("chance".into(), held.tail);
    values.insert("median_ns".into(), p.median as f64);
    values.insert("slow_threshold_ns".into(), p.slow_at as f64);
    values.insert("p99_ns".into(), p.p99 as f64);
    values.insert("sources".into(), srcs.len() as f64);
    if let Some(x) = peak {
        values.insert("peak_utilisation".into(), x);
    }
    if let Some(x) = second {
        values.insert("max_second_utilisation".into(), x);
    }
    Evidence {
        series: p.requests.series.clone(),
        range_ns: None,
        values,
        note: format!(
            "{:.0}% of the {} {} (>= {}) that no other channel's bursts hold overlap these bursts, against {:.0}% of all.{hidden}",
            held.share() * 100.0,
            held.slow,
            p.what(),
            format_duration_ns(p.slow_at as f64),
            held.base * 100.0
        ),
    }
}

/// One burst: when the link was busy with it and who made it.
fn burst_evidence(b: &Burst, name: &str, report: &CaptureReport) -> Evidence {
    let busy_until = b.busy_until_ns(report.link_rate_bps);
    let mut v = BTreeMap::new();
    v.insert("bytes".into(), b.bytes as f64);
    v.insert("other_bytes".into(), b.other_bytes as f64);
    v.insert("peak_bin_bytes".into(), b.peak_bin_bytes as f64);
    if let Some(u) = b.peak_utilisation {
        v.insert("peak_utilisation".into(), u);
    }
    Evidence {
        series: format!("bytes{{dir={},host={}}}", b.dir.name(), b.host),
        range_ns: Some((b.start_ns, busy_until)),
        values: v,
        note: format!(
            "burst {name} for {}, made by {}",
            format_duration_ns((busy_until - b.start_ns) as f64),
            describe_sources(&sources([b]))
        ),
    }
}
