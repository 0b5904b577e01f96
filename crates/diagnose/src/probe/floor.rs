//! `latency-floor`: a probe whose fastest sample is far above what the network gives.
//!
//! The story: an in-memory lookup never answered in under 5 ms while a ping over the same
//! network took 0.45 ms; the RPC implementation added a fixed cost to every call. A minimum is
//! the one number noise cannot raise, so a minimum far above the path's names a fixed cost on
//! the server's path (a timer or poll interval, a synchronous call, a lookup that is not in
//! memory).
//!
//! In: the run's probe series, and the host each probe measures (from the run's `probe`
//! document; empty when unknown). The network floor is a probe's own `floor` label (a duration:
//! a round trip the user measured), else the smallest `ok` sample of the network probes
//! (`icmp`, `tcp-connect`, `tcp-echo`, `udp-echo`) of the same host, else of any host (a
//! service far away must not be held to the round trip of one next door, but a run that
//! probes the network of one host only still gives a floor). Out: a finding per other probe whose minimum is at
//! least [`FLOOR_RATIO`] times that floor *and* at least [`MIN_EXCESS_NS`] above it (a database
//! query's 0.2 ms over a 0.05 ms loopback ping is work, not a floor).

use std::collections::BTreeMap;

use tailhunt_analyze::floor::FLOOR_RATIO;
use tailhunt_model::{parse_duration_ns, Evidence, Finding, Outcome, Verdict};

use super::{ns, ProbeSeries};

/// Name of the detector.
pub const DETECTOR: &str = "latency-floor";
/// Smallest fixed cost above the network's floor worth a finding, ns.
pub const MIN_EXCESS_NS: u64 = 1_000_000;
/// Fewest ok samples a probe needs for its minimum to mean something.
pub const MIN_SAMPLES: usize = 30;
/// Probe kinds that measure the network itself.
pub const NETWORK_KINDS: [&str; 4] = ["icmp", "tcp-connect", "tcp-echo", "udp-echo"];

fn minimum(s: &ProbeSeries) -> Option<u64> {
    let ok: Vec<u64> = s
        .samples
        .iter()
        .filter(|x| x.outcome == Outcome::Ok)
        .map(|x| x.latency_ns().max(0) as u64)
        .collect();
    (ok.len() >= MIN_SAMPLES)
        .then(|| ok.into_iter().min())
        .flatten()
}

/// Findings for the probes whose minimum sits far above the network's floor; `hosts` maps a
/// probe's name to the host it measures.
pub fn latency_floor(series: &[ProbeSeries], hosts: &BTreeMap<String, String>) -> Vec<Finding> {
    let host_of = |s: &ProbeSeries| hosts.get(s.label("probe")).map(String::as_str);
    let networks: Vec<(u64, &ProbeSeries)> = series
        .iter()
        .filter(|s| NETWORK_KINDS.contains(&s.label("kind")))
        .filter_map(|s| minimum(s).map(|m| (m, s)))
        .collect();
    let network_for = |s: &ProbeSeries| {
        let same = host_of(s).and_then(|h| {
            networks
                .iter()
                .filter(|(_, n)| host_of(n) == Some(h))
                .min_by_key(|(m, _)| *m)
        });
        same.or_else(|| networks.iter().min_by_key(|(m, _)| *m))
            .copied()
    };
    series
        .iter()
        .filter(|s| !NETWORK_KINDS.contains(&s.label("kind")))
        .filter_map(|s| {
            let own = s
                .labels
                .get("floor")
                .and_then(|f| parse_duration_ns(f, Some("ms")).ok())
                .filter(|&f| f > 0)
                .map(|f| (f as u64, format!("its floor label {}", s.label("floor"))));
            let (floor, source) = own.or_else(|| {
                network_for(s)
                    .map(|(m, n)| (m, format!("the fastest {} of {}", n.label("kind"), n.who())))
            })?;
            let min = minimum(s)?;
            let ratio = min as f64 / floor.max(1) as f64;
            if ratio < FLOOR_RATIO || min.saturating_sub(floor) < MIN_EXCESS_NS {
                return None;
            }
            let what = format!(
                "never faster than {}, {ratio:.1}x the network's {} ({source}): every request \
                 pays a fixed {} that the network does not explain",
                ns(min as f64),
                ns(floor as f64),
                ns((min - floor) as f64)
            );
            Some(Finding {
                detector: DETECTOR.to_string(),
                verdict: Verdict::Detected,
                confidence: (0.6 + 0.1 * ratio.log2()).min(0.9),
                summary: format!("{}: {what}", s.who()),
                evidence: vec![Evidence {
                    series: s.display_name.clone(),
                    range_ns: None,
                    values: BTreeMap::from([
                        ("min_ns".to_string(), min as f64),
                        ("network_floor_ns".to_string(), floor as f64),
                        ("ratio".to_string(), ratio),
                        ("fixed_cost_ns".to_string(), (min - floor) as f64),
                    ]),
                    note: what,
                }],
                fix: Some(
                    "look for the fixed cost on the server's path: a timer or poll interval, a \
                     synchronous call or log write, a lock, a lookup that is not in memory"
                        .into(),
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::Sample;

    fn series(probe: &str, kind: &str, min_ns: i64) -> ProbeSeries {
        let samples = (0..50)
            .map(|i| {
                Sample::new(
                    i * 1_000_000,
                    i * 1_000_000,
                    i * 1_000_000 + min_ns + i * 10,
                    Outcome::Ok,
                )
            })
            .collect();
        ProbeSeries {
            display_name: format!("probe_latency{{probe={probe}}}"),
            labels: [("probe", probe), ("kind", kind), ("variant", "default")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            samples,
        }
    }

    #[test]
    fn a_far_service_is_held_to_the_round_trip_of_its_own_host() {
        let all = [
            series("near-ping", "tcp-connect", 100_000),
            series("far-ping", "tcp-connect", 5_000_000),
            series("far-db", "postgres", 6_000_000),
            series("near-cache", "redis", 4_000_000),
        ];
        let hosts: BTreeMap<String, String> = [
            ("near-ping", "10.0.0.1"),
            ("near-cache", "10.0.0.1"),
            ("far-ping", "10.9.0.1"),
            ("far-db", "10.9.0.1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let found = latency_floor(&all, &hosts);
        // far-db: 6 ms over its own host's 5 ms is work, not a floor; near-cache: 4 ms over
        // 0.1 ms next door is.
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].summary.starts_with("near-cache"),
            "{}",
            found[0].summary
        );
        // Without hosts, every service is held to the fastest network probe.
        let found = latency_floor(&all, &BTreeMap::new());
        assert_eq!(found.len(), 2, "{found:#?}");
    }
}
