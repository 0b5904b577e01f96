//! The time-sequence points of a sender (sequence, ACK, window, bytes in flight) and the
//! `seq`/`ack`/`inflight`/`window` series they become, on hand-built downloads with known
//! answers: sequence numbers across 2^32, past 4 GiB, a retransmission, a reordered ACK, a
//! capture that missed the SYN, and a capture next to the receiver.

mod tcp_support;

use tailhunt_model::{Series, SeriesData, Unit};
use tailhunt_pcap::analysis::{AnalysisConfig, Analyzer};
use tailhunt_pcap::decode::flags::{ACK, PSH};
use tailhunt_pcap::record::Recorder;
use tailhunt_pcap::tcp::WindowPoint;

use tcp_support::{handshake, packet, push, C, CP, MS, S, SP};

/// A download: the server sends, the client acknowledges. Windows are raw (no scaling).
struct Download {
    an: Analyzer,
    /// The server's next sequence number.
    sseq: u32,
    cseq: u32,
}

impl Download {
    /// A connection whose handshake the capture saw next to the server (the server leg 0,
    /// the client 10 ms away), the server's initial sequence number `isn`.
    fn with_handshake(isn: u32) -> Download {
        Download::handshake_at(isn, (0, 10 * MS))
    }

    /// A connection whose handshake took `legs` (capture point to server and back, to client
    /// and back); windows not scaled.
    fn handshake_at(isn: u32, legs: (i64, i64)) -> Download {
        let mut d = Download::without_handshake(isn);
        handshake(&mut d.an, 0, legs, (d.cseq, isn), None);
        d.cseq += 1;
        d.sseq = isn.wrapping_add(1);
        d
    }

    /// A connection already under way when the capture started: the server's next
    /// sequence number is `seq`.
    fn without_handshake(seq: u32) -> Download {
        Download {
            an: Analyzer::new(AnalysisConfig::default()).unwrap(),
            sseq: seq,
            cseq: 1000,
        }
    }

    fn push(&mut self, ts: i64, data: &[u8]) {
        push(&mut self.an, ts, data);
    }

    /// `len` bytes from the server at `seq`.
    fn segment(&mut self, ts: i64, seq: u32, len: usize) {
        let p = packet(
            S,
            C,
            SP,
            CP,
            seq,
            self.cseq,
            ACK | PSH,
            65535,
            None,
            None,
            len,
        );
        self.push(ts, &p);
    }

    /// The next `len` new bytes from the server.
    fn data(&mut self, ts: i64, len: usize) {
        self.segment(ts, self.sseq, len);
        self.sseq = self.sseq.wrapping_add(len as u32);
    }

    fn ack(&mut self, ts: i64, ack: u32, window: u16) {
        let p = packet(C, S, CP, SP, self.cseq, ack, ACK, window, None, None, 0);
        self.push(ts, &p);
    }

    fn points(&self) -> Vec<WindowPoint> {
        self.an.window_points(0).expect("a TCP flow").to_vec()
    }
}

/// Every point: bytes in flight are `seq - ack` (no SACKs here), and `ack` never passes `seq`.
fn assert_inflight_is_seq_minus_ack(pts: &[WindowPoint]) {
    assert!(!pts.is_empty());
    for p in pts {
        assert_eq!(p.inflight as i64, p.seq - p.ack, "{p:?}");
    }
}

/// The server's initial sequence number 3000 below 2^32: its data crosses 2^32 in the third
/// segment, and the lines go on climbing from the ISN as if nothing happened.
#[test]
fn sequence_and_ack_climb_from_the_isn_across_2_pow_32() {
    let isn = u32::MAX - 2999;
    let mut d = Download::with_handshake(isn);
    for k in 0..6 {
        let t = (20 + 2 * k) * MS;
        d.data(t, 1000);
        // Each segment acknowledged in the next millisecond, the window 40000.
        d.ack(t + MS, d.sseq, 40000);
    }
    let pts = d.points();
    assert_inflight_is_seq_minus_ack(&pts);
    // One point per bin, each after the bin's last packet: data out, then its ACK back.
    let sent: Vec<(i64, i64, u32)> = pts.iter().map(|p| (p.seq, p.ack, p.window)).collect();
    let mut want = Vec::new();
    for k in 0..6 {
        // The SYN takes sequence number 1: data byte n is sequence number n + 1. The window
        // is the last one advertised (65535 in the handshake, 40000 after).
        let window = if k == 0 { 65535 } else { 40000 };
        want.push((1 + 1000 * (k + 1), 1 + 1000 * k, window));
        want.push((1 + 1000 * (k + 1), 1 + 1000 * (k + 1), 40000));
    }
    assert_eq!(sent, want);
    assert!(pts.iter().all(|p| p.seq < 10_000), "no jump by 2^32");
}

/// A capture with gaps of 1 GiB (dropped frames) carries the lines past 4 GiB: the offsets
/// are 64-bit, not the 32-bit sequence numbers.
#[test]
fn the_lines_pass_four_gib() {
    let mut d = Download::with_handshake(7);
    let gib = 1u32 << 30;
    for k in 0..6 {
        let t = (20 + 2 * k) * MS;
        d.sseq = d.sseq.wrapping_add(gib);
        d.data(t, 1000);
        d.ack(t + MS, d.sseq, 65535);
    }
    let last = *d.points().last().unwrap();
    let want = 1 + 6 * (1i64 << 30) + 6 * 1000;
    assert_eq!((last.seq, last.ack), (want, want));
    assert_inflight_is_seq_minus_ack(&d.points());
}

/// A segment resent after its ACK went missing does not move the sequence line back, and an
/// ACK overtaken by a later one does not move the ACK line back.
#[test]
fn a_retransmission_or_a_reordered_ack_moves_no_line_back() {
    let mut d = Download::with_handshake(5000);
    let first = d.sseq;
    d.data(20 * MS, 1000);
    d.data(20 * MS + 100_000, 1000);
    d.ack(21 * MS, first.wrapping_add(1000), 65535);
    let before = *d.points().last().unwrap();
    assert_eq!((before.seq, before.ack), (2001, 1001));
    // The second segment again, 300 ms later (an RTO), in a bin of its own.
    d.segment(321 * MS, first.wrapping_add(1000), 1000);
    let resent = *d.points().last().unwrap();
    assert_eq!(resent.ts_ns, 321 * MS);
    assert_eq!(
        (resent.seq, resent.ack),
        (2001, 1001),
        "seq must not go back"
    );
    // Its ACK, then the old ACK once more (reordered): the line stays at the newer one.
    d.ack(322 * MS, first.wrapping_add(2000), 65535);
    d.ack(323 * MS, first.wrapping_add(1000), 65535);
    let pts = d.points();
    let acks: Vec<i64> = pts.iter().map(|p| p.ack).collect();
    // Bins 20 (both segments), 21, 321, 322, 323.
    assert_eq!(acks, [1, 1001, 1001, 2001, 2001]);
    assert!(pts.windows(2).all(|w| w[1].seq >= w[0].seq));
    assert!(pts.windows(2).all(|w| w[1].ack >= w[0].ack));
    assert_eq!(
        d.an.finish().flows[0]
            .tcp
            .as_ref()
            .unwrap()
            .server
            .retransmissions
            .rto,
        1
    );
}

/// Without the SYN the origin is the first sequence number seen, here 100 below 2^32: the
/// first segment ends at 1448, and an ACK for data sent before the capture began is below 0.
#[test]
fn without_the_syn_the_lines_start_at_the_first_sequence_number_seen() {
    let first = u32::MAX - 99;
    let mut d = Download::without_handshake(first);
    d.ack(MS, first.wrapping_sub(500), 65535);
    d.data(2 * MS, 1448);
    d.data(3 * MS, 1448);
    d.ack(4 * MS, first.wrapping_add(1448), 65535);
    let pts = d.points();
    let lines: Vec<(i64, i64)> = pts.iter().map(|p| (p.seq, p.ack)).collect();
    assert_eq!(lines, [(1448, -500), (2896, -500), (2896, 1448)]);
    assert_inflight_is_seq_minus_ack(&pts);
}

/// Captured next to the receiver, 80 ms from the sender, with a 64 KiB window: the sender
/// fills its window every round trip. The ACK line is the receiver's ACKs as they reached the
/// sender (one leg late), so the sequence line rides `ack + window`, the picture of a
/// window-limited sender — and the stored series say the same.
#[test]
fn at_the_receiver_the_sequence_line_rides_the_window_edge() {
    let rtt = 80 * MS;
    let mut d = Download::handshake_at(5000, (rtt, 10_000));
    let mut t = 2 * rtt;
    for _round in 0..10 {
        // 45 segments of 1448 = 65160 bytes, then the receiver acknowledges them at once.
        for k in 0..45 {
            d.data(t + k * 20_000, 1448);
        }
        let end = t + 45 * 20_000;
        d.ack(end + 5_000, d.sseq, 65535);
        t = end + 5_000 + rtt;
    }
    let pts = d.points();
    assert_inflight_is_seq_minus_ack(&pts);
    assert!(
        pts.iter().all(|p| p.seq <= p.ack + p.window as i64),
        "never past the edge"
    );
    // At the end of each train the sender has filled its window to within one segment.
    let full = pts
        .iter()
        .filter(|p| p.ack + p.window as i64 - p.seq < 1448)
        .count();
    assert!(full >= 9, "{full} bins at the window's edge: {pts:?}");
    // The plain latest ACK would read nearly nothing in flight at those moments; the sender's
    // view says a full window.
    assert!(pts.iter().any(|p| p.inflight > 60_000));

    // The stored series: the same points under the four names, one label, unit bytes.
    let report = d.an.finish();
    let mut sink: Vec<Series> = Vec::new();
    let mut rec = Recorder::new(&mut sink);
    rec.finish(&d.an, &report).unwrap();
    let values = |name: &str| -> Vec<(i64, i64)> {
        let s = sink
            .iter()
            .find(|s| s.name == name && s.labels.get("flow").map(String::as_str) == Some("0"))
            .unwrap_or_else(|| panic!("no {name}{{flow=0}} series"));
        assert_eq!(s.unit, Unit::Bytes, "{name}");
        match &s.data {
            SeriesData::Values(v) => v.iter().map(|p| (p.t_ns, p.value)).collect(),
            _ => panic!("{name} is not a values series"),
        }
    };
    let (seq, ack) = (values("seq"), values("ack"));
    let (inflight, window) = (values("inflight"), values("window"));
    assert_eq!(seq.len(), pts.len());
    for (i, p) in pts.iter().enumerate() {
        assert_eq!(seq[i], (p.ts_ns, p.seq));
        assert_eq!(ack[i], (p.ts_ns, p.ack));
        assert_eq!(window[i], (p.ts_ns, p.window as i64));
        assert_eq!(inflight[i].1, seq[i].1 - ack[i].1);
    }
}
