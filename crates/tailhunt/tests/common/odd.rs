//! Odd capture files, written from scratch: the kinds of file a user hands `tailhunt pcap`
//! that are not a plain Ethernet capture (empty, cut, unknown link types, Linux cooked v2, a
//! small snap length, pcapng with two interfaces, rotated sets). A copy of what this writes is
//! committed under `tests/odd/` (`UPDATE_ODD=1` rewrites it), so a reader change that breaks
//! one of them shows on the committed bytes too; `pcap_odd.rs` holds each file's expected
//! outcome.

#[path = "../../../pcap/tests/read_support/mod.rs"]
mod read_support;

use read_support::{block, epb, eth, idb, ipv4_tcp, pcap_file, shb, Order};

/// One odd file: its name under `tests/odd/` and its bytes.
pub struct OddFile {
    pub name: &'static str,
    pub bytes: Vec<u8>,
}

/// 10:00:00 on 2026-11-20, ns.
const T0: i64 = 1_795_168_800_000_000_000;
const CLIENT: [u8; 4] = [192, 0, 2, 1];
const SERVER: [u8; 4] = [192, 0, 2, 2];

/// An IPv4 TCP segment of a request (client -> server) or response, `seq` its sequence number.
fn segment(request: bool, seq: u32, payload_len: usize) -> Vec<u8> {
    let payload = vec![b'x'; payload_len];
    if request {
        ipv4_tcp(CLIENT, SERVER, 40_000, 80, seq, &[], &payload)
    } else {
        ipv4_tcp(SERVER, CLIENT, 80, 40_000, seq, &[], &payload)
    }
}

/// `n` request/response pairs of one connection, 1 ms apart: (ts_ns, wire_len, IP packet).
fn exchange_packets(n: usize, first: i64, payload_len: usize) -> Vec<(i64, u32, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let p = segment(i % 2 == 0, 1000 + (i / 2 * payload_len) as u32, payload_len);
            (first + i as i64 * 1_000_000, p.len() as u32, p)
        })
        .collect()
}

/// The same packets behind an Ethernet header.
fn ethernet(pkts: Vec<(i64, u32, Vec<u8>)>) -> Vec<(i64, u32, Vec<u8>)> {
    pkts.into_iter()
        .map(|(t, _, ip)| {
            let f = eth(&ip);
            (t, f.len() as u32, f)
        })
        .collect()
}

/// A Linux cooked v2 header (what `tcpdump -i any` writes with libpcap 1.10+) in front of
/// an IPv4 packet: protocol, reserved, interface index, ARPHRD_ETHER, packet type, address.
fn sll2(ip: &[u8]) -> Vec<u8> {
    let mut b = vec![0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 4, 6];
    b.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0, 0]);
    b.extend_from_slice(ip);
    b
}

/// A valid Ethernet capture of `n` frames.
pub fn ethernet_capture(n: usize, first: i64) -> Vec<u8> {
    pcap_file(
        Order::Little,
        true,
        1,
        &ethernet(exchange_packets(n, first, 100)),
    )
}

/// Every odd file, in a fixed order.
pub fn all() -> Vec<OddFile> {
    let whole = ethernet_capture(6, T0);
    // Cut inside the fourth record: three frames are whole.
    let cut_at = 24 + 3 * (16 + whole[24 + 8] as usize) + 20;
    let truncated = whole[..cut_at].to_vec();
    let user0: Vec<(i64, u32, Vec<u8>)> = (0..4)
        .map(|i| (T0 + i * 1_000_000, 40, vec![0xab; 40]))
        .collect();
    let sll2_frames: Vec<(i64, u32, Vec<u8>)> = exchange_packets(4, T0, 100)
        .into_iter()
        .map(|(t, _, ip)| {
            let f = sll2(&ip);
            (t, f.len() as u32, f)
        })
        .collect();
    // 1400-byte segments captured with -s 96: the record keeps 96 bytes, the wire length stays.
    let snap96: Vec<(i64, u32, Vec<u8>)> = ethernet(exchange_packets(4, T0, 1400))
        .into_iter()
        .map(|(t, wire, f)| (t, wire, f[..96].to_vec()))
        .collect();
    vec![
        OddFile {
            name: "empty.pcap",
            bytes: Vec::new(),
        },
        OddFile {
            name: "header-only.pcap",
            bytes: pcap_file(Order::Little, false, 1, &[]),
        },
        OddFile {
            name: "cut-header.pcap",
            bytes: whole[..10].to_vec(),
        },
        OddFile {
            name: "truncated.pcap",
            bytes: truncated.clone(),
        },
        OddFile {
            name: "truncated.pcap.gz",
            bytes: gzip(&truncated),
        },
        OddFile {
            name: "not-a-capture.pcap",
            bytes: b"GET / HTTP/1.1\r\nHost: example\r\n\r\n".to_vec(),
        },
        OddFile {
            name: "user0.pcap",
            bytes: pcap_file(Order::Big, false, 147, &user0),
        },
        OddFile {
            name: "sll2.pcap",
            bytes: pcap_file(Order::Little, true, 276, &sll2_frames),
        },
        OddFile {
            name: "snaplen96.pcap",
            bytes: snaplen(pcap_file(Order::Little, false, 1, &snap96), 96),
        },
        OddFile {
            name: "two-interfaces.pcapng",
            bytes: two_interfaces(),
        },
        OddFile {
            name: "ethernet-and-user0.pcapng",
            bytes: ethernet_and_user0(),
        },
        OddFile {
            name: "rotated.pcap",
            bytes: ethernet_capture(4, T0),
        },
        OddFile {
            name: "rotated.pcap1",
            bytes: ethernet_capture(4, T0 + 10_000_000),
        },
        OddFile {
            name: "rotated.pcap2",
            bytes: Vec::new(),
        },
    ]
}

/// Sets the snap length field of a classic pcap header.
fn snaplen(mut file: Vec<u8>, len: u32) -> Vec<u8> {
    file[16..20].copy_from_slice(&len.to_le_bytes());
    file
}

/// pcapng: interface 0 Ethernet in µs carries the requests, interface 1 raw IP in ns the
/// responses of the same connection (a capture on two ports of a host).
fn two_interfaces() -> Vec<u8> {
    let o = Order::Little;
    let mut f = shb(o);
    f.extend(idb(o, 1, None, None));
    f.extend(idb(o, 101, Some(9), None));
    for (t, _, ip) in exchange_packets(6, T0, 100) {
        let request = ip[12..16] == CLIENT;
        if request {
            let frame = eth(&ip);
            f.extend(epb(o, 0, (t / 1000) as u64, frame.len() as u32, &frame));
        } else {
            f.extend(epb(o, 1, t as u64, ip.len() as u32, &ip));
        }
    }
    f
}

/// pcapng: an Ethernet interface and a USER0 one, two frames each, and an interface
/// statistics block nobody reads.
fn ethernet_and_user0() -> Vec<u8> {
    let o = Order::Big;
    let mut f = shb(o);
    f.extend(idb(o, 1, Some(9), None));
    f.extend(idb(o, 147, Some(9), None));
    for (t, _, frame) in ethernet(exchange_packets(2, T0, 100)) {
        f.extend(epb(o, 0, t as u64, frame.len() as u32, &frame));
        f.extend(epb(o, 1, t as u64 + 500, 40, &[0xcd; 40]));
    }
    f.extend(block(o, 5, &[0; 20]));
    f
}

/// A fixed-output gzip (no time or name in the header), so the committed copy stays equal.
fn gzip(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// `flows` TCP connections, each one request and one response segment 100 µs apart, the
/// connections 20 µs apart; an Ethernet pcap in ns.
pub fn many_flows(flows: usize) -> Vec<u8> {
    let mut pkts = Vec::with_capacity(flows * 2);
    for i in 0..flows {
        let t = T0 + i as i64 * 20_000;
        let client = [10, 1, (i >> 8) as u8, i as u8];
        let port = 20_000 + (i % 40_000) as u16;
        let req = eth(&ipv4_tcp(client, SERVER, port, 80, 1, &[], b"GET"));
        let resp = eth(&ipv4_tcp(SERVER, client, 80, port, 1, &[], b"OK"));
        pkts.push((t, req.len() as u32, req));
        pkts.push((t + 100_000, resp.len() as u32, resp));
    }
    pkts.sort_by_key(|p| p.0);
    pcap_file(Order::Little, true, 1, &pkts)
}
