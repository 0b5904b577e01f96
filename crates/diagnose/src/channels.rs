//! What `microburst` and `link-saturated` share: the capture's bursts grouped by channel, the
//! request latencies they are held against, and who made the bytes.
//!
//! In: a capture report's bursts (each with its sources, the flow directions that carried
//! it) and the request series the run holds: the capture's own exchanges per server port,
//! another run's client-side latencies (`--requests`), and the upstream queueing delay of the
//! packets that made no burst (`queue_delay`). Out: per channel (to or from one host) the
//! bursts split into *microbursts* (a one-second average well under the link rate: a 1 s
//! graph hides them) and *saturation* (the second around them averages half the link rate or
//! more), each with the time the link was busy with its bytes, and per series the samples a
//! detector compares (their service time: a client host that woke late does not count).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tailhunt_histogram::quantile::of_sorted;
use tailhunt_model::evidence::capture::{Burst, CaptureReport, Dir};
use tailhunt_model::{format_duration_ns, Outcome, Sample};

/// A burst whose surrounding second averages this share of the link rate or more is part of
/// a saturation, not a microburst.
pub const SATURATED_SECOND: f64 = 0.5;
/// Samples a series needs before it is compared.
pub const MIN_SAMPLES: usize = 20;
/// A queue delay this long is two ticks of the senders' 1 ms timestamp clock: late.
const QUEUE_DELAY_SLOW_NS: i64 = 2_000_000;

/// Where a request series comes from; it decides which channels it may be held against and
/// how a finding words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// The capture's own request/response exchanges with this server port.
    Exchanges {
        /// The server port.
        server_port: u16,
    },
    /// Latencies another run measured at the client (`--requests`).
    External,
    /// The upstream queueing delay of packets that made no burst (`queue_delay`).
    QueueDelay,
}

/// An answered request as the detectors read it: `(start_ns, end_ns)`, epoch ns.
pub type Span = (i64, i64);

/// The answered samples of `samples` (outcome ok), in order, as spans: what a detector
/// weighs of a request series. 16 bytes a request rather than a [`Sample`]'s 32: a
/// 100,000-exchange capture's latency series, read whole, was `tailhunt pcap`'s peak memory.
pub fn answered(samples: &[Sample]) -> impl Iterator<Item = Span> + '_ {
    samples
        .iter()
        .filter(|s| s.outcome == Outcome::Ok)
        .map(|s| (s.start_ns, s.end_ns))
}

/// Request latencies of one series.
pub struct Requests<'a> {
    /// Series display name.
    pub series: String,
    /// Its answered requests, in the series' order ([`answered`]).
    pub answered: &'a [Span],
    /// Where they come from.
    pub kind: RequestKind,
}

impl Requests<'_> {
    /// Its kind from a stored series' name and labels: `latency{server_port}` are exchanges,
    /// `queue_delay` the bystanders' waits, anything else external.
    pub fn kind_of(name: &str, server_port: Option<&str>) -> RequestKind {
        match (name, server_port.and_then(|p| p.parse().ok())) {
            ("latency", Some(server_port)) => RequestKind::Exchanges { server_port },
            ("queue_delay", _) => RequestKind::QueueDelay,
            _ => RequestKind::External,
        }
    }
}

/// One series ready to compare: its answered samples as `(start, end, latency)` and the
/// threshold of a slow one.
pub struct Prepared<'a> {
    /// The series.
    pub requests: &'a Requests<'a>,
    /// Median service time.
    pub median: i64,
    /// p99.
    pub p99: i64,
    /// Slow from here: 5x the median and 1 ms above it (for queue delays, 2 ms).
    pub slow_at: i64,
}

impl<'a> Prepared<'a> {
    /// `None` with fewer than [`MIN_SAMPLES`] answered samples.
    pub fn new(r: &'a Requests<'a>) -> Option<Prepared<'a>> {
        if r.answered.len() < MIN_SAMPLES {
            return None;
        }
        let mut lat: Vec<i64> = r.answered.iter().map(|&(s, e)| service(s, e)).collect();
        lat.sort_unstable();
        let median = of_sorted(&lat, 0.5)?;
        let p99 = of_sorted(&lat, 0.99).unwrap_or(median);
        // A queue delay's baseline is zero by construction and its median is the 1 ms
        // timestamp tick's rounding (0-1 ms), not a typical service time: two ticks is late.
        let slow_at = match r.kind {
            RequestKind::QueueDelay => QUEUE_DELAY_SLOW_NS,
            _ => (median * 5).max(median + 1_000_000),
        };
        Some(Prepared {
            requests: r,
            median,
            p99,
            slow_at,
        })
    }

    /// Answered samples.
    pub fn len(&self) -> usize {
        self.requests.answered.len()
    }

    /// Whether none is (never: [`Prepared::new`] wants [`MIN_SAMPLES`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(start_ns, end_ns, service_ns)` of answered sample `i`.
    pub fn sample(&self, i: usize) -> (i64, i64, i64) {
        let (start, end) = self.requests.answered[i];
        (start, end, service(start, end))
    }

    /// Every answered sample as [`Prepared::sample`] gives it, in order.
    pub fn samples(&self) -> impl Iterator<Item = (i64, i64, i64)> + '_ {
        (0..self.len()).map(|i| self.sample(i))
    }

    /// Whether sample `i` is slow.
    pub fn slow(&self, i: usize) -> bool {
        self.sample(i).2 >= self.slow_at
    }

    /// `slow requests` or, for queue delays, what they are.
    pub fn what(&self) -> &'static str {
        match self.requests.kind {
            RequestKind::QueueDelay => "delayed packets of other flows",
            _ => "slow requests",
        }
    }
}

/// A request's service time, as [`Sample::service_ns`] gives it.
fn service(start_ns: i64, end_ns: i64) -> i64 {
    end_ns.saturating_sub(start_ns)
}

/// A source of some bursts: a flow direction and its bytes in them.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// Flow name.
    pub flow: String,
    /// The sending endpoint (empty in old documents).
    pub sender: String,
    /// Bytes.
    pub bytes: u64,
    /// Share of the bursts' bytes.
    pub share: f64,
}

impl Source {
    /// `tcp a -> b (25%, sent by b)`.
    pub fn describe(&self) -> String {
        if self.sender.is_empty() {
            format!("{} ({:.0}%)", self.flow, self.share * 100.0)
        } else {
            format!(
                "{} ({:.0}%, sent by {})",
                self.flow,
                self.share * 100.0,
                self.sender
            )
        }
    }

    /// The flow's server port, read from its name (`proto client -> server`).
    fn server_port(&self) -> Option<u16> {
        let server = self.flow.rsplit(" -> ").next()?;
        server.parse::<SocketAddr>().ok().map(|a| a.port())
    }
}

/// The sources of `bursts`, by bytes, largest first; none under 1% of them.
pub fn sources<'b>(bursts: impl IntoIterator<Item = &'b Burst>) -> Vec<Source> {
    let mut by: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    let mut total = 0u64;
    for b in bursts {
        total += b.bytes;
        for f in b.sources() {
            *by.entry((f.flow.as_str(), f.sender.as_str())).or_default() += f.bytes;
        }
    }
    let total = total.max(1) as f64;
    let mut out: Vec<Source> = by
        .into_iter()
        .map(|((flow, sender), bytes)| Source {
            flow: flow.to_string(),
            sender: sender.to_string(),
            bytes,
            share: bytes as f64 / total,
        })
        .filter(|s| s.share >= tailhunt_model::evidence::capture::BurstFlow::MIN_SOURCE_SHARE)
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.flow.cmp(&b.flow)));
    out
}

/// Sources for a summary: all of them, up to 12 then a count.
pub fn describe_sources(sources: &[Source]) -> String {
    const SHOWN: usize = 12;
    let mut s: Vec<String> = sources.iter().take(SHOWN).map(Source::describe).collect();
    if sources.len() > SHOWN {
        s.push(format!("and {} more", sources.len() - SHOWN));
    }
    s.join(", ")
}

/// Which of several channels' source lists to keep: a channel whose sources another one
/// names as well (the same queue seen as traffic to the receiver and from each sender) is
/// left out for the one naming more, or for the earlier of two naming the same.
pub fn distinct(lists: &[&[Source]]) -> Vec<bool> {
    let names = |s: &[Source]| -> Vec<(String, String)> {
        s.iter()
            .map(|x| (x.flow.clone(), x.sender.clone()))
            .collect()
    };
    let all: Vec<Vec<(String, String)>> = lists.iter().map(|l| names(l)).collect();
    (0..all.len())
        .map(|i| {
            !all.iter().enumerate().any(|(j, theirs)| {
                j != i
                    && all[i].iter().all(|m| theirs.contains(m))
                    && (theirs.len() > all[i].len() || (theirs.len() == all[i].len() && j < i))
            })
        })
        .collect()
}

/// The bursts of one channel, split by what a one-second graph shows of them.
pub struct Channel<'a> {
    /// `to` or `from`.
    pub dir: Dir,
    /// The host.
    pub host: &'a str,
    /// Bursts a 1 s average hides.
    pub micro: Vec<&'a Burst>,
    /// Bursts inside a second at half the link rate or more.
    pub saturated: Vec<&'a Burst>,
}

/// The time `b` kept the link busy, widened by a bin each side (the bins' edges): the span a
/// request must overlap to have met it.
pub fn span(b: &Burst, report: &CaptureReport) -> (i64, i64) {
    (
        b.start_ns - report.bin_ns,
        b.busy_until_ns(report.link_rate_bps) + report.bin_ns,
    )
}

/// Sorted, merged spans.
pub fn merged(mut spans: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    spans.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Whether `[start, end]` overlaps any of the merged spans.
pub fn overlaps(spans: &[(i64, i64)], start: i64, end: i64) -> bool {
    let i = spans.partition_point(|&(_, e)| e < start);
    spans.get(i).is_some_and(|&(s, _)| s <= end)
}

/// The capture's channels with bursts, in a stable order.
pub fn channels(report: &CaptureReport) -> Vec<Channel<'_>> {
    let mut by: BTreeMap<(Dir, &str), Vec<&Burst>> = BTreeMap::new();
    for b in &report.bursts {
        by.entry((b.dir, b.host.as_str())).or_default().push(b);
    }
    by.into_iter()
        .map(|((dir, host), bursts)| {
            let (saturated, micro) = bursts
                .iter()
                .partition(|b| second_utilisation(b, &bursts, report) >= SATURATED_SECOND);
            Channel {
                dir,
                host,
                micro,
                saturated,
            }
        })
        .collect()
}

/// The utilisation of the second around `b`: its channel's burst bytes in the second centred
/// on it (pro rata for bursts partly inside), or the aligned second's average the capture
/// measured, whichever is larger.
fn second_utilisation(b: &Burst, channel: &[&Burst], report: &CaptureReport) -> f64 {
    let Some(rate) = report.link_rate_bps.filter(|&r| r > 0) else {
        return b.second_utilisation.unwrap_or(0.0);
    };
    let mid = b.start_ns + (b.end_ns - b.start_ns) / 2;
    let (from, to) = (mid - 500_000_000, mid + 500_000_000);
    let bytes: f64 = channel
        .iter()
        .map(|o| {
            let (s, e) = (o.start_ns, o.end_ns.max(o.start_ns + 1));
            let inside = (e.min(to) - s.max(from)).max(0) as f64 / (e - s) as f64;
            o.bytes as f64 * inside.min(1.0)
        })
        .sum();
    let centred = bytes * 8.0 / rate as f64;
    centred.max(b.second_utilisation.unwrap_or(0.0))
}

/// Whether series `r` may be held against bursts made by `sources`: the capture's own
/// exchanges with a port whose flows made the bursts are the bursts themselves (a bulk
/// fetch is slow because it is bulk).
pub fn eligible(r: &Requests<'_>, sources: &[Source]) -> bool {
    match r.kind {
        RequestKind::Exchanges { server_port } => {
            !sources.iter().any(|s| s.server_port() == Some(server_port))
        }
        RequestKind::External | RequestKind::QueueDelay => true,
    }
}

/// P(X >= k) for X ~ Binomial(n, p): the chance that k of n slow requests fall in the bursts
/// if slowness had nothing to do with them. Summed term by term in log space (n is at most
/// the samples of one series; no crate of the workspace has it).
pub fn binomial_tail(k: usize, n: usize, p: f64) -> f64 {
    if k == 0 || p >= 1.0 {
        return 1.0;
    }
    if p <= 0.0 {
        return 0.0;
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut ln_choose = 0.0;
    let mut sum = 0.0;
    for i in 0..=n {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        if i >= k {
            sum += (ln_choose + i as f64 * lp + (n - i) as f64 * lq).exp();
        }
    }
    sum.min(1.0)
}

/// `latency{...}: p99 1.2ms vs median 60us` for a summary.
pub fn series_brief(p: &Prepared<'_>) -> String {
    format!(
        "{}: p99 {} vs median {}",
        p.requests.series,
        format_duration_ns(p.p99 as f64),
        format_duration_ns(p.median as f64)
    )
}

/// `to 198.18.0.1`.
pub fn channel_name(dir: Dir, host: &str) -> String {
    format!("{} {host}", dir.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a detector weighs of a series: its answered samples' start and end, in order;
    /// the median and p99 are of those alone.
    #[test]
    fn only_answered_samples_are_weighed() {
        let samples: Vec<Sample> = (0..40)
            .map(|i| {
                let outcome = if i % 4 == 3 {
                    Outcome::Timeout
                } else {
                    Outcome::Ok
                };
                let latency = if outcome == Outcome::Ok {
                    1_000
                } else {
                    9_000_000
                };
                Sample::new(i * 10, i * 10 + 5, i * 10 + 5 + latency, outcome)
            })
            .collect();
        let spans: Vec<Span> = answered(&samples).collect();
        assert_eq!(spans.len(), 30);
        assert_eq!(spans[..3], [(5, 1_005), (15, 1_015), (25, 1_025)]);
        let r = Requests {
            series: "latency".into(),
            answered: &spans,
            kind: RequestKind::External,
        };
        let p = Prepared::new(&r).unwrap();
        assert_eq!((p.median, p.p99, p.len()), (1_000, 1_000, 30));
        assert_eq!(p.sample(3), (45, 1_045, 1_000));
    }

    #[test]
    fn spans_merge_and_overlap() {
        let s = merged(vec![(10, 20), (0, 5), (15, 30), (40, 50)]);
        assert_eq!(s, [(0, 5), (10, 30), (40, 50)]);
        assert!(overlaps(&s, 6, 10));
        assert!(!overlaps(&s, 31, 39));
        assert!(overlaps(&s, 35, 45));
        assert!(!overlaps(&s, 51, 60));
    }

    #[test]
    fn a_series_of_the_bursts_own_port_is_not_held_against_them() {
        let src = |flow: &str| Source {
            flow: flow.into(),
            sender: String::new(),
            bytes: 1,
            share: 1.0,
        };
        let own = Requests {
            series: "latency{server_port=7100}".into(),
            answered: &[],
            kind: RequestKind::Exchanges { server_port: 7100 },
        };
        let db = [src("tcp 198.18.0.1:40000 -> 198.18.0.11:7100")];
        assert!(!eligible(&own, &db));
        let api = [src("tcp 198.18.0.2:40000 -> 198.18.0.1:7000")];
        assert!(eligible(&own, &api));
    }
}

/// Hand-built captures for the detectors' tests.
#[cfg(test)]
pub(crate) mod testkit {
    use std::collections::BTreeMap;

    use tailhunt_model::evidence::capture::{Burst, BurstFlow, CaptureReport, Dir};

    use super::Span;

    pub const MS: i64 = 1_000_000;
    /// The capture's first packet.
    pub const T0: i64 = 1_700_000_000 * 1_000_000_000;
    /// 100 Mbit/s: 12,500 bytes per ms.
    pub const RATE: u64 = 100_000_000;

    /// A burst on `dir host` from `start_ms` for `len_ms`, its bytes split among `sources`
    /// (`(flow, sender, share)`), the rest other bytes.
    pub fn burst(
        dir: Dir,
        host: &str,
        start_ms: i64,
        len_ms: i64,
        sources: &[(&str, &str, f64)],
    ) -> Burst {
        let bytes = (len_ms * 12_500) as u64;
        let flows: Vec<BurstFlow> = sources
            .iter()
            .map(|&(flow, sender, share)| BurstFlow {
                flow: flow.into(),
                sender: sender.into(),
                bytes: (bytes as f64 * share) as u64,
                share,
            })
            .collect();
        let other = bytes - flows.iter().map(|f| f.bytes).sum::<u64>();
        Burst {
            dir,
            host: host.into(),
            start_ns: T0 + start_ms * MS,
            end_ns: T0 + (start_ms + len_ms) * MS,
            peak_bin_bytes: 12_500,
            peak_utilisation: Some(1.0),
            bytes,
            second_utilisation: Some(0.1),
            flows,
            other_bytes: other,
            other_flows: u64::from(other > 0),
        }
    }

    /// A capture `len_ms` long at 100 Mbit/s with these bursts.
    pub fn report(len_ms: i64, bursts: Vec<Burst>) -> CaptureReport {
        CaptureReport {
            packets: 1,
            wire_bytes: 1,
            first_ns: T0,
            last_ns: T0 + len_ms * MS,
            out_of_order: 0,
            skipped: BTreeMap::new(),
            bin_ns: MS,
            link_rate_bps: Some(RATE),
            channels: Vec::new(),
            bursts,
            flows: Vec::new(),
            flows_total: 0,
            tcp_flows_total: 0,
            stalls: Vec::new(),
        }
    }

    /// A request every `every_ms` over `len_ms`, taking `latency(start_ms)` ms.
    pub fn requests(len_ms: i64, every_ms: i64, latency: impl Fn(i64) -> f64) -> Vec<Span> {
        (0..len_ms / every_ms)
            .map(|k| {
                let at = k * every_ms;
                let start = T0 + at * MS;
                (start, start + (latency(at) * MS as f64) as i64)
            })
            .collect()
    }
}
