//! End-to-end tests of the real `tailhunt` binary on real SQLite files.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::Env;

#[test]
fn import_prints_the_run_id_and_runs_lists_it() {
    let env = Env::new();
    let csv = env.path("a.csv");
    std::fs::write(&csv, "12ms\n450us\n0.9ms\n").unwrap();
    let text = env.ok(&["import", csv.to_str().unwrap()]);
    let id = text
        .split_whitespace()
        .skip_while(|w| *w != "run")
        .nth(1)
        .unwrap()
        .to_string();
    assert_eq!(id.len(), 10, "{text}");
    let runs = env.json("runs", &["runs"]);
    assert_eq!(runs["runs"][0]["id"], id.as_str());
    assert_eq!(runs["runs"][0]["samples"], 3);
    assert_eq!(runs["runs"][0]["status"], "complete");
    let listing = env.ok(&["runs"]);
    assert!(
        listing.contains(&id) && listing.contains("a.csv"),
        "{listing}"
    );
}

#[test]
fn trimodal_set_gets_three_modes_and_a_p90_gap_warning() {
    let env = Env::new();
    let run = env.import(&env.trimodal("t.csv", 1, 0.0), &[]);
    let doc = env.json("analyze", &["analyze", &run]);
    let a = &doc["series"][0]["analysis"];
    let modes = a["modes"].as_array().unwrap();
    assert_eq!(modes.len(), 3, "{modes:#?}");
    for (m, (peak_ms, share)) in modes.iter().zip([(0.45, 0.88), (10.0, 0.08), (20.0, 0.04)]) {
        let got = m["share"].as_f64().unwrap();
        assert!((got - share).abs() <= 0.01, "share {got} vs {share}");
        let peak = m["peak_ns"].as_f64().unwrap() / 1e6;
        assert!(
            (peak / peak_ms - 1.0).abs() < 0.1,
            "peak {peak} ms vs {peak_ms}"
        );
    }
    let warnings = a["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0]["label"], "p90");
    // Every quantile has a 95% interval at this size, and it brackets the value.
    for q in a["summary"]["quantiles"].as_array().unwrap() {
        let (lo, v, hi) = (
            q["ci_low_ns"].as_u64().unwrap(),
            q["value_ns"].as_u64().unwrap(),
            q["ci_high_ns"].as_u64().unwrap(),
        );
        assert!(lo <= v && v <= hi, "{q}");
    }
    let text = env.ok(&["analyze", &run]);
    assert!(
        text.contains("warning: p90 = ")
            && text.contains("88.0% of samples are at or below the gap"),
        "{text}"
    );
}

#[test]
fn moving_two_percent_of_mass_flips_p90_and_the_report_says_why() {
    let env = Env::new();
    let before = env.import(&env.trimodal("b.csv", 1, 0.0), &[]);
    let after = env.import(&env.trimodal("a.csv", 2, 0.02), &[]);
    let doc = env.json("analyze", &["analyze", &after, "--compare", &before]);
    let p90_after = doc["series"][0]["analysis"]["summary"]["quantiles"][1]["value_ns"]
        .as_u64()
        .unwrap();
    assert!(
        p90_after < 1_000_000,
        "p90 fell into the fast mode: {p90_after}"
    );
    let c = &doc["comparison"]["comparison"];
    assert_eq!(c["same_modes"], true);
    let p90 = c["quantiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["label"] == "p90")
        .unwrap();
    assert!(p90["before_ns"].as_u64().unwrap() > 5_000_000);
    assert_eq!(p90["significant"], true);
    let why = p90["explanation"].as_str().unwrap();
    assert!(
        why.contains("no mode moved")
            && why.contains("88.0%")
            && why.contains("90.0%")
            && why.contains("+2.0 points"),
        "{why}"
    );
    // The shifted run on its own still warns that its p90 is on a knife edge.
    let w = doc["series"][0]["analysis"]["warnings"].as_array().unwrap();
    assert!(w.iter().any(|w| w["label"] == "p90"), "{w:#?}");
}

#[test]
fn expected_floor_reports_how_far_above_it_the_minimum_is() {
    let env = Env::new();
    let csv = env.path("slow.csv");
    let body: String = (0..500).map(|i| format!("{}us\n", 5000 + i)).collect();
    std::fs::write(&csv, body).unwrap();
    let run = env.import(&csv, &[]);
    let text = env.ok(&["analyze", &run, "--expect-floor", "450us"]);
    assert!(
        text.contains("minimum 5.00ms is 11.1x the expected floor 450us"),
        "{text}"
    );
    // The floor can come from another run too (a baseline of the path's round trip).
    let base = env.path("base.csv");
    std::fs::write(&base, "450us\n460us\n500us\n").unwrap();
    let base_run = env.import(&base, &[]);
    let doc = env.json("analyze", &["analyze", &run, "--floor-from", &base_run]);
    let floor = &doc["series"][0]["analysis"]["floor"];
    assert_eq!(floor["expected_ns"], 450_000);
    assert_eq!(floor["above_floor"], true);
}

#[test]
fn malformed_line_names_file_line_and_content() {
    let env = Env::new();
    let csv = env.path("bad.csv");
    std::fs::write(&csv, "1ms\n2ms\nfast\n4ms\n").unwrap();
    let err = env.fails(&["import", csv.to_str().unwrap()]);
    assert!(err.contains("bad.csv:3") && err.contains("'fast'"), "{err}");
}

#[test]
fn samples_before_a_bad_line_are_kept_as_a_partial_run() {
    let env = Env::new();
    let csv = env.path("half.csv");
    let mut body: String = (0..10_000)
        .map(|i| format!("{}us\n", 100 + i % 50))
        .collect();
    body.push_str("oops\n");
    std::fs::write(&csv, body).unwrap();
    let err = env.fails(&["import", csv.to_str().unwrap()]);
    assert!(
        err.contains("half.csv:10001")
            && err.contains("kept the 10000 samples")
            && err.contains("partial run"),
        "{err}"
    );
    let runs = env.json("runs", &["runs"]);
    assert_eq!(runs["runs"][0]["status"], "partial");
    assert_eq!(runs["runs"][0]["samples"], 10_000);
    let text = env.ok(&["analyze", "latest"]);
    assert!(text.contains("partial"), "{text}");
}

#[test]
fn empty_file_and_unknown_unit_are_one_line_errors() {
    let env = Env::new();
    let empty = env.path("empty.csv");
    std::fs::write(&empty, "# nothing here\n\n").unwrap();
    let err = env.fails(&["import", empty.to_str().unwrap()]);
    assert!(
        err.contains("empty.csv") && err.contains("no samples"),
        "{err}"
    );
    let weird = env.path("weird.csv");
    std::fs::write(&weird, "3 parsecs\n").unwrap();
    let err = env.fails(&["import", weird.to_str().unwrap()]);
    assert!(
        err.contains("weird.csv:1") && err.contains("parsecs"),
        "{err}"
    );
    let bare = env.path("bare.csv");
    std::fs::write(&bare, "3\n4\n").unwrap();
    let err = env.fails(&["import", bare.to_str().unwrap()]);
    assert!(err.contains("--unit"), "{err}");
    let err = env.fails(&["import", bare.to_str().unwrap(), "--unit", "fortnights"]);
    assert!(err.contains("fortnights"), "{err}");
    env.ok(&["import", bare.to_str().unwrap(), "--unit", "ms"]);
    // Failed imports leave no empty runs behind.
    assert_eq!(
        env.json("runs", &["runs"])["runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn missing_run_and_missing_store_are_one_line_errors() {
    let env = Env::new();
    let err = env.fails(&["analyze", "latest"]);
    assert!(err.contains("no store at") && err.contains("--db"), "{err}");
    env.import(&env.trimodal("t.csv", 1, 0.0), &[]);
    let err = env.fails(&["analyze", "deadbeef00"]);
    assert!(err.contains("no run matches 'deadbeef00'"), "{err}");
    let err = env.fails(&["analyze", "latest", "--series", "nope"]);
    assert!(
        err.contains("no series named nope") && err.contains("latency"),
        "{err}"
    );
    let err = env.fails(&["analyze", "latest", "--expect-floor", "soon"]);
    assert!(err.contains("--expect-floor"), "{err}");
    let missing = env.path("missing.csv");
    let err = env.fails(&["import", missing.to_str().unwrap()]);
    assert!(err.contains("missing.csv"), "{err}");
}

#[test]
fn unique_prefixes_and_the_db_environment_variable_work() {
    let env = Env::new();
    let run = env.import(&env.trimodal("t.csv", 1, 0.0), &[]);
    let out = std::process::Command::new(common::BIN)
        .env("TAILHUNT_DB", env.db())
        .args(["analyze", &run[..5], "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["run"]["id"], run.as_str());
}

/// Starts `import -` from a pipe and feeds it until the store shows committed samples, so the
/// import is certainly mid-write. Returns the child, its stdin, and the committed count.
fn import_until_committed(
    env: &Env,
) -> (std::process::Child, std::process::ChildStdin, u64, String) {
    let mut child = env
        .cmd()
        .args(["import", "-", "--unit", "us"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let chunk: String = (0..1000).map(|i| format!("{}\n", 400 + i % 300)).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut committed = 0;
    while committed == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "import never committed a block"
        );
        for _ in 0..100 {
            stdin.write_all(chunk.as_bytes()).unwrap();
        }
        if env.db().exists() {
            let conn = rusqlite::Connection::open(env.db()).unwrap();
            committed = conn
                .query_row("SELECT COALESCE(SUM(count), 0) FROM series", [], |r| {
                    r.get::<_, i64>(0)
                })
                .unwrap_or(0) as u64;
        }
    }
    (child, stdin, committed, chunk)
}

#[test]
fn kill_9_in_the_middle_of_an_import_leaves_a_sound_store_with_a_partial_run() {
    let env = Env::new();
    let (mut child, stdin, committed, _) = import_until_committed(&env);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    drop(stdin);
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    drop(conn);
    let runs = env.json("runs", &["runs"]);
    assert_eq!(runs["runs"][0]["status"], "partial");
    let kept = runs["runs"][0]["samples"].as_u64().unwrap();
    assert!(kept >= committed, "kept {kept} of {committed} committed");
    let doc = env.json("analyze", &["analyze", "latest"]);
    assert_eq!(
        doc["series"][0]["analysis"]["summary"]["count"]
            .as_u64()
            .unwrap(),
        kept
    );
}

#[test]
fn ctrl_c_stops_an_import_cleanly_keeping_a_partial_run() {
    let env = Env::new();
    let (child, mut stdin, committed, chunk) = import_until_committed(&env);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The import notices at its next read; feed it until it exits (the pipe then breaks).
    while stdin.write_all(chunk.as_bytes()).is_ok() {}
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("interrupted") && err.contains("partial run"),
        "{err}"
    );
    let runs = env.json("runs", &["runs"]);
    assert_eq!(runs["runs"][0]["status"], "partial");
    assert!(runs["runs"][0]["samples"].as_u64().unwrap() >= committed);
}

#[test]
fn a_closed_output_pipe_is_not_an_error() {
    let env = Env::new();
    let mut child = env
        .cmd()
        .args(["lab", "synth", "lognormal", "--count", "2000000"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut out, &mut first).unwrap();
    drop(out);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn exported_csv_and_hlog_import_back_to_the_same_distribution() {
    let env = Env::new();
    let csv = env.path("t.jsonl");
    let body: String = (0..20_000)
        .map(|i| {
            format!(
                "{{\"ts\": {}, \"latency_us\": {}, \"outcome\": \"{}\"}}\n",
                1_700_000_000.0 + i as f64 * 0.001,
                300 + (i * 7919) % 5000,
                if i % 500 == 0 { "timeout" } else { "ok" }
            )
        })
        .collect();
    std::fs::write(&csv, body).unwrap();
    let original = env.import(&csv, &[]);
    let p99 = |run: &str| {
        let d = env.json("analyze", &["analyze", run]);
        d["series"][0]["analysis"]["summary"]["quantiles"][2]["value_ns"]
            .as_f64()
            .unwrap()
    };
    let exported = env.path("out.csv");
    let w = env.json(
        "written",
        &["export", &original, "-o", exported.to_str().unwrap()],
    );
    assert_eq!(w["values"], 20_000);
    let again = env.import(&exported, &[]);
    assert_eq!(p99(&again), p99(&original));
    let doc = env.json("analyze", &["analyze", &again]);
    assert_eq!(
        doc["series"][0]["analysis"]["summary"]["outcomes"]["timeout"],
        40
    );
    assert_eq!(doc["series"][0]["series"]["timing"], "timed");

    let hlog = env.path("out.hlog");
    env.ok(&[
        "export",
        &original,
        "--format",
        "hlog",
        "-o",
        hlog.to_str().unwrap(),
    ]);
    let from_hlog = env.import(&hlog, &[]);
    let doc = env.json("analyze", &["analyze", &from_hlog]);
    let s = &doc["series"][0];
    assert_eq!(s["series"]["kind"], "histograms");
    assert_eq!(s["analysis"]["summary"]["exact"], false);
    let bound = s["analysis"]["summary"]["relative_error_bound"]
        .as_f64()
        .unwrap();
    let (a, b) = (p99(&original), p99(&from_hlog));
    // Two quantisations (this layout twice) plus HdrHistogram's 3 significant digits.
    assert!((a - b).abs() / a <= 2.0 * bound + 0.001, "{a} vs {b}");
    let err = env.fails(&["export", &from_hlog, "--format", "csv"]);
    assert!(err.contains("--format hlog"), "{err}");
}

#[test]
fn series_column_splits_series_and_analyze_selects_them() {
    let env = Env::new();
    let csv = env.path("two.csv");
    let mut body = String::from("series,latency_ms\n");
    for i in 0..300 {
        body.push_str(&format!(
            "by-name,{}\nby-ip,{}\n",
            20.0 + (i % 10) as f64,
            1.0 + (i % 10) as f64 * 0.1
        ));
    }
    std::fs::write(&csv, body).unwrap();
    let run = env.import(&csv, &[]);
    let doc = env.json("analyze", &["analyze", &run]);
    assert_eq!(doc["series"].as_array().unwrap().len(), 2);
    let doc = env.json("analyze", &["analyze", &run, "--series", "by-ip"]);
    assert_eq!(doc["series"].as_array().unwrap().len(), 1);
    assert!(
        doc["series"][0]["analysis"]["summary"]["max_ns"]
            .as_u64()
            .unwrap()
            < 3_000_000
    );
}

#[test]
fn runs_on_a_new_store_is_an_empty_list_and_delete_removes_a_run() {
    let env = Env::new();
    assert!(env.ok(&["runs"]).contains("no runs"));
    let run = env.import(&env.trimodal("t.csv", 1, 0.0), &[]);
    let doc = env.json("runs", &["runs", "--delete", &run]);
    assert!(doc["runs"].as_array().unwrap().is_empty());
}

#[test]
fn analyze_accepts_a_file_and_imports_it_first() {
    let env = Env::new();
    let csv = env.path("direct.csv");
    std::fs::write(&csv, "1\n2\n3\n").unwrap();
    let doc = env.json(
        "analyze",
        &["analyze", csv.to_str().unwrap(), "--unit", "ms"],
    );
    assert_eq!(doc["series"][0]["analysis"]["summary"]["max_ns"], 3_000_000);
    assert_eq!(
        env.json("runs", &["runs"])["runs"][0]["id"],
        doc["run"]["id"]
    );
}

/// A reader that closes the pipe early (`| head`) is not a failure, for JSON as for text: the
/// command exits 0 and says nothing about the pipe. The JSON document here (40 series
/// analysed, about 200 KB) is larger than the output's buffer, so the pipe fails while it is
/// being written, not only at the last flush.
#[test]
fn a_closed_pipe_on_stdout_is_not_an_error_json_or_text() {
    let env = Env::new();
    let csv = env.path("many.csv");
    let mut rows = String::from("series,latency_ms\n");
    for s in 0..40 {
        for i in 0..200 {
            rows.push_str(&format!(
                "s{s},{}\n",
                0.1 + ((i * 37 + s * 11) % 97) as f64 / 10.0
            ));
        }
    }
    std::fs::write(&csv, rows).unwrap();
    let run = env.import(&csv, &[]);
    for json in [true, false] {
        let (reader, writer) = std::io::pipe().unwrap();
        // Closed before the command writes a byte: its first write fails with EPIPE.
        drop(reader);
        let mut cmd = env.cmd();
        if json {
            cmd.arg("--json");
        }
        let out = cmd
            .args(["analyze", &run])
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "json {json}: {:?} {err}", out.status);
        assert!(!err.contains("pipe"), "json {json}: {err}");
    }
}
