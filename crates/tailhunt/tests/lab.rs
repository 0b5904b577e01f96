//! `tailhunt lab list | run | clean` end to end: every scenario at quick scale through the real
//! binary, read from `--json`; and a `lab run` killed with SIGKILL mid-scenario, then `lab
//! clean`, leaving nothing of the lab behind. The run tests need root (namespaces, cgroups,
//! BPF) and skip with a message otherwise.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{check_schema, is_root, Env};
use serde_json::Value;

/// The root tests measure: one at a time, so they do not slow each other down.
static SERIAL: Mutex<()> = Mutex::new(());

/// Root-cause detectors (the findings that count as causes), as the scoring names them, and
/// the probe detectors of the cold-path scenario.
use tailhunt_lab::method::PROBE_DETECTORS;
use tailhunt_lab::truth::score::DETECTORS as CAUSES;

#[test]
fn lab_list_names_every_scenario_with_its_cause_fix_and_needs() {
    let env = Env::new();
    let doc = env.json("lab-list", &["lab", "list"]);
    let names: Vec<&str> = doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    for want in [
        "microburst",
        "nagle",
        "rcvbuf",
        "noisy-neighbor",
        "noisy-neighbor-system-service",
        "noisy-neighbor-cpu-quota",
        "cold-path",
        "healthy",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let text = env.ok(&["lab", "list"]);
    assert!(text.contains("fix:") && text.contains("needs:"), "{text}");
}

#[test]
fn lab_run_of_an_unknown_scenario_is_a_usage_error() {
    let env = Env::new();
    let err = env.fails(&["lab", "run", "nagel"]);
    assert!(
        err.contains("no scenario 'nagel'") && err.contains("lab list"),
        "{err}"
    );
}

/// Runs `lab run NAMES --json`; returns the exit code and the document (schema-checked).
fn lab_run(env: &Env, names: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec!["--json", "lab", "run"];
    args.extend_from_slice(names);
    let out = env.run(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "lab run printed no JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    check_schema("lab-run", &doc);
    (out.status.code(), doc)
}

/// Checks one scenario's row on its own terms, not only its verdict.
fn check_row(row: &Value) {
    let name = row["scenario"].as_str().unwrap();
    assert_eq!(row["verdict"]["status"], "pass", "{name}: {row:#}");
    check_findings(row);
}

/// Checks what a scenario found and what its fix did, whatever its verdict: no unplanted
/// cause at medium confidence or above, a planted cause on top, and the fix's figure halved.
fn check_findings(row: &Value) {
    let name = row["scenario"].as_str().unwrap();
    let planted: Vec<&str> = row["planted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let strong = |f: &Value| {
        let d = f["detector"].as_str().unwrap();
        f["confidence"].as_f64().unwrap() >= 0.5
            && (CAUSES.contains(&d) || PROBE_DETECTORS.contains(&d))
    };
    let mut all: Vec<&Value> = row["top"]
        .as_object()
        .map(|_| &row["top"])
        .into_iter()
        .collect();
    all.extend(row["others"].as_array().unwrap());
    for f in all.iter().filter(|f| strong(f)) {
        let d = f["detector"].as_str().unwrap();
        assert!(
            planted.contains(&d),
            "{name}: unplanted {d} at medium or above: {row:#}"
        );
    }
    if planted.is_empty() {
        return;
    }
    let top = row["top"]["detector"].as_str().unwrap_or("none");
    assert!(planted.contains(&top), "{name}: top finding {top}: {row:#}");
    let (before, after) = (
        row["figure"]["before"].as_f64().unwrap(),
        row["figure"]["after"].as_f64().unwrap(),
    );
    assert!(
        after < before / 2.0,
        "{name}: the fix took {before} to {after}"
    );
}

/// How often a scenario reported inconclusive (host too noisy) is run again: the machine is
/// shared, and a calm baseline spoiled twice in a row happens while other work runs.
const MAX_RETRIES: u32 = 2;

/// What cold-path says when its healthy twins moved during the run (`twins_moved` in
/// `crates/lab/src/method/coldpath.rs`).
const TWINS_MOVED: &str = "a healthy twin moved too";

/// Runs the scenarios, then again (up to [`MAX_RETRIES`] times) each one that came out
/// inconclusive (the retries show in the test's output), and checks every row.
fn run_and_check(names: &[&str]) {
    let env = Env::new();
    let (code, doc) = lab_run(&env, names);
    let rows = doc["scenarios"].as_array().unwrap().clone();
    assert_eq!(rows.len(), names.len(), "{doc:#}");
    // The report beside the store draws every run of the first `lab run`, each scenario's
    // before against its after
    // (checked now: a retry below writes its own).
    let report = doc["report"]
        .as_str()
        .unwrap_or_else(|| panic!("no report: {doc:#}"));
    assert_eq!(Path::new(report), env.path("t-lab-report.html"));
    let html = std::fs::read_to_string(report).expect("the lab's report");
    for row in &rows {
        for r in row["runs"].as_array().unwrap() {
            let id = r["id"].as_str().unwrap();
            assert!(
                html.contains(&format!("id=\"run-{id}\"")),
                "run {id} is not in the report"
            );
        }
    }
    if names.contains(&"nagle") {
        assert!(
            html.contains("Latency against offered rate: load runs of nagle"),
            "no before/after sweep comparison for nagle in the report"
        );
    }
    let mut all_passed = true;
    for row in &rows {
        let name = row["scenario"].as_str().unwrap();
        eprintln!("{name}: {}", row["verdict"]);
        let mut row = row.clone();
        for retry in 1..=MAX_RETRIES {
            if row["verdict"]["status"] != "inconclusive" {
                break;
            }
            eprintln!(
                "{name}: inconclusive ({}); retry {retry} of {MAX_RETRIES}",
                row["verdict"]["why"]
            );
            let (_, again) = lab_run(&env, &[name]);
            row = again["scenarios"][0].clone();
            eprintln!("{name} (retry {retry}): {}", row["verdict"]);
        }
        all_passed &= row["verdict"]["status"] == "pass";
        let why = row["verdict"]["why"].as_str().unwrap_or("");
        if row["verdict"]["status"] == "inconclusive" && why.starts_with(TWINS_MOVED) {
            // The host moved under the probes where nothing was planted in every run (CI runs
            // of 2026-12-01 saw this four times in a row, the twins' p99 stepping 3.9 ->
            // 10.1 ms and 5.7 -> 3.1 ms): the scenario rightly gives no verdict, so what it
            // found and what the fix did are checked without one.
            eprintln!(
                "{name}: inconclusive after {MAX_RETRIES} retries ({why}): checking its \
                 findings and its fix's figure, not its verdict"
            );
            check_findings(&row);
        } else {
            check_row(&row);
        }
    }
    if all_passed && rows.iter().all(|r| r["verdict"]["status"] == "pass") {
        assert_eq!(code, Some(0), "every scenario passed, so exit 0");
    } else {
        assert_eq!(code, Some(1));
    }
    // Every run is in the store, tagged with its scenario.
    let runs = env.json("runs", &["runs"]);
    for name in names {
        let tagged = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["params"]["tag"] == *name)
            .count();
        assert!(tagged >= 1, "no run tagged {name}");
    }
}

#[test]
fn lab_run_network_scenarios_root() {
    if !is_root() {
        eprintln!("skipped: lab run needs root (network namespaces, the link emulator)");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run_and_check(&["microburst", "nagle", "rcvbuf", "healthy"]);
}

/// The cold paths and traps of root cause #5: each planted cause found about the probe it was
/// planted on (the twins stay silent), and the caching resolver cuts the lookup's cost.
#[test]
fn lab_run_cold_path_root() {
    if !is_root() {
        eprintln!("skipped: lab run needs root (network namespaces, the link emulator)");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run_and_check(&["cold-path"]);
}

#[test]
fn lab_run_cpu_scenarios_root() {
    if !is_root() {
        eprintln!("skipped: lab run needs root (cgroups, BPF)");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run_and_check(&[
        "noisy-neighbor",
        "noisy-neighbor-system-service",
        "noisy-neighbor-cpu-quota",
    ]);
}

/// The lab's namespaces and cgroups of the run with pid `pid`.
fn leftovers(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    for l in String::from_utf8_lossy(&ns.stdout).lines() {
        let name = l.split_whitespace().next().unwrap_or("");
        if name.starts_with("th-") && name.contains(&format!("-{pid}-")) {
            out.push(format!("namespace {name}"));
        }
    }
    for root in [
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup/cpu",
        "/sys/fs/cgroup",
    ] {
        for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("tailhunt-") && n.ends_with(&format!("-{pid}")) {
                out.push(format!("cgroup {}", e.path().display()));
            }
        }
    }
    out
}

/// The processes a lab run noted in its state directory.
fn noted_processes(pid: u32) -> Vec<u32> {
    let dir = format!("/run/tailhunt-lab/{pid}/procs");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Whether `pid` runs (neither gone nor a zombie).
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, None | Some("Z") | Some("X"))
}

#[test]
fn lab_clean_removes_what_a_killed_run_left_root() {
    if !is_root() {
        eprintln!("skipped: lab run needs root");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    for (names, wait_for) in [
        (vec!["rcvbuf"], "namespace"),
        (vec!["noisy-neighbor"], "cgroup"),
    ] {
        let mut child = env
            .cmd()
            .args(["lab", "run"])
            .args(&names)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Mid-scenario: its objects exist and its programs run.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            seen = leftovers(pid);
            if seen.iter().any(|s| s.starts_with(wait_for)) && noted_processes(pid).len() >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(500));
        let procs = noted_processes(pid);
        assert!(
            !procs.is_empty() && !seen.is_empty(),
            "{names:?}: nothing started: {seen:?}"
        );
        child.kill().unwrap(); // SIGKILL: no guard runs
        child.wait().unwrap();
        assert!(
            !leftovers(pid).is_empty(),
            "a killed run leaves its objects"
        );
        let doc = env.json("lab-clean", &["lab", "clean"]);
        assert!(
            doc["runs"].as_array().unwrap().iter().any(|r| r == pid),
            "{doc:#}"
        );
        assert_eq!(leftovers(pid), Vec::<String>::new(), "{names:?}: {doc:#}");
        for p in procs {
            assert!(
                !alive(p),
                "{names:?}: process {p} of the killed run still runs"
            );
        }
        assert!(!std::path::Path::new(&format!("/run/tailhunt-lab/{pid}")).exists());
        // No TUN device of the emulator and no qdisc outlives the namespaces: TUN devices
        // live inside them (and close with the killed process), qdiscs on their veths.
        let tun = Command::new("ip")
            .args(["-o", "link", "show", "type", "tun"])
            .output()
            .unwrap();
        let tun = String::from_utf8_lossy(&tun.stdout);
        assert!(!tun.contains(&format!(": tl{pid}-")), "{tun}");
    }
    // Nothing left: a second clean has nothing to do.
    let doc = env.json("lab-clean", &["lab", "clean"]);
    assert_eq!(doc["namespaces"].as_array().unwrap().len(), 0, "{doc:#}");
}
