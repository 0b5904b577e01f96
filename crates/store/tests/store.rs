//! Store behaviour on a real SQLite file.

use std::collections::BTreeMap;

use serde_json::json;
use tailhunt_histogram::Histogram;
use tailhunt_model::{
    ClockOrigin, Evidence, Finding, IntervalHistogram, Outcome, Point, RunKind, RunStatus, Sample,
    SamplePart, SeriesData, SeriesKind, SeriesMeta, SeriesSink, Unit, Verdict,
};
use tailhunt_store::{Abandoned, Store, StoreError};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("t.db")).unwrap();
    (dir, store)
}

fn samples(n: usize) -> Vec<Sample> {
    (0..n)
        .map(|i| {
            let t = i as i64 * 1_000_000;
            let outcome = if i % 1000 == 999 {
                Outcome::Timeout
            } else {
                Outcome::Ok
            };
            Sample::new(
                t,
                t + 3_000,
                t + 400_000 + (i as i64 * 7919) % 100_000,
                outcome,
            )
        })
        .collect()
}

/// A values series of bytes.
fn bytes_meta() -> SeriesMeta {
    SeriesMeta {
        kind: SeriesKind::Values,
        unit: Unit::Bytes,
        ..SeriesMeta::latency("bytes")
    }
}

#[test]
fn samples_round_trip_across_many_blocks() {
    let (_d, mut store) = store();
    let data = samples(100_000);
    let mut run = store
        .begin_run(
            RunKind::Other("test".into()),
            json!({"a": 1}),
            ClockOrigin::now(),
        )
        .unwrap();
    let s = run.open_series(&SeriesMeta::latency("latency")).unwrap();
    for chunk in data.chunks(777) {
        run.push_samples(s, chunk).unwrap();
    }
    let id = run.finish(json!({"b": 2})).unwrap();
    let info = store.run(&id).unwrap();
    assert_eq!(info.status, RunStatus::Complete);
    assert_eq!(info.samples, 100_000);
    assert_eq!(info.params, json!({"a": 1, "b": 2}));
    let series = store.series(&id).unwrap();
    assert_eq!(series.len(), 1);
    assert_eq!(store.load_samples(series[0].id).unwrap(), data);
}

/// A closed series' open block is written whole; points pushed after the close start a new
/// block, and every sample and point reads back in order with the right counts (closing frees
/// the writer's buffer, so a close that lost its block or rewrote it shorter would show here).
#[test]
fn closed_series_keep_every_point_and_take_more_after() {
    let (_d, mut store) = store();
    let data = samples(20_000);
    let mut run = store
        .begin_run(RunKind::Pcap, json!({}), ClockOrigin::now())
        .unwrap();
    let s = run.open_series(&SeriesMeta::latency("latency")).unwrap();
    let v = run.open_series(&bytes_meta()).unwrap();
    let points: Vec<Point> = (0..10_000)
        .map(|i| Point {
            t_ns: i * 1_000_000,
            value: i % 977,
        })
        .collect();
    // 9,000 samples: one full block and an open one, closed; then the rest.
    run.push_samples(s, &data[..9_000]).unwrap();
    run.push_values(v, &points[..100]).unwrap();
    run.commit_now().unwrap();
    run.close_series(s).unwrap();
    run.close_series(v).unwrap();
    run.close_series(v).unwrap();
    run.push_samples(s, &data[9_000..]).unwrap();
    run.push_values(v, &points[100..]).unwrap();
    assert!(
        run.close_series(7).is_err(),
        "an unopened handle is refused"
    );
    let id = run.finish(json!({})).unwrap();
    let series = store.series(&id).unwrap();
    assert_eq!((series[0].count, series[1].count), (20_000, 10_000));
    assert_eq!(store.load_samples(series[0].id).unwrap(), data);
    assert_eq!(
        store.load_series(&series[1]).unwrap().data,
        SeriesData::Values(points)
    );
}

#[test]
fn histograms_round_trip() {
    let (_d, mut store) = store();
    let mut h = Histogram::new();
    (1..1000u64).for_each(|v| h.record(v * 1000));
    let mut run = store
        .begin_run(RunKind::Other("test".into()), json!({}), ClockOrigin::now())
        .unwrap();
    let meta = SeriesMeta {
        kind: SeriesKind::Histograms,
        ..SeriesMeta::latency("lat")
    };
    let s = run.open_series(&meta).unwrap();
    let iv = IntervalHistogram {
        start_ns: 5,
        end_ns: 1_000_000_005,
        histogram: h,
    };
    run.push_histogram(s, &iv).unwrap();
    assert!(
        run.push_samples(s, &samples(1)).is_err(),
        "kind mismatch must be refused"
    );
    let id = run.finish(json!({})).unwrap();
    let series = store.series(&id).unwrap();
    assert_eq!(series[0].count, 999);
    assert_eq!(store.load_histograms(series[0].id).unwrap(), vec![iv]);
}

#[test]
fn values_round_trip_across_blocks_and_refuse_samples() {
    let (_d, mut store) = store();
    let mut run = store
        .begin_run(RunKind::Pcap, json!({}), ClockOrigin::now())
        .unwrap();
    let s = run.open_series(&bytes_meta()).unwrap();
    let points: Vec<Point> = (0..20_000)
        .map(|i| Point {
            t_ns: 1_700_000_000_000_000_000 + i * 1_000_000,
            value: (i * 37) % 12_500,
        })
        .collect();
    run.push_values(s, &points[..5]).unwrap();
    run.push_values(s, &points[5..]).unwrap();
    assert!(run.push_samples(s, &samples(1)).is_err());
    let id = run.finish(json!({})).unwrap();
    let info = &store.series(&id).unwrap()[0];
    assert_eq!((info.kind, info.count), (SeriesKind::Values, 20_000));
    let loaded = store.load_series(info).unwrap();
    assert_eq!(loaded.data, SeriesData::Values(points));
}

/// A store written by schema version 1 (no value_blocks) opens, gains the tables and says 6.
#[test]
fn version_one_store_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE value_blocks; DROP TABLE documents; DROP TABLE document_rows;
         DROP TABLE derived_series;
         UPDATE meta SET value = '1' WHERE key = 'schema_version';",
    )
    .unwrap();
    drop(conn);
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v, "6");
    for table in [
        "value_blocks",
        "documents",
        "document_rows",
        "derived_series",
    ] {
        let n: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
    }
}

/// A derived series (a load step's `client_lateness`, `service`) keeps no blocks: read back,
/// it is the part of each of its parent's samples, whole and in order, also before the run
/// ends, with its parent's count; it goes with its run. A store of schema 5 (none derived)
/// still reads read-only.
#[test]
fn derived_series_read_back_as_the_parts_of_their_parent() {
    let (dir, mut store) = store();
    let data = samples(20_000);
    let mut run = store
        .begin_run(RunKind::Load, json!({}), ClockOrigin::now())
        .unwrap();
    let latency = run.open_series(&SeriesMeta::latency("latency")).unwrap();
    let parts = SamplePart::ALL.map(|part| {
        run.open_derived(&SeriesMeta::latency(part.name()), latency, part)
            .unwrap()
    });
    // A derived series cannot have a derived or a values parent.
    assert!(run
        .open_derived(&SeriesMeta::latency("x"), parts[0], SamplePart::Service)
        .is_err());
    for chunk in data.chunks(3_000) {
        run.push_samples(latency, chunk).unwrap();
        for (h, part) in parts.iter().zip(SamplePart::ALL) {
            let mine: Vec<Sample> = chunk.iter().map(|s| part.of(s)).collect();
            run.push_samples(*h, &mine).unwrap();
        }
    }
    run.commit_now().unwrap();
    let id = run.id().to_string();
    let check = |store: &Store, n: usize| {
        let infos = store.series(&id).unwrap();
        assert_eq!(infos.len(), 3);
        for (info, part) in infos[1..].iter().zip(SamplePart::ALL) {
            assert_eq!((info.name.as_str(), info.count), (part.name(), n as u64));
            let want: Vec<Sample> = data[..n].iter().map(|s| part.of(s)).collect();
            assert_eq!(
                store.load_samples(info.id).unwrap(),
                want,
                "{}",
                part.name()
            );
        }
    };
    // While the run is open (what `kill -9` would leave): everything committed, derived too.
    check(
        &Store::open_read_only(&dir.path().join("t.db")).unwrap(),
        20_000,
    );
    run.finish(json!({})).unwrap();
    check(&store, 20_000);
    // The run counts what it stored: the parts are views of the 20,000 requests, not more of them.
    assert_eq!(store.run(&id).unwrap().samples, 20_000);
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let blocks: Vec<i64> = conn
        .prepare("SELECT DISTINCT series_id FROM sample_blocks")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        blocks,
        [store.series(&id).unwrap()[0].id],
        "only the parent has blocks"
    );
    store.delete_run(&id).unwrap();
    let left: i64 = conn
        .query_row("SELECT count(*) FROM derived_series", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0);
    // Schema 5: no derived_series table; a read-only reader does not look for it.
    let mut run = store
        .begin_run(RunKind::Load, json!({}), ClockOrigin::now())
        .unwrap();
    let h = run.open_series(&SeriesMeta::latency("latency")).unwrap();
    run.push_samples(h, &data[..100]).unwrap();
    let id = run.finish(json!({})).unwrap();
    drop(store);
    conn.execute_batch(
        "DROP TABLE derived_series; UPDATE meta SET value = '5' WHERE key = 'schema_version';",
    )
    .unwrap();
    drop(conn);
    let old = Store::open_read_only(&dir.path().join("t.db")).unwrap();
    let info = &old.series(&id).unwrap()[0];
    assert_eq!(info.count, 100);
    assert_eq!(old.load_samples(info.id).unwrap(), data[..100]);
    assert_eq!(old.run(&id).unwrap().samples, 100);
}

#[test]
fn documents_round_trip_compressed_and_go_with_their_run() {
    let (dir, mut store) = store();
    let big = format!(
        "{{\"flows\": [{}]}}",
        vec!["{\"bytes\": 1234}"; 50_000].join(",")
    );
    let mut w = store
        .begin_run(RunKind::Pcap, serde_json::json!({}), ClockOrigin::wall(0))
        .unwrap();
    w.put_document("capture", 1, &big).unwrap();
    w.put_document("capture", 2, &big).unwrap(); // replaced, not duplicated
    let id = w.finish(serde_json::json!({})).unwrap();
    assert_eq!(
        store.document(&id, "capture").unwrap(),
        Some((2, big.clone()))
    );
    assert_eq!(store.document(&id, "other").unwrap(), None);
    let sql = rusqlite::Connection::open(store.path()).unwrap();
    let stored: i64 = sql
        .query_row("SELECT sum(length(data)) FROM documents", [], |r| r.get(0))
        .unwrap();
    assert!(
        stored * 20 < big.len() as i64,
        "{stored} bytes stored for {}",
        big.len()
    );
    store.delete_run(&id).unwrap();
    let left: i64 = sql
        .query_row("SELECT count(*) FROM documents", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0);
    drop(dir);
}

#[test]
fn dropped_writer_keeps_samples_and_marks_run_partial() {
    let (_d, mut store) = store();
    let id = {
        let mut run = store
            .begin_run(RunKind::Other("test".into()), json!({}), ClockOrigin::now())
            .unwrap();
        let s = run.open_series(&SeriesMeta::latency("latency")).unwrap();
        run.push_samples(s, &samples(20_000)).unwrap();
        run.id().to_string()
    };
    let info = store.run(&id).unwrap();
    assert_eq!(info.status, RunStatus::Partial);
    assert_eq!(info.samples, 20_000);
}

#[test]
fn an_abandoned_run_keeps_what_it_stored_and_an_empty_one_is_removed() {
    let (_d, mut store) = store();
    // Samples stored before the source failed: kept, partial, with the extra params.
    let mut run = store
        .begin_run(RunKind::Other("test".into()), json!({}), ClockOrigin::now())
        .unwrap();
    let s = run.open_series(&SeriesMeta::latency("latency")).unwrap();
    run.push_samples(s, &samples(3_000)).unwrap();
    let kept = run
        .abandon(json!({ "why": "the server went away" }))
        .unwrap();
    let Abandoned::Kept { id, samples: n } = kept else {
        panic!("a run with samples was removed: {kept:?}");
    };
    assert_eq!(n, 3_000);
    let info = store.run(&id).unwrap();
    assert_eq!(
        (info.status, info.samples),
        (RunStatus::Partial, 3_000),
        "{info:?}"
    );
    assert_eq!(info.params["why"], "the server went away");
    assert_eq!(
        store
            .load_samples(store.series(&id).unwrap()[0].id)
            .unwrap()
            .len(),
        3_000
    );

    // A series opened but nothing pushed: no value stored, so no run.
    let mut run = store
        .begin_run(RunKind::Other("test".into()), json!({}), ClockOrigin::now())
        .unwrap();
    run.open_series(&SeriesMeta::latency("latency")).unwrap();
    let gone = run.abandon(json!({})).unwrap();
    let Abandoned::Removed { id: gone_id } = gone else {
        panic!("an empty run was kept: {gone:?}");
    };
    assert!(matches!(store.run(&gone_id), Err(StoreError::NoSuchRun(_))));
    assert_eq!(store.runs().unwrap().len(), 1);
}

#[test]
fn run_specs_resolve_latest_and_prefixes() {
    let (_d, mut store) = store();
    assert!(matches!(
        store.resolve_run("latest"),
        Err(StoreError::NoRuns)
    ));
    let mut ids = Vec::new();
    for _ in 0..3 {
        let run = store
            .begin_run(RunKind::Other("test".into()), json!({}), ClockOrigin::now())
            .unwrap();
        ids.push(run.finish(json!({})).unwrap());
    }
    assert_eq!(store.resolve_run("latest").unwrap(), ids[2]);
    assert_eq!(store.resolve_run(&ids[0][..7]).unwrap(), ids[0]);
    assert_eq!(store.resolve_run(&ids[1]).unwrap(), ids[1]);
    assert!(matches!(
        store.resolve_run("zzz"),
        Err(StoreError::NoSuchRun(_))
    ));
    assert!(store.resolve_run("").is_err());
    // 17 runs over 16 possible first hex digits: two must share one, and that one-character
    // prefix must be refused as ambiguous, naming both.
    for _ in 0..14 {
        let run = store
            .begin_run(RunKind::Other("test".into()), json!({}), ClockOrigin::now())
            .unwrap();
        ids.push(run.finish(json!({})).unwrap());
    }
    let shared = ids
        .iter()
        .find(|a| ids.iter().filter(|b| b[..1] == a[..1]).count() > 1)
        .map(|a| a[..1].to_string())
        .expect("pigeonhole");
    match store.resolve_run(&shared) {
        Err(StoreError::AmbiguousRun { prefix, matches }) => {
            assert_eq!(prefix, shared);
            assert!(matches.len() >= 2 && matches.iter().all(|m| m.starts_with(&shared)));
            let msg = StoreError::AmbiguousRun { prefix, matches }.to_string();
            assert!(msg.contains("type more"), "{msg}");
        }
        other => panic!("prefix {shared} should be ambiguous, got {other:?}"),
    }
}

#[test]
fn findings_round_trip_and_replace_per_detector() {
    let (_d, mut store) = store();
    let id = store
        .begin_run(RunKind::Other("test".into()), json!({}), ClockOrigin::now())
        .unwrap()
        .finish(json!({}))
        .unwrap();
    let f = Finding {
        detector: "fragile-percentile".into(),
        verdict: Verdict::Warning,
        confidence: 0.9,
        summary: "p90 sits on a gap".into(),
        evidence: vec![Evidence {
            series: "latency".into(),
            range_ns: Some((0, 10)),
            values: BTreeMap::from([("p90_ns".into(), 1e7)]),
            note: "n".into(),
        }],
        fix: None,
    };
    store.put_findings(&id, std::slice::from_ref(&f)).unwrap();
    store.put_findings(&id, std::slice::from_ref(&f)).unwrap();
    assert_eq!(store.findings(&id).unwrap(), vec![f]);
}

#[test]
fn missing_and_foreign_files_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.db");
    let err = Store::open_existing(&missing).err().unwrap().to_string();
    assert!(err.contains("nope.db") && err.contains("--db"), "{err}");
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).unwrap();
    let err = Store::open(&junk).err().unwrap().to_string();
    assert!(
        err.contains("junk.db") && err.contains("not a SQLite database"),
        "{err}"
    );
}

/// A store opened read-only reads as any other, writes nothing, and says findings given to it
/// were not kept.
#[test]
fn read_only_store_reads_and_keeps_findings_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let id = {
        let mut store = Store::open(&path).unwrap();
        let mut run = store
            .begin_run(RunKind::Other("test".into()), json!({}), ClockOrigin::now())
            .unwrap();
        let s = run.open_series(&SeriesMeta::latency("latency")).unwrap();
        run.push_samples(s, &samples(10_000)).unwrap();
        run.finish(json!({})).unwrap()
    };
    let mut store = Store::open_read_only(&path).unwrap();
    assert!(store.is_read_only() && !store.findings_unsaved());
    let info = &store.series(&id).unwrap()[0];
    assert_eq!(store.load_samples(info.id).unwrap(), samples(10_000));
    let f = Finding {
        detector: "d".into(),
        verdict: Verdict::Warning,
        confidence: 1.0,
        summary: "s".into(),
        evidence: vec![],
        fix: None,
    };
    store.replace_findings(&id, &[f]).unwrap();
    assert!(store.findings_unsaved());
    assert!(store.findings(&id).unwrap().is_empty());
    assert!(matches!(store.delete_run(&id), Err(StoreError::ReadOnly)));
    assert!(matches!(
        store.begin_run(RunKind::Other("x".into()), json!({}), ClockOrigin::now()),
        Err(StoreError::ReadOnly)
    ));
    // Reading for a command on a writable file opens it normally.
    assert!(!Store::open_for_reading(&path).unwrap().is_read_only());
    let missing = dir.path().join("nope.db");
    assert!(matches!(
        Store::open_for_reading(&missing),
        Err(StoreError::Missing(_))
    ));
}

#[test]
fn a_full_disk_and_a_read_only_file_are_named_not_quoted() {
    let full = rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
        Some("database or disk is full".into()),
    );
    let e = StoreError::from(full);
    assert!(matches!(e, StoreError::DiskFull));
    assert!(
        e.to_string()
            .starts_with("the disk holding the store is full"),
        "{e}"
    );
    let ro = rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
        Some("attempt to write a readonly database".into()),
    );
    assert!(StoreError::from(ro).is_read_only());
}
