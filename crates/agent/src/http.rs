//! The exporter's HTTP server: `/metrics`, `/findings` and `/healthz`, read-only.
//!
//! In: a listen address (loopback by default, [`DEFAULT_LISTEN`]), an optional bearer token,
//! and a shared [`Exported`] the caller replaces whenever it has a new snapshot. Out: a
//! [`Server`] answering on its own thread until dropped.
//!
//! - `GET /metrics`: OpenMetrics text, or protobuf with native histograms when the `Accept`
//!   header asks for it ([`crate::exposition::negotiate`]).
//! - `GET /findings`: the active findings as JSON.
//! - `GET /healthz`: `ok`, never behind the token (a load balancer's check).
//!
//! With a [`TlsIdentity`] (a PEM certificate chain and its key) every endpoint is served over
//! HTTPS only (OpenSSL through tiny_http; the handshake runs on the accepting thread, so a
//! client that stalls it delays the next: keep the endpoint to trusted networks).
//!
//! With a token, `/metrics` and `/findings` need `Authorization: Bearer TOKEN` (compared in
//! constant time) and answer 401 otherwise. Any method other than GET/HEAD gets 405: no
//! endpoint changes anything.

use std::io::Cursor;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

use subtle::ConstantTimeEq;
use tiny_http::{Header, Method, Request, Response};

use crate::exposition::{self, Format, Snapshot};

/// Where the server listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9465";

/// The snapshot being served; replace it with [`Exported::set`].
#[derive(Debug, Clone, Default)]
pub struct Exported {
    inner: Arc<RwLock<Arc<Snapshot>>>,
}

impl Exported {
    /// Starts with an empty snapshot.
    pub fn new() -> Exported {
        Exported::default()
    }

    /// Replaces the served snapshot.
    pub fn set(&self, snapshot: Snapshot) {
        let snapshot = Arc::new(snapshot);
        match self.inner.write() {
            Ok(mut g) => *g = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
    }

    /// The snapshot served now.
    pub fn get(&self) -> Arc<Snapshot> {
        match self.inner.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Binding the address failed.
    #[error("cannot listen on {addr}: {reason} (is another process using the port? pick another with --listen)")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The error text.
        reason: String,
    },
    /// An empty token would let everyone in while looking protected.
    #[error("the bearer token is empty: give a non-empty token or none")]
    EmptyToken,
    /// The certificate or key cannot be used.
    #[error("{0}")]
    Tls(String),
}

/// The certificate chain (leaf first) and private key HTTPS is served with, as PEM.
#[derive(Clone)]
pub struct TlsIdentity {
    /// Where the chain was read from.
    pub cert_path: PathBuf,
    /// Where the key was read from.
    pub key_path: PathBuf,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

fn read_pem(key: &str, path: &Path, marker: &str, what: &str) -> Result<Vec<u8>, HttpError> {
    let bytes = std::fs::read(path).map_err(|e| {
        HttpError::Tls(format!(
            "{key} = \"{}\": cannot read it: {e}",
            path.display()
        ))
    })?;
    let text = String::from_utf8_lossy(&bytes);
    if !text.contains("-----BEGIN ") || !text.contains(marker) {
        return Err(HttpError::Tls(format!(
            "{key} = \"{}\": holds no PEM {what} (a \"-----BEGIN ...{marker}\" block)",
            path.display()
        )));
    }
    Ok(bytes)
}

impl TlsIdentity {
    /// Reads the PEM certificate chain (the server's own certificate first) and its key.
    /// Whether they match is checked when the server starts.
    pub fn read(cert: &Path, key: &Path) -> Result<TlsIdentity, HttpError> {
        Ok(TlsIdentity {
            cert_pem: read_pem("tls_cert", cert, "CERTIFICATE-----", "certificate")?,
            key_pem: read_pem("tls_key", key, "PRIVATE KEY-----", "private key")?,
            cert_path: cert.to_path_buf(),
            key_path: key.to_path_buf(),
        })
    }
}

/// A running server; stops when dropped.
pub struct Server {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
    tls: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Listens on `addr` and serves `exported` on a thread of its own.
    pub fn start(
        addr: &str,
        token: Option<String>,
        exported: Exported,
    ) -> Result<Server, HttpError> {
        Server::start_with(addr, token, None, exported)
    }

    /// As [`Server::start`], over HTTPS when `tls` is given.
    pub fn start_with(
        addr: &str,
        token: Option<String>,
        tls: Option<&TlsIdentity>,
        exported: Exported,
    ) -> Result<Server, HttpError> {
        if token.as_deref() == Some("") {
            return Err(HttpError::EmptyToken);
        }
        let bind_error = |e: Box<dyn std::error::Error + Send + Sync>| HttpError::Bind {
            addr: addr.to_string(),
            reason: e.to_string(),
        };
        let server = match tls {
            None => tiny_http::Server::http(addr).map_err(bind_error)?,
            Some(id) => {
                // Bind first, so a port in use is reported as such and not as a TLS problem.
                let listener =
                    std::net::TcpListener::bind(addr).map_err(|e| bind_error(Box::new(e)))?;
                let config = tiny_http::SslConfig {
                    certificate: id.cert_pem.clone(),
                    private_key: id.key_pem.clone(),
                };
                tiny_http::Server::from_listener(listener, Some(config)).map_err(|e| {
                    HttpError::Tls(format!(
                        "tls_cert = \"{}\", tls_key = \"{}\": not usable together: {e} (give the server's certificate first and the key that belongs to it)",
                        id.cert_path.display(),
                        id.key_path.display()
                    ))
                })?
            }
        };
        let local = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| HttpError::Bind {
                addr: addr.to_string(),
                reason: "not an IP address".into(),
            })?;
        let server = Arc::new(server);
        let s = server.clone();
        let thread = std::thread::Builder::new()
            .name("tailhunt-http".into())
            .spawn(move || {
                for request in s.incoming_requests() {
                    serve(request, token.as_deref(), &exported);
                }
            })
            .map_err(|e| HttpError::Bind {
                addr: addr.to_string(),
                reason: format!("cannot start the server thread: {e}"),
            })?;
        Ok(Server {
            server,
            thread: Some(thread),
            addr: local,
            tls: tls.is_some(),
        })
    }

    /// `https` when serving over TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Answer = Response<Cursor<Vec<u8>>>;

/// Adds a header (names and values here are fixed ASCII, which always parse).
fn with(response: Answer, name: &str, value: &str) -> Answer {
    match Header::from_bytes(name.as_bytes(), value.as_bytes()) {
        Ok(h) => response.with_header(h),
        Err(()) => response,
    }
}

fn text(status: u16, body: &str) -> Answer {
    let r = Response::from_data(body.as_bytes().to_vec()).with_status_code(status);
    with(r, "Content-Type", "text/plain; charset=utf-8")
}

/// Constant-time check of `Authorization: Bearer TOKEN`.
pub fn authorized(authorization: Option<&str>, token: &str) -> bool {
    let given = authorization
        .and_then(|h| h.strip_prefix("Bearer "))
        .unwrap_or("");
    bool::from(given.as_bytes().ct_eq(token.as_bytes()))
}

fn get_header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

fn serve(request: Request, token: Option<&str>, exported: &Exported) {
    let response = answer(&request, token, exported);
    // A client that went away is not the server's problem.
    let _ = request.respond(response);
}

fn answer(request: &Request, token: Option<&str>, exported: &Exported) -> Answer {
    if !matches!(request.method(), Method::Get | Method::Head) {
        let r = text(405, "read-only: only GET and HEAD are answered\n");
        return with(r, "Allow", "GET, HEAD");
    }
    let path = request.url().split('?').next().unwrap_or("");
    if path == "/healthz" {
        return text(200, "ok\n");
    }
    if path != "/metrics" && path != "/findings" {
        return text(
            404,
            "not found: the endpoints are /metrics, /findings and /healthz\n",
        );
    }
    if let Some(token) = token {
        if !authorized(get_header(request, "Authorization"), token) {
            let r = text(401, "missing or wrong bearer token\n");
            return with(r, "WWW-Authenticate", "Bearer");
        }
    }
    let snapshot = exported.get();
    if path == "/findings" {
        return match exposition::findings_json(&snapshot) {
            Ok(body) => with(text(200, &body), "Content-Type", "application/json"),
            Err(e) => text(500, &format!("{e}\n")),
        };
    }
    let rendered = match exposition::negotiate(get_header(request, "Accept")) {
        Format::Text => exposition::render_text(snapshot)
            .map(|t| (t.into_bytes(), exposition::OPENMETRICS_CONTENT_TYPE)),
        Format::Protobuf => {
            exposition::render_protobuf(&snapshot).map(|b| (b, exposition::PROTOBUF_CONTENT_TYPE))
        }
    };
    match rendered {
        Ok((body, content_type)) => with(
            Response::from_data(body).with_status_code(200),
            "Content-Type",
            content_type,
        ),
        Err(e) => text(500, &format!("{e}\n")),
    }
}
