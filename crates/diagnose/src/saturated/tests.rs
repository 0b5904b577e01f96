use tailhunt_model::evidence::capture::{Burst, Dir};

use super::*;
use crate::channels::testkit::{burst, report, requests};
use crate::channels::RequestKind;
use crate::microburst::microburst;

const CACHE: &str = "198.18.50.2";
const BULK: &str = "tcp 198.18.50.2:44430 -> 198.18.51.2:7400";

/// A transfer fills the link toward the cache from 0.5 s to 3.0 s of a 4 s capture (in
/// episodes of 200 ms with 5 ms gaps, as a congestion control that probes makes them).
fn full() -> CaptureReport {
    let bursts = (0..12)
        .map(|k| {
            let mut b = burst(
                Dir::To,
                CACHE,
                500 + 205 * k,
                200,
                &[(BULK, "198.18.51.2:7400", 0.99)],
            );
            b.second_utilisation = Some(0.97);
            b
        })
        .collect();
    report(4000, bursts)
}

fn inside(at: i64) -> bool {
    (500..3000).contains(&at)
}

/// Regression (issue 13): a link full for most of the run moved the requests' median and got
/// no finding at all. It is `link-saturated`, naming what filled it; not `microburst`.
#[test]
fn a_link_full_for_seconds_is_named_with_what_filled_it() {
    let mut r = full();
    // The same bytes as traffic from the transfer's sender: the same link, one finding.
    let from: Vec<_> = r
        .bursts
        .iter()
        .map(|b| Burst {
            dir: Dir::From,
            host: "198.18.51.2".into(),
            ..b.clone()
        })
        .collect();
    r.bursts.extend(from);
    let api = requests(4000, 2, |at| {
        if inside(at) {
            3.0 + (at % 7) as f64
        } else {
            0.06
        }
    });
    let reqs = [Requests {
        series: "api".into(),
        answered: &api,
        kind: RequestKind::External,
    }];
    let f = link_saturated(&r, &reqs);
    assert_eq!(f.len(), 1, "{f:#?}");
    let s = &f[0].summary;
    assert!(s.starts_with("link saturated to 198.18.50.2"), "{s}");
    assert!(
        s.contains(BULK) && s.contains("sent by 198.18.51.2:7400"),
        "{s}"
    );
    assert!(f[0].confidence >= 0.9, "{}", f[0].confidence);
    assert!(microburst(&r, &reqs).is_empty());
}

/// A bulk transfer alone filling its link is what bulk transfers do: without requests that
/// got slower meanwhile there is nothing to explain.
#[test]
fn a_full_link_that_slows_nothing_is_not_a_finding() {
    let r = full();
    let api = requests(4000, 2, |_| 0.06);
    let reqs = [Requests {
        series: "api".into(),
        answered: &api,
        kind: RequestKind::External,
    }];
    assert!(link_saturated(&r, &reqs).is_empty());
    assert!(link_saturated(&r, &[]).is_empty());
}

/// A capture downstream of the full link: the requests' exchanges there look fast, and the
/// queue delays mix the requests (3 ms late while the link is full) with the departures and
/// the other direction (never late), so their median barely moves; the share that waited
/// does.
#[test]
fn packets_that_waited_while_the_link_was_full_name_it() {
    let r = full();
    let delays = requests(
        4000,
        1,
        |at| {
            if inside(at) && at % 3 == 0 {
                3.0
            } else {
                0.4
            }
        },
    );
    let reqs = [Requests {
        series: "queue_delay".into(),
        answered: &delays,
        kind: RequestKind::QueueDelay,
    }];
    let f = link_saturated(&r, &reqs);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        f[0].summary.contains("waited 2.00ms or more upstream"),
        "{}",
        f[0].summary
    );
    // The same numbers as a request series: its median did not move, no finding.
    let reqs = [Requests {
        series: "api".into(),
        answered: &delays,
        kind: RequestKind::External,
    }];
    assert!(link_saturated(&r, &reqs).is_empty());
}
