//! Each capture scenario generates a pcap tshark can read and a truth holding the planted
//! event, and leaves no namespace behind. Needs root (CI has it); skips with a reason otherwise.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;
use tailhunt_lab::scenario::{generate, CaptureScenario, GeneratedCapture};
use tailhunt_netlab::netns::is_root;

/// One scenario at a time: on a 2-core machine, scenarios running side by side starve each
/// other's Python programs and the link emulator, and the timings they plant get noisy.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Generates `s` into a fresh directory, or None (with the reason printed) when not root.
fn generated(s: CaptureScenario) -> Option<GeneratedCapture> {
    if !is_root() {
        eprintln!("skipped: capture scenarios need root (network namespaces, tcpdump)");
        return None;
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("scenario-{}", s.name()));
    let _ = std::fs::remove_dir_all(&dir);
    let g = generate(s, &dir).unwrap_or_else(|e| panic!("{}: {e}", s.name()));
    assert_no_namespace_left(s);
    assert!(g.pcap.exists(), "{} missing", g.pcap.display());
    let text = std::fs::read_to_string(&g.truth_path).unwrap();
    let reread: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        reread, g.truth,
        "truth file differs from the returned truth"
    );
    assert_eq!(g.truth["scenario"], s.name());
    assert_eq!(g.truth["capture"]["packets_dropped_by_kernel"], 0);
    Some(g)
}

/// The namespaces `s` creates (`th-<role>-<pid>-<n>`, this test process's pid) are all gone:
/// a scenario removes its own before `generate` returns, so any left over is a leak. (Other
/// scenarios may be running beside it, so only its own roles are checked.)
fn assert_no_namespace_left(s: CaptureScenario) {
    let roles: &[&str] = match s {
        CaptureScenario::Microburst => &["mb-cache", "mb-far", "mb-api"],
        CaptureScenario::Nagle => &["nagle-cli", "nagle-srv"],
        CaptureScenario::ClientTimeout => &["to-cli", "to-srv"],
        CaptureScenario::SmallRcvbuf | CaptureScenario::CleanBulk => {
            &["bulk-cli", "bulk-gw", "bulk-srv"]
        }
    };
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    let pid = std::process::id();
    for role in roles {
        let prefix = format!("th-{role}-{pid}-");
        assert!(!list.contains(&prefix), "{prefix}* left behind: {list}");
    }
}

/// `tshark -r PCAP -Y FILTER -T fields -e ...`: one Vec of fields per packet.
fn tshark(g: &GeneratedCapture, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut c = Command::new("tshark");
    c.arg("-r")
        .arg(&g.pcap)
        .args(["-Y", filter, "-T", "fields"]);
    for f in fields {
        c.args(["-e", f]);
    }
    let out = c.output().expect("tshark runs (apt-get install tshark)");
    assert!(
        out.status.success(),
        "tshark -r {}: {}",
        g.pcap.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

fn epoch_ns(field: &str) -> i64 {
    let (s, frac) = field.split_once('.').unwrap_or((field, "0"));
    let frac = format!("{frac:0<9}");
    s.parse::<i64>().unwrap() * 1_000_000_000 + frac[..9].parse::<i64>().unwrap()
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

#[test]
fn nagle_body_leaves_a_delayed_ack_after_the_header_root() {
    let Some(g) = generated(CaptureScenario::Nagle) else {
        return;
    };
    let t = &g.truth;
    assert_eq!(t["client_nodelay"], false);
    assert_eq!(t["server_nodelay"], false);
    let reqs = t["requests"].as_array().unwrap();
    assert!(reqs.len() >= 55, "only {} requests", reqs.len());
    let med = int(&t["median_latency_ns"]);
    assert!((30_000_000..=60_000_000).contains(&med), "median {med} ns");
    // In the capture: each 20-byte header is followed by its 80-byte body ~40 ms later.
    let client = t["flow"]["client"].as_str().unwrap();
    let (addr, port) = client.split_once(':').unwrap();
    let filter = format!("ip.src=={addr} && tcp.srcport=={port} && tcp.len>0");
    let segs = tshark(&g, &filter, &["frame.time_epoch", "tcp.len"]);
    let mut gaps = Vec::new();
    for w in segs.windows(2) {
        if w[0][1] == "20" && w[1][1] == "80" {
            gaps.push(epoch_ns(&w[1][0]) - epoch_ns(&w[0][0]));
        }
    }
    assert!(
        gaps.len() >= 40,
        "{} header/body pairs: {segs:?}",
        gaps.len()
    );
    let gap = median(gaps);
    assert!(
        (30_000_000..=60_000_000).contains(&gap),
        "body held {gap} ns"
    );
    // The truth's stall agrees with the capture within a few ms.
    let stall = int(&t["median_body_stall_ns"]);
    assert!(
        (stall - gap).abs() < 5_000_000,
        "truth {stall} vs capture {gap}"
    );
}

#[test]
fn microburst_slow_api_requests_wait_behind_bursts_root() {
    let Some(g) = generated(CaptureScenario::Microburst) else {
        return;
    };
    let t = &g.truth;
    let bursts = t["bursts"].as_array().unwrap();
    assert!(bursts.len() >= 10, "{} bursts", bursts.len());
    for b in bursts {
        let len = int(&b["end_ns"]) - int(&b["start_ns"]);
        // 480 kB at 100 Mbit/s is 38 ms on the wire.
        assert!(
            (10_000_000..300_000_000).contains(&len),
            "burst of {len} ns"
        );
        assert_eq!(b["per_db"].as_array().unwrap().len(), 4);
    }
    assert_eq!(t["api_unanswered"], 0);
    assert_eq!(
        t["link"]["shaper_counts"]["dropped_packets"], 0,
        "bursts must delay, not drop"
    );
    let slow = t["slow_seqs"].as_array().unwrap();
    let during = int(&t["slow_during_burst"]);
    assert!(slow.len() >= 10, "{} slow api requests", slow.len());
    assert!(
        during * 10 >= slow.len() as i64 * 8,
        "{during} of {} slow in bursts",
        slow.len()
    );
    // The capture holds the db replies and the api requests.
    let db = t["db_flows"][0]["server"].as_str().unwrap();
    let (addr, port) = db.split_once(':').unwrap();
    let db_bytes: i64 = tshark(
        &g,
        &format!("ip.src=={addr} && tcp.srcport=={port}"),
        &["tcp.len"],
    )
    .iter()
    .map(|f| f[0].parse::<i64>().unwrap_or(0))
    .sum();
    let want = int(&t["reply_bytes_per_db"]) * bursts.len() as i64;
    assert!(
        db_bytes >= want,
        "{db_bytes} bytes from {db}, truth says {want}"
    );
}

#[test]
fn client_timeout_closes_after_two_seconds_and_resets_follow_root() {
    let Some(g) = generated(CaptureScenario::ClientTimeout) else {
        return;
    };
    let t = &g.truth;
    let waited = int(&t["close_ns"]) - int(&t["request_ns"]);
    let timeout = int(&t["timeout_ns"]);
    assert_eq!(timeout, 2_000_000_000);
    assert!(
        (timeout..timeout + 300_000_000).contains(&waited),
        "closed after {waited} ns"
    );
    assert!(int(&t["bytes_received"]) < int(&t["bytes_requested"]));
    assert!(t["server"]["send_error"].is_string(), "{}", t["server"]);
    assert_eq!(t["link"]["shaper_counts"]["dropped_packets"], 0);
    let client = t["flow"]["client"].as_str().unwrap();
    let (addr, port) = client.split_once(':').unwrap();
    let resets = tshark(
        &g,
        &format!("ip.src=={addr} && tcp.srcport=={port} && tcp.flags.reset==1"),
        &["frame.time_epoch"],
    );
    assert!(!resets.is_empty(), "no reset from the client");
    assert!(epoch_ns(&resets[0][0]) >= int(&t["close_ns"]) - 1_000_000);
}

#[test]
fn small_rcvbuf_download_is_slower_than_autotuned_root() {
    let Some(small) = generated(CaptureScenario::SmallRcvbuf) else {
        return;
    };
    let Some(clean) = generated(CaptureScenario::CleanBulk) else {
        return;
    };
    let (s, c) = (&small.truth, &clean.truth);
    assert_eq!(s["rcvbuf_requested"], 65536);
    assert!(c["rcvbuf_requested"].is_null());
    for t in [s, c] {
        assert_eq!(t["bytes_received"], t["bytes"]);
        assert_eq!(t["capture"]["snaplen"], 128);
        assert_eq!(t["extra_captures"][0]["host"], "server");
        assert_eq!(t["extra_captures"][0]["packets_dropped_by_kernel"], 0);
    }
    // About rwnd/RTT: 64 kB per 80 ms is 0.8 MB/s, against ~10 MB/s with autotuning.
    let (ts, tc) = (int(&s["transfer_ns"]), int(&c["transfer_ns"]));
    assert!(ts > 2 * tc, "small-rcvbuf {ts} ns vs clean {tc} ns");
    let rtt = int(&s["link"]["rtt_ns"]);
    let bytes = int(&s["bytes"]);
    let rate = bytes as f64 / (ts as f64 / 1e9);
    assert!(rate < 2.0 * 131072.0 / (rtt as f64 / 1e9), "{rate} B/s");
    // The healthy exchanges of clean-bulk take about one round trip each.
    let rr: Vec<i64> = c["rr_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| int(&r["latency_ns"]))
        .collect();
    assert_eq!(rr.len(), 20);
    assert!(rr.iter().all(|&l| l >= rtt), "{rr:?} faster than the path");
    let m = median(rr.clone());
    assert!(m < rtt + 20_000_000, "median exchange {m} ns: {rr:?}");
    // The client's advertised window stays near 64 kB in the small-rcvbuf capture.
    let client = s["flow"]["client"].as_str().unwrap();
    let (addr, port) = client.split_once(':').unwrap();
    let wins = tshark(
        &small,
        &format!("ip.src=={addr} && tcp.srcport=={port}"),
        &["tcp.window_size"],
    );
    let max = wins.iter().filter_map(|w| w[0].parse::<i64>().ok()).max();
    assert!(
        max.is_some_and(|m| m <= 131072),
        "max advertised window {max:?}"
    );
}

#[test]
fn unwritable_output_directory_is_named_in_the_error() {
    let dir = std::path::Path::new("/proc/tailhunt-no-such-dir");
    let e = generate(CaptureScenario::Nagle, dir)
        .unwrap_err()
        .to_string();
    assert!(e.contains("/proc/tailhunt-no-such-dir"), "{e}");
    assert!(e.contains("writable output directory"), "{e}");
}

#[test]
fn failed_generation_leaves_no_namespace_root() {
    if !is_root() {
        eprintln!("skipped: capture scenarios need root (network namespaces, tcpdump)");
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A directory where the pcap should go: tcpdump cannot write it, after the namespaces
    // and links are built.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scenario-fails");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("nagle.pcap")).unwrap();
    let e = generate(CaptureScenario::Nagle, &dir)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tcpdump"), "{e}");
    assert_no_namespace_left(CaptureScenario::Nagle);
}
