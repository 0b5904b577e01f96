//! Hand-built TCP packets for the analysis tests.
#![allow(dead_code)]

use tailhunt_pcap::analysis::Analyzer;
use tailhunt_pcap::{decode, LinkType, RawPacket};

/// The client's address.
pub const C: [u8; 4] = [198, 18, 0, 1];
/// The server's address.
pub const S: [u8; 4] = [198, 18, 0, 2];
/// The client's port.
pub const CP: u16 = 40000;
/// The server's port.
pub const SP: u16 = 80;
/// A millisecond, ns.
pub const MS: i64 = 1_000_000;

/// An IPv4+TCP packet (raw IP link type); `wscale` adds the option (SYNs), `ts` the
/// timestamps option `(TSval, TSecr)`.
#[allow(clippy::too_many_arguments)]
pub fn packet(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    wscale: Option<u8>,
    ts: Option<(u32, u32)>,
    len: usize,
) -> Vec<u8> {
    let mut opts = Vec::new();
    if let Some(w) = wscale {
        opts.extend_from_slice(&[2, 4, 0x05, 0xb4]); // MSS 1460
        opts.extend_from_slice(&[1, 3, 3, w]);
    }
    if let Some((val, ecr)) = ts {
        opts.extend_from_slice(&[1, 1, 8, 10]);
        opts.extend_from_slice(&val.to_be_bytes());
        opts.extend_from_slice(&ecr.to_be_bytes());
    }
    let thl = 20 + opts.len();
    let total = 20 + thl + len;
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = ((thl / 4) as u8) << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&window.to_be_bytes());
    t[20..20 + opts.len()].copy_from_slice(&opts);
    p
}

/// Decodes `data` (captured at `ts`) into the analyser and drops the events it gave.
pub fn push(an: &mut Analyzer, ts: i64, data: &[u8]) {
    let raw = RawPacket {
        ts_ns: ts,
        iface: 0,
        link: LinkType::RawIp,
        wire_len: data.len() as u32,
        data,
    };
    an.push(&decode(&raw).expect("decodes"));
    an.events.rtt.clear();
    an.events.exchanges.clear();
    an.events.stalls.clear();
}

/// A handshake from the client (initial sequence number `c`) to the server (`s`): the SYN at
/// `t`, the SYN-ACK `server_leg` later, the client's ACK `client_leg` after that; `wscale`
/// offered by both (`None`: no window scaling). Windows 65535.
pub fn handshake(
    an: &mut Analyzer,
    t: i64,
    (server_leg, client_leg): (i64, i64),
    (c, s): (u32, u32),
    wscale: Option<u8>,
) {
    use tailhunt_pcap::decode::flags::{ACK, SYN};
    push(
        an,
        t,
        &packet(C, S, CP, SP, c, 0, SYN, 65535, wscale, None, 0),
    );
    let synack = packet(S, C, SP, CP, s, c + 1, SYN | ACK, 65535, wscale, None, 0);
    push(an, t + server_leg, &synack);
    let ack = packet(
        C,
        S,
        CP,
        SP,
        c + 1,
        s.wrapping_add(1),
        ACK,
        65535,
        None,
        None,
        0,
    );
    push(an, t + server_leg + client_leg, &ack);
}
