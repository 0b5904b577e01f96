use tailhunt_model::evidence::capture::Dir;

use super::*;
use crate::channels::testkit::{burst, report, requests};
use crate::channels::{RequestKind, Span};

const CACHE: &str = "198.18.50.2";
const DB1: &str = "tcp 198.18.50.2:40001 -> 198.18.51.11:7100";
const DB2: &str = "tcp 198.18.50.2:40002 -> 198.18.51.12:7100";
const REV: &str = "tcp 198.18.51.2:43560 -> 198.18.50.2:7001";
const API: &str = "tcp 198.18.52.2:50000 -> 198.18.50.2:7000";

/// Every 333 ms: two dbs fill the link toward the cache for 40 ms (an api request flow at
/// 0.5% of those bytes, as documents stored before the source rule listed it), and 150 ms
/// later a far client's fetch fills the other direction for 10 ms.
fn both_directions() -> CaptureReport {
    let mut bursts = Vec::new();
    for k in 0..12 {
        let t = 100 + 333 * k;
        bursts.push(burst(
            Dir::To,
            CACHE,
            t,
            40,
            &[
                (DB1, "198.18.51.11:7100", 0.49),
                (DB2, "198.18.51.12:7100", 0.49),
                (API, "198.18.52.2:50000", 0.005),
            ],
        ));
        bursts.push(burst(
            Dir::From,
            CACHE,
            t + 150,
            10,
            &[(REV, "198.18.50.2:7001", 0.97)],
        ));
    }
    report(4000, bursts)
}

/// An api request every 2 ms that waits for whichever queue it meets to drain.
fn api_latency(at: i64) -> f64 {
    let k = (at - 100).div_euclid(333);
    let fwd = 100 + 333 * k;
    let rev = fwd + 150;
    if (fwd..fwd + 40).contains(&at) {
        (fwd + 40 - at) as f64 + 0.06
    } else if (rev..rev + 10).contains(&at) {
        (rev + 10 - at) as f64 + 0.06
    } else {
        0.06
    }
}

fn series<'a>(name: &str, answered: &'a [Span], kind: RequestKind) -> Requests<'a> {
    Requests {
        series: name.into(),
        answered,
        kind,
    }
}

fn summaries(f: &[Finding]) -> Vec<&str> {
    f.iter().map(|f| f.summary.as_str()).collect()
}

/// Regression (issue 13): with bursts in both directions only the channel holding the most
/// slow requests was reported, and the api flow at ~0% of the bytes was listed behind the
/// bursts. Each direction is a finding of its own, every source is named, no victim is.
#[test]
fn sources_in_both_directions_are_each_named_and_victims_never() {
    let r = both_directions();
    let api = requests(4000, 2, api_latency);
    let f = microburst(&r, &[series("api:latency", &api, RequestKind::External)]);
    let s = summaries(&f);
    assert_eq!(f.len(), 2, "{s:#?}");
    assert!(s[0].starts_with("microbursts to 198.18.50.2"), "{s:#?}");
    assert!(s[0].contains(DB1) && s[0].contains(DB2), "{s:#?}");
    assert!(s[1].starts_with("microbursts from 198.18.50.2"), "{s:#?}");
    assert!(s[1].contains(REV), "{s:#?}");
    assert!(s.iter().all(|s| !s.contains(API)), "{s:#?}");
    assert!(s[1].contains("sent by 198.18.50.2:7001"), "{s:#?}");
}

/// Regression (issue 13): a capture's own exchanges of the bulk port (the db fetches, slow
/// because each is 10 ms of link time) were held against the bursts they make and named one
/// db as its own cause. They are not evidence of anyone waiting.
#[test]
fn the_bursts_own_exchanges_do_not_explain_them() {
    let r = both_directions();
    let fetches = requests(4000, 2, |at| {
        let k = (at - 100).div_euclid(333);
        let t = 100 + 333 * k;
        if (t..t + 40).contains(&at) {
            30.0
        } else {
            0.2
        }
    });
    let f = microburst(
        &r,
        &[series(
            "latency{server_port=7100}",
            &fetches,
            RequestKind::Exchanges { server_port: 7100 },
        )],
    );
    assert!(f.is_empty(), "{:#?}", summaries(&f));
}

/// A capture downstream of the queue: the requests' exchanges look fast there, but the
/// packets of other flows arrived late by their own timestamps, inside the bursts.
#[test]
fn packets_delayed_upstream_name_the_bursts_that_held_them() {
    let r = both_directions();
    // Each sample runs from when the packet would have arrived to when it did.
    let delays = requests(4000, 1, |at| {
        let k = (at - 100).div_euclid(333);
        let t = 100 + 333 * k;
        if (t..t + 40).contains(&at) {
            (at - t) as f64
        } else {
            0.4
        }
    });
    let f = microburst(
        &r,
        &[series("queue_delay", &delays, RequestKind::QueueDelay)],
    );
    let s = summaries(&f);
    assert_eq!(f.len(), 1, "{s:#?}");
    assert!(s[0].contains("delayed packets of other flows"), "{s:#?}");
    assert!(s[0].contains(DB1) && s[0].contains(DB2), "{s:#?}");
}

/// A capture upstream of the queue sees the bursts' bytes leave in 2 ms; the link needs 40 ms
/// to carry them, and requests sent meanwhile wait. Those requests are held by the burst.
#[test]
fn a_burst_seen_upstream_keeps_the_link_busy_until_its_bytes_are_through() {
    let mut bursts = Vec::new();
    for k in 0..12 {
        let mut b = burst(
            Dir::To,
            CACHE,
            100 + 333 * k,
            2,
            &[(DB1, "198.18.51.11:7100", 0.99)],
        );
        b.bytes = 40 * 12_500;
        b.flows[0].bytes = b.bytes;
        bursts.push(b);
    }
    let r = report(4000, bursts);
    let api = requests(4000, 2, api_latency);
    let f = microburst(
        &r,
        &[series(
            "latency{server_port=7000}",
            &api,
            RequestKind::Exchanges { server_port: 7000 },
        )],
    );
    assert_eq!(f.len(), 1, "{:#?}", summaries(&f));
    assert!(f[0].summary.contains(DB1));
    assert!(f[0].summary.contains("up to 40.0ms"), "{}", f[0].summary);
}

/// The same queue as traffic to the cache and as traffic from one db: one finding.
#[test]
fn one_queue_seen_from_each_sender_is_one_finding() {
    let mut r = both_directions();
    r.bursts.retain(|b| b.dir == Dir::To);
    for k in 0..12 {
        r.bursts.push(burst(
            Dir::From,
            "198.18.51.11",
            100 + 333 * k,
            20,
            &[(DB1, "198.18.51.11:7100", 1.0)],
        ));
    }
    let api = requests(4000, 2, api_latency);
    let f = microburst(&r, &[series("api", &api, RequestKind::External)]);
    let s = summaries(&f);
    assert_eq!(f.len(), 1, "{s:#?}");
    assert!(s[0].starts_with("microbursts to 198.18.50.2"), "{s:#?}");
}

/// Slow requests at times the bursts do not explain: silence.
#[test]
fn slow_requests_away_from_the_bursts_are_not_microbursts() {
    let r = both_directions();
    let api = requests(4000, 2, |at| if at % 333 == 310 { 20.0 } else { 0.06 });
    let f = microburst(&r, &[series("api", &api, RequestKind::External)]);
    assert!(f.is_empty(), "{:#?}", summaries(&f));
}

#[test]
fn the_binomial_tail_is_exact_on_small_cases() {
    assert!((binomial_tail(1, 1, 0.3) - 0.3).abs() < 1e-12);
    // P(X >= 2), X ~ B(3, 0.5) = 4/8.
    assert!((binomial_tail(2, 3, 0.5) - 0.5).abs() < 1e-12);
    assert_eq!(binomial_tail(0, 5, 0.1), 1.0);
    assert!(binomial_tail(30, 30, 0.1) < 1e-29);
}

/// The far client fetches on the same schedule as the cache: the reverse bursts come inside
/// the forward ones. No slow request is held by them alone, yet they hold as many as chance
/// would never put there: named, below medium confidence, saying the two cannot be told apart.
#[test]
fn bursts_at_the_same_times_in_both_directions_are_both_named() {
    let mut r = both_directions();
    for b in r.bursts.iter_mut().filter(|b| b.dir == Dir::From) {
        b.start_ns -= 140 * crate::channels::testkit::MS;
        b.end_ns -= 140 * crate::channels::testkit::MS;
    }
    let api = requests(4000, 2, api_latency);
    let f = microburst(&r, &[series("api", &api, RequestKind::External)]);
    let s = summaries(&f);
    assert_eq!(f.len(), 2, "{s:#?}");
    assert!(f[0].confidence >= 0.5 && f[1].confidence < 0.5, "{f:#?}");
    assert!(s[1].contains(REV) && s[1].contains("cannot tell"), "{s:#?}");
}

/// Regression (issue 13): with `--requests` the best channel/series pair won and the other
/// series was dropped. Every series that holds slow requests in a channel's bursts is cited.
#[test]
fn every_series_that_holds_slow_requests_is_cited() {
    let r = both_directions();
    let api = requests(4000, 2, api_latency);
    let own = requests(4000, 3, api_latency);
    let f = microburst(
        &r,
        &[
            series(
                "latency{server_port=7000}",
                &own,
                RequestKind::Exchanges { server_port: 7000 },
            ),
            series("client:latency", &api, RequestKind::External),
        ],
    );
    assert_eq!(f.len(), 2, "{:#?}", summaries(&f));
    for finding in &f {
        let cited: Vec<&str> = finding.evidence.iter().map(|e| e.series.as_str()).collect();
        assert!(
            cited.contains(&"latency{server_port=7000}") && cited.contains(&"client:latency"),
            "{cited:?}"
        );
    }
}
