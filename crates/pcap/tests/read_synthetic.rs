//! Synthetic captures written by the test: both byte orders, pcapng with several interfaces,
//! resolutions, offsets and sections, block kinds, compression, and a cut at every byte.

mod read_support;

use std::io::Write;

use read_support::*;
use tailhunt_pcap::read::MAX_BUFFER;
use tailhunt_pcap::ReadError;

#[test]
fn big_endian_pcap_microseconds_reads_like_little_endian_nanoseconds() {
    let frames = small_frames(5);
    for (order, nano) in [
        (Order::Big, false),
        (Order::Little, true),
        (Order::Big, true),
        (Order::Little, false),
    ] {
        let (pkts, err) = read_all(&pcap_file(order, nano, 1, &frames));
        assert!(err.is_none(), "{order:?} nano={nano}: {err:?}");
        assert_eq!(pkts.len(), 5);
        for (p, f) in pkts.iter().zip(&frames) {
            let want_ts = if nano { f.0 } else { f.0 / 1000 * 1000 };
            assert_eq!(p.0, want_ts, "{order:?} nano={nano}");
            assert_eq!((p.1, p.2, p.3), (0, 1, f.1));
            assert_eq!(p.4, f.2);
        }
    }
}

/// Two sections; the first big-endian with an Ethernet interface in µs (default resolution)
/// and a raw-IP interface at 2^-20 s with a 100 s offset; the second little-endian with an
/// SLL2 interface in ns. EPB, SPB, obsolete PB and unknown blocks mixed in.
fn two_section_pcapng() -> Vec<u8> {
    let be = Order::Big;
    let le = Order::Little;
    let frame = eth(&ipv4_tcp(
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        1,
        2,
        3,
        &[],
        b"hello",
    ));
    let raw = ipv4_tcp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, 3, &[], b"raw!");
    let mut sll2 = vec![
        0x08, 0x00, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    sll2.extend_from_slice(&raw);
    let mut f = shb(be);
    f.extend(idb(be, 1, None, None));
    f.extend(block(be, 0x0bad, b"unknown block body"));
    f.extend(idb(be, 101, Some(0x80 | 20), Some(100)));
    f.extend(epb(be, 0, 1_700_000_000_123_456, 1514, &frame));
    f.extend(epb(be, 1, 3 << 20 | 1 << 19, raw.len() as u32, &raw));
    f.extend(spb(be, frame.len() as u32, &frame));
    f.extend(pb(be, 1, 5 << 20, 9000, &raw));
    f.extend(block(be, 5, &[0; 20])); // interface statistics
    f.extend(shb(le));
    f.extend(idb(le, 276, Some(9), None));
    f.extend(epb(
        le,
        0,
        1_700_000_001_000_000_007,
        sll2.len() as u32,
        &sll2,
    ));
    f
}

#[test]
fn pcapng_interfaces_resolutions_offsets_sections_and_block_kinds() {
    let (pkts, err) = read_all(&two_section_pcapng());
    assert!(err.is_none(), "{err:?}");
    let summary: Vec<(i64, u32, u32, u32, usize)> = pkts
        .iter()
        .map(|p| (p.0, p.1, p.2, p.3, p.4.len()))
        .collect();
    let us = 1_700_000_000_123_456_000;
    assert_eq!(
        summary,
        vec![
            (us, 0, 1, 1514, 59),
            (103_500_000_000, 1, 101, 44, 44),
            (103_500_000_000, 0, 1, 59, 59), // SPB: no time of its own, the last one seen
            (105_000_000_000, 1, 101, 9000, 44),
            (1_700_000_001_000_000_007, 0, 276, 64, 64),
        ]
    );
    for p in &pkts {
        let raw = tailhunt_pcap::RawPacket {
            ts_ns: p.0,
            iface: p.1,
            link: tailhunt_pcap::LinkType::from_number(p.2),
            wire_len: p.3,
            data: &p.4,
        };
        let d = tailhunt_pcap::decode(&raw).expect("every synthetic frame decodes");
        assert_eq!(d.src.to_string(), "1.2.3.4");
    }
}

#[test]
fn packet_for_an_undescribed_interface_is_corrupt_with_its_offset() {
    let o = Order::Little;
    let mut f = shb(o);
    f.extend(idb(o, 1, None, None));
    let at = f.len() as u64;
    f.extend(epb(o, 3, 0, 4, &[1, 2, 3, 4]));
    match read_all(&f) {
        (p, Some(ReadError::Corrupt { offset, what, .. })) => {
            assert!(p.is_empty());
            assert_eq!(offset, at);
            assert!(what.contains("interface 3"), "{what}");
        }
        other => panic!("expected Corrupt, got {:?}", other.1),
    }
}

#[test]
fn nonsense_record_length_is_corrupt_not_an_allocation() {
    let mut f = pcap_file(Order::Little, false, 1, &small_frames(2));
    let at = f.len() as u64;
    f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0]);
    f.extend_from_slice(&[0; 64]);
    match read_all(&f) {
        (p, Some(ReadError::Corrupt { offset, .. })) => {
            assert_eq!(p.len(), 2);
            assert_eq!(offset, at);
        }
        other => panic!("expected Corrupt, got {:?}", other.1),
    }
}

#[test]
fn not_a_capture_names_the_first_bytes() {
    match read_all(b"GET / HTTP/1.1\r\n") {
        (_, Some(e @ ReadError::NotACapture { .. })) => {
            assert!(e.to_string().contains("47455420"), "{e}");
        }
        other => panic!("expected NotACapture, got {:?}", other.1),
    }
}

/// Record boundaries (start offsets) of a file, and its length.
/// Every cut of `file`, read as a stream and as a file: both must keep the packets before the
/// cut and name the record it cuts.
fn check_every_cut(file: &[u8], header_end: u64, starts: &[u64], packets: usize) {
    for (cut, (pkts, err)) in (0..=file.len()).flat_map(|cut| {
        [
            (cut, read_all(&file[..cut])),
            (cut, read_file_all(&file[..cut])),
        ]
    }) {
        let cut = cut as u64;
        let complete = starts
            .iter()
            .skip(1)
            .take(packets)
            .filter(|&&e| e <= cut)
            .count();
        if cut < header_end {
            assert!(pkts.is_empty());
            match err {
                Some(ReadError::Empty { .. }) if cut == 0 => {}
                Some(ReadError::Truncated { offset: 0, .. }) if cut > 0 => {}
                other => panic!("cut {cut} inside the header: {other:?}"),
            }
            continue;
        }
        assert_eq!(pkts.len(), complete, "cut at {cut}");
        if starts.contains(&cut) {
            assert!(err.is_none(), "cut at boundary {cut}: {err:?}");
        } else {
            let start = *starts.iter().filter(|&&s| s <= cut).max().unwrap();
            match err {
                Some(ReadError::Truncated { offset, .. }) => {
                    assert_eq!(offset, start, "cut at {cut}")
                }
                other => panic!("cut at {cut}: expected Truncated at {start}, got {other:?}"),
            }
        }
    }
}

#[test]
fn pcap_cut_at_every_byte_returns_earlier_packets_then_truncated_at_the_record() {
    let frames = small_frames(4);
    let file = pcap_file(Order::Big, true, 1, &frames);
    check_every_cut(&file, 24, &record_starts(&frames), 4);
}

#[test]
fn pcapng_cut_at_every_byte_returns_earlier_packets_then_truncated_at_the_block() {
    let o = Order::Little;
    let frames = small_frames(3);
    let mut file = shb(o);
    file.extend(idb(o, 1, Some(9), None));
    let mut starts = vec![0, shb(o).len() as u64];
    for f in &frames {
        starts.push(file.len() as u64);
        file.extend(epb(o, 0, f.0 as u64, f.1, &f.2));
    }
    starts.push(file.len() as u64);
    file.extend(block(o, 5, &[0; 20]));
    starts.push(file.len() as u64);
    // Packets complete at the end of the EPBs: starts[3..=5].
    for cut in 0..=file.len() {
        let (pkts, err) = read_all(&file[..cut]);
        let cut = cut as u64;
        let complete = starts[3..=5].iter().filter(|&&e| e <= cut).count();
        assert_eq!(pkts.len(), complete, "cut at {cut}");
        if cut == 0 {
            assert!(matches!(err, Some(ReadError::Empty { .. })), "{err:?}");
        } else if starts.contains(&cut) {
            assert!(err.is_none(), "cut at boundary {cut}: {err:?}");
        } else {
            let start = *starts.iter().filter(|&&s| s <= cut).max().unwrap();
            match err {
                Some(ReadError::Truncated { offset, .. }) => {
                    assert_eq!(offset, start, "cut at {cut}")
                }
                other => panic!("cut at {cut}: expected Truncated at {start}, got {other:?}"),
            }
        }
    }
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

#[test]
fn gzip_and_zstd_read_like_the_plain_file() {
    let plain = two_section_pcapng();
    let (want, err) = read_all(&plain);
    assert!(err.is_none());
    let zst = zstd::encode_all(&plain[..], 3).unwrap();
    for (name, bytes) in [("gzip", gzip(&plain)), ("zstd", zst)] {
        let (got, err) = read_all(&bytes);
        assert!(err.is_none(), "{name}: {err:?}");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn cut_compressed_files_keep_earlier_packets_then_truncated_at_a_record() {
    let frames = small_frames(6);
    let plain = pcap_file(Order::Little, true, 1, &frames);
    let starts = record_starts(&frames);
    let (all, _) = read_all(&plain);
    let mut truncated = 0;
    for bytes in [gzip(&plain), zstd::encode_all(&plain[..], 3).unwrap()] {
        for cut in 4..bytes.len() {
            let (pkts, err) = read_all(&bytes[..cut]);
            assert_eq!(pkts[..], all[..pkts.len()], "cut {cut}");
            match err {
                Some(ReadError::Truncated { offset, .. }) => {
                    truncated += 1;
                    let at = if pkts.is_empty() {
                        [0, 24].as_slice()
                    } else {
                        &starts[pkts.len()..=pkts.len()]
                    };
                    assert!(
                        at.contains(&offset),
                        "cut {cut}: offset {offset}, {} packets",
                        pkts.len()
                    );
                }
                Some(e) => panic!("cut {cut}: expected Truncated, got {e}"),
                None => panic!("cut {cut} of {}: no error", bytes.len()),
            }
        }
    }
    assert!(truncated > 0);
}

#[test]
fn position_counts_file_bytes_and_buffer_stays_bounded() {
    let plain = pcap_file(Order::Little, true, 1, &small_frames(20));
    let z = zstd::encode_all(&plain[..], 3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [("p.pcap", &plain), ("p.pcap.zst", &z)] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let mut r = tailhunt_pcap::open_file(&path).unwrap();
        use tailhunt_pcap::PacketSource;
        while r.next_packet().unwrap().is_some() {}
        assert_eq!(r.position(), bytes.len() as u64, "{name}");
        assert!(r.buffer_capacity() <= MAX_BUFFER);
    }
}

#[test]
fn missing_file_is_an_io_error_naming_it() {
    let e = tailhunt_pcap::open(std::path::Path::new("/nonexistent/x.pcap"))
        .err()
        .unwrap();
    assert!(matches!(e, ReadError::Io { .. }));
    assert!(e.to_string().contains("/nonexistent/x.pcap"));
}

#[test]
fn pcap_writer_output_reads_back_and_tshark_agrees() {
    let frames = small_frames(5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w =
        tailhunt_pcap::PcapWriter::new(file, tailhunt_pcap::LinkType::Ethernet, 64).unwrap();
    for (ts, wire, data) in &frames {
        w.write_packet(*ts, *wire, data).unwrap();
    }
    assert_eq!(w.packets(), 5);
    w.finish().unwrap();
    let (pkts, err) = read_all(&std::fs::read(&path).unwrap());
    assert!(err.is_none(), "{err:?}");
    let got: Vec<(i64, u32, usize)> = pkts.iter().map(|p| (p.0, p.3, p.4.len())).collect();
    let want: Vec<(i64, u32, usize)> = frames
        .iter()
        .map(|f| (f.0, f.1, f.2.len().min(64)))
        .collect();
    assert_eq!(got, want);
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args([
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
        ])
        .output()
        .expect("tshark runs (apt-get install tshark)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let want: Vec<String> = want
        .iter()
        .map(|(ts, wire, cap)| {
            format!(
                "{}.{:09}\t{wire}\t{cap}",
                ts / 1_000_000_000,
                ts % 1_000_000_000
            )
        })
        .collect();
    assert_eq!(lines, want);
}

#[test]
fn open_reader_reads_a_stream_such_as_stdin() {
    let plain = pcap_file(Order::Little, true, 1, &small_frames(3));
    let gz = gzip(&plain);
    let mut r = tailhunt_pcap::open_reader("-", Box::new(std::io::Cursor::new(gz))).unwrap();
    use tailhunt_pcap::PacketSource;
    let mut n = 0;
    while r.next_packet().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 3);
    assert_eq!(r.format_name(), "pcap");
}
