use super::*;

fn records(q: &mut Queue) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(r) = q.peek().unwrap() {
        out.push(r);
        q.ack().unwrap();
    }
    out
}

#[test]
fn records_come_back_in_order_and_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let mut q = Queue::open(dir.path(), 1 << 20).unwrap();
    for i in 0..100u32 {
        q.append(format!("record {i}").as_bytes()).unwrap();
    }
    assert_eq!(q.peek().unwrap().unwrap(), b"record 0");
    q.ack().unwrap();
    q.ack().unwrap();
    drop(q);
    let mut q = Queue::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(q.stats().pending_records, 98);
    let got = records(&mut q);
    assert_eq!(got.len(), 98);
    assert_eq!(got[0], b"record 2");
    assert_eq!(got[97], b"record 99");
    drop(q);
    let q = Queue::open(dir.path(), 1 << 20).unwrap();
    assert!(q.is_empty());
}

#[test]
fn acknowledged_segments_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let mut q = Queue::open(dir.path(), 64 * 1024).unwrap();
    let payload = vec![7u8; 1000];
    for _ in 0..40 {
        q.append(&payload).unwrap();
    }
    let segs = |d: &Path| {
        fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("seg-")
            })
            .count()
    };
    assert!(segs(dir.path()) >= 5, "{} segments", segs(dir.path()));
    assert_eq!(records(&mut q).len(), 40);
    assert_eq!(segs(dir.path()), 1);
    q.append(b"after").unwrap();
    assert_eq!(records(&mut q), vec![b"after".to_vec()]);
}

#[test]
fn a_full_queue_drops_the_oldest_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut q = Queue::open(dir.path(), 8192).unwrap();
    let mut dropped = 0;
    for i in 0..100u32 {
        let mut payload = vec![0u8; 200];
        payload[..4].copy_from_slice(&i.to_le_bytes());
        dropped += q.append(&payload).unwrap().dropped_records;
    }
    let s = q.stats();
    assert!(s.pending_bytes <= 8192);
    assert_eq!(s.dropped_records, dropped);
    assert_eq!(s.pending_records + s.dropped_records, 100);
    let got = records(&mut q);
    let first = u32::from_le_bytes(got[0][..4].try_into().unwrap());
    assert_eq!(
        first as u64, dropped,
        "the oldest were dropped, the newest kept"
    );
    let before = q.stats().dropped_records;
    assert!(matches!(
        q.append(&vec![0u8; 9000]),
        Err(QueueError::TooLarge { .. })
    ));
    assert_eq!(
        q.stats().dropped_records,
        before + 1,
        "a refused record is lost, so counted"
    );
}

#[test]
fn a_torn_tail_is_cut_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut q = Queue::open(dir.path(), 1 << 20).unwrap();
    q.append(b"first").unwrap();
    q.append(b"second").unwrap();
    drop(q);
    let seg = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".q"))
        .unwrap();
    let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&[50, 0, 0, 0, 1, 2, 3, 4, 9, 9]).unwrap();
    drop(f);
    let mut q = Queue::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(q.stats().lost_on_open_bytes, 10);
    q.append(b"third").unwrap();
    assert_eq!(
        records(&mut q),
        vec![b"first".to_vec(), b"second".to_vec(), b"third".to_vec()]
    );
}

#[test]
fn bad_ack_file_and_tiny_bound_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Queue::open(dir.path(), 100),
        Err(QueueError::BoundTooSmall(100))
    ));
    fs::write(dir.path().join("acked"), "banana").unwrap();
    let e = Queue::open(dir.path(), 1 << 20).unwrap_err().to_string();
    assert!(e.contains("banana") && e.contains("delete it"), "{e}");
}

#[test]
fn a_torn_record_right_after_the_acknowledgement_does_not_stall_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let mut q = Queue::open(dir.path(), 64 * 1024).unwrap();
    for i in 0..30u32 {
        let mut payload = vec![1u8; 1000];
        payload[..4].copy_from_slice(&i.to_le_bytes());
        q.append(&payload).unwrap();
    }
    let mut segs: Vec<PathBuf> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".q"))
        .collect();
    segs.sort();
    assert!(segs.len() >= 3);
    let len = fs::metadata(&segs[0]).unwrap().len();
    let first_segment_records = (len / 1008) as u32;
    // Deliver all but the first segment's last record, then tear that record: the
    // acknowledgement now points at the torn segment's end, before a gap.
    for _ in 0..first_segment_records - 1 {
        q.peek().unwrap().unwrap();
        q.ack().unwrap();
    }
    drop(q);
    OpenOptions::new()
        .write(true)
        .open(&segs[0])
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let mut q = Queue::open(dir.path(), 64 * 1024).unwrap();
    assert_eq!(q.stats().lost_on_open_bytes, 1003);
    let got: Vec<u32> = records(&mut q)
        .iter()
        .map(|r| u32::from_le_bytes(r[..4].try_into().unwrap()))
        .collect();
    let want: Vec<u32> = (first_segment_records..30).collect();
    assert_eq!(got, want);
}

#[test]
fn a_queue_directory_in_use_is_refused_until_its_holder_goes() {
    let dir = tempfile::tempdir().unwrap();
    let mut q = Queue::open(dir.path(), 1 << 20).unwrap();
    q.append(b"one").unwrap();
    match Queue::open(dir.path(), 1 << 20) {
        Err(QueueError::InUse(p)) => assert_eq!(p, dir.path()),
        other => panic!("second open of a queue in use: {other:?}"),
    }
    drop(q);
    let mut q = Queue::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(records(&mut q), vec![b"one".to_vec()]);
}
