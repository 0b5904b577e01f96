//! Ingest benchmark: tailhunt's store against one SQLite row per sample.
//!
//! ```text
//! cargo run --release --locked -p tailhunt-store --example ingest -- [--samples N] [--json]
//! ```
//!
//! For each seeded data set (see [`data_sets`]) it writes the same N samples (default 10 M) twice
//! into fresh files in a temp directory:
//!
//! - **tailhunt**: `Store::open`, `begin_run`, `open_series`, `push_samples` in chunks of 4096,
//!   `finish` — compressed blocks of 8192 samples.
//! - **peer**: what a user would build without tailhunt: plain SQLite through rusqlite, one row
//!   `(series_id, intended_ns, start_ns, end_ns, outcome)` per sample, a prepared INSERT inside
//!   one transaction, the same pragmas (WAL, synchronous=NORMAL).
//!
//! The timed part is from the start of the run to its commit. Then the WAL is checkpointed and
//! the files (db + `-wal`) are measured. Both files are read back and checked, untimed. The size
//! of the same samples as CSV text (`intended_ns,start_ns,end_ns,outcome`) is printed for scale.
//! Output: a markdown table, or one JSON object with `--json`. `bench/store.sh` runs this.

use std::error::Error;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::{params, Connection};
use tailhunt_model::{ClockOrigin, Outcome, Sample, SeriesMeta, SeriesSink, Timing};
use tailhunt_store::Store;
use tailhunt_synth as synth;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// Samples per `push_samples` call, like a source that reads and pushes in batches.
const CHUNK: usize = 4096;

/// An epoch-like base for the load generator's intended times (2023-11-14, ns).
const EPOCH_BASE_NS: i64 = 1_700_000_000_000_000_000;

/// A timed-out request ends when the client gives up, this long after it was sent.
const TIMEOUT_NS: i64 = 1_000_000_000;

/// One ingest measurement.
#[derive(serde::Serialize)]
struct Measured {
    seconds: f64,
    samples_per_s: f64,
    bytes: u64,
    bytes_per_sample: f64,
}

/// The `--json` document.
#[derive(serde::Serialize)]
struct Doc {
    samples: usize,
    chunk: usize,
    /// SQLite under both designs (bundled by rusqlite).
    sqlite_version: &'static str,
    data_sets: Vec<Row>,
}

/// Both designs on one data set.
#[derive(serde::Serialize)]
struct Row {
    data_set: &'static str,
    tailhunt: Measured,
    peer_row_per_sample: Measured,
    /// tailhunt samples/s over peer samples/s.
    rate_ratio: f64,
    /// peer bytes over tailhunt bytes.
    size_ratio: f64,
    csv_bytes_per_sample: f64,
}

/// The seeded data sets: (name, samples, timing).
fn data_sets(n: usize) -> Result<Vec<(&'static str, Vec<Sample>, Timing)>> {
    let latency = synth::lognormal(n, 500e3, 0.5, 1)?;
    let latency_only = |round_to: u64| -> Vec<Sample> {
        (0..n)
            .map(|i| {
                Sample::from_latency(
                    i as i64,
                    (latency[i] / round_to * round_to) as i64,
                    Outcome::Ok,
                )
            })
            .collect()
    };
    // An open-loop generator at 1 kHz: small non-negative send lag, service time at ns
    // resolution, 0.1% of requests time out.
    let lag = synth::lognormal(n, 2e3, 1.0, 2)?;
    let service = synth::lognormal(n, 500e3, 0.5, 3)?;
    let mut rng = StdRng::seed_from_u64(4);
    let fixed_rate = (0..n)
        .map(|i| {
            let intended = EPOCH_BASE_NS + i as i64 * 1_000_000;
            let start = intended + lag[i] as i64;
            if rng.random_bool(0.001) {
                Sample::new(intended, start, start + TIMEOUT_NS, Outcome::Timeout)
            } else {
                Sample::new(intended, start, start + service[i] as i64, Outcome::Ok)
            }
        })
        .collect();
    Ok(vec![
        ("latency-us", latency_only(1000), Timing::Untimed),
        ("latency-ns", latency_only(1), Timing::Untimed),
        ("load-fixed-rate", fixed_rate, Timing::Timed),
    ])
}

/// Size of the database and its WAL, bytes.
fn db_bytes(path: &Path) -> Result<u64> {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len());
    let main = size(path).map_err(|e| format!("size of {}: {e}", path.display()))?;
    let wal = size(&path.with_extension("db-wal")).unwrap_or(0);
    Ok(main + wal)
}

fn measured(seconds: f64, bytes: u64, n: usize) -> Measured {
    Measured {
        seconds,
        samples_per_s: n as f64 / seconds,
        bytes,
        bytes_per_sample: bytes as f64 / n as f64,
    }
}

fn ingest_tailhunt(path: &Path, samples: &[Sample], timing: Timing) -> Result<Measured> {
    let mut store = Store::open(path)?;
    let meta = SeriesMeta {
        timing,
        ..SeriesMeta::latency("latency")
    };
    let t0 = Instant::now();
    let mut run = store.begin_run(
        tailhunt_model::RunKind::Other("bench".into()),
        serde_json::json!({}),
        ClockOrigin::now(),
    )?;
    let series = run.open_series(&meta)?;
    for chunk in samples.chunks(CHUNK) {
        run.push_samples(series, chunk)?;
    }
    let run_id = run.finish(serde_json::json!({}))?;
    let seconds = t0.elapsed().as_secs_f64();
    store.checkpoint()?;
    let bytes = db_bytes(path)?;

    let info = store.series(&run_id)?;
    let back = store.load_samples(info[0].id)?;
    if back.len() != samples.len() {
        return Err(format!(
            "read back {} samples, not the {} written",
            back.len(),
            samples.len()
        )
        .into());
    }
    if let Some(i) = (0..back.len()).find(|&i| back[i] != samples[i]) {
        return Err(format!(
            "sample {i} read back as {:?}, written as {:?}",
            back[i], samples[i]
        )
        .into());
    }
    Ok(measured(seconds, bytes, samples.len()))
}

fn ingest_peer(path: &Path, samples: &[Sample]) -> Result<Measured> {
    let mut conn = Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         CREATE TABLE samples (series_id INTEGER, intended_ns INTEGER, start_ns INTEGER, end_ns INTEGER, outcome INTEGER);",
    )?;
    let t0 = Instant::now();
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare("INSERT INTO samples VALUES (?1, ?2, ?3, ?4, ?5)")?;
        for s in samples {
            insert.execute(params![
                1,
                s.intended_ns,
                s.start_ns,
                s.end_ns,
                s.outcome.code()
            ])?;
        }
    }
    tx.commit()?;
    let seconds = t0.elapsed().as_secs_f64();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let bytes = db_bytes(path)?;

    let count: i64 = conn.query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))?;
    for i in [0, samples.len() / 2, samples.len() - 1] {
        let s = samples[i];
        let row: (i64, i64, i64, u8) = conn.query_row(
            "SELECT intended_ns, start_ns, end_ns, outcome FROM samples WHERE rowid = ?1",
            [i as i64 + 1],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        if count as usize != samples.len()
            || row != (s.intended_ns, s.start_ns, s.end_ns, s.outcome.code())
        {
            return Err(format!(
                "peer table holds {count} rows or row {i} differs from what was written"
            )
            .into());
        }
    }
    Ok(measured(seconds, bytes, samples.len()))
}

/// Bytes of the samples as `intended_ns,start_ns,end_ns,outcome` CSV lines with a header.
fn csv_bytes(samples: &[Sample]) -> u64 {
    let mut line = Vec::with_capacity(80);
    let mut total = "intended_ns,start_ns,end_ns,outcome\n".len() as u64;
    for s in samples {
        line.clear();
        // Writing into a Vec cannot fail.
        let _ = writeln!(
            line,
            "{},{},{},{}",
            s.intended_ns,
            s.start_ns,
            s.end_ns,
            s.outcome.name()
        );
        total += line.len() as u64;
    }
    total
}

fn parse_args() -> Result<(usize, bool)> {
    let (mut n, mut json) = (10_000_000usize, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--samples" => {
                let v = args
                    .next()
                    .ok_or("--samples needs a number, e.g. --samples 1000000")?;
                n = v
                    .replace('_', "")
                    .parse()
                    .map_err(|e| format!("--samples '{v}': {e}"))?;
            }
            "--json" => json = true,
            other => {
                return Err(format!("unknown argument '{other}' (use --samples N, --json)").into())
            }
        }
    }
    if n == 0 {
        return Err("--samples must be at least 1".into());
    }
    Ok((n, json))
}

fn print_table(n: usize, rows: &[Row]) {
    println!(
        "{n} samples per data set, pushed in chunks of {CHUNK}; tailhunt = compressed blocks, \
         peer = one row per sample; both on SQLite {} (bundled by rusqlite), WAL, \
         synchronous=NORMAL. Ratios: rate = tailhunt/peer, size = peer/tailhunt.\n",
        rusqlite::version()
    );
    println!("| data set | tailhunt samples/s | peer samples/s | rate ratio | tailhunt bytes/sample | peer bytes/sample | size ratio | CSV bytes/sample |");
    println!("|---|--:|--:|--:|--:|--:|--:|--:|");
    for r in rows {
        println!(
            "| {} | {:.2} M | {:.2} M | {:.1}x | {:.2} | {:.2} | {:.1}x | {:.2} |",
            r.data_set,
            r.tailhunt.samples_per_s / 1e6,
            r.peer_row_per_sample.samples_per_s / 1e6,
            r.rate_ratio,
            r.tailhunt.bytes_per_sample,
            r.peer_row_per_sample.bytes_per_sample,
            r.size_ratio,
            r.csv_bytes_per_sample,
        );
    }
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ingest: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run() -> Result<()> {
    let (n, json) = parse_args()?;
    let dir = tempfile::tempdir().map_err(|e| format!("creating a temp directory: {e}"))?;
    let mut rows = Vec::new();
    for (name, samples, timing) in data_sets(n)? {
        let tailhunt = ingest_tailhunt(
            &dir.path().join(format!("{name}-tailhunt.db")),
            &samples,
            timing,
        )
        .map_err(|e| format!("{name}: tailhunt store: {e}"))?;
        let peer = ingest_peer(&dir.path().join(format!("{name}-peer.db")), &samples)
            .map_err(|e| format!("{name}: peer (row per sample): {e}"))?;
        rows.push(Row {
            data_set: name,
            rate_ratio: tailhunt.samples_per_s / peer.samples_per_s,
            size_ratio: peer.bytes as f64 / tailhunt.bytes as f64,
            csv_bytes_per_sample: csv_bytes(&samples) as f64 / n as f64,
            tailhunt,
            peer_row_per_sample: peer,
        });
        // Free the disk before the next data set (the peer file is ~0.3 GB per 10 M samples).
        let clean = |e: std::io::Error| format!("cleaning {}: {e}", dir.path().display());
        for f in std::fs::read_dir(dir.path()).map_err(clean)? {
            std::fs::remove_file(f.map_err(clean)?.path()).map_err(clean)?;
        }
    }
    if json {
        let doc = Doc {
            samples: n,
            chunk: CHUNK,
            sqlite_version: rusqlite::version(),
            data_sets: rows,
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_table(n, &rows);
    }
    Ok(())
}
