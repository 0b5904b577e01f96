//! Durable by time: what a writer was handed is committed within its commit interval, whatever
//! the rate, so a writer that dies without flushing (`kill -9`, the OOM killer) loses at most
//! the last interval. A writer that is never dropped (`mem::forget`) stands in for the killed
//! process: nothing runs after it, and a second connection reads only what was committed.

use std::time::Duration;

use serde_json::json;
use tailhunt_model::{ClockOrigin, Outcome, Point, Sample, SeriesKind, SeriesMeta, SeriesSink};
use tailhunt_store::Store;

fn sample(i: i64) -> Sample {
    let t = i * 20_000_000; // 50 per second
    Sample::new(t, t + 5_000, t + 300_000 + i * 11, Outcome::Ok)
}

/// Samples of the run as another process would read them now.
fn committed(path: &std::path::Path) -> (u64, Vec<Sample>) {
    let reader = Store::open(path).unwrap();
    let id = reader.resolve_run("latest").unwrap();
    let info = reader.run(&id).unwrap();
    let series = reader.series(&id).unwrap();
    let samples = reader.load_samples(series[0].id).unwrap();
    (info.samples, samples)
}

#[test]
fn a_slow_source_is_committed_every_interval_not_every_65536_samples() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut store = Store::open(&path).unwrap();
    let mut run = store
        .begin_run(tailhunt_model::RunKind::Load, json!({}), ClockOrigin::now())
        .unwrap();
    run.set_commit_interval(Some(Duration::from_millis(50)));
    let s = run.open_series(&SeriesMeta::latency("latency")).unwrap();
    let all: Vec<Sample> = (0..300).map(sample).collect();
    // Three "seconds" of a 50/s source, one push per sample, an interval passing between.
    for (k, chunk) in all.chunks(100).enumerate() {
        for x in chunk {
            run.push_samples(s, std::slice::from_ref(x)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(60));
        run.commit_if_due().unwrap();
        let (count, back) = committed(&path);
        assert_eq!(count, 100 * (k as u64 + 1), "after chunk {k}");
        assert_eq!(back, all[..100 * (k + 1)], "after chunk {k}");
    }
    // The open block kept one row, rewritten as it grew, not one row per commit.
    let rows: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM sample_blocks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 1);
    // The writer dies without a flush: the last interval's samples are all that is missing.
    run.push_samples(s, &[sample(300)]).unwrap();
    std::mem::forget(run);
    let (count, back) = committed(&path);
    assert_eq!(count, 300);
    assert_eq!(back, all);
}

#[test]
fn full_blocks_still_roll_over_and_the_count_stays_exact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut store = Store::open(&path).unwrap();
    let mut run = store
        .begin_run(tailhunt_model::RunKind::Load, json!({}), ClockOrigin::now())
        .unwrap();
    // Commit on every push: each push rewrites the open block.
    run.set_commit_interval(Some(Duration::ZERO));
    let s = run.open_series(&SeriesMeta::latency("latency")).unwrap();
    let values = run
        .open_series(&SeriesMeta {
            kind: SeriesKind::Values,
            ..SeriesMeta::latency("bytes")
        })
        .unwrap();
    let all: Vec<Sample> = (0..20_000).map(sample).collect();
    let points: Vec<Point> = (0..20_000)
        .map(|i| Point {
            t_ns: i * 1_000,
            value: i % 97,
        })
        .collect();
    for (c, p) in all.chunks(3_001).zip(points.chunks(3_001)) {
        run.push_samples(s, c).unwrap();
        run.push_values(values, p).unwrap();
    }
    std::mem::forget(run);
    let reader = Store::open(&path).unwrap();
    let id = reader.resolve_run("latest").unwrap();
    let series = reader.series(&id).unwrap();
    assert_eq!(series[0].count, 20_000);
    assert_eq!(reader.load_samples(series[0].id).unwrap(), all);
    assert_eq!(series[1].count, 20_000);
    let seqs: Vec<(i64, i64)> = {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let mut q = conn
            .prepare("SELECT seq, n FROM sample_blocks ORDER BY seq")
            .unwrap();
        q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(seqs, [(0, 8192), (1, 8192), (2, 20_000 - 2 * 8192)]);
}

#[test]
fn without_an_interval_only_full_blocks_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut store = Store::open(&path).unwrap();
    let mut run = store
        .begin_run(
            tailhunt_model::RunKind::Import,
            json!({}),
            ClockOrigin::now(),
        )
        .unwrap();
    run.set_commit_interval(None);
    let s = run.open_series(&SeriesMeta::latency("latency")).unwrap();
    run.push_samples(s, &[sample(0), sample(1)]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    run.commit_if_due().unwrap();
    std::mem::forget(run);
    assert_eq!(committed(&path).0, 0);
}
