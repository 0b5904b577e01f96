//! The TCP and bin analysis on hand-built packets with known answers, and fuzzing of the whole
//! pass with random segments (no panic, a report that serialises).

mod tcp_support;

use proptest::prelude::*;
use tailhunt_model::evidence::capture::{Abandoned, CaptureReport, CloseKind, Role};
use tailhunt_pcap::analysis::{AnalysisConfig, Analyzer};
use tailhunt_pcap::decode::flags::{ACK, FIN, PSH, RST, SYN};

use tcp_support::{handshake, packet, push, C, CP, MS, S, SP};

struct Flow {
    an: Analyzer,
    cseq: u32,
    sseq: u32,
}

impl Flow {
    fn new(link_rate: Option<u64>) -> Flow {
        Flow {
            an: Analyzer::new(AnalysisConfig {
                link_rate_bps: link_rate,
                ..AnalysisConfig::default()
            })
            .unwrap(),
            cseq: 1000,
            sseq: 5000,
        }
    }

    fn push(&mut self, ts: i64, data: &[u8]) {
        push(&mut self.an, ts, data);
    }

    /// Handshake at `t` with the server `rtt` away and the client 10 ms away; window scale 7.
    fn handshake(&mut self, t: i64, rtt: i64) {
        let (c, s) = (self.cseq, self.sseq);
        self.push(t, &packet(C, S, CP, SP, c, 0, SYN, 65535, Some(7), None, 0));
        self.push(
            t + rtt,
            &packet(S, C, SP, CP, s, c + 1, SYN | ACK, 65535, Some(7), None, 0),
        );
        self.push(
            t + rtt + 10 * MS,
            &packet(C, S, CP, SP, c + 1, s + 1, ACK, 512, None, None, 0),
        );
        self.cseq += 1;
        self.sseq += 1;
    }

    fn client_data(&mut self, t: i64, len: usize) {
        let p = packet(
            C,
            S,
            CP,
            SP,
            self.cseq,
            self.sseq,
            ACK | PSH,
            512,
            None,
            None,
            len,
        );
        self.push(t, &p);
        self.cseq += len as u32;
    }

    fn server_data(&mut self, t: i64, len: usize) {
        let p = packet(
            S,
            C,
            SP,
            CP,
            self.sseq,
            self.cseq,
            ACK | PSH,
            512,
            None,
            None,
            len,
        );
        self.push(t, &p);
        self.sseq += len as u32;
    }

    fn client_ack(&mut self, t: i64, ack: u32, window_raw: u16) {
        let p = packet(C, S, CP, SP, self.cseq, ack, ACK, window_raw, None, None, 0);
        self.push(t, &p);
    }

    fn report(mut self) -> CaptureReport {
        self.an.finish()
    }
}

/// Captured next to the server: 10 ms to the client. A request, a response in two segments,
/// a lost segment resent after an RTO, a zero window, and the client's FIN exactly 30 s after
/// its request while the server is still sending, answered by RSTs.
#[test]
fn one_connection_end_to_end() {
    let mut f = Flow::new(None);
    f.handshake(0, 20_000);
    let t0 = 100 * MS;
    f.client_data(t0, 100);
    f.server_data(t0 + 2 * MS, 1448);
    f.server_data(t0 + 2 * MS + 10_000, 1448);
    f.client_ack(t0 + 12 * MS, f.sseq, 512);
    // A segment goes out, no ACK: the same bytes again 300 ms later (an RTO).
    let lost = f.sseq;
    f.server_data(t0 + 20 * MS, 1448);
    f.sseq = lost;
    f.server_data(t0 + 320 * MS, 1448);
    f.client_ack(t0 + 330 * MS, f.sseq, 0); // and the client's window closes
    f.client_ack(t0 + 830 * MS, f.sseq, 512); // for 500 ms
    f.server_data(t0 + 840 * MS, 1448);
    f.client_ack(t0 + 850 * MS, f.sseq, 512);
    let close = t0 + 30_000 * MS;
    f.push(
        close,
        &packet(C, S, CP, SP, f.cseq, f.sseq, FIN | ACK, 512, None, None, 0),
    );
    f.server_data(close + 5 * MS, 1448);
    f.push(
        close + 15 * MS,
        &packet(C, S, CP, SP, f.cseq + 1, 0, RST, 0, None, None, 0),
    );
    let r = f.report();
    assert_eq!(r.flows.len(), 1);
    let fl = &r.flows[0];
    assert_eq!(
        (fl.name.client.as_str(), fl.name.server.as_str()),
        ("198.18.0.1:40000", "198.18.0.2:80")
    );
    let t = fl.tcp.as_ref().unwrap();
    let hs = t.handshake.unwrap();
    assert_eq!(
        (hs.server_leg_ns, hs.client_leg_ns),
        (Some(20_000), Some(10 * MS))
    );
    assert!(t.wscale_from_syn);
    assert_eq!(t.client.wscale, 7);
    // The client advertised 0 for 500 ms.
    assert_eq!(
        (t.client.zero_windows, t.client.zero_window_ns),
        (1, 500 * MS)
    );
    assert_eq!(
        t.server.retransmissions.rto, 1,
        "{:?}",
        t.server.retransmissions
    );
    assert_eq!(t.server.retransmissions.total(), 1);
    assert_eq!(t.server.payload_bytes, 4 * 1448 + 1448);
    // RTT of the server's data (capture next to the server -> client -> back): the handshake
    // and 9.99 ms for the first ACK, never from the resent segment.
    let rtt = t.rtt_client_leg.unwrap();
    assert_eq!(rtt.min_ns, 10 * MS - 10_000);
    assert!(rtt.max_ns <= 10 * MS, "{rtt:?}");
    let c = t.close.as_ref().unwrap();
    assert_eq!((c.by, c.how), (Role::Client, CloseKind::Fin));
    assert_eq!(c.after_last_request_ns, Some(30_000 * MS));
    assert_eq!(c.round_gap_s, Some(30.0));
    assert!(c.peer_sent_after_close);
    assert_eq!(c.resets_after_close, 1);
    // The response stopped 29 s before the close and resumed after it: a stall, not a
    // transfer still arriving and not a server that never answered.
    assert_eq!(c.abandoned, Some(Abandoned::Stalled));
    assert_eq!(c.answer_bytes, Some(4 * 1448));
    assert_eq!(c.first_answer_after_ns, Some(2 * MS));
    assert_eq!(c.peer_bytes_after_close, Some(1448));
    assert_eq!(c.peer_data_after_close_ns, Some(5 * MS));
    assert!(
        c.note.contains(
            "30.0s after its request (application timeout?) while the response had stalled"
        ),
        "{}",
        c.note
    );
    assert_eq!(t.exchanges, 1);
}

/// A SYN answered by a reset (a closed port) is a refused connection, and says so; a reset
/// after the handshake is not.
#[test]
fn a_reset_answering_the_syn_is_a_refusal() {
    let mut f = Flow::new(None);
    let c = f.cseq;
    f.push(0, &packet(C, S, CP, SP, c, 0, SYN, 65535, Some(7), None, 0));
    f.push(
        MS,
        &packet(S, C, SP, CP, 0, c + 1, RST | ACK, 0, None, None, 0),
    );
    let r = f.report();
    let close = r.flows[0].tcp.as_ref().unwrap().close.clone().unwrap();
    assert_eq!((close.by, close.how), (Role::Server, CloseKind::Rst));
    assert_eq!(
        close.note,
        "server refused the connection: a reset answered the SYN"
    );

    let mut f = Flow::new(None);
    f.handshake(0, MS);
    let (c, s2) = (f.cseq, f.sseq);
    f.push(
        20 * MS,
        &packet(S, C, SP, CP, s2, c, RST | ACK, 0, None, None, 0),
    );
    let r = f.report();
    let close = r.flows[0].tcp.as_ref().unwrap().close.clone().unwrap();
    assert_eq!((close.by, close.how), (Role::Server, CloseKind::Rst));
    assert!(!close.note.contains("refused"), "{}", close.note);
}

/// Captured next to the receiver, 80 ms from the sender: the sender's window (64 KiB, scale
/// 0) is full every round trip although the receiver acknowledges each train at once.
#[test]
fn a_window_limited_download_seen_from_the_receiver() {
    let mut f = Flow::new(None);
    let rtt = 80 * MS;
    f.an = Analyzer::new(AnalysisConfig::default()).unwrap();
    // Handshake without window scaling.
    handshake(&mut f.an, 0, (rtt, 10_000), (f.cseq, f.sseq), None);
    f.cseq += 1;
    f.sseq += 1;
    f.client_data(rtt + 20_000, 10);
    let mut t = 2 * rtt + 20_000;
    for _round in 0..20 {
        // 45 segments of 1448 = 65160 bytes, then the receiver acknowledges them.
        for k in 0..45 {
            f.server_data(t + k * 20_000, 1448);
        }
        let end = t + 45 * 20_000;
        f.client_ack(end + 5_000, f.sseq, 65535);
        t = end + 5_000 + rtt;
    }
    let r = f.report();
    let tcp = r.flows[0].tcp.as_ref().unwrap();
    assert_eq!(tcp.main_sender, "server");
    assert!(
        tcp.rwnd_limited_share > 0.8,
        "rwnd-limited share {}",
        tcp.rwnd_limited_share
    );
    let (rate, bound) = (tcp.throughput_bps.unwrap(), tcp.window_bound_bps.unwrap());
    assert!(
        (rate / bound - 1.0).abs() < 0.25,
        "rate {rate} vs window/RTT {bound}"
    );
}

/// 1 ms bins at 100 Mbit/s: a 5 ms burst at full rate between quiet milliseconds.
#[test]
fn a_burst_of_back_to_back_segments() {
    let mut f = Flow::new(Some(100_000_000));
    f.handshake(0, 1_000);
    // 100 Mbit/s = 12.5 bytes/us: a 1500-byte frame every 120 us for 5 ms.
    let start = 10 * MS;
    for k in 0..42 {
        f.server_data(start + k * 120_000, 1460);
    }
    for k in 0..10 {
        f.server_data(20 * MS + k * 3 * MS, 100);
    }
    let r = f.report();
    let bursts: Vec<_> = r.bursts.iter().filter(|b| b.host == "198.18.0.1").collect();
    assert_eq!(bursts.len(), 1, "{:?}", r.bursts);
    let b = bursts[0];
    assert_eq!(b.start_ns, start);
    assert_eq!(b.end_ns, start + 41 * 120_000);
    assert_eq!(b.flows.len(), 1);
    assert!(b.peak_utilisation.unwrap() > 0.95);
}

#[derive(Debug, Clone)]
struct Seg {
    from_client: bool,
    flow: u8,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    len: u16,
    dt_us: u32,
}

fn seg() -> impl Strategy<Value = Seg> {
    (
        any::<bool>(),
        0u8..3,
        any::<u32>(),
        any::<u32>(),
        any::<u8>(),
        any::<u16>(),
        0u16..3000,
        0u32..500_000,
    )
        .prop_map(
            |(from_client, flow, seq, ack, flags, window, len, dt_us)| Seg {
                from_client,
                flow,
                seq,
                ack,
                flags,
                window,
                len,
                dt_us,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Any sequence of segments, in or out of order, analyses without a panic and gives a
    /// report that serialises and whose counts add up.
    #[test]
    fn random_segments_never_panic(segs in proptest::collection::vec(seg(), 0..300), rate in proptest::option::of(1_000u64..10_000_000_000)) {
        let mut f = Flow::new(rate);
        let mut t = 1_700_000_000_000_000_000i64;
        for s in &segs {
            t += s.dt_us as i64 * 1000 - 100_000;
            let port = CP + s.flow as u16;
            let p = if s.from_client {
                packet(C, S, port, SP, s.seq, s.ack, s.flags, s.window, (s.flags & SYN != 0).then_some(s.window as u8 % 16), None, s.len as usize)
            } else {
                packet(S, C, SP, port, s.seq, s.ack, s.flags, s.window, (s.flags & SYN != 0).then_some(s.window as u8 % 16), None, s.len as usize)
            };
            f.push(t, &p);
        }
        let r = f.report();
        prop_assert_eq!(r.packets, segs.len() as u64);
        let json = serde_json::to_string(&r).unwrap();
        let back: CaptureReport = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(back.flows.len(), r.flows.len());
        let counted: u64 = r.flows.iter().map(|f| f.client_to_server.packets + f.server_to_client.packets).sum();
        prop_assert_eq!(counted, segs.len() as u64);
    }
}

/// A library caller passing a zero (or absurd) bin width gets an error naming it, not a
/// division by zero.
#[test]
fn a_zero_bin_width_is_an_error_not_a_panic() {
    for bin_ns in [0, -1, 5_000, 2_000_000_000] {
        let e = Analyzer::new(AnalysisConfig {
            bin_ns,
            ..AnalysisConfig::default()
        })
        .err()
        .expect("refused");
        assert!(e.to_string().contains("bin width"), "{e}");
    }
    let e = Analyzer::new(AnalysisConfig {
        burst_threshold: 0.0,
        ..AnalysisConfig::default()
    })
    .err()
    .expect("refused");
    assert!(e.to_string().contains("burst threshold"), "{e}");
}
