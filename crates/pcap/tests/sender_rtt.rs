//! The round trip the sender lives with, from a capture at the receiver with the bottleneck's
//! queue upstream of it: the handshake crosses an empty queue, the queue fills afterwards, and
//! only the TCP timestamp echoes see it (issue 13, item 1).
//!
//! The downloads are built packet by packet from a model of the path: the receiver
//! acknowledges every second segment at once (its TS clock ticks every millisecond, so
//! several ACKs share a TSval), each ACK reaches the sender 50 µs later and releases as many
//! segments as it acknowledged, echoing that ACK's TSval, and those segments reach the capture
//! point after the queue's delay, one every 232 µs at most (50 Mbit/s).

mod tcp_support;

use std::collections::VecDeque;

use tailhunt_model::evidence::capture::{CaptureReport, TcpSummary};
use tailhunt_pcap::analysis::{AnalysisConfig, Analyzer};
use tailhunt_pcap::decode::flags::{ACK, PSH, SYN};
use tcp_support::{packet, push, C, CP, MS, S, SP};

const US: i64 = 1_000;
/// One segment at the bottleneck's rate (1500-byte frames at 50 Mbit/s).
const GAP: i64 = 232 * US;
const SEG: u32 = 1448;
/// Capture point (at the receiver) -> sender, for an ACK.
const ACK_TRIP: i64 = 50 * US;

/// How the download goes.
struct Path {
    /// Capture point -> sender -> capture point at time `t` (ACK trip, queue, data trip).
    leg: fn(i64) -> i64,
    /// Window scale the receiver offers (none: no scaling) and the raw window it advertises.
    wscale: Option<u8>,
    window_raw: u16,
    /// Segments the sender keeps in flight at most (its congestion window).
    cwnd: u32,
    /// The application has nothing to send from this byte until this time.
    pause: Option<(u32, i64)>,
    bytes: u32,
}

/// The receiver's TS clock (1 ms ticks) and the sender's.
fn ts_receiver(t: i64) -> u32 {
    1_000 + (t / MS) as u32
}
fn ts_sender(t: i64) -> u32 {
    70_000 + (t / MS) as u32
}

struct Capture {
    an: Analyzer,
}

impl Capture {
    fn push(&mut self, ts: i64, data: &[u8]) {
        push(&mut self.an, ts, data);
    }
}

/// A segment the sender sent: when, and when it reaches the capture point.
struct InFlight {
    sent: i64,
    due: i64,
}

/// Runs the download over `p` and returns the connection's summary.
fn download(p: &Path) -> TcpSummary {
    let mut cap = Capture {
        an: Analyzer::new(AnalysisConfig::default()).unwrap(),
    };
    let (c0, s0) = (1000u32, 5000u32);
    let hs = 100 * US;
    cap.push(
        0,
        &packet(
            C,
            S,
            CP,
            SP,
            c0,
            0,
            SYN,
            65535,
            p.wscale,
            Some((ts_receiver(0), 0)),
            0,
        ),
    );
    cap.push(
        hs,
        &packet(
            S,
            C,
            SP,
            CP,
            s0,
            c0 + 1,
            SYN | ACK,
            65535,
            p.wscale,
            Some((ts_sender(0), ts_receiver(0))),
            0,
        ),
    );
    let ts = |t| Some((ts_receiver(t), ts_sender(0)));
    let (cseq, mut sseq) = (c0 + 1, s0 + 1);
    cap.push(
        hs + 10 * US,
        &packet(C, S, CP, SP, cseq, sseq, ACK, p.window_raw, None, ts(hs), 0),
    );
    // The request, 12 bytes; the sender answers with its first flight, echoing it.
    let req = hs + 20 * US;
    cap.push(
        req,
        &packet(
            C,
            S,
            CP,
            SP,
            cseq,
            sseq,
            ACK | PSH,
            p.window_raw,
            None,
            ts(req),
            12,
        ),
    );
    let cseq = cseq + 12;
    let mut flight: VecDeque<InFlight> = (0..p.cwnd)
        .map(|_| InFlight {
            sent: req,
            due: req + (p.leg)(req),
        })
        .collect();
    let (mut sent, mut last, mut unacked) = (p.cwnd, 0i64, 0u32);
    let total = p.bytes / SEG;
    let mut acks: Vec<(i64, u32)> = Vec::new();
    while let Some(seg) = flight.pop_front() {
        let at = seg.due.max(last + GAP);
        last = at;
        // TS.Recent when it was sent: the newest ACK that had reached the sender (the request
        // before any).
        let tsecr = acks
            .iter()
            .rev()
            .find(|(t, _)| t + ACK_TRIP <= seg.sent)
            .map_or(ts_receiver(req), |&(_, v)| v);
        cap.push(
            at,
            &packet(
                S,
                C,
                SP,
                CP,
                sseq,
                cseq,
                ACK,
                65535,
                None,
                Some((ts_sender(at), tsecr)),
                SEG as usize,
            ),
        );
        sseq += SEG;
        unacked += 1;
        // Every second segment is acknowledged at once, a lone one by the delayed-ACK timer
        // (40 ms) unless another arrives first.
        let next = flight.front().map(|n| n.due.max(at + GAP));
        if unacked < 2 && next.is_some_and(|n| n < at + 40 * MS) {
            continue;
        }
        let a = if unacked < 2 {
            at + 40 * MS
        } else {
            at + 5 * US
        };
        let v = ts_receiver(a);
        let ack = packet(
            C,
            S,
            CP,
            SP,
            cseq,
            sseq,
            ACK,
            p.window_raw,
            None,
            Some((v, ts_sender(at))),
            0,
        );
        cap.push(a, &ack);
        acks.push((a, v));
        for _ in 0..unacked {
            if sent == total {
                break;
            }
            let mut send = a + ACK_TRIP;
            if let Some((from, until)) = p.pause {
                if sent * SEG >= from && send < until {
                    send = until;
                }
            }
            flight.push_back(InFlight {
                sent: send,
                due: send - ACK_TRIP + (p.leg)(send),
            });
            sent += 1;
        }
        unacked = 0;
    }
    let r: CaptureReport = cap.an.finish();
    r.flows[0].tcp.clone().unwrap()
}

/// A queue that fills after the handshake: 100 µs then, 20 ms once the download begins,
/// rising to 100 ms over half a second and staying there.
fn filling_queue(t: i64) -> i64 {
    if t < MS {
        return 100 * US;
    }
    20 * MS + (80 * MS).min(80 * MS * t / (500 * MS))
}

/// 64 KiB of window (45 segments in flight), 2 MB.
fn pinned() -> Path {
    Path {
        leg: filling_queue,
        wscale: None,
        window_raw: 65535,
        cwnd: 45,
        pause: None,
        bytes: 2_000_000,
    }
}

fn ratio(t: &TcpSummary) -> f64 {
    t.throughput_bps.unwrap() / t.window_bound_bps.unwrap()
}

#[test]
fn a_queue_upstream_of_the_receiver_is_in_the_senders_round_trip() {
    let t = download(&pinned());
    assert_eq!(t.main_sender, "server");
    let rtt = t.sender_rtt.clone().unwrap();
    assert_eq!(rtt.sender_leg_from, "timestamps");
    assert!(rtt.echo_samples > 100, "{rtt:?}");
    // The echo is matched to the first ACK of its TSval: it overstates by under one tick.
    assert!(rtt.echo_error_max_ns < MS, "{rtt:?}");
    // Most bytes moved at the full queue: the weighted leg is near 100 ms, the handshake's
    // 0.1 ms nowhere in it.
    assert!(
        (60 * MS..=101 * MS).contains(&rtt.sender_leg_ns),
        "sender leg {rtt:?}"
    );
    assert!(rtt.receiver_leg_ns < MS, "{rtt:?}");
    // Window-limited all along; the capture sees the two segments each ACK releases one
    // bottleneck slot apart, and in between the sender seems to have room.
    assert!(
        t.rwnd_limited_share > 0.7,
        "rwnd-limited share {} {:?}",
        t.rwnd_limited_share,
        t.server.states
    );
    assert!(
        (ratio(&t) - 1.0).abs() < 0.2,
        "rate {} vs window/RTT {}",
        t.throughput_bps.unwrap(),
        t.window_bound_bps.unwrap()
    );
}

/// The twin: the same path and traffic, but the receiver offers 8 MiB (window scale 7) and the
/// sender's congestion window holds it to 45 segments: not the window's doing.
#[test]
fn the_same_queue_with_an_open_window_is_not_window_limited() {
    let t = download(&Path {
        wscale: Some(7),
        ..pinned()
    });
    assert!(t.rwnd_limited_share < 0.1, "{}", t.rwnd_limited_share);
    assert!(ratio(&t) < 0.05, "rate/bound {}", ratio(&t));
}

/// The sender pauses for two seconds with everything acknowledged: the first segment after
/// the pause echoes a two-second-old TSval, which is the application's pause, not the path.
#[test]
fn an_application_pause_is_not_a_round_trip() {
    let t = download(&Path {
        pause: Some((1_000_000, 3_000 * MS)),
        ..pinned()
    });
    let rtt = t.sender_rtt.clone().unwrap();
    assert!(rtt.sender_leg_ns <= 101 * MS, "{rtt:?}");
    assert!(
        (ratio(&t) - 1.0).abs() < 0.2,
        "rate/bound {} ({rtt:?})",
        ratio(&t)
    );
}

/// Without timestamps the sender's leg is the capture's own (handshake, ACKs), and says so.
#[test]
fn without_timestamps_the_leg_says_where_it_came_from() {
    let mut cap = Capture {
        an: Analyzer::new(AnalysisConfig::default()).unwrap(),
    };
    let p = |ts, src, dst, sp, dp, seq, ack, fl, len| {
        (
            ts,
            packet(src, dst, sp, dp, seq, ack, fl, 65535, None, None, len),
        )
    };
    for (ts, pk) in [
        p(0, C, S, CP, SP, 1000, 0, SYN, 0),
        p(30 * MS, S, C, SP, CP, 5000, 1001, SYN | ACK, 0),
        p(30 * MS + 10 * US, C, S, CP, SP, 1001, 5001, ACK, 0),
        p(31 * MS, C, S, CP, SP, 1001, 5001, ACK | PSH, 12),
        p(61 * MS, S, C, SP, CP, 5001, 1013, ACK, 1448),
        p(61 * MS + 5 * US, C, S, CP, SP, 1013, 6449, ACK, 0),
    ] {
        cap.push(ts, &pk);
    }
    let r = cap.an.finish();
    let rtt = r.flows[0].tcp.as_ref().unwrap().sender_rtt.clone().unwrap();
    assert_eq!(rtt.sender_leg_from, "acks");
    assert_eq!(rtt.echo_samples, 0);
    assert_eq!(rtt.sender_leg_ns, 30 * MS);
}
