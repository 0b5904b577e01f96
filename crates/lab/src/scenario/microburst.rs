//! Microburst (root cause #1): db replies fill the cache's shaped link while api requests wait.
//!
//! In: the output directory. Out: the truth (schema in the parent module's docs), after the
//! cache, dbs and api client (`py/microburst.py`) ran for [`DURATION_MS`] and tcpdump recorded
//! the cache's interface.

use std::time::Duration;

use serde_json::{json, Value};

use super::procs::{add_tbf, qdisc_counts, Capture, Proc};
use super::{median, read_part, Out, ScenarioError};
use tailhunt_netlab::netns::{veth, Netns};

const CACHE: &str = "198.18.2.2";
const FAR: &str = "198.18.2.1";
const DBS: [&str; 4] = ["198.18.2.11", "198.18.2.12", "198.18.2.13", "198.18.2.14"];
const API: &str = "198.18.7.2";
const API_GW: &str = "198.18.7.1";
const CACHE_PORT: &str = "7000";
const DB_PORT: &str = "7100";
const REPLY_BYTES: &str = "120000";
const INTERVAL_MS: &str = "300";
const API_PERIOD_US: &str = "2000";
/// How long the api client sends.
pub(crate) const DURATION_MS: u64 = 4000;
const RATE_BPS: u64 = 100_000_000;
// A 200 ms tbf queue holds 2.5 MB at 100 Mbit/s: far more than one burst (480 kB), so bursts
// wait in the queue (delay) and are never dropped. A 4 kB bucket (not 16 kB) keeps 1 ms bins
// near the configured rate (peaks ~120% rather than ~180%).
const SHAPER: [&str; 6] = ["rate", "100mbit", "burst", "4kb", "latency", "200ms"];

pub(crate) fn run(out: &Out) -> Result<Value, ScenarioError> {
    let script = out.script("microburst.py", include_str!("../../py/microburst.py"))?;
    let cache = Netns::new("mb-cache")?;
    let far = Netns::new("mb-far")?;
    let api_ns = Netns::new("mb-api")?;
    let (cache_end, far_end) = veth(&cache, &format!("{CACHE}/24"), &far, &format!("{FAR}/24"))?;
    for a in DBS {
        let cidr = format!("{a}/24");
        far.run(&["ip", "addr", "add", &cidr, "dev", &far_end.iface])?;
    }
    add_tbf(&far, &far_end.iface, &SHAPER)?;
    // The api host has its own link to the far side, which routes between it and the cache:
    // its capture sees each request before it waits in the shaper's queue.
    let (api_end, _) = veth(&api_ns, &format!("{API}/24"), &far, &format!("{API_GW}/24"))?;
    far.run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    api_ns.run(&["ip", "route", "add", "default", "via", API_GW])?;
    cache.run(&["ip", "route", "add", "198.18.7.0/24", "via", FAR])?;

    let pcap = out.file("pcap");
    let capture = Capture::start(&cache, &cache_end.iface, &pcap, 0)?;
    let api_pcap = out.file("api.pcap");
    let api_capture = Capture::start(&api_ns, &api_end.iface, &api_pcap, 0)?;
    let dbs = DBS.join(",");
    let mut db = Proc::python(
        &far,
        "microburst db",
        &script,
        &["db", &dbs, DB_PORT, REPLY_BYTES],
    )?;
    db.wait_line("READY", Duration::from_secs(10))?;
    let cache_part = out.part("cache")?;
    let mut cache_proc = Proc::python(
        &cache,
        "microburst cache",
        &script,
        &[
            "cache",
            CACHE,
            CACHE_PORT,
            &dbs,
            DB_PORT,
            INTERVAL_MS,
            REPLY_BYTES,
            &cache_part,
        ],
    )?;
    cache_proc.wait_line("READY", Duration::from_secs(10))?;
    let api_part = out.part("api")?;
    let duration = DURATION_MS.to_string();
    let mut api = Proc::python(
        &api_ns,
        "microburst api",
        &script,
        &[
            "api",
            CACHE,
            CACHE_PORT,
            API,
            API_PERIOD_US,
            &duration,
            &api_part,
        ],
    )?;
    api.wait_success(Duration::from_millis(DURATION_MS + 10_000))?;
    cache_proc.wait_success(Duration::from_secs(5))?;
    drop(db);
    let capture = capture.stop("cache")?;
    let api_capture = api_capture.stop("api")?;
    let shaper = qdisc_counts(&far, &far_end.iface)?;
    let (cache_truth, api_truth) = (read_part(&cache_part)?, read_part(&api_part)?);
    let mut t = truth(capture, &far_end.iface, cache_truth, api_truth);
    t["link"]["shaper_counts"] = shaper;
    t["extra_captures"] = json!([api_capture]);
    Ok(t)
}

fn truth(capture: Value, shaped_iface: &str, cache: Value, api: Value) -> Value {
    let bursts = cache["bursts"].as_array().cloned().unwrap_or_default();
    let requests = api["requests"].as_array().cloned().unwrap_or_default();
    let slow: Vec<i64> = api["slow_seqs"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    let slow_during_burst = slow
        .iter()
        .filter(|&&seq| {
            let Some(r) = usize::try_from(seq).ok().and_then(|i| requests.get(i)) else {
                return false;
            };
            let (send, reply) = (r["send_ns"].as_i64(), r["reply_ns"].as_i64());
            let (Some(send), Some(reply)) = (send, reply) else {
                return false;
            };
            bursts.iter().any(|b| {
                let (start, end) = (b["request_ns"].as_i64(), b["end_ns"].as_i64());
                matches!((start, end), (Some(s), Some(e)) if send <= e && reply >= s)
            })
        })
        .count();
    let latencies = requests
        .iter()
        .filter_map(|r| r["latency_ns"].as_i64())
        .collect();
    json!({
        "capture": capture,
        "link": {
            "rate_bps": RATE_BPS,
            "shaper": format!("tbf {}", SHAPER.join(" ")),
            "shaped_iface": shaped_iface,
            "direction": "far -> cache",
        },
        "cache": format!("{CACHE}:{CACHE_PORT}"),
        "cache_pid": cache["cache_pid"],
        "api_pid": api["api_pid"],
        "db_flows": cache["db_flows"],
        "api_flow": api["api_flow"],
        "reply_bytes_per_db": cache["reply_bytes_per_db"],
        "burst_interval_ns": cache["burst_interval_ns"],
        "bursts": bursts,
        "api_period_ns": api["period_ns"],
        "api_requests": requests,
        "api_unanswered": api["unanswered"],
        "median_latency_ns": median(latencies),
        "slow_threshold_ns": api["slow_threshold_ns"],
        "slow_seqs": slow,
        "slow_during_burst": slow_during_burst,
    })
}
