//! Decoding hand-built frames: every link type, VLAN stacks, IPv4/IPv6 extension headers and
//! fragments, TCP options, snap lengths, GSO super-frames and cut headers.

mod read_support;

use read_support::*;
use tailhunt_pcap::{decode, Decoded, LinkType, RawPacket, Skip, Transport};

fn dec(link: LinkType, wire_len: u32, data: &[u8]) -> Result<Decoded<'_>, Skip> {
    decode(&RawPacket {
        ts_ns: 42,
        iface: 3,
        link,
        wire_len,
        data,
    })
}

fn tcp_of<'a>(d: &Decoded<'a>) -> tailhunt_pcap::Tcp<'a> {
    match d.transport {
        Transport::Tcp(t) => t,
        other => panic!("expected TCP, got {other:?}"),
    }
}

const OPTS: [u8; 20] = [
    2, 4, 0x05, 0xb4, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 9, 0, 0, 0, 5,
];

#[test]
fn ethernet_with_two_vlan_tags_ipv4_tcp_and_options() {
    let ip = ipv4_tcp(
        [10, 1, 2, 3],
        [10, 4, 5, 6],
        5555,
        80,
        0xdead_beef,
        &OPTS,
        b"GET /",
    );
    let mut f = vec![
        2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xa8, 0x00, 100, 0x81, 0x00, 0x20, 200, 0x08,
        0x00,
    ];
    f.extend_from_slice(&ip);
    let d = dec(LinkType::Ethernet, f.len() as u32, &f).unwrap();
    assert_eq!((d.ts_ns, d.iface, d.wire_len), (42, 3, f.len() as u32));
    assert_eq!(d.vlan, Some(200));
    assert_eq!(d.src.to_string(), "10.1.2.3");
    assert_eq!(d.dst.to_string(), "10.4.5.6");
    assert_eq!((d.ip_len, d.ip_id, d.ttl), (ip.len() as u32, 0x1234, 64));
    let t = tcp_of(&d);
    assert_eq!(
        (t.src_port, t.dst_port, t.seq, t.ack, t.flags, t.window),
        (5555, 80, 0xdead_beef, 7, 0x18, 512)
    );
    assert_eq!(t.options.mss, Some(1460));
    assert_eq!(t.options.wscale, Some(7));
    assert!(t.options.sack_permitted);
    assert_eq!(t.options.timestamps, Some((9, 5)));
    assert_eq!((t.payload_len, t.payload), (5, &b"GET /"[..]));
}

#[test]
fn sack_blocks_and_a_bad_option_length_keeps_earlier_options() {
    let mut opts = vec![1, 1, 5, 26];
    for (l, r) in [(100u32, 200u32), (300, 400), (500, 600)] {
        opts.extend_from_slice(&l.to_be_bytes());
        opts.extend_from_slice(&r.to_be_bytes());
    }
    opts.extend_from_slice(&[2, 4, 1, 0, 3, 40]); // MSS 256, then a wscale claiming 40 bytes
    let ip = ipv4_tcp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 3, &opts, b"");
    let d = dec(LinkType::RawIp, ip.len() as u32, &ip).unwrap();
    let o = tcp_of(&d).options;
    assert_eq!(o.sack_count, 3);
    assert_eq!(&o.sack[..3], &[(100, 200), (300, 400), (500, 600)]);
    assert_eq!(o.mss, Some(256));
    assert_eq!(o.wscale, None);
}

fn udp4(frag: u16, payload: &[u8]) -> Vec<u8> {
    let total = 28 + payload.len();
    let mut b = vec![
        0x45, 0, 0, 0, 0, 9, 0, 0, 17, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2,
    ];
    b[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    b[6..8].copy_from_slice(&frag.to_be_bytes());
    b.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
    b.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(payload);
    b
}

#[test]
fn linux_sll_v1_and_v2_carry_ipv4_udp() {
    let ip = udp4(0, b"dns?");
    let mut sll = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&ip);
    let mut sll2 = vec![
        0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 4, 6, 1, 2, 3, 4, 5, 6, 0, 0,
    ];
    sll2.extend_from_slice(&ip);
    for (link, f) in [(LinkType::LinuxSll, sll), (LinkType::LinuxSll2, sll2)] {
        let d = dec(link, f.len() as u32, &f).unwrap();
        match d.transport {
            Transport::Udp(u) => assert_eq!(
                (u.src_port, u.dst_port, u.payload_len, u.payload),
                (12345, 53, 4, &b"dns?"[..])
            ),
            other => panic!("{link:?}: {other:?}"),
        }
        assert_eq!(d.ip_len, 32);
    }
}

#[test]
fn ipv4_fragments_first_decodes_transport_later_ones_do_not() {
    let first = udp4(0x2000, b"part one"); // MF set, offset 0
    let later = udp4(0x0003, b"part two"); // offset 24 bytes
    assert!(matches!(
        dec(LinkType::RawIp, 36, &first).unwrap().transport,
        Transport::Udp(_)
    ));
    assert!(matches!(
        dec(LinkType::RawIp, 36, &later).unwrap().transport,
        Transport::Other(17)
    ));
}

fn ipv6(next: u8, ext: &[u8], upper: &[u8]) -> Vec<u8> {
    let mut b = vec![0x60, 0, 0, 0];
    b.extend_from_slice(&((ext.len() + upper.len()) as u16).to_be_bytes());
    b.extend_from_slice(&[next, 55]);
    b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    b.extend_from_slice(&[0; 11]);
    b.push(1);
    b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    b.extend_from_slice(&[0; 11]);
    b.push(2);
    b.extend_from_slice(ext);
    b.extend_from_slice(upper);
    b
}

fn tcp_only() -> Vec<u8> {
    ipv4_tcp([0; 4], [0; 4], 443, 9999, 1, &[], b"tls")[20..].to_vec()
}

#[test]
fn ipv6_walks_hop_by_hop_routing_destination_and_fragment_headers() {
    // hop-by-hop (8 bytes) -> routing (16 bytes) -> destination options (8) -> TCP
    let mut ext = vec![43, 0, 1, 4, 0, 0, 0, 0];
    ext.extend_from_slice(&[60, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    ext.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
    let p = ipv6(0, &ext, &tcp_only());
    // NULL link, BSD AF_INET6 = 30 written big-endian (LOOP style).
    let mut f = 30u32.to_be_bytes().to_vec();
    f.extend_from_slice(&p);
    let d = dec(LinkType::Null, f.len() as u32, &f).unwrap();
    assert_eq!(d.src.to_string(), "2001:db8::1");
    assert_eq!((d.ip_len, d.ttl, d.ip_id), (p.len() as u32, 55, 0));
    let t = tcp_of(&d);
    assert_eq!((t.src_port, t.dst_port, t.payload_len), (443, 9999, 3));

    let first = ipv6(44, &[6, 0, 0, 1, 0, 0, 0, 7], &tcp_only());
    let later = ipv6(44, &[6, 0, 0, 0x19, 0, 0, 0, 7], &tcp_only());
    let mut f = 10u32.to_le_bytes().to_vec(); // Linux AF_INET6, host order
    f.extend_from_slice(&first);
    assert_eq!(
        tcp_of(&dec(LinkType::Null, f.len() as u32, &f).unwrap()).src_port,
        443
    );
    assert!(matches!(
        dec(LinkType::RawIp, later.len() as u32, &later)
            .unwrap()
            .transport,
        Transport::Other(6)
    ));
}

#[test]
fn snap_length_does_not_shrink_ip_or_payload_lengths() {
    let f = eth(&ipv4_tcp([1; 4], [2; 4], 1, 2, 3, &[], &[7u8; 1000]));
    let d = dec(LinkType::Ethernet, f.len() as u32, &f[..128]).unwrap();
    assert_eq!(d.ip_len, 1040);
    let t = tcp_of(&d);
    assert_eq!((t.payload_len, t.payload.len()), (1000, 128 - 54));
}

#[test]
fn gso_super_frames_take_their_length_from_the_wire() {
    let mut ip = ipv4_tcp([1; 4], [2; 4], 1, 2, 3, &[], &[0u8; 200]);
    ip[2] = 0;
    ip[3] = 0; // total length 0: the super-frame exceeds 65535
    let f = eth(&ip);
    let d = dec(LinkType::Ethernet, 14 + 70_000, &f).unwrap();
    assert_eq!(d.ip_len, 70_000);
    assert_eq!(tcp_of(&d).payload_len, 70_000 - 40);
    // Total length larger than the frame: the frame's length wins.
    let mut ip = ipv4_tcp([1; 4], [2; 4], 1, 2, 3, &[], &[0u8; 100]);
    ip[2..4].copy_from_slice(&9000u16.to_be_bytes());
    let d = dec(LinkType::RawIp, ip.len() as u32, &ip).unwrap();
    assert_eq!(d.ip_len, 140);
}

#[test]
fn ethernet_padding_is_not_payload() {
    let mut f = eth(&ipv4_tcp([1; 4], [2; 4], 1, 2, 3, &[], b""));
    f.resize(60, 0);
    let d = dec(LinkType::Ethernet, 60, &f).unwrap();
    let t = tcp_of(&d);
    assert_eq!((d.ip_len, t.payload_len, t.payload.len()), (40, 0, 0));
}

#[test]
fn every_cut_header_is_truncated_never_a_panic() {
    let f = eth(&ipv4_tcp([1; 4], [2; 4], 1, 2, 3, &OPTS, b"x"));
    let header = 14 + 20 + 40;
    for cut in 0..header {
        assert_eq!(
            dec(LinkType::Ethernet, f.len() as u32, &f[..cut]).err(),
            Some(Skip::Truncated),
            "cut {cut}"
        );
    }
    let p = ipv6(0, &[6, 0, 1, 4, 0, 0, 0, 0], &tcp_only());
    for cut in 0..48 + 20 {
        assert_eq!(
            dec(LinkType::RawIp, p.len() as u32, &p[..cut]).err(),
            Some(Skip::Truncated),
            "v6 cut {cut}"
        );
    }
    for link in [LinkType::LinuxSll, LinkType::LinuxSll2, LinkType::Null] {
        assert_eq!(dec(link, 3, &[8, 0, 0]).err(), Some(Skip::Truncated));
    }
}

#[test]
fn what_is_not_ip_or_cannot_be_right_is_skipped_with_the_reason() {
    let mut arp = vec![0xff; 12];
    arp.extend_from_slice(&[0x08, 0x06, 0, 1]);
    assert_eq!(dec(LinkType::Ethernet, 16, &arp).err(), Some(Skip::NotIp));
    assert_eq!(
        dec(LinkType::Other(147), 4, &[0; 4]).err(),
        Some(Skip::UnknownLink)
    );
    let mut ip = ipv4_tcp([1; 4], [2; 4], 1, 2, 3, &[], b"");
    ip[0] = 0x44; // header length 16 bytes
    assert_eq!(dec(LinkType::RawIp, 40, &ip).err(), Some(Skip::Malformed));
    let mut ip = ipv4_tcp([1; 4], [2; 4], 1, 2, 3, &[], b"");
    ip[32] = 0x40; // TCP data offset 16 bytes
    assert_eq!(dec(LinkType::RawIp, 40, &ip).err(), Some(Skip::Malformed));
    let mut f = eth(&ip);
    f[14] = 0x65; // IPv6 nibble behind an IPv4 ethertype
    assert_eq!(dec(LinkType::Ethernet, 54, &f).err(), Some(Skip::Malformed));
    assert_eq!(Skip::NotIp.name(), "not-ip");
}
