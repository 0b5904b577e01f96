//! The ground-truth generator end to end: cases plant what they say (checked against the traffic
//! programs' own records, never against tailhunt's analysis), tailhunt's documents come back for
//! every view, and nothing the cases created is left behind. The timeout tests also hold the
//! `application-timeout` detector to its cases (issue 13, item 2).
//!
//! Needs root and a built `tailhunt` (`target/release/tailhunt`, or `$TAILHUNT_BIN`); skips with
//! the reason otherwise. The quick matrix against the detectors' targets is
//! `quick_matrix_meets_the_detector_targets_root` (also `bench/detectors.sh --assert`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;
use tailhunt_lab::truth::{matrix, run_case, Case, Scale, Tools};
use tailhunt_netlab::netns::is_root;

/// One case at a time: they share CPU 0, the subnets and the machine's patience.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn tailhunt() -> PathBuf {
    std::env::var_os("TAILHUNT_BIN").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/release/tailhunt"
            ))
        },
        PathBuf::from,
    )
}

/// The tools, or None (with the reason printed) when the test cannot run here.
fn tools(test: &str) -> Option<Tools> {
    if !is_root() {
        eprintln!("skipping {test}: the cases need root (namespaces, tc, tcpdump, cgroups)");
        return None;
    }
    let bin = tailhunt();
    if !bin.is_file() {
        eprintln!(
            "skipping {test}: no tailhunt at {} (cargo build --release -p tailhunt)",
            bin.display()
        );
        return None;
    }
    Some(Tools {
        tailhunt: bin,
        worker: Some(PathBuf::from(env!("CARGO_BIN_EXE_tailhunt-truth"))),
    })
}

fn case(name: &str) -> Case {
    matrix(Scale::Full, 1)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

fn out_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("truth")
}

/// Namespaces and cgroups this process created (their names carry its pid).
fn leftovers() -> Vec<String> {
    let pid = std::process::id().to_string();
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let mut left: Vec<String> = String::from_utf8_lossy(&ns.stdout)
        .lines()
        .filter(|l| l.contains(&format!("-{pid}-")))
        .map(str::to_string)
        .collect();
    for root in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpu"] {
        if let Ok(d) = std::fs::read_dir(root) {
            left.extend(
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| {
                        n.starts_with("tailhunt-truth-") && n.ends_with(&format!("-{pid}"))
                    }),
            );
        }
    }
    left
}

#[test]
fn a_pinned_receive_buffer_holds_the_download_at_window_over_rtt_root() {
    let Some(tools) = tools("a_pinned_receive_buffer_holds_the_download_at_window_over_rtt_root")
    else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run_case(
        &case("window-rcvbuf64k-rtt80ms-100mbit"),
        &tools,
        &out_dir(),
    )
    .unwrap();
    assert!(leftovers().is_empty(), "left behind: {:?}", leftovers());
    let t = &r.truth;
    assert_eq!(t.planted.len(), 1, "{:#?}", t.planted);
    assert_eq!(t.planted[0].detector, "receive-window-limited");
    // The cause took effect, by the client's own measurement: throughput at window/RTT.
    let (got, bound) = (
        t.facts["throughput_bps"].as_f64().unwrap(),
        t.facts["window_bound_bps"].as_f64().unwrap(),
    );
    assert!(
        (got / bound - 1.0).abs() < 0.25,
        "throughput {got} against window/RTT {bound}"
    );
    let views: Vec<&str> = r.outputs.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(views, ["receiver", "sender", "tcp_info"]);
    for (v, doc) in &r.outputs {
        assert!(doc["findings"].is_array(), "{v}: no findings array");
    }
    let dir = out_dir().join("window-rcvbuf64k-rtt80ms-100mbit");
    for f in [
        "truth.json",
        "score.json",
        "receiver.pcap",
        "sender.pcap",
        "receiver.json",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let again: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    assert_eq!(again["planted"][0]["unit"]["server"], "198.18.31.2:7400");
}

#[test]
fn an_abandoned_download_is_closed_with_data_queued_root() {
    let Some(tools) = tools("an_abandoned_download_is_closed_with_data_queued_root") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let c = matrix(Scale::Quick, 1)
        .into_iter()
        .find(|c| c.name.starts_with("timeout-rst-"))
        .unwrap();
    let r = run_case(&c, &tools, &out_dir()).unwrap();
    assert!(leftovers().is_empty(), "left behind: {:?}", leftovers());
    let client = &r.truth.programs["programs"]["client"];
    // Unread bytes at the close are what make the kernel reset instead of FIN.
    assert!(
        client["unread_bytes_at_close"].as_u64().unwrap() > 0,
        "{client}"
    );
    let took =
        client["close_wall_ns"].as_i64().unwrap() - client["request_wall_ns"].as_i64().unwrap();
    let timeout = client["timeout_ns"].as_i64().unwrap();
    assert!(
        (took - timeout).abs() < 100_000_000,
        "closed {took} ns after the request, timeout {timeout}"
    );
    assert_eq!(r.truth.planted[0].detector, "application-timeout");
}

/// The other RST: a client that aborts (SO_LINGER 0) at its timeout on a server still thinking.
/// By the client's own record not one response byte came, and it closed at its timeout.
#[test]
fn an_aborting_client_gives_up_before_the_slow_server_answers_root() {
    let Some(tools) = tools("an_aborting_client_gives_up_before_the_slow_server_answers_root")
    else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run_case(&case("timeout-server-slow-abort-1s"), &tools, &out_dir()).unwrap();
    assert!(leftovers().is_empty(), "left behind: {:?}", leftovers());
    let client = &r.truth.programs["programs"]["client"];
    assert_eq!(client["ending"], "abort", "{client}");
    assert_eq!(client["bytes_read"].as_u64(), Some(0), "{client}");
    let took =
        client["close_wall_ns"].as_i64().unwrap() - client["request_wall_ns"].as_i64().unwrap();
    assert!(
        (took - 1_000_000_000).abs() < 100_000_000,
        "closed {took} ns after the request"
    );
    assert_eq!(
        r.truth.facts["response_bytes_before_close"].as_u64(),
        Some(0)
    );
    assert_eq!(r.truth.planted[0].detector, "application-timeout");
}

/// Issue 13, item 2, on real traffic: a timeout closed with a single RST and nothing after it
/// is found in both captures, and explained as a server slower than the timeout; the response
/// still arriving at a reset download is explained as a slow transfer. No explanation
/// contradicts the clients' own records.
#[test]
fn timeouts_closed_with_resets_are_found_and_told_apart_root() {
    let Some(tools) = tools("timeouts_closed_with_resets_are_found_and_told_apart_root") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (name, says) in [
        ("timeout-server-slow-abort-1s", "no response byte"),
        ("timeout-rst-1s", "still arriving"),
    ] {
        let r = run_case(&case(name), &tools, &out_dir()).unwrap();
        assert!(leftovers().is_empty(), "left behind: {:?}", leftovers());
        let counts = &r.score.counts["application-timeout"];
        assert_eq!(
            (counts.tp, counts.fp, counts.fn_),
            (2, 0, 0),
            "{name}: {:#?}",
            r.score
        );
        for o in &r.score.outcomes {
            assert!(
                o.contradictions.is_empty(),
                "{name}: {:?}",
                o.contradictions
            );
        }
        for view in ["client", "server"] {
            let (_, doc) = r.outputs.iter().find(|(v, _)| v == view).unwrap();
            let summaries: Vec<&str> = doc["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["detector"] == "application-timeout")
                .filter_map(|f| f["summary"].as_str())
                .collect();
            assert!(
                summaries.len() == 1 && summaries[0].contains(says),
                "{name} {view}: {summaries:?}"
            );
        }
    }
    // Its twin, answered in 300 ms and reset at the timeout all the same: nothing.
    let r = run_case(
        &case("timeout-server-slow-abort-2s-twin"),
        &tools,
        &out_dir(),
    )
    .unwrap();
    assert!(
        r.score.twin_failures.is_empty(),
        "{:?}",
        r.score.twin_failures
    );
    for (view, doc) in &r.outputs {
        let any = doc["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["detector"] == "application-timeout"));
        assert!(!any, "twin, {view}: {:#}", doc["findings"]);
    }
}

/// The counts of `detector` on `view` of a scored case (zero when it had no outcome there).
fn counts_of(r: &tailhunt_lab::truth::CaseResult, view: &str, detector: &str) -> (u32, u32, u32) {
    r.score
        .outcomes
        .iter()
        .find(|o| o.view == view && o.detector == detector)
        .map_or((0, 0, 0), |o| (o.counts.tp, o.counts.fp, o.counts.fn_))
}

/// Issue 13, item 1, on real traffic: a pinned receive buffer behind a queue that filled
/// after the handshake is named from the receiver's capture (the sender's round trip from
/// the timestamp echoes, not the handshake's sub-millisecond legs) and from the client's own
/// TCP_INFO; the autotuned twin through the same queue is not.
#[test]
fn a_window_behind_a_queue_is_named_from_the_receiver_root() {
    let Some(tools) = tools("a_window_behind_a_queue_is_named_from_the_receiver_root") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let named_everywhere = |r: &tailhunt_lab::truth::CaseResult| {
        ["receiver", "sender", "tcp_info"]
            .iter()
            .all(|v| counts_of(r, v, "receive-window-limited") == (1, 0, 0))
    };
    let mut r = run_case(
        &case("window-rcvbuf64k-shared-queue-50mbit"),
        &tools,
        &out_dir(),
    )
    .unwrap();
    // The receiver's view reads the sender's round trip from the echoes of a queue that a busy
    // host drains unevenly (seen once in `make test` right after the workspace build, never in
    // four runs alone): a miss is printed and the case run once more.
    if !named_everywhere(&r) {
        eprintln!(
            "window behind a queue: not named in every view on the first run ({:?}); running it again",
            r.score.outcomes.iter().map(|o| (&o.view, &o.counts)).collect::<Vec<_>>()
        );
        r = run_case(
            &case("window-rcvbuf64k-shared-queue-50mbit"),
            &tools,
            &out_dir(),
        )
        .unwrap();
    }
    assert!(leftovers().is_empty(), "left behind: {:?}", leftovers());
    for view in ["receiver", "sender", "tcp_info"] {
        assert_eq!(
            counts_of(&r, view, "receive-window-limited"),
            (1, 0, 0),
            "{view}: {:#?}",
            r.score.outcomes
        );
    }
    let receiver = &r.outputs.iter().find(|(v, _)| v == "receiver").unwrap().1;
    let flow = receiver["report"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["server"].as_str().unwrap().ends_with(":7400"))
        .unwrap();
    let tcp = &flow["tcp"];
    // The handshake crossed the empty queue; the echoes saw it full.
    let handshake = tcp["handshake"]["server_leg_ns"].as_i64().unwrap();
    let sender_leg = tcp["sender_rtt"]["sender_leg_ns"].as_i64().unwrap();
    assert!(handshake < 5_000_000, "{tcp:#}");
    assert!(sender_leg > 20 * handshake.max(1_000_000), "{tcp:#}");
    assert_eq!(tcp["sender_rtt"]["sender_leg_from"], "timestamps");
    let twin = run_case(
        &case("window-autotuned-shared-queue-50mbit"),
        &tools,
        &out_dir(),
    )
    .unwrap();
    assert!(
        twin.score.twin_failures.is_empty(),
        "{:?}",
        twin.score.twin_failures
    );
}

/// A client that gave up has no sender's trailer: its own TCP_INFO (the window it advertised,
/// its estimate of the sender's round trip) still names the window, and the timeout at
/// window/RTT.
#[test]
fn a_client_that_gave_up_names_its_window_and_its_timeout_root() {
    let Some(tools) = tools("a_client_that_gave_up_names_its_window_and_its_timeout_root") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run_case(
        &case("window-rcvbuf64k-rtt80ms-100mbit-timeout2s"),
        &tools,
        &out_dir(),
    )
    .unwrap();
    assert!(leftovers().is_empty(), "left behind: {:?}", leftovers());
    assert_eq!(r.truth.facts["timed_out"], true);
    for detector in ["receive-window-limited", "application-timeout"] {
        assert_eq!(
            counts_of(&r, "tcp_info", detector),
            (1, 0, 0),
            "{detector}: {:#?}",
            r.score.outcomes
        );
    }
    let doc = &r.outputs.iter().find(|(v, _)| v == "tcp_info").unwrap().1;
    assert_eq!(doc["rtt_from"], "receiver", "{doc:#}");
}

#[test]
fn a_hungry_neighbour_slows_the_sleeper_by_its_own_account_root() {
    let Some(tools) = tools("a_hungry_neighbour_slows_the_sleeper_by_its_own_account_root") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The host's own load can spoil the calm part; the planted effect must show in one of three.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let r = run_case(&case("runq-neighbour-unequal"), &tools, &out_dir()).unwrap();
        assert!(leftovers().is_empty(), "left behind: {:?}", leftovers());
        assert_eq!(r.truth.takers.len(), 1);
        let f = &r.truth.facts;
        let calm = f["victim_late_p99_calm_median_ns"]
            .as_f64()
            .unwrap_or(f64::MAX);
        let hot = f["victim_late_p99_after_onset_median_ns"]
            .as_f64()
            .unwrap_or(0.0);
        if hot >= 5.0 * calm && hot >= 1e6 {
            return;
        }
        seen.push((calm, hot));
    }
    panic!("the sleeper's own lateness p99 (calm, with the hogs) never rose 5x: {seen:?}");
}

/// The detectors against their targets on the quick matrix (issue 13): precision and recall
/// of every detector at least 0.9 and no healthy twin with a finding at medium confidence or
/// above. This host is shared: a matrix that misses is run once more, and the first run's
/// report is printed, so a retry shows; a detector that misses twice fails the test.
#[test]
fn quick_matrix_meets_the_detector_targets_root() {
    let Some(tools) = tools("quick_matrix_meets_the_detector_targets_root") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut reports = Vec::new();
    for attempt in 1..=2 {
        let out = Command::new(env!("CARGO_BIN_EXE_tailhunt-truth"))
            .args(["matrix", "--seed", "1", "--assert", "0.9", "--tailhunt"])
            .arg(&tools.tailhunt)
            .arg("--out")
            .arg(out_dir().join(format!("quick-{attempt}")))
            .output()
            .unwrap();
        assert!(leftovers().is_empty(), "left behind: {:?}", leftovers());
        let report = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            if attempt > 1 {
                eprintln!("quick matrix: attempt 1 missed, attempt {attempt} met the targets; attempt 1:\n{}", reports.join("\n"));
            }
            return;
        }
        reports.push(report);
    }
    panic!(
        "the quick matrix missed the targets twice:\n{}",
        reports.join("\n---- retry ----\n")
    );
}
