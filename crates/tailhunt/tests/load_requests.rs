//! What `tailhunt load` can send beyond a GET: any Redis command (SET with a value size, INCR,
//! commands answered with arrays), memcached set, and HTTP requests with a method, headers and
//! a body, each checked on the server that received them (a real redis-server and memcached,
//! and an HTTP server in the test that records every request).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use common::servers::{memcached, redis};
use common::tls::tls_server;
use common::Env;
use serde_json::Value;

/// The one step of a `load --rate R` document.
fn only_step(doc: &Value) -> &Value {
    &doc["steps"][0]
}

/// `load URL` at 200/s for 1 s, with `extra` flags.
fn load_args<'a>(url: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "load",
        url,
        "--rate",
        "200",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--nodelay=true",
    ];
    args.extend_from_slice(extra);
    args
}

fn load(env: &Env, url: &str, extra: &[&str]) -> Value {
    env.json("load", &load_args(url, extra))
}

/// Sends one raw request line(s) to `addr` and returns the first reply line.
fn ask(addr: &str, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line.trim_end().to_string()
}

#[test]
fn redis_set_with_a_value_size_incr_and_an_array_reply() {
    let env = Env::new();
    let r = redis();
    let doc = load(
        &env,
        &format!("redis://{}/SET/blob", r.addr),
        &["--request-bytes", "100"],
    );
    let s = only_step(&doc);
    assert!(s["ok"].as_u64().unwrap() >= 150, "{s:#}");
    assert_eq!(s["errors"], 0, "{s:#}");
    // The server holds the value the SETs carried.
    assert_eq!(
        ask(&r.addr, b"*2\r\n$6\r\nSTRLEN\r\n$4\r\nblob\r\n"),
        ":100"
    );
    // Every INCR the load sent (no warm-up) reached the server once.
    let doc = load(&env, &format!("redis://{}/incr/hits", r.addr), &[]);
    let s = only_step(&doc);
    let sent = s["ok"].as_u64().unwrap();
    assert_eq!(s["errors"], 0, "{s:#}");
    let mut c = TcpStream::connect(&r.addr).unwrap();
    c.write_all(b"*2\r\n$3\r\nGET\r\n$4\r\nhits\r\n").unwrap();
    let mut reply = vec![0u8; 64];
    let n = c.read(&mut reply).unwrap();
    let text = String::from_utf8_lossy(&reply[..n]);
    assert_eq!(
        text.lines().nth(1),
        Some(sent.to_string().as_str()),
        "{text}"
    );
    // A command answered with an array (of bulk strings) is an answer too; a wrong-type reply
    // is an error the step counts.
    ask(
        &r.addr,
        b"*4\r\n$5\r\nRPUSH\r\n$1\r\nq\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    let doc = load(&env, &format!("redis://{}/LRANGE/q/0/-1", r.addr), &[]);
    let s = only_step(&doc);
    assert!(s["ok"].as_u64().unwrap() >= 150, "{s:#}");
    // A run in which every request failed is measured and kept (exit 0: failures may be what
    // it measures), with a warning naming the first error: its latencies are the errors'.
    let url = format!("redis://{}/LRANGE/blob/0/-1", r.addr);
    let out = env.run(&load_args(&url, &["--json"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("the run's document");
    common::check_schema("load", &doc);
    let s = only_step(&doc);
    assert_eq!(s["ok"], 0, "LRANGE on a string is WRONGTYPE: {s:#}");
    assert!(s["errors"].as_u64().unwrap() >= 150, "{s:#}");
    // The run says what the server answered, not only that it was an error.
    let first = doc["first_error"].as_str().unwrap_or_default();
    assert!(first.starts_with("error reply: -WRONGTYPE"), "{doc:#}");
    assert!(
        err.contains("tailhunt: warning: no request succeeded: ")
            && err.contains("(first: error reply: -WRONGTYPE")
            && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(doc["status"], "complete", "{doc:#}");
}

#[test]
fn memcached_set_stores_a_value_of_the_request_size() {
    let env = Env::new();
    let m = memcached();
    let doc = load(
        &env,
        &format!("memcached://{}/set/page", m.addr),
        &["--request-bytes", "50"],
    );
    let s = only_step(&doc);
    assert!(s["ok"].as_u64().unwrap() >= 150, "{s:#}");
    assert_eq!(s["errors"], 0, "{s:#}");
    assert_eq!(ask(&m.addr, b"get page\r\n"), "VALUE page 0 50");
}

/// What the test's HTTP server saw of one request.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    /// The connection it came on (numbered as accepted).
    conn: usize,
    line: String,
    trace: Option<String>,
    body: Vec<u8>,
}

/// An HTTP/1.1 keep-alive server on a free port that records every request and answers `ok`.
fn recording_server() -> (String, Arc<Mutex<Vec<Seen>>>) {
    answering_server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false)
}

/// A server on a free port that records every request and answers it with `reply`, closing
/// the connection after each answer when `close`.
fn answering_server(reply: &'static [u8], close: bool) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().flatten().enumerate() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || serve(conn, n, reply, close, &log));
        }
    });
    (addr, seen)
}

fn serve(conn: TcpStream, n: usize, reply: &[u8], close: bool, log: &Mutex<Vec<Seen>>) {
    let mut out = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut length, mut trace) = (0usize, None);
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap(),
                "x-trace" => trace = Some(value.trim().to_string()),
                _ => {}
            }
        }
        let mut body = vec![0u8; length];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        log.lock().unwrap().push(Seen {
            conn: n,
            line: line.trim_end().to_string(),
            trace,
            body,
        });
        if out.write_all(reply).is_err() || close {
            return;
        }
    }
}

/// A server that closes each connection after its answer, saying so (HTTP/1.0, as Python's
/// http.server; `Connection: close` in HTTP/1.1, as nginx at its keep-alive limit): every
/// request is answered, on a connection opened again after each, and none is an error.
/// (Before, the next request went on the closing connection: 42 of 100 failed against
/// http.server with "the server closed the connection".)
#[test]
fn a_server_that_closes_after_each_answer_is_not_an_error() {
    let env = Env::new();
    for reply in [
        &b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"[..],
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
    ] {
        let (addr, seen) = answering_server(reply, true);
        let doc = load(&env, &format!("http://{addr}/"), &["--conns", "2"]);
        let s = only_step(&doc);
        let first = String::from_utf8_lossy(reply.split(|&b| b == b'\r').next().unwrap());
        assert_eq!(s["errors"], 0, "{first}: {doc:#}");
        assert_eq!(s["ok"], s["sent"], "{first}: {s:#}");
        assert!(s["ok"].as_u64().unwrap() >= 190, "{first}: {s:#}");
        let seen = seen.lock().unwrap();
        let conns = seen
            .iter()
            .map(|r| r.conn)
            .collect::<std::collections::HashSet<_>>();
        assert_eq!(
            conns.len(),
            seen.len(),
            "{first}: one request per connection"
        );
    }
}

#[test]
fn an_http_method_headers_and_a_body_reach_the_server() {
    let env = Env::new();
    let (addr, seen) = recording_server();
    let body = env.path("body.json");
    std::fs::write(&body, br#"{"user": 42}"#).unwrap();
    let doc = load(
        &env,
        &format!("http://{addr}/api/users"),
        &[
            "--method",
            "post",
            "--header",
            "X-Trace: lab-1",
            "--body-file",
            body.to_str().unwrap(),
        ],
    );
    let s = only_step(&doc);
    assert!(s["ok"].as_u64().unwrap() >= 150, "{s:#}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len() as u64, s["ok"].as_u64().unwrap(), "{s:#}");
    let want = Seen {
        conn: 0,
        line: "POST /api/users HTTP/1.1".into(),
        trace: Some("lab-1".into()),
        body: br#"{"user": 42}"#.to_vec(),
    };
    let same = |x: &Seen| {
        Seen {
            conn: 0,
            ..x.clone()
        } == want
    };
    assert!(seen.iter().all(same), "{:?}", seen.first());
}

#[test]
fn requests_a_target_cannot_carry_are_refused_with_the_reason() {
    let env = Env::new();
    let r = redis();
    let redis_url = format!("redis://{}/k", r.addr);
    for (args, needle) in [
        (
            vec![
                "load",
                redis_url.as_str(),
                "--rate",
                "10",
                "--method",
                "POST",
            ],
            "are for http:// and https:// targets",
        ),
        (
            vec![
                "load",
                "http://127.0.0.1:9/",
                "--rate",
                "10",
                "--header",
                "nocolon",
            ],
            "must be 'Name: value'",
        ),
        (
            vec![
                "load",
                "http://127.0.0.1:9/",
                "--rate",
                "10",
                "--method",
                "GE T",
            ],
            "is not an HTTP method",
        ),
        (
            vec!["load", "memcached://127.0.0.1:9/delete/k", "--rate", "10"],
            "only get and set",
        ),
        (
            vec![
                "load",
                "http://127.0.0.1:9/",
                "--rate",
                "10",
                "--body-file",
                "/nonexistent/body",
            ],
            "cannot read --body-file '/nonexistent/body'",
        ),
    ] {
        let err = env.fails(&args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn https_with_a_trusted_ca_file_or_insecure_and_a_clear_refusal_otherwise() {
    let env = Env::new();
    let srv = tls_server(&env);
    let url = format!("https://{}/health", srv.addr);
    let doc = load(&env, &url, &["--ca-file", srv.ca.to_str().unwrap()]);
    let s = only_step(&doc);
    assert!(s["ok"].as_u64().unwrap() >= 150, "{s:#}");
    assert_eq!(s["errors"], 0, "{s:#}");
    assert_eq!(
        srv.served(),
        s["ok"].as_u64().unwrap(),
        "every answer came over TLS"
    );
    let doc = load(
        &env,
        &url,
        &["--insecure", "--method", "POST", "--body", "x"],
    );
    let s = only_step(&doc);
    assert!(s["ok"].as_u64().unwrap() >= 150, "{s:#}");
    assert_eq!(srv.last(), "POST None x");
    // The system's roots do not know this certificate: the handshake fails, and says why.
    let out = env.run(&["--json", "load", &url, "--rate", "10", "--duration", "1s"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("TLS handshake") && text.contains("certificate"),
        "{text}"
    );
}
