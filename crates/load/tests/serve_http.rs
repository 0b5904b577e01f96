//! The HTTP/1.1 reference server against a minimal client, curl and wrk on 127.0.0.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use tailhunt_load::serve::{ServeConfig, ServeProto, Server};
use tailhunt_load::wire::{self, ServerTimes};

fn start(f: impl FnOnce(&mut ServeConfig)) -> Server {
    let mut cfg = ServeConfig::new(ServeProto::Http, "127.0.0.1:0".parse().unwrap());
    f(&mut cfg);
    Server::start(cfg).unwrap()
}

fn connect(server: &Server) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let reader = BufReader::new(s.try_clone().unwrap());
    (s, reader)
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn read_response(r: &mut BufReader<TcpStream>) -> Response {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.to_string(), v.trim().to_string()));
    }
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    let len: usize = resp.header("Content-Length").unwrap().parse().unwrap();
    resp.body = vec![0; len];
    r.read_exact(&mut resp.body).unwrap();
    resp
}

fn timestamps(resp: &Response) -> ServerTimes {
    wire::parse_timestamp_header(resp.header(wire::TIMESTAMP_HEADER).unwrap()).unwrap()
}

#[test]
fn three_pipelined_requests_get_three_responses_with_timestamps() {
    let server = start(|c| c.reply_bytes = 10);
    let (mut s, mut r) = connect(&server);
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\
          POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody\
          GET /q?a=1 HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .unwrap();
    for _ in 0..3 {
        let resp = read_response(&mut r);
        assert_eq!(
            (resp.status, resp.body.as_slice()),
            (200, &b"xxxxxxxxxx"[..])
        );
        let t = timestamps(&resp);
        assert!(t.app_recv_ns > 0 && t.app_send_ns >= t.app_recv_ns, "{t:?}");
    }
    let stats = server.stop();
    assert_eq!((stats.requests, stats.replies), (3, 3));
}

/// More pipelined requests than the server's first read buffer holds, sent at once and
/// followed by the client's FIN: every request is answered, then the server closes too. (The
/// end-to-end contract of the server's shorter reads; it does not isolate reading to the end
/// after RDHUP, since the writes' own EPOLLOUT edges report the close as well.)
#[test]
fn a_pipelined_flood_then_a_half_close_gets_every_reply() {
    let server = start(|c| c.reply_bytes = 1);
    let (mut s, mut r) = connect(&server);
    let n = 3000;
    let flood = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(n);
    s.write_all(&flood).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    for _ in 0..n {
        assert_eq!(read_response(&mut r).status, 200);
    }
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{} bytes after the last reply", rest.len());
    let stats = server.stop();
    assert_eq!((stats.requests, stats.replies), (n as u64, n as u64));
}

#[test]
fn empty_bodies_split_writes_and_timestamps_off() {
    let server = start(|c| {
        c.reply_bytes = 0;
        c.split_writes = true;
        c.timestamps = false;
    });
    let (mut s, mut r) = connect(&server);
    s.write_all(b"GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n")
        .unwrap();
    for _ in 0..2 {
        let resp = read_response(&mut r);
        assert_eq!((resp.status, resp.body.len()), (200, 0));
        assert_eq!(timestamps(&resp), ServerTimes::default());
    }
}

#[test]
fn connection_close_is_honoured() {
    let server = start(|_| {});
    let (mut s, mut r) = connect(&server);
    s.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n\r\n")
        .unwrap();
    let resp = read_response(&mut r);
    assert_eq!(resp.header("Connection"), Some("close"));
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

#[test]
fn malformed_request_gets_400_and_closes_only_that_connection() {
    let server = start(|_| {});
    let (mut good, mut good_r) = connect(&server);
    let (mut bad, mut bad_r) = connect(&server);
    bad.write_all(b"GET / HTTP/1.1\r\n\r\nthis is not http\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut bad_r).status, 200);
    assert_eq!(read_response(&mut bad_r).status, 400);
    let mut rest = Vec::new();
    let _ = bad_r.read_to_end(&mut rest);
    assert!(rest.is_empty());
    good.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut good_r).status, 200);
    assert_eq!(server.stop().bad_requests, 1);
}

#[test]
fn oversized_head_gets_431() {
    let server = start(|_| {});
    let (mut s, mut r) = connect(&server);
    let mut head = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
    head.resize(70 << 10, b'a');
    // The server may close before reading everything; the write error is not the point.
    let _ = s.write_all(&head);
    assert_eq!(read_response(&mut r).status, 431);
}

#[test]
fn curl_gets_the_body_and_header() {
    let server = start(|c| c.reply_bytes = 5);
    let url = format!("http://{}/anything", server.local_addr());
    let out = match Command::new("curl")
        .args(["-sS", "-i", "--max-time", "5", &url, &url])
        .output()
    {
        Ok(out) => out,
        Err(e) => return eprintln!("skipped: curl not runnable ({e}); apt-get install curl"),
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert_eq!(text.matches("xxxxx").count(), 2, "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("x-tailhunt-timestamps: "),
        "{text}"
    );
    // Both requests went over one kept-alive connection.
    assert_eq!(server.stop().connections, 1);
}

#[test]
fn wrk_runs_without_errors() {
    let server = start(|c| c.threads = 2);
    let url = format!("http://{}/", server.local_addr());
    let out = match Command::new("wrk")
        .args(["-t1", "-c4", "-d1s", &url])
        .output()
    {
        Ok(out) => out,
        Err(e) => return eprintln!("skipped: wrk not runnable ({e}); apt-get install wrk"),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        !text.contains("Non-2xx") && !text.contains("Socket errors"),
        "{text}"
    );
    let stats = server.stop();
    assert!(
        stats.replies > 100 && stats.bad_requests == 0,
        "{stats:?}\n{text}"
    );
}
