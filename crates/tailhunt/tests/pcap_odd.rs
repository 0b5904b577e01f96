//! `tailhunt pcap` on odd files and sets of files: the committed corpus under `tests/odd/`
//! (written by `common/odd.rs`), each with the outcome and message it must get, and a capture
//! with more connections than the stored report keeps.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};

use common::odd;
use common::Env;
use serde_json::Value;

fn odd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/odd")
}

/// A gzip file's content (the committed copy is compared decompressed: another version of the
/// compressor may write other bytes for the same content).
fn content(name: &str, bytes: &[u8]) -> Vec<u8> {
    if !name.ends_with(".gz") {
        return bytes.to_vec();
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn the_committed_odd_captures_are_what_the_generator_writes() {
    let dir = odd_dir();
    let update = std::env::var_os("UPDATE_ODD").is_some();
    if update {
        std::fs::create_dir_all(&dir).unwrap();
    }
    for f in odd::all() {
        let path = dir.join(f.name);
        if update {
            std::fs::write(&path, &f.bytes).unwrap();
            continue;
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (UPDATE_ODD=1 cargo test --test pcap_odd writes it)",
                path.display()
            )
        });
        assert_eq!(
            content(f.name, &committed),
            content(f.name, &f.bytes),
            "{} differs from what common/odd.rs writes (UPDATE_ODD=1 rewrites the corpus)",
            f.name
        );
    }
}

/// What one run of `tailhunt pcap FILES --json` gave.
struct Ran {
    code: Option<i32>,
    doc: Option<Value>,
    stderr: String,
}

/// A finished `tailhunt pcap --json`: its status, its document (checked against the schema)
/// and its messages.
fn ran(out: std::process::Output) -> Ran {
    let doc = (!out.stdout.is_empty()).then(|| {
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        common::check_schema("pcap", &v);
        v
    });
    Ran {
        code: out.status.code(),
        doc,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn pcap(env: &Env, names: &[&str]) -> Ran {
    let mut args = vec!["pcap".to_string()];
    args.extend(
        names
            .iter()
            .map(|n| odd_dir().join(n).display().to_string()),
    );
    args.push("--json".into());
    let out = env.cmd().args(&args).output().unwrap();
    ran(out)
}

/// Runs and checks the exit status, the packets counted and the stderr message.
fn expect(env: &Env, names: &[&str], code: i32, packets: Option<u64>, message: &str) -> Ran {
    let r = pcap(env, names);
    assert_eq!(r.code, Some(code), "{names:?}: {}", r.stderr);
    assert!(
        r.stderr.contains(message),
        "{names:?}: stderr should say '{message}': {}",
        r.stderr
    );
    assert_eq!(
        r.doc
            .as_ref()
            .map(|d| d["report"]["packets"].as_u64().unwrap()),
        packets,
        "{names:?}"
    );
    if code == 0 {
        assert!(r.stderr.is_empty(), "{names:?}: {}", r.stderr);
    }
    r
}

fn statuses(doc: &Value) -> Vec<String> {
    doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["status"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn files_that_cannot_be_read_at_all_are_one_line_errors_and_store_nothing() {
    let env = Env::new();
    expect(
        &env,
        &["empty.pcap"],
        2,
        None,
        "is empty (0 bytes): nothing to analyse",
    );
    expect(
        &env,
        &["cut-header.pcap"],
        2,
        None,
        "truncated: pcap file header at byte 0",
    );
    // The first 8 bytes, not the whole first read.
    expect(
        &env,
        &["not-a-capture.pcap"],
        2,
        None,
        "is not a pcap or pcapng capture (first bytes 474554202f204854);",
    );
    expect(
        &env,
        &["empty.pcap", "not-a-capture.pcap"],
        2,
        None,
        "none of the 2 files can be read",
    );
    assert!(env.ok(&["runs"]).lines().all(|l| !l.contains(".pcap")));
}

#[test]
fn cut_files_keep_the_frames_before_the_cut_record() {
    let env = Env::new();
    // Three whole records of 16 + 154 bytes after the 24-byte header.
    let at = "packet record at byte 534";
    for name in ["truncated.pcap", "truncated.pcap.gz"] {
        let r = expect(&env, &[name], 2, Some(3), at);
        let doc = r.doc.unwrap();
        assert_eq!(doc["status"], "partial");
        assert_eq!(statuses(&doc), ["cut"]);
        assert_eq!(doc["files"][0]["frames"], 3);
        assert!(r.stderr.contains("partial run"), "{}", r.stderr);
    }
    let r = expect(&env, &["header-only.pcap"], 0, Some(0), "");
    assert_eq!(statuses(&r.doc.unwrap()), ["read"]);
}

#[test]
fn unknown_link_types_are_named_and_a_file_of_nothing_else_is_an_error() {
    let env = Env::new();
    let r = expect(
        &env,
        &["user0.pcap"],
        2,
        Some(4),
        "nothing analysed: link type 147 (USER0): 1 file not analysed",
    );
    let doc = r.doc.unwrap();
    let link = &doc["link_types_not_analysed"][0];
    assert_eq!(
        (
            &link["link_type"],
            &link["name"],
            &link["frames"],
            &link["inputs"]
        ),
        (
            &Value::from(147),
            &Value::from("USER0"),
            &Value::from(4),
            &Value::from(1)
        )
    );
    expect(
        &env,
        &["user0.pcap", "user0.pcap"],
        2,
        Some(8),
        "link type 147 (USER0): 2 files not analysed",
    );
    // Beside frames it reads, an unknown interface is named, not an error.
    let r = expect(&env, &["ethernet-and-user0.pcapng"], 0, Some(4), "");
    let doc = r.doc.unwrap();
    assert_eq!(doc["report"]["flows"].as_array().unwrap().len(), 1);
    // The HTML report's trust facts say why those frames were left out.
    let html = env.path("odd.html");
    env.ok(&[
        "report",
        doc["run_id"].as_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(html).unwrap();
    assert!(
        html.contains("frames not analysed</td><td class=\"doubt\">2 (2 unknown-link)"),
        "no reason for the frames left out"
    );
    let text = env.ok(&[
        "pcap",
        odd_dir()
            .join("ethernet-and-user0.pcapng")
            .to_str()
            .unwrap(),
    ]);
    assert!(
        text.contains("link type 147 (USER0): 2 frame(s) in 1 file not analysed"),
        "{text}"
    );
    assert!(!text.contains("unknown-link"), "{text}");
}

/// The flow of the generated exchanges: payload bytes up and down.
fn payload(doc: &Value) -> (u64, u64) {
    let flows = doc["report"]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 1, "{:#}", doc["report"]["flows"]);
    let f = &flows[0];
    (
        f["client_to_server"]["payload_bytes"].as_u64().unwrap(),
        f["server_to_client"]["payload_bytes"].as_u64().unwrap(),
    )
}

#[test]
fn cooked_v2_snap_length_96_and_two_pcapng_interfaces_are_analysed() {
    let env = Env::new();
    let doc = expect(&env, &["sll2.pcap"], 0, Some(4), "").doc.unwrap();
    assert_eq!(payload(&doc), (200, 200));
    // 96 captured bytes of 1454-byte frames: headers whole, lengths from the IP header.
    let doc = expect(&env, &["snaplen96.pcap"], 0, Some(4), "")
        .doc
        .unwrap();
    assert_eq!(doc["report"]["wire_bytes"], 4 * 1454);
    assert_eq!(payload(&doc), (2800, 2800));
    assert_eq!(doc["report"]["skipped"], serde_json::json!({}));
    let doc = expect(&env, &["two-interfaces.pcapng"], 0, Some(6), "")
        .doc
        .unwrap();
    assert_eq!(payload(&doc), (300, 300));
}

#[test]
fn a_rotated_set_with_an_empty_last_file_is_read_whole() {
    let env = Env::new();
    let set = ["rotated.pcap", "rotated.pcap1", "rotated.pcap2"];
    let doc = expect(&env, &set, 0, Some(8), "").doc.unwrap();
    assert_eq!(doc["status"], "complete");
    assert_eq!(statuses(&doc), ["read", "read", "empty"]);
    let paths: Vec<String> = set
        .iter()
        .map(|n| odd_dir().join(n).display().to_string())
        .collect();
    let mut args = vec!["pcap"];
    args.extend(paths.iter().map(String::as_str));
    let text = env.ok(&args);
    assert!(
        text.contains("3 files read in order as one capture: 2 read whole")
            && text.contains("rotated.pcap2' is empty (0 bytes)"),
        "{text}"
    );
}

#[test]
fn a_rotated_set_ending_in_an_empty_file_can_be_matched_against_another_capture() {
    let env = Env::new();
    let other = odd_dir().join("rotated.pcap");
    let mut args: Vec<String> = ["rotated.pcap", "rotated.pcap1", "rotated.pcap2"]
        .iter()
        .map(|n| odd_dir().join(n).display().to_string())
        .collect();
    args.insert(0, "pcap".into());
    args.extend(["--match".into(), other.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let doc = env.json("pcap", &args);
    assert_eq!(doc["matching"]["packets_a"], 8);
    assert_eq!(doc["matching"]["matched_packets"], 4);
}

#[test]
fn a_cut_or_unreadable_file_does_not_stop_the_set() {
    let env = Env::new();
    let r = expect(
        &env,
        &["truncated.pcap", "rotated.pcap"],
        2,
        Some(7),
        "1 of 2 files not read whole: ",
    );
    let doc = r.doc.unwrap();
    assert_eq!(doc["status"], "partial");
    assert_eq!(statuses(&doc), ["cut", "read"]);
    let r = expect(
        &env,
        &["not-a-capture.pcap", "rotated.pcap"],
        2,
        Some(4),
        "is not a pcap or pcapng capture",
    );
    assert_eq!(statuses(&r.doc.unwrap()), ["unread", "read"]);
}

#[test]
fn every_connection_is_counted_printed_and_stored() {
    let env = Env::new();
    let file = env.path("many.pcap");
    std::fs::write(&file, odd::many_flows(5150)).unwrap();
    let text = env.ok(&["pcap", file.to_str().unwrap()]);
    assert!(
        text.contains("; 5,150 flows"),
        "{}",
        &text[..text.len().min(600)]
    );
    assert!(
        text.contains("TCP flows (largest 10 of 5,150; every flow: tailhunt export "),
        "{}",
        &text[..text.len().min(2000)]
    );
    // The report keeps the first 1,000 flows and the largest (these are all alike); the
    // totals count every one.
    let doc = env.json("pcap", &["pcap", file.to_str().unwrap()]);
    let held = doc["report"]["flows"].as_array().unwrap();
    assert!((1000..5150).contains(&held.len()), "{}", held.len());
    assert_eq!(doc["report"]["flows_total"], 5150);
    assert_eq!(doc["report"]["tcp_flows_total"], 5150);
    let run = doc["run_id"].as_str().unwrap();
    let db = rusqlite::Connection::open(env.db()).unwrap();
    let data: Vec<u8> = db
        .query_row(
            "SELECT data FROM documents WHERE name = 'capture' AND run_id = ?1",
            [run],
            |r| r.get(0),
        )
        .unwrap();
    let stored: Value = serde_json::from_slice(&zstd_decode(&data)).unwrap();
    assert_eq!(stored["flows_total"], 5150);
    // Every flow is stored, as rows, and exported in order of id, once each.
    let csv = env.ok(&["export", run, "--flows"]);
    let ids: Vec<usize> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids, (0..5150).collect::<Vec<_>>());
    let flows_csv = env.path("flows.csv");
    env.ok(&[
        "pcap",
        file.to_str().unwrap(),
        "--flows-csv",
        flows_csv.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&flows_csv).unwrap(), csv);
    let d = env.json("diagnose", &["diagnose", "latest"]);
    assert!(d["findings"].as_array().is_some());
    // A run of another kind has none, and says which runs do.
    let import = env.import(&env.trimodal("t.csv", 1, 0.0), &[]);
    let e = env.fails(&["export", &import, "--flows"]);
    assert!(
        e.contains("has no flows") && e.contains("pcap or capture run"),
        "{e}"
    );
}

fn zstd_decode(data: &[u8]) -> Vec<u8> {
    zstd::decode_all(data).expect("the stored document is zstd")
}

/// One connection, a frame a millisecond for 40 s: about 1.4 MB of packed channel bins, more
/// than the scratch file's write buffer.
fn long_capture(env: &Env) -> PathBuf {
    let file = env.path("long.pcap");
    std::fs::write(
        &file,
        odd::ethernet_capture(40_000, 1_795_168_800_000_000_000),
    )
    .unwrap();
    file
}

/// `tailhunt pcap FILE --json` with `TMPDIR` set: its report and its stderr (exit status 0).
fn pcap_with_tmpdir(env: &Env, file: &Path, tmpdir: &Path) -> (Value, String) {
    let out = env
        .cmd()
        .args(["pcap", file.to_str().unwrap(), "--json"])
        .env("TMPDIR", tmpdir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    (doc["report"].clone(), stderr)
}

/// Without a writable `TMPDIR` the pass keeps what it would have put in its scratch file in
/// memory: the same report, and a note on stderr that says why.
#[test]
fn without_a_scratch_file_the_pass_reports_the_same_and_says_so() {
    let env = Env::new();
    let file = long_capture(&env);
    let tmp = env.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let run = |tmpdir: &Path| pcap_with_tmpdir(&env, &file, tmpdir);
    let (spilled, quiet) = run(&tmp);
    // Quiet, but for the note of a_scratch_file_in_memory_is_named where the test's own
    // directory is on a tmpfs.
    assert!(
        quiet.is_empty() || quiet.contains("which keeps files in memory"),
        "{quiet}"
    );
    // The file is unnamed: nothing is left behind.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    let missing = env.path("no-such-dir");
    let (kept, note) = run(&missing);
    assert!(
        note.contains(&format!("no scratch file in {}", missing.display()))
            && note.contains("in memory instead"),
        "{note}"
    );
    assert_eq!(spilled["packets"], 40_000);
    assert_eq!(spilled, kept);
}

/// A scratch file on a file system that keeps its files in memory (a `/tmp` on tmpfs) bounds
/// nothing: the pass gives the same report and says where the file went and what it held.
#[test]
fn a_scratch_file_in_memory_is_named() {
    let shm = Path::new("/dev/shm");
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let tmpfs = mounts.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 2 && f[1] == "/dev/shm" && f[2] == "tmpfs"
    });
    if !tmpfs {
        eprintln!("skipped: /dev/shm is not a tmpfs on this machine");
        return;
    }
    let env = Env::new();
    let file = long_capture(&env);
    // Removed when dropped, also when an assertion fails.
    let in_memory = tempfile::Builder::new()
        .prefix("tailhunt-test-")
        .tempdir_in(shm)
        .unwrap();
    let run = |tmpdir: &Path| pcap_with_tmpdir(&env, &file, tmpdir);
    let (report, note) = run(in_memory.path());
    assert!(
        note.contains(&format!(
            "the scratch file is in {}, on tmpfs, which keeps files in memory",
            in_memory.path().display()
        )) && note.contains("MiB of older bins"),
        "{note}"
    );
    let disk = env.path("tmp");
    std::fs::create_dir_all(&disk).unwrap();
    let (on_disk, _) = run(&disk);
    assert_eq!(report, on_disk);
}

/// `tailhunt pcap - --json` with `bytes` piped in.
fn piped(env: &Env, bytes: &[u8], extra: &[&str]) -> Ran {
    use std::io::Write;
    let mut child = env
        .cmd()
        .args(["pcap", "-", "--json"])
        .args(extra)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = bytes.to_vec();
    // Written beside the reading: a capture larger than the pipe's buffer would block.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    ran(out)
}

/// The document without what names the input and the run.
fn analysis_of(doc: &Value) -> Value {
    let mut d = doc.clone();
    for key in ["run_id", "inputs", "files"] {
        d.as_object_mut().unwrap().remove(key);
    }
    d
}

#[test]
fn a_capture_piped_on_standard_input_is_analysed_as_the_file_is() {
    let env = Env::new();
    for (name, threads) in [
        ("rotated.pcap", "1"),
        ("truncated.pcap.gz", "2"),
        ("sll2.pcap", "2"),
    ] {
        let from_file = pcap(&env, &[name]);
        let bytes = std::fs::read(odd_dir().join(name)).unwrap();
        let from_pipe = piped(&env, &bytes, &["--threads", threads]);
        assert_eq!(
            from_pipe.code, from_file.code,
            "{name}: {}",
            from_pipe.stderr
        );
        let (file_doc, pipe_doc) = (from_file.doc.unwrap(), from_pipe.doc.unwrap());
        assert_eq!(pipe_doc["files"][0]["name"], "stdin", "{name}");
        assert_eq!(
            pipe_doc["files"][0]["status"], file_doc["files"][0]["status"],
            "{name}"
        );
        assert!(
            analysis_of(&pipe_doc) == analysis_of(&file_doc),
            "{name}: the piped capture's analysis differs from the file's"
        );
    }
    // Nothing piped in: an empty input, stored nowhere.
    let empty = piped(&env, &[], &[]);
    assert_eq!(empty.code, Some(2));
    assert!(
        empty.stderr.contains("'stdin' is empty"),
        "{}",
        empty.stderr
    );
}

#[test]
fn standard_input_must_be_the_only_capture_and_cannot_be_matched() {
    let env = Env::new();
    let other = odd_dir().join("rotated.pcap").display().to_string();
    let with_file = env.fails(&["pcap", "-", &other]);
    assert!(
        with_file.contains("'-' (standard input) must be the only capture"),
        "{with_file}"
    );
    let matched = env.fails(&["pcap", "-", "--match", &other]);
    assert!(matched.contains("a pipe cannot be read twice"), "{matched}");
}
