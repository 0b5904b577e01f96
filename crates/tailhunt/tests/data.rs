//! End-to-end tests of the data path: export and import round trips of real load runs, one
//! percentile rule across commands, the floor verdict, odd import files, read-only stores and a
//! full disk. Servers, mounts and users are the real ones, started or made by the tests and
//! removed (by PID, by unmounting) also when a test fails.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::servers::tailhunt_serve;
use common::{is_root, Env, BIN};
use serde_json::Value;

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Exports `run` in `format` to `file` and returns the bytes written.
fn export(env: &Env, run: &str, format: &str, file: &Path) -> Vec<u8> {
    env.ok(&[
        "export",
        run,
        "--format",
        format,
        "-o",
        file.to_str().unwrap(),
    ]);
    std::fs::read(file).unwrap()
}

/// Acceptance of issue 11, item 1: a sweep with repeats (series with two labels, send lag, a
/// monotonic clock) exported, imported and exported again gives the same bytes, in CSV and in
/// JSON lines; the imported run has the same series with the same labels.
#[test]
fn export_import_export_of_a_load_sweep_with_repeats_is_byte_identical() {
    let env = Env::new();
    let server = tailhunt_serve("tcp", &[]);
    let url = format!("tcp://{}", server.addr);
    let doc = env.json(
        "load",
        &[
            "load",
            &url,
            "--sweep",
            "50,200",
            "--repeat",
            "2",
            "--duration",
            "1s",
        ],
    );
    drop(server);
    let run = doc["run_id"].as_str().unwrap().to_string();
    for format in ["csv", "jsonl"] {
        let first = export(&env, &run, format, &env.path(&format!("first.{format}")));
        let text = String::from_utf8_lossy(&first);
        if format == "csv" {
            assert!(
                text.contains("\n\"latency{rate=50,repeat=2}\","),
                "series names with commas are quoted:\n{}",
                &text[..text.len().min(400)]
            );
        }
        if format == "csv" {
            // Samples carry send lag; latency counts from the intended time.
            let rows: Vec<Vec<i64>> = text
                .lines()
                .skip(1)
                .map(|l| {
                    let f: Vec<&str> = l.rsplitn(6, ',').collect();
                    f[1..5].iter().rev().map(|v| v.parse().unwrap()).collect()
                })
                .collect();
            assert_eq!(rows.len() as u64, doc_samples(&doc));
            assert!(
                rows.iter().all(|r| r[3] == r[2] - r[0]),
                "latency = end - intended"
            );
            assert!(rows.iter().any(|r| r[1] > r[0]), "some send lag");
        }
        let again = env.import(&env.path(&format!("first.{format}")), &[]);
        let second = export(&env, &again, format, &env.path(&format!("second.{format}")));
        assert!(
            first == second,
            "{format}: the second export differs from the first ({} vs {} bytes)",
            first.len(),
            second.len()
        );
        let imported = env.run_row(&again);
        assert_eq!(imported["samples"], doc_samples(&doc));
    }
    // The import knows the labels: diagnose reads the rates back as a sweep.
    let again = env.import(&env.path("first.csv"), &[]);
    let analyzed = env.json("analyze", &["analyze", &again]);
    let names: Vec<&str> = analyzed["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["series"]["display_name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.contains(&"latency{rate=200,repeat=1}"), "{names:?}");
    let labels = &analyzed["series"][0]["series"]["labels"];
    assert!(
        labels["rate"].is_string() && labels["repeat"].is_string(),
        "{labels}"
    );
}

/// Measured samples of a load document (all steps, not the warm-up).
fn doc_samples(doc: &Value) -> u64 {
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scheduled"].as_u64().unwrap())
        .sum()
}

/// One run, one p99.9: `load` used 0.999, `analyze` 99.9/100, and in floating point
/// 99.9/100 x 3000 = 2997.0000000000005 picked rank 2998. Both must be the value at rank
/// ceil(0.999 n), computed here in integers from the exported samples.
#[test]
fn load_and_analyze_print_the_same_p999_for_one_run() {
    let env = Env::new();
    let server = tailhunt_serve("tcp", &[]);
    let url = format!("tcp://{}", server.addr);
    let doc = env.json(
        "load",
        &["load", &url, "--rate", "1000", "--duration", "3s"],
    );
    drop(server);
    let step = &doc["steps"][0];
    let from_load = step["latency_ns"]["p999"].as_u64().unwrap();
    let series = step["series"].as_str().unwrap();
    let analyzed = env.json("analyze", &["analyze", "latest", "--series", series]);
    let from_analyze = analyzed["series"][0]["analysis"]["summary"]["quantiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["label"] == "p99.9")
        .unwrap()["value_ns"]
        .as_u64()
        .unwrap();
    let csv = export(&env, "latest", "csv", &env.path("run.csv"));
    let mut latencies: Vec<u64> = String::from_utf8(csv)
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| l.starts_with(series) || l.starts_with(&format!("\"{series}\"")))
        .map(|l| l.rsplit(',').nth(1).unwrap().parse().unwrap())
        .collect();
    latencies.sort_unstable();
    let n = latencies.len() as u64;
    assert_eq!(n, step["scheduled"].as_u64().unwrap());
    assert!(n >= 2000, "{n} samples");
    let rank = (999 * n).div_ceil(1000);
    let exact = latencies[rank as usize - 1];
    assert_eq!(from_load, exact, "load's p99.9 (n = {n}, rank {rank})");
    assert_eq!(
        from_analyze, exact,
        "analyze's p99.9 (n = {n}, rank {rank})"
    );
}

/// A minimum under the expected floor once read "0.7x the expected floor" and nothing more.
#[test]
fn a_minimum_below_the_expected_floor_gets_a_verdict() {
    let env = Env::new();
    let csv = env.path("fast.csv");
    let body: String = (0..1000).map(|i| format!("{}us\n", 315 + i)).collect();
    std::fs::write(&csv, body).unwrap();
    let run = env.import(&csv, &[]);
    let out = env.ok(&["analyze", &run, "--expect-floor", "450us"]);
    assert!(
        out.contains(
            "warning: minimum 315us is below the expected floor 450us (--expect-floor 450us), and so are 13.5% of samples: the expectation is wrong"
        ),
        "{out}"
    );
    assert!(!out.contains("0.7x"), "{out}");
    let doc = env.json("analyze", &["analyze", &run, "--expect-floor", "450us"]);
    let floor = &doc["series"][0]["analysis"]["floor"];
    assert_eq!(floor["verdict"], "below_floor");
    assert_eq!(floor["above_floor"], false);
    let doc = env.json("analyze", &["analyze", &run, "--expect-floor", "300us"]);
    assert_eq!(doc["series"][0]["analysis"]["floor"]["verdict"], "at_floor");
}

#[test]
fn percentiles_are_read_exactly_and_bad_ones_are_refused() {
    let env = Env::new();
    let csv = env.path("n.csv");
    let body: String = (1..=3000).map(|i| format!("{i}us\n")).collect();
    std::fs::write(&csv, body).unwrap();
    let run = env.import(&csv, &[]);
    let doc = env.json(
        "analyze",
        &["analyze", &run, "--percentiles", "99.9,p99.9,0.999"],
    );
    let values: Vec<u64> = doc["series"][0]["analysis"]["summary"]["quantiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["value_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(values, [2_997_000; 3]);
    let out = env.run(&["analyze", &run, "--percentiles", "99.9x"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'99.9x' is not a number"), "{err}");
    let out = env.run(&["analyze", &run, "--percentiles", "101"]);
    let (_, err) = text(&out);
    assert!(err.contains("'101' is out of range"), "{err}");
}

#[test]
fn a_decimal_comma_or_a_wrong_field_count_names_the_line() {
    let env = Env::new();
    let csv = env.path("comma.csv");
    std::fs::write(&csv, "latency_ms\n1.5\n2.5\n1,2\n3\n").unwrap();
    let err = env.fails(&["import", csv.to_str().unwrap()]);
    assert!(
        err.contains("comma.csv:4: 2 fields but the header has 1 (a decimal comma? write 1.2"),
        "{err}"
    );
    assert!(
        err.contains("kept the 2 samples read before it stopped as partial run"),
        "{err}"
    );
    let csv = env.path("wide.csv");
    std::fs::write(&csv, "ts,latency_ms\n0,1\n1,2,3\n").unwrap();
    let err = env.fails(&["import", csv.to_str().unwrap()]);
    assert!(
        err.contains("wide.csv:3: 3 fields but the header has 2"),
        "{err}"
    );
}

/// An interval log of `seconds` one-second intervals with one value each, via a CSV import and
/// `export --format hlog`.
fn interval_log(env: &Env, seconds: u64) -> String {
    let csv = env.path("for-hlog.csv");
    let body: String = (0..seconds)
        .map(|i| format!("{},{}us\n", 1_700_000_000 + i, 100 + i))
        .collect();
    std::fs::write(&csv, body).unwrap();
    let run = env.import(&csv, &[]);
    String::from_utf8(export(env, &run, "hlog", &env.path("all.hlog"))).unwrap()
}

#[test]
fn an_interval_log_keeps_the_intervals_before_a_bad_line() {
    let env = Env::new();
    let log = interval_log(&env, 3);
    let bad_line = log.lines().count() + 1;
    let file = env.path("cut.hlog");
    std::fs::write(&file, format!("{log}this is not an interval\n")).unwrap();
    let err = env.fails(&["import", file.to_str().unwrap()]);
    assert!(
        err.contains(&format!(
            "cut.hlog:{bad_line}: not an HdrHistogram interval-log line"
        )),
        "{err}"
    );
    assert!(
        err.contains("kept the 3 samples read before it stopped as partial run"),
        "{err}"
    );
    let runs = env.json("runs", &["runs"]);
    let last = runs["runs"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["status"].as_str(), last["samples"].as_u64()),
        (Some("partial"), Some(3))
    );
}

#[test]
fn a_corrupt_deflate_stream_is_told_in_words() {
    let env = Env::new();
    let log = interval_log(&env, 2);
    let last = log.lines().last().unwrap().to_string();
    // The base64 after the last comma: keep its 8-byte header, garble the zlib stream.
    let (head, b64) = last.rsplit_once(',').unwrap();
    let garbled: String = b64
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i >= 16 && c.is_ascii_alphabetic() {
                if c == 'A' {
                    'B'
                } else {
                    'A'
                }
            } else {
                c
            }
        })
        .collect();
    let file = env.path("corrupt.hlog");
    std::fs::write(&file, log.replace(&last, &format!("{head},{garbled}"))).unwrap();
    let err = env.fails(&["import", file.to_str().unwrap()]);
    assert!(err.contains("corrupt.hlog:"), "{err}");
    assert!(
        err.contains(
            "the interval's histogram does not decode: the compressed histogram does not inflate"
        ),
        "{err}"
    );
    for debug_text in ["IoError", "Custom {", "kind:", "DeserializeError"] {
        assert!(!err.contains(debug_text), "{err}");
    }
    assert!(err.contains("kept the 1 samples"), "{err}");
}

#[test]
fn analyze_of_a_missing_file_says_the_file_does_not_exist() {
    let env = Env::new();
    let err = env.fails(&["analyze", "nosuchfile.csv"]);
    assert!(
        err.contains("cannot read 'nosuchfile.csv': no such file"),
        "{err}"
    );
    assert!(!err.contains("no run matches"), "{err}");
    let err = env.fails(&["analyze", env.dir.path().to_str().unwrap()]);
    assert!(err.contains("it is not a regular file"), "{err}");
}

/// A store made by root, then made read-only: `chmod 0444` on the file and `0555` on its
/// directory (so SQLite can create no `-wal`/`-shm` beside it).
fn read_only_store(env: &Env) -> (PathBuf, String) {
    let dir = env.path("shared");
    std::fs::create_dir(&dir).unwrap();
    let db = dir.join("sent.db");
    let csv = env.path("t.csv");
    let body: String = (0..2000)
        .map(|i| format!("{},{}us\n", i, 100 + i % 700))
        .collect();
    std::fs::write(&csv, format!("ts_ms,latency\n{body}")).unwrap();
    let out = Command::new(BIN)
        .arg("--db")
        .arg(&db)
        .args(["import", "--quiet", csv.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    let run = String::from_utf8(out.stdout).unwrap().trim().to_string();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    (db, run)
}

/// The read commands on a read-only store: they work, `diagnose` says its findings were not
/// saved, and writing commands say the store cannot be written.
fn check_read_commands(run_as: &dyn Fn(&[&str]) -> Output, run: &str) {
    let ok = |args: &[&str]| {
        let out = run_as(args);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{args:?}: {stderr}");
        stdout
    };
    assert!(ok(&["runs"]).contains(run));
    let doc: Value = serde_json::from_str(&ok(&["analyze", run, "--json"])).unwrap();
    assert_eq!(doc["series"][0]["analysis"]["summary"]["count"], 2000);
    assert_eq!(ok(&["export", run]).lines().count(), 2001);
    let diagnosed = ok(&["diagnose", run]);
    assert!(
        diagnosed.contains("the findings were not saved: the store is read-only"),
        "{diagnosed}"
    );
    let doc: Value = serde_json::from_str(&ok(&["diagnose", run, "--json"])).unwrap();
    common::check_schema("diagnose", &doc);
    assert_eq!(doc["saved"], false);
    let out = run_as(&["runs", "--delete", run]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the store cannot be written"), "{err}");
    assert!(!err.contains("attempt to write"), "{err}");
}

/// "Send me your tailhunt.db": a store the user may not write reads as any other. Root ignores
/// file modes, so the commands run as `nobody`.
#[test]
fn a_store_the_user_may_not_write_is_readable_root() {
    if !is_root() || Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: needs root and setpriv to drop to nobody");
        return;
    }
    let env = Env::new();
    let (db, run) = read_only_store(&env);
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .expect("setpriv")
    };
    check_read_commands(&as_nobody, &run);
    // Nothing beside it was created or changed.
    let names: Vec<String> = std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["sent.db"]);
}

/// Unmounts (lazily, by path) when dropped, also when the test fails.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The same store on a read-only bind mount, where root may not write either.
#[test]
fn a_store_on_a_read_only_mount_is_readable_root() {
    if !is_root() {
        eprintln!("skipped: needs root to mount");
        return;
    }
    let env = Env::new();
    let (db, run) = read_only_store(&env);
    let src = db.parent().unwrap().to_path_buf();
    let target = env.path("ro-mount");
    std::fs::create_dir(&target).unwrap();
    let status = Command::new("mount")
        .arg("--bind")
        .arg(&src)
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success());
    let _mounted = Mount(target.clone());
    let status = Command::new("mount")
        .args(["-o", "remount,bind,ro"])
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success());
    let db = target.join("sent.db");
    let as_root = |args: &[&str]| {
        Command::new(BIN)
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .unwrap()
    };
    check_read_commands(&as_root, &run);
}

/// A full disk in the middle of an import: the message says the disk is full, how much was
/// kept, as which run, in which file; never SQLite's own words.
#[test]
fn a_full_disk_mid_import_says_what_was_kept_and_where_root() {
    if !is_root() {
        eprintln!("skipped: needs root to mount a small tmpfs");
        return;
    }
    let env = Env::new();
    let target = env.path("small");
    std::fs::create_dir(&target).unwrap();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success());
    let _mounted = Mount(target.clone());
    let csv = env.path("big.csv");
    // Pseudo-random latencies compress poorly: ~2 bytes each, far more than 1 MiB in all.
    let mut body = String::from("ts_ns,latency_ns\n");
    let mut x: u64 = 1;
    for i in 0..2_000_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        body.push_str(&format!("{},{}\n", i * 1000, 1000 + (x >> 40) % 9_000_000));
    }
    std::fs::write(&csv, body).unwrap();
    let db = target.join("t.db");
    let out = Command::new(BIN)
        .arg("--db")
        .arg(&db)
        .args(["import", csv.to_str().unwrap()])
        .output()
        .unwrap();
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the disk holding the store is full"), "{err}");
    assert!(
        err.contains("as partial run") && err.contains(&db.display().to_string()),
        "{err}"
    );
    for raw in ["sqlite:", "Error code", "database or disk is full"] {
        assert!(!err.contains(raw), "{err}");
    }
    // What the message says was kept is there.
    let kept: u64 = err
        .split("kept the ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in: {err}"));
    assert!(kept > 0 && kept < 2_000_000, "{kept}");
    let out = Command::new(BIN)
        .arg("--db")
        .arg(&db)
        .args(["runs", "--json"])
        .output()
        .unwrap();
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &runs["runs"][0];
    assert_eq!(
        (run["status"].as_str(), run["samples"].as_u64()),
        (Some("partial"), Some(kept))
    );
}
