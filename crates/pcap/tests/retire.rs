//! Closed connections leave memory: the analysis keeps only what the report still needs of
//! them, and the report is the same as when every flow's bins are kept to the end.

mod tcp_support;

use tailhunt_model::evidence::capture::CaptureReport;
use tailhunt_pcap::analysis::{AnalysisConfig, Analyzer};
use tailhunt_pcap::decode::flags::{ACK, FIN, PSH, SYN};

use tcp_support::{packet, push, C, MS, S, SP};

/// One short connection from client port `port` at `t`: handshake, a 100 B request,
/// `segments` reply segments of 1448 B `gap` apart, FINs both ways, the last ACK.
fn connection(an: &mut Analyzer, t: i64, port: u16, segments: u32, gap: i64) -> i64 {
    connection_ending(an, t, port, segments, gap, true)
}

/// [`connection`], with or without the client's ACK of the server's FIN (without it the
/// connection has not ended cleanly: the server's FIN may still come again).
fn connection_ending(
    an: &mut Analyzer,
    t: i64,
    port: u16,
    segments: u32,
    gap: i64,
    last_ack: bool,
) -> i64 {
    let (c, s) = (1000u32, 5000u32);
    push(
        an,
        t,
        &packet(C, S, port, SP, c, 0, SYN, 65535, Some(7), None, 0),
    );
    let syn_ack = packet(S, C, SP, port, s, c + 1, SYN | ACK, 65535, Some(7), None, 0);
    push(an, t + 20_000, &syn_ack);
    push(
        an,
        t + 40_000,
        &packet(C, S, port, SP, c + 1, s + 1, ACK, 512, None, None, 0),
    );
    let req = packet(
        C,
        S,
        port,
        SP,
        c + 1,
        s + 1,
        ACK | PSH,
        512,
        None,
        None,
        100,
    );
    push(an, t + 50_000, &req);
    let mut at = t + 100_000;
    let mut seq = s + 1;
    for _ in 0..segments {
        let p = packet(S, C, SP, port, seq, c + 101, ACK, 512, None, None, 1448);
        push(an, at, &p);
        seq += 1448;
        at += gap;
    }
    push(
        an,
        at,
        &packet(C, S, port, SP, c + 101, seq, ACK | FIN, 512, None, None, 0),
    );
    let fin = packet(S, C, SP, port, seq, c + 102, ACK | FIN, 512, None, None, 0);
    push(an, at + 20_000, &fin);
    if last_ack {
        push(
            an,
            at + 40_000,
            &packet(C, S, port, SP, c + 102, seq + 1, ACK, 512, None, None, 0),
        );
    }
    at + 40_000
}

/// The server's FIN of [`connection`] on `port` with one reply segment, sent again.
fn fin_again(an: &mut Analyzer, t: i64, port: u16) {
    let (c, seq) = (1000u32, 5000u32 + 1 + 1448);
    push(
        an,
        t,
        &packet(S, C, SP, port, seq, c + 102, ACK | FIN, 512, None, None, 0),
    );
}

fn config(keep_flow_bins: bool) -> AnalysisConfig {
    AnalysisConfig {
        link_rate_bps: Some(100_000_000),
        keep_flow_bins,
        ..AnalysisConfig::default()
    }
}

/// 60,000 short connections, about 1,000 a second: the flows held open at the end are those
/// of the last few seconds, and the report still has every one of them.
#[test]
fn closed_connections_leave_memory_and_stay_in_the_report() {
    let mut an = Analyzer::new(config(false)).unwrap();
    let n = 60_000u32;
    for i in 0..n {
        // Ports cycle through 20,000: each is reused every 20 s, by then long closed.
        let port = 20_000 + (i % 20_000) as u16;
        connection(&mut an, i as i64 * MS, port, 1, 10_000);
    }
    let open = an.open_flows();
    let report = an.finish();
    assert_eq!(report.flows.len(), n as usize);
    assert_eq!(report.flow_count(), n as u64);
    let ids: Vec<usize> = report.flows.iter().map(|f| f.id).collect();
    assert!(
        ids.windows(2).all(|w| w[0] + 1 == w[1]),
        "ids in order, none missing"
    );
    // A sweep runs every 1,024 packets here (9 packets a connection, one a millisecond, so
    // more than 10 ms between them): at most the ~114 connections since the last sweep plus
    // the last 20 ms's ~3 are still held, as they ended cleanly (every 65,536 packets alone
    // would leave ~8,300; a second's hold ~1,900).
    assert!(open < 200, "{open} of {n} flows still held");
    // The channels' bins (a minute of them, both ways, both hosts) are packed into the
    // scratch file as they age: memory keeps a few bytes a bin of the 40 a bin takes
    // unpacked, and read back they are all there.
    let bins: usize = report
        .channels
        .iter()
        .filter_map(|c| an.channel_bins(c.dir, c.host.parse().unwrap()))
        .map(|b| b.count())
        .sum();
    assert!(bins >= 4 * 59_000, "{bins} bins");
    let per_bin = an.channel_heap_bytes() as f64 / bins as f64;
    assert!(per_bin < 3.0, "{per_bin:.1} bytes a bin in memory");
    let spilled = an.spilled_bytes() as f64 / bins as f64;
    assert!(
        spilled < 12.0,
        "{spilled:.1} bytes a bin in the scratch file"
    );
    let answered: u64 = report
        .flows
        .iter()
        .filter_map(|f| f.tcp.as_ref())
        .map(|t| t.exchanges)
        .sum();
    assert_eq!(answered, n as u64);
}

/// A 10 ms burst made by 20 short connections that then close and retire, beside a
/// connection that stays open: its sources and every other figure are the same as when the
/// analysis keeps every flow's bins. Also returns the flows still held and the bins the
/// open connection holds at the end.
fn burst_capture(keep_flow_bins: bool) -> (CaptureReport, usize, usize) {
    let mut an = Analyzer::new(config(keep_flow_bins)).unwrap();
    // Background: one connection sending a 100 B segment every 40 us for 4 s (100,000
    // packets, 2.5 kB per ms: a fifth of the link), so sweeps run after the burst.
    let (c, s, bg) = (1u32, 1u32, 19_999u16);
    push(
        &mut an,
        0,
        &packet(C, S, bg, SP, c, 0, SYN, 65535, Some(7), None, 0),
    );
    push(
        &mut an,
        10_000,
        &packet(S, C, SP, bg, s, c + 1, SYN | ACK, 65535, Some(7), None, 0),
    );
    let mut seq = s + 1;
    let mut next_burst = 0;
    for k in 0..100_000i64 {
        let t = 20_000 + k * 40_000;
        let p = packet(S, C, SP, bg, seq, c + 1, ACK | PSH, 512, None, None, 60);
        push(&mut an, t, &p);
        seq += 60;
        // At 1 s, twenty connections each send 7 segments over 10 ms: ~200 kB into C.
        if t >= 1_000 * MS && next_burst < 20 {
            connection(
                &mut an,
                t + next_burst * 1_000,
                30_000 + next_burst as u16,
                7,
                1_400_000,
            );
            next_burst += 1;
        }
    }
    let open = an.open_flows();
    let background: usize = an
        .flow_bins()
        .filter(|(_, src, dst, _)| src.port() == bg || dst.port() == bg)
        .map(|(.., bins)| bins.len())
        .sum();
    (an.finish(), open, background)
}

#[test]
fn retired_and_open_flows_still_make_their_bursts() {
    let (kept, _, all_bins) = burst_capture(true);
    let (retired, open, near_bins) = burst_capture(false);
    assert_eq!(open, 1, "the twenty burst connections were retired");
    // The open connection crossed the burst: only its bins near the burst, and its last
    // ~100 ms not yet decided, are still held (a bin a millisecond for 4 s when all are kept).
    assert!(all_bins >= 4_000, "{all_bins} bins kept whole");
    assert!(
        near_bins < 200,
        "{near_bins} bins held of the open connection"
    );
    // The same episode twice: towards the client and from the server.
    assert_eq!(retired.bursts.len(), 2, "{:?}", retired.bursts);
    let sources = retired.bursts[0].sources().count();
    assert!(sources >= 10, "{:?}", retired.bursts[0]);
    assert_eq!(
        serde_json::to_value(&retired).unwrap(),
        serde_json::to_value(&kept).unwrap()
    );
}

/// 20,000 short connections (one, mid-capture, sends 290 kB) analysed twice: keeping every
/// flow in the report, and handing each flow out as it finishes (`store_flows`, as `tailhunt
/// pcap` stores them). Every flow is handed out once, and the report keeps exactly the first
/// 1,000, the largest and the one a detector may name; the rest of it is the same.
#[test]
fn stored_flows_are_handed_out_once_and_the_report_keeps_what_it_needs() {
    let run = |store_flows: bool| {
        let mut an = Analyzer::new(AnalysisConfig {
            store_flows,
            largest_flows: 5,
            ..config(false)
        })
        .unwrap();
        let mut handed = Vec::new();
        for i in 0..20_000u32 {
            let port = 20_000 + (i % 20_000) as u16;
            let segments = if i == 12_345 { 200 } else { 1 + i % 3 };
            connection(&mut an, i as i64 * MS, port, segments, 10_000);
            handed.append(&mut an.finished);
        }
        let report = an.finish();
        handed.append(&mut an.finished);
        (report, handed)
    };
    let (whole, none) = run(false);
    assert!(none.is_empty());
    let (kept, handed) = run(true);
    let mut ids: Vec<usize> = handed.iter().map(|f| f.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..20_000).collect::<Vec<_>>(), "each flow once");
    let mut by_id = handed.clone();
    by_id.sort_by_key(|f| f.id);
    assert_eq!(by_id, whole.flows, "the same summaries");
    // What the report keeps: the first 1,000, the large one, the largest of the others.
    let large = kept.flows.iter().find(|f| f.id == 12_345);
    assert!(large.is_some_and(|f| f.is_evidence()));
    assert!(kept.flows[..1000]
        .iter()
        .enumerate()
        .all(|(i, f)| f.id == i));
    assert_eq!(kept.flows.len(), 1000 + 1 + CaptureReport::LARGEST_FLOWS);
    let mut largest: Vec<_> = whole.flows[1000..]
        .iter()
        .filter(|f| f.id != 12_345)
        .collect();
    largest.sort_by_key(|f| (std::cmp::Reverse(f.payload_bytes()), f.id));
    let smallest_kept = largest[CaptureReport::LARGEST_FLOWS - 1].payload_bytes();
    assert!(kept.flows[1000..]
        .iter()
        .all(|f| f.id == 12_345 || f.payload_bytes() >= smallest_kept));
    assert_eq!((kept.flows_total, kept.tcp_flows_total), (20_000, 20_000));
    let strip = |r: &CaptureReport| {
        let mut v = serde_json::to_value(r).unwrap();
        v["flows"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&kept), strip(&whole));
}

/// A flow the window detector weighs (300 KB and more) but smaller than the flows whose window
/// points outlive their retirement: its mean window is the same whether it retired during the
/// pass or was still held at its end.
#[test]
fn a_retired_flow_keeps_its_mean_window() {
    let mean_window = |retire: bool| {
        let mut an = Analyzer::new(config(false)).unwrap();
        let end = connection(&mut an, 0, 40_000, 300, 100_000);
        if retire {
            // 2,400 frames of short connections from 200 ms after its end: sweeps enough.
            for i in 0..300u32 {
                connection(
                    &mut an,
                    end + 200 * MS + i64::from(i) * MS,
                    20_000 + i as u16,
                    1,
                    10_000,
                );
            }
        }
        let held = an.open_flows();
        let report = an.finish();
        let first = &report.flows[0];
        assert!(first.server_to_client.payload_bytes > 400_000);
        (held, first.tcp.as_ref().unwrap().mean_window)
    };
    let (live_held, live) = mean_window(false);
    let (retired_held, retired) = mean_window(true);
    assert_eq!(live_held, 1);
    assert!(
        retired_held < 300,
        "the first flow retired ({retired_held} held)"
    );
    assert!(live.is_some());
    assert_eq!(retired, live);
}

/// A connection whose last FIN is not acknowledged has not ended cleanly: it is held for a
/// second after its last packet, not for 20 ms, so that the FIN sent again still finds it.
#[test]
fn connections_that_did_not_end_cleanly_are_held_for_a_second() {
    let held = |last_ack: bool| {
        let mut an = Analyzer::new(config(false)).unwrap();
        for i in 0..10_000u32 {
            let port = 20_000 + i as u16;
            connection_ending(&mut an, i as i64 * MS, port, 1, 10_000, last_ack);
        }
        an.open_flows()
    };
    let (clean, unclean) = (held(true), held(false));
    // 8 (or 7) packets a millisecond: the last sweep came at most ~1,100 connections ago.
    assert!(clean < 1_300, "{clean} held after clean ends");
    assert!(
        unclean > clean + 500,
        "{unclean} held without the last ACKs, {clean} with them"
    );
}

/// A segment of a connection already retired (here its server's FIN sent again, as after a
/// lost last ACK) is counted as `after-close`, not made into a new flow; a SYN on the same
/// ports opens a new one; once a second has passed since the connection's last packet, its
/// ports lead nowhere and a stray segment makes a flow of its own, as before retirement.
#[test]
fn late_segments_of_retired_connections_are_counted_not_made_flows() {
    let mut an = Analyzer::new(config(false)).unwrap();
    // 1,100 connections, one every 0.5 ms (8 packets each): the sweep at packet 8,192
    // (about 512 ms) retires those that ended before about 412 ms, cleanly.
    let every = MS / 2;
    for i in 0..1_100u32 {
        connection(&mut an, i as i64 * every, 20_000 + i as u16, 1, 10_000);
    }
    let held = an.open_flows();
    assert!(
        held < 400,
        "{held} held: the first connections were retired"
    );
    fin_again(&mut an, 560 * MS, 20_000);
    connection(&mut an, 570 * MS, 20_000, 1, 10_000);
    // Past 3 s (and sweeps): connection 1's ports are forgotten.
    for i in 0..4_000u32 {
        connection(
            &mut an,
            1_000 * MS + i as i64 * every,
            40_000 + i as u16,
            1,
            10_000,
        );
    }
    fin_again(&mut an, 3_100 * MS, 20_001);
    let report = an.finish();
    assert_eq!(
        report.skipped.get(tailhunt_pcap::analysis::AFTER_CLOSE),
        Some(&1)
    );
    // 1,100 + the port's new connection + 4,000 + the stray FIN's flow.
    assert_eq!(report.flow_count(), 1_100 + 1 + 4_000 + 1);
    let reopened: Vec<_> = report
        .flows
        .iter()
        .filter(|f| f.name.client.ends_with(":20000"))
        .collect();
    assert_eq!(reopened.len(), 2, "the first connection and the new one");
    assert!(reopened
        .iter()
        .all(|f| f.tcp.as_ref().unwrap().exchanges == 1));
}
