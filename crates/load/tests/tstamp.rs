//! Kernel socket timestamps on real loopback sockets: the wrappers of `tstamp`, the reference
//! servers' `rx_kernel_ns`, and the load generator's breakdown with client kernel times.
//!
//! Software timestamps need no privilege and loopback makes them, so these run everywhere;
//! hardware timestamps are never expected here (loopback has no NIC clock).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tailhunt_load::clock::real_ns;
use tailhunt_load::engine::{run_step, Collect, Live, StepConfig};
use tailhunt_load::schedule::Arrival;
use tailhunt_load::serve::{ServeConfig, ServeProto, Server, ThinkTime};
use tailhunt_load::target::parse_target;
use tailhunt_load::tstamp::{self, KernelTime, Reader, TxStamp, Want};
use tailhunt_load::wire::{self, ServerTimes};
use tailhunt_model::Outcome;

const RX_TX: Want = Want {
    rx: true,
    tx: true,
    hardware: false,
};

/// Drains `fd`'s error queue until `n` stamps came (they are queued when the packet leaves,
/// which on loopback is before `send` returns, but allow a little time).
fn tx_stamps(reader: &mut Reader, fd: &impl std::os::fd::AsFd, n: usize) -> Vec<TxStamp> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while got.len() < n && Instant::now() < deadline {
        reader.drain_tx(fd, |s| got.push(s)).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    got
}

/// Returns once the kernel stamps received packets, with a socket that keeps it doing so while
/// it lives. The first socket to ask turns receive timestamping on asynchronously (a static key
/// flipped from a workqueue: `net_enable_timestamp` in net/core/dev.c), so packets in the first
/// moments after may carry none; the code under test treats that as "unknown", the tests wait.
fn kernel_rx_stamps_on() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(s.local_addr().unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    tstamp::enable(
        &s,
        Want {
            rx: true,
            ..Want::default()
        },
    )
    .unwrap();
    let (mut reader, mut buf) = (Reader::new(), [0u8; 8]);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        s.send(b"x").unwrap();
        if reader.recv(&s, &mut buf).unwrap().1.software_ns.is_some() {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "the kernel never stamped a received packet"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn software(t: KernelTime) -> u64 {
    t.software_ns.expect("a software timestamp")
}

#[test]
fn udp_rx_and_tx_timestamps_come_back_numbered_and_in_order() {
    let _on = kernel_rx_stamps_on();
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.connect(server.local_addr().unwrap()).unwrap();
    let on = tstamp::enable(
        &server,
        Want {
            rx: true,
            ..Want::default()
        },
    )
    .unwrap();
    assert!(on.rx && !on.tx, "{on:?}");
    let on = tstamp::enable(&client, RX_TX).unwrap();
    assert!(on.rx && on.tx, "{on:?}");
    let before = real_ns() as u64;
    for i in 0..3u8 {
        client.send(&[i; 16]).unwrap();
    }
    let after_send = real_ns() as u64;
    let mut reader = Reader::new();
    let stamps = tx_stamps(&mut reader, &client, 3);
    assert_eq!(stamps.iter().map(|s| s.id).collect::<Vec<_>>(), [0, 1, 2]);
    for s in &stamps {
        let t = software(s.time);
        assert!(before <= t && t <= after_send, "{before} {t} {after_send}");
        assert_eq!(s.time.hardware_ns, None, "loopback has no hardware clock");
    }
    let mut buf = [0u8; 64];
    for i in 0..3u8 {
        let (n, peer, t) = reader.recv_from(&server, &mut buf).unwrap();
        assert_eq!(
            (n, buf[0], peer),
            (16, i, Some(client.local_addr().unwrap()))
        );
        // Received after it was sent, before the application looked: one host, one clock.
        let rx = software(t);
        assert!(software(stamps[i as usize].time) <= rx && rx <= real_ns() as u64);
    }
    // An empty error queue is not an error.
    assert_eq!(reader.drain_tx(&client, |_| {}).unwrap(), 0);
}

#[test]
fn tcp_tx_ids_are_the_offset_of_each_sends_last_byte() {
    let _on = kernel_rx_stamps_on();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // Enabled on the listener, inherited by the accepted socket.
    tstamp::enable(
        &listener,
        Want {
            rx: true,
            ..Want::default()
        },
    )
    .unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    client.set_nodelay(true).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    accepted
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert!(tstamp::enable(&client, RX_TX).unwrap().tx);
    client.write_all(&[1; 10]).unwrap();
    client.write_all(&[2; 5]).unwrap();
    let mut reader = Reader::new();
    let stamps = tx_stamps(&mut reader, &client, 2);
    let ids: Vec<u32> = stamps.iter().map(|s| s.id).collect();
    assert_eq!(ids, [tstamp::stream_id(10), tstamp::stream_id(15)]);
    let mut got = 0;
    let mut buf = [0u8; 64];
    let mut last_rx = 0;
    while got < 15 {
        let (n, t) = reader.recv(&accepted, &mut buf).unwrap();
        assert!(n > 0);
        got += n;
        last_rx = software(t);
    }
    assert!(software(stamps[1].time) <= last_rx && last_rx <= real_ns() as u64);
}

fn start(proto: ServeProto, think: ThinkTime) -> Server {
    let mut cfg = ServeConfig::new(proto, "127.0.0.1:0".parse().unwrap());
    cfg.think = think;
    Server::start(cfg).unwrap()
}

/// A server's timestamps are on its CLOCK_REALTIME; on one host they are ordered with ours.
fn check_server_times(t: ServerTimes, sent: u64, got: u64) {
    assert!(t.rx_kernel_ns > 0, "no kernel receive timestamp: {t:?}");
    assert!(
        sent <= t.rx_kernel_ns && t.rx_kernel_ns <= t.app_recv_ns,
        "sent {sent}, {t:?}"
    );
    assert!(
        t.app_recv_ns <= t.app_send_ns && t.app_send_ns <= got,
        "{t:?}, got {got}"
    );
}

#[test]
fn tcp_server_returns_its_kernel_receive_time_before_its_app_receive_time() {
    let server = start(ServeProto::Tcp, ThinkTime::None);
    let _on = kernel_rx_stamps_on();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut ask = |seq: u64| -> (u64, ServerTimes, u64) {
        let mut req = Vec::new();
        wire::put_request_frame(&mut req, seq, 16);
        let sent = real_ns() as u64;
        s.write_all(&req).unwrap();
        let mut body = vec![0; wire::FRAME_HEADER + wire::RESPONSE_MIN_BODY];
        s.read_exact(&mut body).unwrap();
        let got = real_ns() as u64;
        let (echo, t) = wire::parse_response_body(&body[wire::FRAME_HEADER..]).unwrap();
        assert_eq!(echo, seq);
        (sent, t, got)
    };
    for seq in 0..20 {
        let (sent, t, got) = ask(seq);
        check_server_times(t, sent, got);
    }
}

#[test]
fn udp_server_returns_its_kernel_receive_time_before_its_app_receive_time() {
    let server = start(ServeProto::Udp, ThinkTime::None);
    let _on = kernel_rx_stamps_on();
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ask = |seq: u64| -> (u64, ServerTimes, u64) {
        let mut req = Vec::new();
        wire::put_request_body(&mut req, seq, 16);
        let sent = real_ns() as u64;
        s.send(&req).unwrap();
        let mut buf = [0u8; 2048];
        let n = s.recv(&mut buf).unwrap();
        let got = real_ns() as u64;
        let (echo, t) = wire::parse_response_body(&buf[..n]).unwrap();
        assert_eq!(echo, seq);
        (sent, t, got)
    };
    for seq in 0..20 {
        let (sent, t, got) = ask(seq);
        check_server_times(t, sent, got);
    }
}

fn step(url: &str, breakdown: bool) -> StepConfig {
    StepConfig {
        target: parse_target(url).unwrap(),
        rate: 500.0,
        duration: Duration::from_millis(600),
        warmup: Duration::ZERO,
        conns: 2,
        threads: 1,
        max_inflight: 8,
        timeout: Duration::from_secs(2),
        nodelay: true,
        split_writes: false,
        request_bytes: 16,
        arrival: Arrival::Fixed,
        seed: 1,
        breakdown,
        http: Default::default(),
        tls: Default::default(),
        timing: Default::default(),
    }
}

/// With `breakdown`, every ok sample's parts add up to its service time, the client's kernel
/// times are known (so `client_stack` is nonzero), and a 1 ms think time is the server's.
/// Bounds are loose where the machine's load shows (timer wake-ups), exact where it cannot.
fn check_breakdown(proto: ServeProto, scheme: &str) {
    let server = start(proto, ThinkTime::Fixed(Duration::from_millis(1)));
    let _on = kernel_rx_stamps_on();
    let cfg = step(&format!("{scheme}://{}", server.local_addr()), true);
    let mut got = Collect::default();
    run_step(
        &cfg,
        &Arc::new(Live::default()),
        &Arc::new(AtomicBool::new(false)),
        &mut got,
    )
    .unwrap();
    // In intended-time order, every request with its breakdown.
    assert!(got
        .0
        .windows(2)
        .all(|w| w[0].sample.intended_ns <= w[1].sample.intended_ns));
    assert!(got.0.iter().all(|f| f.breakdown.is_some()));
    let mut ok = 0;
    let mut with_client_times = 0;
    let mut apps = Vec::new();
    for (s, b) in got
        .0
        .iter()
        .map(|f| (&f.sample, f.breakdown.unwrap_or_default()))
    {
        if s.outcome != Outcome::Ok {
            continue;
        }
        ok += 1;
        let service = s.end_ns - s.start_ns;
        assert_eq!(
            b.client_stack_ns + b.network_ns + b.server_stack_ns + b.server_app_ns,
            service,
            "{b:?}"
        );
        assert!(b.client_stack_ns >= 0 && b.network_ns >= 0, "{b:?}");
        assert!(b.server_stack_ns > 0, "server kernel time missing: {b:?}");
        // Never shorter than the think time; later only by timer latency (see the median).
        assert!(b.server_app_ns >= 1_000_000, "{b:?}");
        apps.push(b.server_app_ns);
        with_client_times += usize::from(b.client_stack_ns > 0);
    }
    apps.sort_unstable();
    let median = apps.get(apps.len() / 2).copied().unwrap_or(0);
    assert!(
        median < 1_300_000,
        "server_app median {median} ns for 1 ms think"
    );
    assert!(ok >= 250, "only {ok} ok samples of {}", got.0.len());
    // Kernel timestamps on both sides of the client: nearly every sample has them.
    assert!(
        with_client_times * 10 >= ok * 9,
        "{with_client_times} of {ok}"
    );
}

#[test]
fn tcp_breakdown_parts_add_up_to_the_service_time() {
    check_breakdown(ServeProto::Tcp, "tcp");
}

#[test]
fn udp_breakdown_parts_add_up_to_the_service_time() {
    check_breakdown(ServeProto::Udp, "udp");
}
