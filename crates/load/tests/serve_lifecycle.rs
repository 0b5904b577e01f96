//! Starting and stopping reference servers: errors that help, prompt shutdown, counters.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tailhunt_load::serve::{ServeConfig, ServeError, ServeProto, Server, ThinkTime};
use tailhunt_load::wire;

fn cfg(proto: ServeProto) -> ServeConfig {
    ServeConfig::new(proto, "127.0.0.1:0".parse().unwrap())
}

#[test]
fn binding_a_port_in_use_says_what_to_do() {
    for proto in [ServeProto::Tcp, ServeProto::Http, ServeProto::Udp] {
        let first = Server::start(cfg(proto)).unwrap();
        let mut again = cfg(proto);
        again.listen = first.local_addr();
        let err = Server::start(again).unwrap_err();
        assert!(matches!(err, ServeError::Bind { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "address {} is already in use (stop the other server or choose another --listen port)",
                first.local_addr()
            )
        );
    }
}

#[test]
fn bad_settings_are_refused_with_the_valid_range() {
    let mut c = cfg(ServeProto::Tcp);
    c.threads = 0;
    assert!(Server::start(c)
        .unwrap_err()
        .to_string()
        .contains("1..=1024"));
    let mut c = cfg(ServeProto::Udp);
    c.reply_bytes = 70_000;
    assert!(Server::start(c)
        .unwrap_err()
        .to_string()
        .contains("at most 65507"));
    let mut c = cfg(ServeProto::Tcp);
    c.think = ThinkTime::Uniform {
        low: Duration::from_millis(3),
        high: Duration::from_millis(1),
    };
    assert!(Server::start(c)
        .unwrap_err()
        .to_string()
        .contains("above high"));
    let mut c = cfg(ServeProto::Tcp);
    c.listen = "192.0.2.1:0".parse().unwrap();
    let err = Server::start(c).unwrap_err().to_string();
    assert!(err.contains("not on this machine"), "{err}");
}

#[test]
fn stop_returns_promptly_with_the_counters_even_with_replies_held() {
    for proto in [ServeProto::Tcp, ServeProto::Http, ServeProto::Udp] {
        let mut c = cfg(proto);
        c.threads = 2;
        c.think = ThinkTime::Fixed(Duration::from_secs(60));
        let server = Server::start(c).unwrap();
        let addr = server.local_addr();
        let _conn = match proto {
            ServeProto::Udp => {
                let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                let mut req = Vec::new();
                wire::put_request_body(&mut req, 1, 8);
                s.send_to(&req, addr).unwrap();
                None
            }
            ServeProto::Tcp | ServeProto::Http => {
                let mut s = TcpStream::connect(addr).unwrap();
                if proto == ServeProto::Http {
                    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
                } else {
                    let mut req = Vec::new();
                    wire::put_request_frame(&mut req, 1, 8);
                    s.write_all(&req).unwrap();
                }
                Some(s)
            }
        };
        let deadline = Instant::now() + Duration::from_secs(3);
        while server.stats().requests < 1 {
            assert!(Instant::now() < deadline, "{proto}: request never counted");
            std::thread::sleep(Duration::from_millis(2));
        }
        let t0 = Instant::now();
        let stats = server.stop();
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{proto}: stop took {:?}",
            t0.elapsed()
        );
        assert_eq!((stats.requests, stats.replies), (1, 0), "{proto}");
        assert_eq!(
            stats.connections,
            u64::from(proto != ServeProto::Udp),
            "{proto}"
        );
        // Stopped means closed: a new connection is refused.
        if proto != ServeProto::Udp {
            assert!(TcpStream::connect(addr).is_err(), "{proto}");
        }
    }
}
