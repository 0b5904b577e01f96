//! `tailhunt load` reports the client's own lateness apart from the service time: at 10k
//! requests/s on one connection against a local `tailhunt serve tcp`, the step's summary has
//! both parts, and the stored `client_lateness` and `service` series add up to the `latency`
//! series request by request. Structure and consistency only, never speed: the host is shared.
//! Also: `--spin` and `--pin` are checked before anything runs.

mod common;

use std::collections::HashMap;

use common::servers::tailhunt_serve;
use common::Env;
use serde_json::Value;

/// A stored series as (intended, start, end, outcome) rows, by `tailhunt export`.
fn series(env: &Env, run: &str, name: &str) -> Vec<(i64, i64, i64, String)> {
    let csv = env.ok(&["export", run, "--series", name]);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let col = |n: &str| {
        header
            .iter()
            .position(|h| *h == n)
            .unwrap_or_else(|| panic!("no column {n} in {header:?}"))
    };
    let (i, s, e, o) = (
        col("intended_ns"),
        col("start_ns"),
        col("end_ns"),
        col("outcome"),
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |k: usize| f[k].parse::<i64>().unwrap_or_else(|_| panic!("{l}"));
            (n(i), n(s), n(e), f[o].to_string())
        })
        .collect()
}

fn pct(v: &Value, k: &str) -> (u64, u64) {
    let p = &v[k];
    let get = |q: &str| p[q].as_u64().unwrap_or_else(|| panic!("no {k}.{q}: {v:#}"));
    (get("p50"), get("p99"))
}

#[test]
fn lateness_and_service_are_reported_apart_and_add_up_to_the_latency() {
    let env = Env::new();
    let server = tailhunt_serve("tcp", &["--reply-bytes", "60"]);
    let doc = env.json(
        "load",
        &[
            "load",
            &format!("tcp://{}", server.addr),
            "--rate",
            "10k",
            "--duration",
            "3s",
            "--warmup",
            "500ms",
            "--conns",
            "1",
            "--max-inflight",
            "1",
            "--nodelay=true",
            "--request-bytes",
            "60",
            "--spin",
            "50us",
        ],
    );
    let step = &doc["steps"][0];
    let sent = step["sent"].as_u64().unwrap();
    assert!(sent > 0, "{step:#}");
    let (late50, late99) = pct(step, "client_lateness_ns");
    let (svc50, svc99) = pct(step, "service_ns");
    assert!(late50 <= late99 && svc50 <= svc99, "{step:#}");
    // The summary's send lag p99 is the lateness p99 (one figure, two names).
    assert_eq!(step["send_lag_p99_ns"].as_u64(), Some(late99), "{step:#}");

    let run = doc["run_id"].as_str().unwrap();
    let latency = series(&env, run, "latency{rate=10000}");
    let late = series(&env, run, "client_lateness{rate=10000}");
    let service = series(&env, run, "service{rate=10000}");
    assert_eq!(latency.len() as u64, step["scheduled"].as_u64().unwrap());
    assert_eq!(late.len(), latency.len());
    assert_eq!(service.len(), latency.len());
    // Request by request (matched by intended time): lateness + service = latency, with the
    // same outcome, and each part is what the latency sample's own times say.
    let by_time: HashMap<i64, &(i64, i64, i64, String)> =
        latency.iter().map(|r| (r.0, r)).collect();
    assert_eq!(by_time.len(), latency.len(), "intended times are distinct");
    for (l, s) in late.iter().zip(&service) {
        assert_eq!(l.0, s.0, "the two series hold the same requests in order");
        let r = by_time[&l.0];
        let (lat, l_ns, s_ns) = (r.2 - r.0, l.2 - l.0, s.2 - s.0);
        assert_eq!(l_ns + s_ns, lat, "{r:?} {l:?} {s:?}");
        assert_eq!((l_ns, s_ns), (r.1 - r.0, r.2 - r.1), "{r:?}");
        assert!(l_ns >= 0 && s_ns >= 0, "{r:?}");
        assert_eq!((&l.3, &s.3), (&r.3, &r.3));
    }
    // The printed summary shows both parts.
    let text = env.ok(&[
        "load",
        &format!("tcp://{}", server.addr),
        "--rate",
        "1k",
        "--duration",
        "500ms",
        "--conns",
        "1",
    ]);
    assert!(text.contains("client lateness"), "{text}");
    assert!(text.contains("service p99"), "{text}");
}

#[test]
fn spin_and_pin_are_checked_before_anything_runs() {
    let env = Env::new();
    let err = env.fails(&["load", "tcp://127.0.0.1:9", "--rate", "100", "--spin", "1s"]);
    assert!(err.contains("--spin") && err.contains("10ms"), "{err}");
    let err = env.fails(&[
        "load",
        "tcp://127.0.0.1:9",
        "--rate",
        "100",
        "--pin",
        "4000",
    ]);
    assert!(err.contains("--pin 4000"), "{err}");
}
