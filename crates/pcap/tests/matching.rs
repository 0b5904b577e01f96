//! Cross-capture matching on two synthetic captures of the same traffic: a client-side
//! capture A and a server-side capture B behind a NAT, B's clock 3 s ahead, known one-way
//! delays, a packet lost on the way, a middlebox RST, a flow whose sequence numbers a
//! firewall rewrites, and a flow only A saw.

use std::io::Cursor;
use std::net::Ipv4Addr;

use tailhunt_model::evidence::capture::{CloseOrigin, DelayStats, Side};
use tailhunt_pcap::matching::{match_captures, MatchConfig};
use tailhunt_pcap::{open_reader, LinkType, PcapWriter};

const MS: i64 = 1_000_000;
const OFFSET: i64 = 3_000 * MS;
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;

#[derive(Clone, Copy)]
struct Seg {
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    ip_id: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    len: usize,
    tsval: Option<u32>,
}

/// IPv4 + TCP (+ timestamps option) + `len` payload bytes derived from `seq`'s low byte.
fn frame(s: &Seg, payload_seed: u8) -> Vec<u8> {
    let opt_len = if s.tsval.is_some() { 12 } else { 0 };
    let tcp_len = 20 + opt_len;
    let total = 20 + tcp_len + s.len;
    let mut f = vec![0x45, 0];
    f.extend((total as u16).to_be_bytes());
    f.extend(s.ip_id.to_be_bytes());
    f.extend([0x40, 0, 64, 6, 0, 0]);
    f.extend(s.src.0);
    f.extend(s.dst.0);
    f.extend(s.src.1.to_be_bytes());
    f.extend(s.dst.1.to_be_bytes());
    f.extend(s.seq.to_be_bytes());
    f.extend(s.ack.to_be_bytes());
    f.push(((tcp_len / 4) as u8) << 4);
    f.push(s.flags);
    f.extend(64240u16.to_be_bytes());
    f.extend([0, 0, 0, 0]);
    if let Some(v) = s.tsval {
        f.extend([1, 1, 8, 10]);
        f.extend(v.to_be_bytes());
        f.extend(0u32.to_be_bytes());
    }
    f.extend((0..s.len).map(|i| payload_seed.wrapping_add(i as u8)));
    f
}

fn capture(mut pkts: Frames) -> Vec<u8> {
    pkts.sort_by_key(|(t, _)| *t);
    let mut w = PcapWriter::new(Vec::new(), LinkType::RawIp, 65535).expect("header");
    for (t, f) in &pkts {
        w.write_packet(*t, f.len() as u32, f).expect("write");
    }
    w.finish().expect("finish")
}

const CLIENT: [u8; 4] = [10, 0, 0, 1];
const SERVER: [u8; 4] = [198, 18, 0, 2];
const NAT: [u8; 4] = [198, 18, 1, 1];
const T0: i64 = 1_700_000_000_000_000_000;

/// What the NAT does to a client-side segment (and back): the client becomes NAT:port+10000.
fn nat(s: Seg) -> Seg {
    let mut s = s;
    if s.src.0 == CLIENT {
        s.src = (NAT, s.src.1 + 10000);
    }
    if s.dst.0 == CLIENT {
        s.dst = (NAT, s.dst.1 + 10000);
    }
    s
}

/// Timestamped frames of one capture.
type Frames = Vec<(i64, Vec<u8>)>;

/// The frames of capture A and of capture B.
fn scenario() -> (Frames, Frames) {
    let c1 = (CLIENT, 40000);
    let s = (SERVER, 80);
    let seg = |src, dst, ip_id, seq, ack, flags, len, ts: u32| Seg {
        src,
        dst,
        ip_id,
        seq,
        ack,
        flags,
        len,
        tsval: Some(ts),
    };
    // Flow 1: client->server delays 1, 2, 3 ms; server->client 1, 1.5, 2 ms; the second data
    // segment is lost; the FIN is the server's; a middlebox RSTs towards the server.
    let up = |d: i64| Some(d);
    let flow1: Vec<(i64, Seg, Option<i64>)> = vec![
        (0, seg(c1, s, 1, 1000, 0, SYN, 0, 100), up(MS)),
        (
            10 * MS,
            seg(s, c1, 7, 5000, 1001, SYN | ACK, 0, 900),
            up(-MS),
        ),
        (20 * MS, seg(c1, s, 2, 1001, 5001, ACK, 0, 101), up(2 * MS)),
        (
            30 * MS,
            seg(c1, s, 3, 1001, 5001, ACK | PSH, 100, 102),
            up(3 * MS),
        ),
        (
            40 * MS,
            seg(c1, s, 4, 1101, 5001, ACK | PSH, 100, 103),
            None,
        ),
        (
            50 * MS,
            seg(s, c1, 8, 5001, 1201, ACK | PSH, 200, 901),
            up(-3 * MS / 2),
        ),
        (
            60 * MS,
            seg(s, c1, 9, 5201, 1201, FIN | ACK, 0, 902),
            up(-2 * MS),
        ),
    ];
    let mut a = Vec::new();
    let mut b = Vec::new();
    for (t, sg, d) in &flow1 {
        a.push((T0 + t, frame(sg, sg.ip_id as u8)));
        if let Some(d) = d {
            b.push((T0 + t + OFFSET + d, frame(&nat(*sg), sg.ip_id as u8)));
        }
    }
    let rst = seg(c1, s, 0, 1201, 0, RST, 0, 0);
    b.push((
        T0 + OFFSET + 55 * MS,
        frame(&nat(Seg { tsval: None, ..rst }), 0),
    ));
    // Flow 2: a firewall adds 777777 to the client's sequence numbers (and takes it off the
    // acks); no timestamps; matched by IP id and payload. 1 ms each way.
    let c2 = (CLIENT, 40001);
    let shift = 777_777u32;
    let flow2 = [
        (
            100 * MS,
            Seg {
                tsval: None,
                ..seg(c2, s, 10, 2000, 0, SYN, 0, 0)
            },
            MS,
        ),
        (
            110 * MS,
            Seg {
                tsval: None,
                ..seg(s, c2, 20, 9000, 2001, SYN | ACK, 0, 0)
            },
            -MS,
        ),
        (
            120 * MS,
            Seg {
                tsval: None,
                ..seg(c2, s, 11, 2001, 9001, ACK | PSH, 50, 0)
            },
            MS,
        ),
    ];
    for (t, sg, d) in flow2 {
        a.push((T0 + t, frame(&sg, 42)));
        let mut rewritten = nat(sg);
        if sg.src.0 == CLIENT {
            rewritten.seq = rewritten.seq.wrapping_add(shift);
        } else {
            rewritten.ack = rewritten.ack.wrapping_add(shift);
        }
        b.push((T0 + t + OFFSET + d, frame(&rewritten, 42)));
    }
    // Flow 3: only A saw it.
    let ssh = seg(
        (CLIENT, 40002),
        ([10, 0, 0, 9], 22),
        99,
        31337,
        0,
        SYN,
        0,
        5,
    );
    a.push((T0 + 5 * MS, frame(&ssh, 0)));
    (a, b)
}

fn run(a: Vec<u8>, b: Vec<u8>) -> tailhunt_model::evidence::capture::MatchReport {
    let mut ra = open_reader("a.pcap", Box::new(Cursor::new(a))).expect("A");
    let mut rb = open_reader("b.pcap", Box::new(Cursor::new(b))).expect("B");
    match_captures(&mut ra, &mut rb, MatchConfig::default()).expect("match")
}

fn ep(ip: [u8; 4], port: u16) -> String {
    format!("{}:{port}", Ipv4Addr::from(ip))
}

#[test]
fn nat_clock_offset_loss_and_middlebox_rst_come_out_exactly() {
    let (a, b) = scenario();
    let r = run(capture(a), capture(b));
    assert_eq!(r.clock_offset_ns, Some(OFFSET), "{r:#?}");
    assert_eq!((r.packets_a, r.packets_b, r.matched_packets), (11, 10, 9));
    assert_eq!((r.unmatched_flows_a, r.unmatched_flows_b), (1, 0));
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert_eq!(r.flows.len(), 2);

    let f = &r.flows[0];
    assert_eq!(f.a.client, ep(CLIENT, 40000));
    assert_eq!(f.a.server, ep(SERVER, 80));
    assert_eq!(f.b.client, ep(NAT, 50000));
    assert_eq!(f.b.server, ep(SERVER, 80));
    assert!(f.nat);
    assert_eq!(f.matched_packets, 6);
    let up = &f.a_to_b;
    assert_eq!(up.sender, ep(CLIENT, 40000));
    assert_eq!((up.sent, up.matched, up.lost, up.appeared), (4, 3, 1, 1));
    assert_eq!(
        up.delay,
        Some(DelayStats {
            min_ns: MS,
            p50_ns: 2 * MS,
            p90_ns: 3 * MS,
            p99_ns: 3 * MS,
            max_ns: 3 * MS,
            mean_ns: 2 * MS
        })
    );
    let down = &f.b_to_a;
    assert_eq!(down.sender, ep(SERVER, 80));
    assert_eq!(
        (down.sent, down.matched, down.lost, down.appeared),
        (3, 3, 0, 0)
    );
    assert_eq!(
        down.delay,
        Some(DelayStats {
            min_ns: MS,
            p50_ns: 3 * MS / 2,
            p90_ns: 2 * MS,
            p99_ns: 2 * MS,
            max_ns: 2 * MS,
            mean_ns: 3 * MS / 2
        })
    );
    assert_eq!(
        f.closes,
        vec![
            CloseOrigin {
                kind: "rst".into(),
                sender: ep(CLIENT, 40000),
                seen_in_a_ns: None,
                seen_in_b_ns: Some(T0 + OFFSET + 55 * MS),
                first_seen: Side::B,
                from_middlebox: true,
            },
            CloseOrigin {
                kind: "fin".into(),
                sender: ep(SERVER, 80),
                seen_in_a_ns: Some(T0 + 60 * MS),
                seen_in_b_ns: Some(T0 + OFFSET + 58 * MS),
                first_seen: Side::B,
                from_middlebox: false,
            },
        ]
    );

    // Sequence numbers rewritten: paired by IP id + payload.
    let g = &r.flows[1];
    assert_eq!(g.a.client, ep(CLIENT, 40001));
    assert_eq!(g.b.client, ep(NAT, 50001));
    assert_eq!(g.matched_packets, 3);
    assert_eq!((g.a_to_b.matched, g.a_to_b.lost), (2, 0));
    assert_eq!(
        g.a_to_b.delay.as_ref().map(|d| (d.min_ns, d.max_ns)),
        Some((MS, MS))
    );
    assert_eq!(g.b_to_a.delay.as_ref().map(|d| d.p50_ns), Some(MS));
    assert!(g.closes.is_empty());
}

#[test]
fn swapping_the_captures_negates_the_offset_and_swaps_the_hops() {
    let (a, b) = scenario();
    let r = run(capture(b), capture(a));
    assert_eq!(r.clock_offset_ns, Some(-OFFSET));
    assert_eq!((r.unmatched_flows_a, r.unmatched_flows_b), (0, 1));
    let f = &r.flows[0];
    // Now B (the client side) is first for client->server packets.
    assert_eq!(f.b_to_a.sender, ep(NAT, 50000));
    assert_eq!(
        (f.b_to_a.matched, f.b_to_a.lost, f.b_to_a.appeared),
        (3, 1, 1)
    );
    assert_eq!(f.b_to_a.delay.as_ref().map(|d| d.p50_ns), Some(2 * MS));
    assert_eq!(f.a_to_b.delay.as_ref().map(|d| d.min_ns), Some(MS));
    let rst = &f.closes[0];
    assert_eq!(
        (rst.kind.as_str(), rst.first_seen, rst.from_middlebox),
        ("rst", Side::A, true)
    );
}

#[test]
fn a_retransmission_pairs_with_its_own_copy_not_the_original() {
    // The original is lost between the points; the retransmission (new TSval) gets through.
    let c = (CLIENT, 40000);
    let s = (SERVER, 80);
    let mk = |ip_id, seq, flags, len, ts| Seg {
        src: c,
        dst: s,
        ip_id,
        seq,
        ack: 1,
        flags,
        len,
        tsval: Some(ts),
    };
    let back = Seg {
        src: s,
        dst: c,
        ip_id: 50,
        seq: 1,
        ack: 1101,
        flags: ACK,
        len: 0,
        tsval: Some(7),
    };
    // An earlier packet seen at both points, so the lost one falls while both captures ran.
    let early = Seg {
        ip_id: 49,
        ack: 1000,
        tsval: Some(6),
        ..back
    };
    let a = vec![
        (T0 - 10 * MS, frame(&early, 0)),
        (T0, frame(&mk(1, 1000, ACK | PSH, 100, 10), 1)),
        (T0 + 200 * MS, frame(&mk(2, 1000, ACK | PSH, 100, 60), 1)),
        (T0 + 205 * MS, frame(&back, 0)),
    ];
    let b = vec![
        (T0 - 11 * MS, frame(&early, 0)),
        (T0 + 201 * MS, frame(&mk(2, 1000, ACK | PSH, 100, 60), 1)),
        (T0 + 204 * MS, frame(&back, 0)),
    ];
    let r = run(capture(a), capture(b));
    assert_eq!(r.clock_offset_ns, Some(0));
    let f = &r.flows[0];
    assert!(!f.nat);
    assert_eq!((f.a_to_b.sent, f.a_to_b.lost), (2, 1));
    assert_eq!(f.a_to_b.delay.as_ref().map(|d| d.max_ns), Some(MS));
}

#[test]
fn captures_without_tcp_are_an_error_naming_the_capture() {
    let (a, _) = scenario();
    let empty = capture(Vec::new());
    let mut ra = open_reader("a.pcap", Box::new(Cursor::new(capture(a)))).expect("A");
    let mut rb = open_reader("b.pcap", Box::new(Cursor::new(empty))).expect("B");
    let e = match_captures(&mut ra, &mut rb, MatchConfig::default()).unwrap_err();
    assert!(
        e.to_string().contains("capture B has no TCP packets"),
        "{e}"
    );
}
