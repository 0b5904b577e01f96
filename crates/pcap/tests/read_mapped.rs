//! A plain capture file is read through a memory map: a file cut while it is read ends as a
//! truncated one (without the SIGBUS that touching a cut map raises ending the process), and
//! a file that grows while it is read is read to its new end, as reading it would.

mod read_support;

use std::fs::OpenOptions;
use std::io::Write;

use read_support::*;
use tailhunt_pcap::{PacketSource, ReadError};

/// Frames as written: (ts_ns, wire_len, data).
type Frames = Vec<(i64, u32, Vec<u8>)>;

/// `n` frames with payloads of about 1,400 bytes (the records cross page boundaries).
fn big_frames(n: usize) -> Frames {
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

/// Reads 100 frames of a 2,000-frame file, cuts the file to `cut` bytes, and reads on: the
/// frames read (checked against those written, up to the cut) and how the reading ended.
fn read_across_a_cut(cut: u64) -> (Frames, usize, ReadError) {
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
                if starts[read + 1] <= cut {
                    assert_eq!(p.data, &frames[read].2[..], "frame {read}");
                }
                read += 1;
            }
            Ok(None) => panic!("a clean end after {read} frames; expected the cut"),
            Err(e) => break e,
        }
    };
    (frames, read, err)
}

#[test]
fn a_file_cut_while_it_is_mapped_is_truncated_at_the_record_not_a_crash() {
    // A page-aligned cut: the pages after it are gone from the map, and touching them
    // raises SIGBUS (which, unguarded, ends this test's process).
    let cut = 1u64 << 20;
    let (frames, read, err) = read_across_a_cut(cut);
    let starts = record_starts(&frames);
    let whole = starts[1..].iter().filter(|&&end| end <= cut).count();
    let cut_record = *starts.iter().filter(|&&s| s < cut).max().unwrap();
    assert!(starts[whole + 1] > cut, "the cut falls inside a record");
    assert_eq!(read, whole);
    match err {
        ReadError::Truncated { offset, .. } => assert_eq!(offset, cut_record),
        other => panic!("expected Truncated at {cut_record}, got {other}"),
    }
}

#[test]
fn a_file_cut_inside_a_page_while_it_is_mapped_still_ends_truncated() {
    // The rest of the cut's page reads as zeros without a fault; the next page faults.
    let cut = (1u64 << 20) + 1_000;
    let (frames, read, err) = read_across_a_cut(cut);
    let starts = record_starts(&frames);
    let whole = starts[1..].iter().filter(|&&end| end <= cut).count();
    assert!(read >= whole, "{read} frames read, {whole} before the cut");
    assert!(
        matches!(err, ReadError::Truncated { offset, .. } if offset <= cut),
        "{err}"
    );
}

#[test]
fn a_file_that_grows_while_it_is_mapped_is_read_to_its_new_end() {
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
    // tcpdump writes on: the rest arrives after the reader reached the end of its map.
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
