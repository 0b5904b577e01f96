//! The upstream queueing delay of the packets that made no burst, on hand-built packets with
//! TCP timestamps: a bulk source fills a 100 Mbit/s link for 10 ms every 100 ms, and a request
//! flow's packets sent meanwhile arrive when the burst has drained.

use tailhunt_model::Sample;
use tailhunt_pcap::analysis::{AnalysisConfig, Analyzer};
use tailhunt_pcap::decode::flags::{ACK, PSH};
use tailhunt_pcap::{decode, LinkType, RawPacket};

const MS: i64 = 1_000_000;
const T0: i64 = 1_700_000_000 * 1_000_000_000;
const CACHE: [u8; 4] = [198, 18, 0, 1];
const DB: [u8; 4] = [198, 18, 0, 11];
const API: [u8; 4] = [198, 18, 0, 20];

/// An IPv4+TCP data packet with a timestamp option (raw IP link type).
fn packet(
    src: [u8; 4],
    dst: [u8; 4],
    ports: (u16, u16),
    seq: u32,
    tsval: u32,
    len: usize,
) -> Vec<u8> {
    let opts = [1u8, 1, 8, 10];
    let thl = 20 + 12;
    let total = 20 + thl + len;
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&ports.0.to_be_bytes());
    t[2..4].copy_from_slice(&ports.1.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&1u32.to_be_bytes());
    t[12] = ((thl / 4) as u8) << 4;
    t[13] = ACK | PSH;
    t[14..16].copy_from_slice(&65535u16.to_be_bytes());
    t[20..24].copy_from_slice(&opts);
    t[24..28].copy_from_slice(&tsval.to_be_bytes());
    p
}

fn push(an: &mut Analyzer, ts: i64, data: &[u8]) {
    let raw = RawPacket {
        ts_ns: ts,
        iface: 0,
        link: LinkType::RawIp,
        wire_len: data.len() as u32,
        data,
    };
    let d = decode::decode(&raw).expect("decodes");
    an.push(&d);
}

/// 2 s of traffic; the api sender's clock ticks at `api_hz`. Returns the bystanders' delays.
fn run(api_hz: i64) -> Vec<Sample> {
    let mut an = Analyzer::new(AnalysisConfig {
        link_rate_bps: Some(100_000_000),
        ..AnalysisConfig::default()
    })
    .unwrap();
    let mut packets: Vec<(i64, Vec<u8>)> = Vec::new();
    let (mut dseq, mut aseq) = (1u32, 1u32);
    for burst in 0..20i64 {
        let start = burst * 100 * MS;
        // 10 ms at the link rate: a 1250-byte frame every 100 us, all written at the start
        // (they wait behind each other: the burst's own queueing, not a victim's).
        for k in 0..100i64 {
            let at = start + k * 100_000;
            let tsval = (1000 + start / MS) as u32;
            packets.push((at, packet(DB, CACHE, (7100, 40000), dseq, tsval, 1250 - 52)));
            dseq += 1198;
        }
    }
    for ms in 0..2000i64 {
        let sent = ms * MS + 300_000;
        let in_burst = ms % 100 < 10;
        // Queued behind the burst: out when it has drained (its 10 ms), one after the other.
        let at = if in_burst {
            (ms / 100) * 100 * MS + 10 * MS + (ms % 100) * 20_000
        } else {
            sent + 50_000
        };
        let tsval = (5_000 + sent * api_hz / 1_000_000_000) as u32;
        packets.push((at, packet(API, CACHE, (50000, 7000), aseq, tsval, 60)));
        aseq += 60;
    }
    packets.sort_by_key(|p| p.0);
    for (at, p) in &packets {
        push(&mut an, T0 + at, p);
    }
    let report = an.finish();
    assert_eq!(
        report
            .bursts
            .iter()
            .filter(|b| b.dir.name() == "to")
            .count(),
        20
    );
    an.bystander_delays(&report)
        .map(tailhunt_pcap::analysis::queue_delay_sample)
        .collect()
}

#[test]
fn requests_queued_behind_a_burst_show_their_wait_and_the_burst_its_own_none() {
    let d = run(1000);
    assert!(!d.is_empty());
    let late: Vec<&Sample> = d
        .iter()
        .filter(|s| s.end_ns - s.start_ns >= 2 * MS)
        .collect();
    // The api packets sent in the first 8 ms of each burst waited 2 ms or more: one sample per
    // bin they arrived in (they leave the queue 20 us apart, all in the bin after the burst).
    assert_eq!(late.len(), 20, "{late:?}");
    for s in &late {
        let wait = s.end_ns - s.start_ns;
        assert!((2 * MS..=11 * MS).contains(&wait), "{s:?}");
        let phase = (s.end_ns - T0) % (100 * MS);
        assert!((10 * MS..11 * MS).contains(&phase), "{s:?}");
    }
    // The db's own packets waited too (up to 10 ms, behind each other), but they are the
    // burst: none of them is among the late samples above, nor any sample at all.
    assert!(d.len() <= 2000, "{}", d.len());
}

#[test]
fn a_sender_whose_clock_does_not_tick_at_1khz_is_left_out() {
    assert!(run(250).is_empty());
}
