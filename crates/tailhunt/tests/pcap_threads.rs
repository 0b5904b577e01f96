//! `tailhunt pcap --threads N` prints, stores and writes exactly what `--threads 1` does:
//! the text and the JSON (byte for byte, run id aside), the exit status and message, the
//! `--flows-csv` and `--bins-csv` files, and every row the run leaves in the store (series
//! in the order they were opened, their blocks, the stored report, the findings). On every
//! committed odd capture and set, a synthetic capture of thousands of short connections on
//! a saturated link, and (as root) a capture of real traffic taken by tcpdump.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Env, BIN};
use tailhunt_model::evidence::capture::FlowSummary;
use tailhunt_model::evidence::RowEncoding;

/// The workspace root (the bench generators live there).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn odd(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/odd")
        .join(name)
}

/// Everything one run left that a user or a later command can see, with its run id
/// replaced by `RUN`.
#[derive(Debug, PartialEq)]
struct Left {
    status: Option<i32>,
    json: String,
    stderr: String,
    text: String,
    flows_csv: String,
    bins_csv: String,
    store: Vec<String>,
}

/// Runs `tailhunt pcap FILES EXTRA --threads N` twice in fresh stores (`--json`, then text)
/// and gathers what it left.
fn run(files: &[PathBuf], extra: &[&str], threads: usize) -> Left {
    let env = Env::new();
    let (flows, bins) = (env.path("flows.csv"), env.path("bins.csv"));
    let go = |json: bool, db: &str| {
        let mut c = Command::new(BIN);
        c.env_remove("TAILHUNT_DB").arg("--db").arg(env.path(db));
        if json {
            c.arg("--json");
        }
        c.arg("pcap")
            .args(files)
            .args(extra)
            .args(["--threads", &threads.to_string()])
            .arg("--flows-csv")
            .arg(&flows)
            .arg("--bins-csv")
            .arg(&bins);
        c.output().expect("run tailhunt")
    };
    let text_out = go(false, "text.db");
    let out = go(true, "json.db");
    let json = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let store = dump(&env.path("json.db"));
    let json_id = run_id(&store);
    let text_id = run_id(&dump(&env.path("text.db")));
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    Left {
        status: out.status.code(),
        json: json.replace(&json_id, "RUN"),
        stderr: stderr.replace(&json_id, "RUN"),
        text: String::from_utf8_lossy(&text_out.stdout).replace(&text_id, "RUN"),
        flows_csv: read(&flows),
        bins_csv: read(&bins),
        store: store.iter().map(|r| r.replace(&json_id, "RUN")).collect(),
    }
}

/// The id of the run in a store's dump ("no run" when there is none).
fn run_id(dump: &[String]) -> String {
    dump.iter()
        .find_map(|r| r.strip_prefix("runs|Text(\""))
        .and_then(|r| r.split('"').next())
        .unwrap_or("no run")
        .to_string()
}

/// Every row of the tables a pcap run writes, in key order, one line each (`table|values`);
/// the run's creation time left out.
fn dump(db: &Path) -> Vec<String> {
    let Ok(conn) = rusqlite::Connection::open(db) else {
        return Vec::new();
    };
    let tables = [
        (
            "runs",
            "id, kind, status, origin_wall_ns, origin_mono_ns, params",
        ),
        ("series", "*"),
        ("sample_blocks", "*"),
        ("value_blocks", "*"),
        ("histograms", "*"),
        ("documents", "*"),
        ("findings", "*"),
    ];
    let mut out = Vec::new();
    for (table, columns) in tables {
        let Ok(mut st) = conn.prepare(&format!("SELECT {columns} FROM {table} ORDER BY 1, 2"))
        else {
            continue;
        };
        let n = st.column_count();
        let rows = st
            .query_map([], |row| {
                let mut line = table.to_string();
                for i in 0..n {
                    let v: rusqlite::types::Value = row.get(i)?;
                    line.push('|');
                    line.push_str(&match v {
                        rusqlite::types::Value::Blob(b) => {
                            b.iter().map(|x| format!("{x:02x}")).collect()
                        }
                        other => format!("{other:?}"),
                    });
                }
                Ok(line)
            })
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    // The flows' rows: chunks differ with the order the flows finished in (a sharded pass
    // stores its flows at the end), the flows in them must not.
    if let Ok(mut st) = conn.prepare("SELECT name, version, codec, data FROM document_rows") {
        let mut items: Vec<(String, i64, String)> = st
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, u32>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, Vec<u8>>(3)?,
                ))
            })
            .unwrap()
            .flat_map(|r| {
                let (name, version, codec, data) = r.unwrap();
                assert_eq!((name.as_str(), codec.as_str()), ("flows", "postcard-zstd"));
                let data = zstd::decode_all(&data[..]).unwrap();
                RowEncoding::Postcard
                    .decode::<FlowSummary>(version, &data)
                    .unwrap()
                    .into_iter()
                    .map(|f| {
                        (
                            name.clone(),
                            f.id as i64,
                            serde_json::to_string(&f).unwrap(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        items.sort();
        out.extend(
            items
                .into_iter()
                .map(|(name, _, line)| format!("document_rows|{name}|{line}")),
        );
    }
    out
}

/// Runs `files` with 1, 2 and 3 threads and asserts the three left the same.
fn same(files: &[PathBuf], extra: &[&str]) -> Left {
    let one = run(files, extra, 1);
    for threads in [2, 3] {
        let many = run(files, extra, threads);
        for (what, a, b) in [
            (
                "status",
                format!("{:?}", one.status),
                format!("{:?}", many.status),
            ),
            ("json", one.json.clone(), many.json.clone()),
            ("stderr", one.stderr.clone(), many.stderr.clone()),
            ("text", one.text.clone(), many.text.clone()),
            ("flows csv", one.flows_csv.clone(), many.flows_csv.clone()),
            ("bins csv", one.bins_csv.clone(), many.bins_csv.clone()),
        ] {
            assert!(
                a == b,
                "{files:?} {extra:?}: {what} differs with {threads} threads"
            );
        }
        assert_eq!(one.store.len(), many.store.len(), "{files:?}: stored rows");
        for (a, b) in one.store.iter().zip(&many.store) {
            assert!(
                a == b,
                "{files:?} {extra:?}: stored row differs with {threads} threads: {}",
                &a[..a.len().min(200)]
            );
        }
    }
    one
}

#[test]
fn every_odd_capture_and_set_is_the_same_on_more_threads() {
    let singles = [
        "cut-header.pcap",
        "empty.pcap",
        "ethernet-and-user0.pcapng",
        "header-only.pcap",
        "not-a-capture.pcap",
        "rotated.pcap",
        "sll2.pcap",
        "snaplen96.pcap",
        "truncated.pcap",
        "truncated.pcap.gz",
        "two-interfaces.pcapng",
        "user0.pcap",
    ];
    for name in singles {
        same(&[odd(name)], &["--link-rate", "1gbit"]);
    }
    let rotated = ["rotated.pcap", "rotated.pcap1", "rotated.pcap2"].map(odd);
    let left = same(&rotated, &[]);
    assert_eq!(left.status, Some(0), "{}", left.stderr);
    // A set cut in the middle: the rest is still read, the run is partial, exit status 1.
    let cut = ["rotated.pcap", "truncated.pcap", "rotated.pcap1"].map(odd);
    let left = same(&cut, &["--link-rate", "1gbit"]);
    assert_ne!(left.status, Some(0));
    assert!(left.json.contains("\"partial\""), "{}", left.json);
}

/// Thousands of short connections (more than a sweep's worth of packets, so connections
/// retire mid-pass) on a link they saturate (bursts, and bins kept near them).
#[test]
fn many_short_connections_on_a_busy_link_are_the_same_on_more_threads() {
    let env = Env::new();
    let file = common::capture::short_connections(&env, 8000, 4);
    let left = same(std::slice::from_ref(&file), &["--link-rate", "20mbit"]);
    let doc: serde_json::Value = serde_json::from_str(&left.json).unwrap();
    assert!(doc["report"]["packets"].as_u64().unwrap() > 65_536);
    assert!(!doc["report"]["bursts"].as_array().unwrap().is_empty());
    assert!(doc["report"]["flows_total"].as_u64().unwrap() >= 8000);
    let stored_flows = left
        .store
        .iter()
        .filter(|r| r.starts_with("document_rows|flows|"))
        .count();
    assert_eq!(
        Some(stored_flows as u64),
        doc["report"]["flows_total"].as_u64()
    );
    assert_eq!(left.flows_csv.lines().count(), stored_flows + 1);
    let series = left
        .store
        .iter()
        .filter(|r| r.starts_with("series|"))
        .count();
    assert!(series > 5, "{series} series stored");
}

/// Real traffic taken by tcpdump (bulk flows and short request/response connections, with
/// TCP timestamps): needs root for the network namespace, as CI has.
#[test]
fn a_tcpdump_capture_of_real_traffic_is_the_same_on_more_threads_root() {
    if common::capture::namespace("threads-probe").is_none() {
        return;
    }
    let env = Env::new();
    let file = env.path("mixed.pcap");
    let status = Command::new("bash")
        .arg(root().join("bench/gen/capture.sh"))
        .arg(&file)
        .arg("30")
        .env("MAX_SECS", "20")
        .status()
        .expect("run bench/gen/capture.sh");
    assert!(status.success());
    let left = same(std::slice::from_ref(&file), &["--link-rate", "1gbit"]);
    let doc: serde_json::Value = serde_json::from_str(&left.json).unwrap();
    assert!(doc["report"]["flows"].as_array().unwrap().len() > 10);
}
