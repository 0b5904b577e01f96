//! The tcp frame reference server against a blocking client on 127.0.0.1.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tailhunt_load::serve::{ServeConfig, ServeProto, Server, ThinkTime};
use tailhunt_load::wire::{self, ServerTimes};

fn start(f: impl FnOnce(&mut ServeConfig)) -> Server {
    let mut cfg = ServeConfig::new(ServeProto::Tcp, "127.0.0.1:0".parse().unwrap());
    f(&mut cfg);
    Server::start(cfg).unwrap()
}

fn connect(server: &Server) -> TcpStream {
    let s = TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

fn read_reply(s: &mut TcpStream) -> (usize, u64, ServerTimes) {
    let mut header = [0u8; 4];
    s.read_exact(&mut header).unwrap();
    assert_eq!(wire::frame_len(&header, wire::RESPONSE_MIN_BODY), Ok(None));
    let len = u32::from_be_bytes(header) as usize;
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    let (seq, times) = wire::parse_response_body(&body).unwrap();
    (len, seq, times)
}

fn request(seq: u64, body: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    wire::put_request_frame(&mut buf, seq, body);
    buf
}

#[test]
fn echoes_seq_with_the_reply_size_and_timestamps() {
    let server = start(|c| c.reply_bytes = 100);
    let mut s = connect(&server);
    let before = tailhunt_model::ClockOrigin::now().wall_ns as u64;
    s.write_all(&request(42, 64)).unwrap();
    let (len, seq, t) = read_reply(&mut s);
    assert_eq!((len, seq), (100, 42));
    assert!(
        t.app_recv_ns >= before && t.app_send_ns >= t.app_recv_ns,
        "{t:?}"
    );
    // Too small a reply size is padded up to the minimum body.
    let server = start(|c| {
        c.reply_bytes = 1;
        c.timestamps = false;
    });
    let mut s = connect(&server);
    s.write_all(&request(7, 8)).unwrap();
    assert_eq!(
        read_reply(&mut s),
        (wire::RESPONSE_MIN_BODY, 7, ServerTimes::default())
    );
    let stats = server.stop();
    assert_eq!(
        (
            stats.connections,
            stats.requests,
            stats.replies,
            stats.bad_requests
        ),
        (1, 1, 1, 0)
    );
}

#[test]
fn pipelined_requests_are_answered_in_order_despite_random_think_times() {
    let think = ThinkTime::Uniform {
        low: Duration::ZERO,
        high: Duration::from_millis(3),
    };
    let server = start(|c| c.think = think);
    let mut s = connect(&server);
    let mut burst = Vec::new();
    for seq in 0..50 {
        wire::put_request_frame(&mut burst, seq, 20);
    }
    // One frame split across two writes, the rest many to a write.
    s.write_all(&burst[..10]).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    s.write_all(&burst[10..]).unwrap();
    for want in 0..50 {
        assert_eq!(read_reply(&mut s).1, want);
    }
}

#[test]
fn split_writes_still_produce_correct_frames() {
    let server = start(|c| {
        c.split_writes = true;
        c.reply_bytes = 500;
    });
    let mut s = connect(&server);
    let burst: Vec<u8> = (0..20).flat_map(|seq| request(seq, 8)).collect();
    s.write_all(&burst).unwrap();
    for want in 0..20 {
        let (len, seq, _) = read_reply(&mut s);
        assert_eq!((len, seq), (500, want));
    }
}

#[test]
fn think_time_of_2ms_delays_each_reply_about_2ms() {
    let server = start(|c| c.think = ThinkTime::Fixed(Duration::from_millis(2)));
    let mut s = connect(&server);
    let mut rtts: Vec<Duration> = (0..20)
        .map(|seq| {
            let t0 = Instant::now();
            s.write_all(&request(seq, 8)).unwrap();
            assert_eq!(read_reply(&mut s).1, seq);
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
fn bad_length_closes_only_that_connection() {
    let server = start(|_| {});
    let mut good = connect(&server);
    let mut bad = connect(&server);
    good.write_all(&request(1, 8)).unwrap();
    assert_eq!(read_reply(&mut good).1, 1);
    // A valid request, then a frame whose length is below the minimum: the first is answered,
    // then the connection closes.
    let mut garbage = request(5, 8);
    garbage.extend_from_slice(&[0, 0, 0, 2, 9, 9]);
    bad.write_all(&garbage).unwrap();
    assert_eq!(read_reply(&mut bad).1, 5);
    let mut rest = Vec::new();
    let _ = bad.read_to_end(&mut rest); // EOF or reset, never a timeout
    assert!(rest.is_empty());
    good.write_all(&request(2, 8)).unwrap();
    assert_eq!(read_reply(&mut good).1, 2);
    assert_eq!(server.stop().bad_requests, 1);
}

#[test]
fn large_frames_cross_many_reads_and_writes() {
    let server = start(|c| c.reply_bytes = 4 << 20);
    let mut s = connect(&server);
    let mut writer = s.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        for seq in 0..3 {
            writer.write_all(&request(seq, 3 << 20)).unwrap();
        }
    });
    for want in 0..3 {
        let (len, seq, _) = read_reply(&mut s);
        assert_eq!((len, seq), (4 << 20, want));
    }
    sender.join().unwrap();
}

#[test]
fn connections_spread_over_threads_and_all_get_answers() {
    let server = start(|c| c.threads = 2);
    let mut conns: Vec<TcpStream> = (0..8).map(|_| connect(&server)).collect();
    for round in 0..5 {
        for s in &mut conns {
            s.write_all(&request(round, 8)).unwrap();
        }
        for s in &mut conns {
            assert_eq!(read_reply(s).1, round);
        }
    }
    let stats = server.stop();
    assert_eq!(
        (stats.connections, stats.requests, stats.replies),
        (8, 40, 40)
    );
}

#[test]
fn pause_holds_replies_then_answers_all_in_order() {
    let pause = (Duration::ZERO, Duration::from_millis(300));
    let server = start(|c| c.pause = Some(pause));
    let mut s = connect(&server);
    let t0 = Instant::now();
    for seq in 0..10 {
        s.write_all(&request(seq, 8)).unwrap();
    }
    for want in 0..10 {
        assert_eq!(read_reply(&mut s).1, want);
    }
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    // After the pause, replies are immediate again.
    let t1 = Instant::now();
    s.write_all(&request(10, 8)).unwrap();
    assert_eq!(read_reply(&mut s).1, 10);
    assert!(t1.elapsed() < Duration::from_secs(1), "{:?}", t1.elapsed());
}

#[test]
fn a_client_writing_far_ahead_of_reading_gets_every_reply_in_order() {
    // 20 MB of replies queue up while the client is not reading: the server stops reading at
    // its output limit and resumes as the client drains, without losing or reordering any.
    let server = start(|c| c.reply_bytes = 200);
    let s = connect(&server);
    let mut writer = s.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let burst: Vec<u8> = (0..100_000).flat_map(|seq| request(seq, 8)).collect();
        writer.write_all(&burst).unwrap();
    });
    std::thread::sleep(Duration::from_millis(200));
    let mut r = std::io::BufReader::with_capacity(1 << 16, s.try_clone().unwrap());
    let mut frame = [0u8; 204];
    for want in 0..100_000 {
        r.read_exact(&mut frame).unwrap();
        assert_eq!(
            wire::parse_response_body(&frame[4..]).map(|(seq, _)| seq),
            Some(want)
        );
    }
    sender.join().unwrap();
    drop(s);
    assert_eq!(server.stop().replies, 100_000);
}
