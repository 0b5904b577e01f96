//! An HTTPS server for the tests: Python's HTTP server over OpenSSL, with a certificate
//! signed by a private CA made by `openssl`.

use std::io::{BufRead, BufReader};

use super::Env;

/// A TLS HTTP/1.1 keep-alive server (Python's, over OpenSSL) with a certificate for 127.0.0.1
/// signed by a CA made by `openssl`, on a free port; logs what it answered. Stopped (by
/// PID) when dropped. One connection at a time (Python's `HTTPServer`).
pub struct TlsServer {
    child: std::process::Child,
    pub addr: String,
    /// The CA that signed the server's certificate.
    pub ca: std::path::PathBuf,
    /// The number of requests answered, then the last one's method, its `X-Test` header and
    /// its body, space-separated (rewritten at each request).
    log: std::path::PathBuf,
}

impl TlsServer {
    fn logged(&self) -> (u64, String) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let (n, last) = text.split_once(' ').unwrap_or(("0", ""));
        (n.parse().unwrap_or(0), last.to_string())
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.logged().0
    }

    /// The last request answered: its method, its `X-Test` header (`None` without one) and its
    /// body, space-separated.
    pub fn last(&self) -> String {
        self.logged().1
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TLS_SERVER: &str = r#"
import http.server, ssl, sys
cert, key, log = sys.argv[1], sys.argv[2], sys.argv[3]
n = 0
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self):
        global n
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        n += 1
        last = "%s %s %s" % (self.command, self.headers.get("X-Test"), body.decode())
        open(log, "w").write("%d %s" % (n, last))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    do_GET = answer
    do_POST = answer
s = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// Runs `openssl ARGS`, quietly; panics naming the step when it fails.
fn openssl(args: &[&std::ffi::OsStr]) {
    let st = std::process::Command::new("openssl")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl (installed by scripts/setup.sh)");
    assert!(st.success(), "openssl {args:?} failed");
}

pub fn tls_server(env: &Env) -> TlsServer {
    // A CA, and a certificate for 127.0.0.1 it signed (a self-signed CA certificate cannot
    // serve as the server's own: webpki refuses a CA used as an end entity).
    let p = |name: &str| env.path(name).into_os_string();
    let o = |s: &str| std::ffi::OsString::from(s);
    openssl(&[
        &o("req"),
        &o("-x509"),
        &o("-newkey"),
        &o("rsa:2048"),
        &o("-nodes"),
        &o("-days"),
        &o("1"),
        &o("-subj"),
        &o("/CN=tailhunt-test-ca"),
        &o("-keyout"),
        &p("ca.key"),
        &o("-out"),
        &p("ca.pem"),
    ]);
    openssl(&[
        &o("req"),
        &o("-newkey"),
        &o("rsa:2048"),
        &o("-nodes"),
        &o("-subj"),
        &o("/CN=127.0.0.1"),
        &o("-keyout"),
        &p("key.pem"),
        &o("-out"),
        &p("leaf.csr"),
    ]);
    std::fs::write(
        env.path("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(&[
        &o("x509"),
        &o("-req"),
        &o("-in"),
        &p("leaf.csr"),
        &o("-CA"),
        &p("ca.pem"),
        &o("-CAkey"),
        &p("ca.key"),
        &o("-CAcreateserial"),
        &o("-days"),
        &o("1"),
        &o("-extfile"),
        &p("leaf.ext"),
        &o("-out"),
        &p("cert.pem"),
    ]);
    let (cert, key) = (env.path("cert.pem"), env.path("key.pem"));
    let script = env.path("tls_server.py");
    std::fs::write(&script, TLS_SERVER).unwrap();
    let log = env.path("served");
    let mut child = std::process::Command::new("python3")
        .arg(&script)
        .arg(&cert)
        .arg(&key)
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut port = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    TlsServer {
        child,
        addr: format!("127.0.0.1:{}", port.trim()),
        ca: env.path("ca.pem"),
        log,
    }
}
