//! A capture file that changes while it is read: one cut (a `tcpdump -C -W` ring reopens its
//! oldest file with `O_TRUNC`) ends as a truncated capture with the frames before the cut kept,
//! and one that grows (tcpdump still writing) is read to its new end. (These guarded a memory
//! map of plain files, tried on 2026-12-01 and not kept, docs/benchmarks.md: touching a cut map
//! raises SIGBUS.)

mod read_support;

use std::fs::OpenOptions;
use std::io::Write;

use read_support::*;
use tailhunt_pcap::{PacketSource, ReadError};

/// `n` frames with payloads of about 1,400 bytes (the records cross page boundaries).
fn big_frames(n: usize) -> Vec<(i64, u32, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let payload = vec![(i % 251) as u8; 1_300 + (i * 37) % 200];
            let f = eth(&ipv4_tcp(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                40000,
                80,
                i as u32,
                &[],
                &payload,
            ));
            (
                1_700_000_000_000_000_000 + i as i64 * 1_000,
                f.len() as u32,
                f,
            )
        })
        .collect()
}

/// Reads 100 frames of a 2,000-frame file, cuts the file to `cut` bytes, and reads on: every
/// frame read must be the one written (bytes read before the cut are real), the reading must
/// end as truncated at a record, and no frame before the cut may be missing.
fn read_across_a_cut(cut: u64) {
    let frames = big_frames(2_000);
    let bytes = pcap_file(Order::Little, true, 1, &frames);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring.pcap");
    std::fs::write(&path, &bytes).unwrap();
    let mut r = tailhunt_pcap::open_file(&path).unwrap();
    for f in &frames[..100] {
        assert_eq!(r.next_packet().unwrap().unwrap().data, &f.2[..]);
    }
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let starts = record_starts(&frames);
    let mut read = 100;
    let err = loop {
        match r.next_packet() {
            Ok(Some(p)) => {
                assert_eq!(p.data, &frames[read].2[..], "frame {read}, cut {cut}");
                read += 1;
            }
            Ok(None) => panic!("a clean end after {read} frames; expected the cut"),
            Err(e) => break e,
        }
    };
    let whole = starts[1..].iter().filter(|&&end| end <= cut).count();
    assert!(
        read >= whole,
        "{read} frames read, {whole} before the cut at {cut}"
    );
    match err {
        ReadError::Truncated { offset, .. } => assert_eq!(offset, starts[read], "cut {cut}"),
        other => panic!("cut {cut}: expected Truncated at a record, got {other}"),
    }
}

#[test]
fn a_file_cut_while_it_is_read_ends_truncated_with_every_frame_before_the_cut() {
    // At a page boundary and inside a page, more than 100 frames on.
    read_across_a_cut(1 << 20);
    read_across_a_cut((1 << 20) + 1_000);
}

#[test]
fn a_file_that_grows_while_it_is_read_is_read_to_its_new_end() {
    let frames = big_frames(40);
    let bytes = pcap_file(Order::Little, false, 1, &frames);
    let starts = record_starts(&frames);
    let half = starts[20] as usize;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.pcap");
    std::fs::write(&path, &bytes[..half]).unwrap();
    let mut r = tailhunt_pcap::open_file(&path).unwrap();
    for _ in 0..20 {
        assert!(r.next_packet().unwrap().is_some());
    }
    // tcpdump writes on: the rest arrives after the reader reached the end of what it read.
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&bytes[half..])
        .unwrap();
    let mut more = 0;
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!(p.wire_len, frames[20 + more].1);
        more += 1;
    }
    assert_eq!(more, 20);
    assert_eq!(r.position(), bytes.len() as u64);
}
