//! The UDP echo reference server against a blocking client on 127.0.0.1.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use tailhunt_load::serve::{ServeConfig, ServeProto, Server, ThinkTime};
use tailhunt_load::wire;

fn start(f: impl FnOnce(&mut ServeConfig)) -> (Server, UdpSocket) {
    let mut cfg = ServeConfig::new(ServeProto::Udp, "127.0.0.1:0".parse().unwrap());
    f(&mut cfg);
    let server = Server::start(cfg).unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    client.connect(server.local_addr()).unwrap();
    (server, client)
}

fn ask(client: &UdpSocket, seq: u64) -> (usize, u64) {
    let mut req = Vec::new();
    wire::put_request_body(&mut req, seq, 16);
    client.send(&req).unwrap();
    let mut buf = [0u8; 2048];
    let n = client.recv(&mut buf).unwrap();
    let (got, t) = wire::parse_response_body(&buf[..n]).unwrap();
    assert!(t.app_send_ns >= t.app_recv_ns && t.app_recv_ns > 0, "{t:?}");
    (n, got)
}

#[test]
fn echoes_seq_padded_to_the_reply_size() {
    let (server, client) = start(|c| {
        c.reply_bytes = 1000;
        c.threads = 2;
    });
    for seq in 0..20 {
        assert_eq!(ask(&client, seq), (1000, seq));
    }
    // Shorter than a seq: counted, not answered.
    client.send(&[1, 2, 3]).unwrap();
    assert_eq!(ask(&client, 99), (1000, 99));
    let stats = server.stop();
    assert_eq!(
        (
            stats.requests,
            stats.replies,
            stats.bad_requests,
            stats.connections
        ),
        (21, 21, 1, 0)
    );
}

#[test]
fn think_time_applies_to_datagrams() {
    let (_server, client) = start(|c| c.think = ThinkTime::Fixed(Duration::from_millis(2)));
    let mut rtts: Vec<Duration> = (0..15)
        .map(|seq| {
            let t0 = Instant::now();
            assert_eq!(ask(&client, seq).1, seq);
            t0.elapsed()
        })
        .collect();
    rtts.sort();
    assert!(rtts[0] >= Duration::from_micros(1900), "{rtts:?}");
    let median = rtts[rtts.len() / 2];
    assert!(
        (Duration::from_micros(1500)..Duration::from_millis(10)).contains(&median),
        "{rtts:?}"
    );
}

#[test]
fn a_burst_of_datagrams_is_answered_one_for_one() {
    let (server, client) = start(|c| {
        c.think = ThinkTime::Exponential {
            mean: Duration::from_micros(200),
        }
    });
    let mut req = Vec::new();
    for seq in 0..100 {
        req.clear();
        wire::put_request_body(&mut req, seq, 8);
        client.send(&req).unwrap();
    }
    let mut seen = [false; 100];
    let mut buf = [0u8; 256];
    for _ in 0..100 {
        let n = client.recv(&mut buf).unwrap();
        seen[wire::body_seq(&buf[..n]).unwrap() as usize] = true;
    }
    assert!(seen.iter().all(|&s| s));
    assert_eq!(server.stop().replies, 100);
}
