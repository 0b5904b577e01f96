//! Builders for synthetic frames and capture files, shared by the read/fuzz tests.
#![allow(dead_code)]

/// Byte order of a synthetic file.
#[derive(Clone, Copy, Debug)]
pub enum Order {
    Little,
    Big,
}

impl Order {
    pub fn u16(self, v: u16) -> [u8; 2] {
        match self {
            Order::Little => v.to_le_bytes(),
            Order::Big => v.to_be_bytes(),
        }
    }
    pub fn u32(self, v: u32) -> [u8; 4] {
        match self {
            Order::Little => v.to_le_bytes(),
            Order::Big => v.to_be_bytes(),
        }
    }
}

/// IPv4 + TCP (20-byte IP header, TCP with `opts`, padded to 4) carrying `payload`.
pub fn ipv4_tcp(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut tcp_opts = opts.to_vec();
    while !tcp_opts.len().is_multiple_of(4) {
        tcp_opts.push(1);
    }
    let thl = 20 + tcp_opts.len();
    let total = 20 + thl + payload.len();
    let mut b = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0];
    b[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    b.extend_from_slice(&src);
    b.extend_from_slice(&dst);
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&seq.to_be_bytes());
    b.extend_from_slice(&7u32.to_be_bytes());
    b.push(((thl / 4) as u8) << 4);
    b.push(0x18);
    b.extend_from_slice(&512u16.to_be_bytes());
    b.extend_from_slice(&[0, 0, 0, 0]);
    b.extend_from_slice(&tcp_opts);
    b.extend_from_slice(payload);
    b
}

/// Ethernet II header (no VLAN) in front of an IPv4 packet.
pub fn eth(ip: &[u8]) -> Vec<u8> {
    let mut b = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    b.extend_from_slice(ip);
    b
}

/// Classic pcap bytes: (ts_ns, wire_len, data) records.
pub fn pcap_file(order: Order, nano: bool, link: u32, pkts: &[(i64, u32, Vec<u8>)]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&order.u32(if nano { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    f.extend_from_slice(&order.u16(2));
    f.extend_from_slice(&order.u16(4));
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&order.u32(65535));
    f.extend_from_slice(&order.u32(link));
    for (ts, wire, data) in pkts {
        let div = if nano { 1 } else { 1000 };
        f.extend_from_slice(&order.u32((ts / 1_000_000_000) as u32));
        f.extend_from_slice(&order.u32(((ts % 1_000_000_000) / div) as u32));
        f.extend_from_slice(&order.u32(data.len() as u32));
        f.extend_from_slice(&order.u32(*wire));
        f.extend_from_slice(data);
    }
    f
}

/// A pcapng block of `kind` with `body` (padded), both lengths filled in.
pub fn block(order: Order, kind: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    while !body.len().is_multiple_of(4) {
        body.push(0);
    }
    let len = (12 + body.len()) as u32;
    let mut b = order.u32(kind).to_vec();
    b.extend_from_slice(&order.u32(len));
    b.extend_from_slice(&body);
    b.extend_from_slice(&order.u32(len));
    b
}

/// Section header block.
pub fn shb(order: Order) -> Vec<u8> {
    let mut body = order.u32(0x1A2B_3C4D).to_vec();
    body.extend_from_slice(&order.u16(1));
    body.extend_from_slice(&order.u16(0));
    body.extend_from_slice(&[0xff; 8]);
    block(order, 0x0A0D_0D0A, &body)
}

/// Interface description block with optional if_tsresol and if_tsoffset.
pub fn idb(order: Order, link: u16, tsresol: Option<u8>, tsoffset: Option<i64>) -> Vec<u8> {
    let mut body = order.u16(link).to_vec();
    body.extend_from_slice(&[0, 0]);
    body.extend_from_slice(&order.u32(0));
    if let Some(r) = tsresol {
        body.extend_from_slice(&order.u16(9));
        body.extend_from_slice(&order.u16(1));
        body.extend_from_slice(&[r, 0, 0, 0]);
    }
    if let Some(o) = tsoffset {
        body.extend_from_slice(&order.u16(14));
        body.extend_from_slice(&order.u16(8));
        let v = match order {
            Order::Little => o.to_le_bytes(),
            Order::Big => o.to_be_bytes(),
        };
        body.extend_from_slice(&v);
    }
    body.extend_from_slice(&[0, 0, 0, 0]);
    block(order, 1, &body)
}

/// Enhanced packet block with raw timestamp units.
pub fn epb(order: Order, iface: u32, units: u64, wire: u32, data: &[u8]) -> Vec<u8> {
    let mut body = order.u32(iface).to_vec();
    body.extend_from_slice(&order.u32((units >> 32) as u32));
    body.extend_from_slice(&order.u32(units as u32));
    body.extend_from_slice(&order.u32(data.len() as u32));
    body.extend_from_slice(&order.u32(wire));
    body.extend_from_slice(data);
    block(order, 6, &body)
}

/// Simple packet block.
pub fn spb(order: Order, wire: u32, data: &[u8]) -> Vec<u8> {
    let mut body = order.u32(wire).to_vec();
    body.extend_from_slice(data);
    block(order, 3, &body)
}

/// Obsolete packet block.
pub fn pb(order: Order, iface: u16, units: u64, wire: u32, data: &[u8]) -> Vec<u8> {
    let mut body = order.u16(iface).to_vec();
    body.extend_from_slice(&order.u16(0));
    body.extend_from_slice(&order.u32((units >> 32) as u32));
    body.extend_from_slice(&order.u32(units as u32));
    body.extend_from_slice(&order.u32(data.len() as u32));
    body.extend_from_slice(&order.u32(wire));
    body.extend_from_slice(data);
    block(order, 2, &body)
}

/// A small Ethernet capture: `n` TCP frames 1 ms apart with growing payloads.
pub fn small_frames(n: usize) -> Vec<(i64, u32, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let payload = vec![b'a' + i as u8; 10 + 7 * i];
            let f = eth(&ipv4_tcp(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                40000,
                80,
                1000 + i as u32,
                &[2, 4, 5, 180],
                &payload,
            ));
            (
                1_700_000_000_000_000_000 + i as i64 * 1_000_123,
                f.len() as u32,
                f,
            )
        })
        .collect()
}

/// One packet as read: (ts_ns, iface, link number, wire_len, data).
pub type Pkt = (i64, u32, u32, u32, Vec<u8>);

/// Reads every packet: (ts_ns, iface, link number, wire_len, data) and the final error, if any.
pub fn read_all(bytes: &[u8]) -> (Vec<Pkt>, Option<tailhunt_pcap::ReadError>) {
    let (pkts, err, _) = read_stream(Box::new(std::io::Cursor::new(bytes.to_vec())), false);
    (pkts, err)
}

/// [`read_all`] from any stream, with or without the read-ahead thread (started once the
/// format is detected, as a pass does), and the bytes the reader counted from the stream.
pub fn read_stream(
    stream: Box<dyn std::io::Read + Send>,
    ahead: bool,
) -> (Vec<Pkt>, Option<tailhunt_pcap::ReadError>, u64) {
    use tailhunt_pcap::PacketSource;
    let mut r = match tailhunt_pcap::open_reader("test", stream) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e), 0),
    };
    if ahead {
        r.read_ahead();
    }
    let (out, err) = drain(&mut r);
    (out, err, r.position())
}

/// Every packet `r` has left, and the error it ended with, if any.
pub fn drain(
    r: &mut dyn tailhunt_pcap::PacketSource,
) -> (Vec<Pkt>, Option<tailhunt_pcap::ReadError>) {
    let mut out = Vec::new();
    loop {
        match r.next_packet() {
            Ok(Some(p)) => out.push((
                p.ts_ns,
                p.iface,
                p.link.number(),
                p.wire_len,
                p.data.to_vec(),
            )),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

/// [`read_all`] through a file.
pub fn read_file_all(bytes: &[u8]) -> (Vec<Pkt>, Option<tailhunt_pcap::ReadError>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.pcap");
    std::fs::write(&path, bytes).unwrap();
    match tailhunt_pcap::open_file(&path) {
        Ok(mut r) => drain(&mut r),
        Err(e) => (Vec::new(), Some(e)),
    }
}

/// Where each record of a classic pcap file of `frames` starts, and where the last ends.
pub fn record_starts(frames: &[(i64, u32, Vec<u8>)]) -> Vec<u64> {
    let mut at = 24u64;
    let mut out = vec![at];
    for f in frames {
        at += 16 + f.2.len() as u64;
        out.push(at);
    }
    out
}
