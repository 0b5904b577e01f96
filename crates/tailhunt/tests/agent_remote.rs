//! The real `tailhunt agent` binary remote-writing into real receivers:
//!
//! - probe histograms end to end: the agent probes a local `tailhunt serve tcp` and writes to
//!   VictoriaMetrics (`vmrange`), Prometheus with native histograms and Prometheus with classic
//!   buckets; `histogram_quantile(0.99, ...)` from each equals the p99 of the samples the agent
//!   stored, within the bucket error, and each receiver's count equals the stored count;
//! - a full queue for a receiver that is down: the bound and the drops on `/metrics` (behind
//!   a token: a wrong one gets 401 and says why) and on stderr;
//! - `kill -9` of the agent during a 30 s outage: the next agent on the same queue directory
//!   delivers every batch the first one had on disk (counted on disk, then in the receivers).

#[path = "../../agent/tests/common/mod.rs"]
mod tsdb;

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::agent::Agent;
use common::servers::tailhunt_serve;
use tsdb::{binary, free_port, prometheus, query, query_until, query_until_eq, victoria};

/// The value of the exposition line that starts with `series`.
fn value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The latencies (seconds) of the ok and timed-out samples of every agent window in the
/// store (what the exported histogram holds), sorted.
fn stored_latencies(db: &Path) -> Vec<f64> {
    let store = tailhunt_store::Store::open_read_only(db).unwrap();
    let mut out = Vec::new();
    for run in store.runs().unwrap() {
        if run.params.get("agent_window") != Some(&serde_json::Value::Bool(true)) {
            continue;
        }
        for s in store.series(&run.id).unwrap() {
            for sample in store.load_samples(s.id).unwrap() {
                if sample.outcome != tailhunt_model::Outcome::Error {
                    out.push(sample.latency_ns().max(0) as f64 / 1e9);
                }
            }
        }
    }
    out.sort_by(f64::total_cmp);
    out
}

/// The classic bucket `(lo, hi]` holding `v` seconds.
fn classic_bucket(v: f64) -> (f64, f64) {
    let bounds = tailhunt_agent::exposition::CLASSIC_BOUNDS_SECONDS;
    let i = bounds.iter().position(|&b| v <= b).unwrap();
    (if i == 0 { 0.0 } else { bounds[i - 1] }, bounds[i])
}

#[test]
fn probe_histograms_reach_victoria_metrics_and_prometheus_with_the_agents_p99() {
    let dir = tempfile::tempdir().unwrap();
    let Some(vm) = victoria(&dir.path().join("vm"), free_port()) else {
        return;
    };
    let receiver = ["--web.enable-remote-write-receiver"];
    let native = [receiver[0], "--enable-feature=native-histograms"];
    let Some(prom_native) = prometheus(&dir.path().join("pn"), free_port(), None, &native) else {
        return;
    };
    let prom_classic = prometheus(&dir.path().join("pc"), free_port(), None, &receiver).unwrap();
    // Replies take 1 to 5 ms of "application" time: the p99 lies well inside one classic
    // bucket's range of interest and away from loopback noise.
    let server = tailhunt_serve("tcp", &["--think-time", "uniform:1ms:5ms"]);
    let db = dir.path().join("agent.db");
    let cfg = dir.path().join("agent.toml");
    let endpoint = |name: &str, url: &str, mode: &str| {
        format!("\n[[remote_write]]\nname = \"{name}\"\nurl = \"{url}/api/v1/write\"\nhistograms = \"{mode}\"\n")
    };
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:0\"\ninterval = \"500ms\"\ninstance = \"e2e\"\nqueue_dir = \"{}\"\nprobe_interval = \"20ms\"\ntimeout = \"10ms\"\nstore = \"{}\"\nwindow = \"1h\"\nretention = \"2h\"\n\n[[probe]]\nname = \"serve\"\nkind = \"tcp-echo\"\ntarget = \"{}\"\n{}{}{}",
            dir.path().join("queue").display(),
            db.display(),
            server.addr,
            endpoint("vm", &vm.url, "vmrange"),
            endpoint("native", &prom_native.url, "native"),
            endpoint("classic", &prom_classic.url, "classic"),
        ),
    )
    .unwrap();
    let rest = Agent::start(&cfg, &["--duration", "10s"]).wait(40);
    assert!(
        rest.contains("0 batch(es) stay queued"),
        "the last snapshot was not delivered: {rest}"
    );
    let lat = stored_latencies(&db);
    let n = lat.len();
    assert!(n >= 300, "only {n} samples stored: {rest}");
    // Nearest rank, as tailhunt and histogram_quantile's bucket choice use it.
    let p99 = lat[(0.99 * n as f64).ceil() as usize - 1];
    let sel = "{probe=\"serve\",instance=\"e2e\"}";
    let ask = |base: &str, q: &str| -> f64 {
        let v = query_until(base, q, 1, 10);
        assert_eq!(v.len(), 1, "{q} at {base}: {v:?}");
        v[0]
    };
    // Each receiver holds every sample the agent stored: the exported histogram is the store's.
    // (VictoriaMetrics makes fresh samples searchable within a second or so: poll.)
    let count = format!("tailhunt_probe_latency_seconds_count{sel}");
    let want = [n as f64];
    assert_eq!(
        query_until_eq(&vm.url, &count, &want, 10),
        want,
        "VictoriaMetrics' count"
    );
    assert_eq!(query_until_eq(&prom_classic.url, &count, &want, 10), want);
    let native_count = format!("histogram_count(tailhunt_probe_latency_seconds{sel})");
    assert_eq!(
        query_until_eq(&prom_native.url, &native_count, &want, 10),
        want
    );

    let vm_p99 = ask(
        &vm.url,
        &format!("histogram_quantile(0.99, sum by (vmrange) (tailhunt_probe_latency_seconds_bucket{sel}))"),
    );
    let native_p99 = ask(
        &prom_native.url,
        &format!("histogram_quantile(0.99, tailhunt_probe_latency_seconds{sel})"),
    );
    let classic_p99 = ask(
        &prom_classic.url,
        &format!("histogram_quantile(0.99, tailhunt_probe_latency_seconds_bucket{sel})"),
    );
    let off = |v: f64| (v - p99).abs() / p99 * 100.0;
    eprintln!(
        "{n} samples stored, p99 {:.3} ms; VictoriaMetrics vmrange {:.3} ms ({:.2}% off), Prometheus native {:.3} ms ({:.2}% off), Prometheus classic {:.3} ms ({:.1}% off)",
        p99 * 1e3,
        vm_p99 * 1e3,
        off(vm_p99),
        native_p99 * 1e3,
        off(native_p99),
        classic_p99 * 1e3,
        off(classic_p99)
    );
    // vmrange buckets are 2.2% wide and native ones (schema 7) 0.54%; tailhunt's own
    // histogram, which both are made from, adds its resolution (under 1%).
    assert!(off(vm_p99) < 3.5, "vmrange p99 {vm_p99} s against {p99} s");
    assert!(
        off(native_p99) < 1.6,
        "native p99 {native_p99} s against {p99} s"
    );
    // Classic buckets are coarse: the answer is interpolated inside the bucket holding the p99
    // (1% of slack at its edges for tailhunt's resolution).
    let (lo, hi) = classic_bucket(p99);
    assert!(
        classic_p99 >= lo * 0.99 && classic_p99 <= hi * 1.01,
        "classic p99 {classic_p99} s outside ({lo}, {hi}] holding {p99} s"
    );
}

/// Batches per receiver on disk in the agent's queue directory `dir/NAME`.
fn queued_on_disk(dir: &Path, name: &str) -> u64 {
    let q = tailhunt_agent::queue::Queue::open(&dir.join(name), 1 << 30).unwrap();
    q.stats().pending_records
}

/// Samples of the first agent's uptime gauge: one per batch it pushed.
const FIRST_BATCHES: &str =
    "count_over_time(tailhunt_agent_uptime_seconds{instance=\"first\"}[10m])";

#[test]
fn kill_9_of_the_agent_during_an_outage_loses_nothing_it_queued_on_disk() {
    if binary("victoria-metrics").is_none() || binary("prometheus").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--web.enable-remote-write-receiver"];
    let mut vm = victoria(&dir.path().join("vm"), free_port()).unwrap();
    let mut prom = prometheus(&dir.path().join("prom"), free_port(), None, &flags).unwrap();
    let queue = dir.path().join("queue");
    let (vm_url, prom_url) = (vm.url.clone(), prom.url.clone());
    let config = |instance: &str| {
        let cfg = dir.path().join(format!("{instance}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "listen = \"127.0.0.1:0\"\ninterval = \"250ms\"\ninstance = \"{instance}\"\nqueue_dir = \"{}\"\n\n[[remote_write]]\nname = \"vm\"\nurl = \"{}/api/v1/write\"\nhistograms = \"vmrange\"\n\n[[remote_write]]\nname = \"prom\"\nurl = \"{}/api/v1/write\"\n",
                queue.display(),
                vm_url,
                prom_url
            ),
        )
        .unwrap();
        cfg
    };
    let first = Agent::start(&config("first"), &[]);
    let until = Instant::now() + Duration::from_secs(15);
    let batches = |base: &str| query(base, FIRST_BATCHES).first().copied().unwrap_or(0.0);
    while (batches(&vm.url) < 4.0 || batches(&prom.url) < 4.0) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
    }
    // The outage: both receivers stop for 30 s; the agent is killed 15 s into it.
    let outage = Instant::now();
    vm.terminate();
    prom.terminate();
    std::thread::sleep(Duration::from_secs(15));
    let m = first.metrics();
    for ep in ["vm", "prom"] {
        let failing = value(
            &m,
            &format!("tailhunt_remote_write_failing{{endpoint=\"{ep}\"}}"),
        );
        assert_eq!(failing, Some(1.0), "{ep} not reported failing:\n{m}");
    }
    drop(first); // SIGKILL
    let on_disk = [queued_on_disk(&queue, "vm"), queued_on_disk(&queue, "prom")];
    // 15 s at 4 batches a second.
    assert!(
        on_disk.iter().all(|&n| n >= 40),
        "queued on disk: {on_disk:?}"
    );
    std::thread::sleep(Duration::from_secs(30).saturating_sub(outage.elapsed()));
    let vm = victoria(&dir.path().join("vm"), vm.port).unwrap();
    let prom = prometheus(&dir.path().join("prom"), prom.port, None, &flags).unwrap();
    eprintln!(
        "outage of {:.1} s; the first agent killed with {on_disk:?} batches on disk (vm, prom)",
        outage.elapsed().as_secs_f64()
    );
    // What arrived before the outage, read before anything else is written.
    let before = [&vm.url, &prom.url].map(|u| {
        query_until(u, FIRST_BATCHES, 1, 10)
            .first()
            .copied()
            .unwrap_or(0.0)
    });
    assert!(
        before.iter().all(|&b| b >= 4.0),
        "before the outage: {before:?}"
    );
    let second = Agent::start(&config("second"), &[]);
    for (i, base) in [&vm.url, &prom.url].into_iter().enumerate() {
        let want = before[i] + on_disk[i] as f64;
        let got = query_until_eq(base, FIRST_BATCHES, &[want], 30);
        eprintln!(
            "{base}: {} batches before the outage + {} on disk = {want}; now holds {got:?}",
            before[i], on_disk[i]
        );
        assert_eq!(got, vec![want], "batches lost or doubled at {base}");
    }
    let m = second.metrics();
    for ep in ["vm", "prom"] {
        let queued = value(
            &m,
            &format!("tailhunt_remote_write_queue_batches{{endpoint=\"{ep}\"}}"),
        );
        assert!(queued.is_some_and(|q| q <= 2.0), "{ep}:\n{m}");
    }
    drop(second);
}

#[test]
fn a_full_queue_is_reported_on_metrics_and_stderr_and_a_wrong_token_is_told_why() {
    // Run-queue tracing and the socket sampler off: their series grow with the host's cgroups
    // and sockets, and a batch larger than this queue's whole bound takes another path.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "s3cret\n").unwrap();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:0\"\ntoken_file = \"{}\"\ninterval = \"50ms\"\nqueue_dir = \"{}\"\n\n[[remote_write]]\nname = \"down\"\nurl = \"http://127.0.0.1:{}/api/v1/write\"\nqueue_max_bytes = 4096\n\n[runq]\nenabled = false\n[sockets]\nenabled = false\n",
            dir.path().join("token").display(),
            dir.path().join("queue").display(),
            free_port()
        ),
    )
    .unwrap();
    let agent = Agent::start(&cfg, &["--duration", "4s"]);
    let wrong = agent.get("/metrics", Some("guess"));
    assert!(
        wrong.starts_with("HTTP/1.0 401") || wrong.starts_with("HTTP/1.1 401"),
        "{wrong}"
    );
    assert!(wrong.contains("missing or wrong bearer token"), "{wrong}");
    let dropped = "tailhunt_remote_write_dropped_batches_total{endpoint=\"down\"}";
    let until = Instant::now() + Duration::from_secs(3);
    let mut m = String::new();
    while Instant::now() < until {
        m = agent.get("/metrics", Some("s3cret"));
        if value(&m, dropped).is_some_and(|v| v > 0.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(value(&m, dropped).is_some_and(|v| v > 0.0), "{m}");
    let bound = "tailhunt_remote_write_queue_max_bytes{endpoint=\"down\"}";
    assert_eq!(value(&m, bound), Some(4096.0), "{m}");
    let queued = "tailhunt_remote_write_queue_bytes{endpoint=\"down\"}";
    assert!(value(&m, queued).is_some_and(|v| v <= 4096.0), "{m}");
    let full = "tailhunt_remote_write_queue_full{endpoint=\"down\"}";
    assert_eq!(value(&m, full), Some(1.0), "{m}");
    let rest = agent.wait(20);
    let said: Vec<&str> = rest
        .lines()
        .filter(|l| l.contains("queue full (4096 bytes)"))
        .collect();
    eprintln!("{said:?}");
    // Said once when it filled, not for each of the ~80 batches that dropped another.
    assert_eq!(said.len(), 1, "{rest}");
    assert!(rest.contains("cannot reach"), "{rest}");
}
