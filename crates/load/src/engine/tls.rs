//! HTTPS for the stream worker: a connection is a plain TCP socket or a rustls client session
//! over one, behind the same `Read`/`Write` the worker uses.
//!
//! In: [`TlsOptions`] (trust the system's roots, a CA file, or nothing) and a connected
//! blocking socket. Out: a `Link` whose handshake is done (it runs blocking, within the
//! connect timeout, before the schedule uses the connection, so the first request's latency is
//! the request's, as with a kept-alive connection) and whose socket is then non-blocking.
//!
//! rustls and not OpenSSL: pure Rust over `ring` (already built here), no system library to
//! match, and a session that works on a non-blocking socket record by record.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, StreamOwned};

/// How the server's certificate is checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Trust these PEM certificates (a private CA) instead of the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Check nothing (a self-signed test server): the session is encrypted, not authenticated.
    pub insecure: bool,
}

/// A client configuration for `opts`; the error names the file or the store that failed.
pub fn client_config(opts: &TlsOptions) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let config = if opts.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        match &opts.ca_file {
            Some(path) => {
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("--ca-file '{}': {e}", path.display()))?;
                if certs.is_empty() {
                    return Err(format!(
                        "--ca-file '{}' holds no PEM certificate",
                        path.display()
                    ));
                }
                for c in certs {
                    roots
                        .add(c)
                        .map_err(|e| format!("--ca-file '{}': {e}", path.display()))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                for c in found.certs {
                    let _ = roots.add(c);
                }
                if roots.is_empty() {
                    return Err("no trusted root certificates on this system (install \
                                ca-certificates, or give --ca-file or --insecure)"
                        .into());
                }
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// The server's name as the certificate must show it (a DNS name or an IP address).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|_| {
        format!("'{host}' is neither a DNS name nor an IP address a certificate can name")
    })
}

/// What a worker needs to open TLS sessions to its target.
#[derive(Clone)]
pub(crate) struct Tls {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

/// The sessions' configuration for an `https://` step (`None` for other schemes).
pub(crate) fn for_step(cfg: &super::StepConfig) -> io::Result<Option<Tls>> {
    if cfg.target.scheme != crate::target::Scheme::Https {
        return Ok(None);
    }
    let config = client_config(&cfg.tls).map_err(io::Error::other)?;
    let name = server_name(&cfg.target.host).map_err(io::Error::other)?;
    Ok(Some(Tls { config, name }))
}

/// Connects to `addr`, then (with `tls`) shakes hands; the socket is non-blocking at the end.
pub(crate) fn connect(
    addr: &std::net::SocketAddr,
    tls: Option<&Tls>,
    nodelay: bool,
    timeout: Duration,
) -> io::Result<Link> {
    let s = TcpStream::connect_timeout(addr, timeout)?;
    s.set_nodelay(nodelay)?;
    let link = match tls {
        None => Link::Plain(s),
        Some(t) => Link::handshake(s, t.config.clone(), t.name.clone(), timeout)?,
    };
    link.tcp().set_nonblocking(true)?;
    Ok(link)
}

/// One connection's byte stream.
pub(crate) enum Link {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Link {
    /// A TLS session over `sock` (blocking, its timeouts set), its handshake done; the socket
    /// is left blocking (the caller makes it non-blocking).
    pub(crate) fn handshake(
        sock: TcpStream,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
        timeout: Duration,
    ) -> io::Result<Link> {
        sock.set_read_timeout(Some(timeout))?;
        sock.set_write_timeout(Some(timeout))?;
        let mut conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut sock = sock;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)
                .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
        }
        sock.set_read_timeout(None)?;
        sock.set_write_timeout(None)?;
        Ok(Link::Tls(Box::new(StreamOwned::new(conn, sock))))
    }

    /// The TCP socket underneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Link::Plain(s) => s,
            Link::Tls(t) => &t.sock,
        }
    }

    /// Whether encrypted bytes wait to be written (the socket was full): the worker keeps
    /// asking for writability until they are out.
    pub(crate) fn pending_write(&self) -> bool {
        match self {
            Link::Plain(_) => false,
            Link::Tls(t) => t.conn.wants_write(),
        }
    }

    /// Writes what the session holds for the socket; `WouldBlock` when the socket is full.
    pub(crate) fn flush_tls(&mut self) -> io::Result<()> {
        if let Link::Tls(t) = self {
            while t.conn.wants_write() {
                t.conn.write_tls(&mut t.sock)?;
            }
        }
        Ok(())
    }

    /// Whether a short read means the socket is drained (plain), or more may be buffered in
    /// the session (TLS: read on until `WouldBlock`).
    pub(crate) fn short_read_drains(&self) -> bool {
        matches!(self, Link::Plain(_))
    }
}

/// One `recv` on a plain socket. Through rustix's direct system call rather than the standard
/// library's libc wrapper: libc's marks each call a thread-cancellation point (two calls to
/// enable and disable it around the syscall), 1.7% of a saturated client's `perf` samples.
fn plain_recv(s: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    rustix::net::recv(s, buf, rustix::net::RecvFlags::empty())
        .map(|(n, _)| n)
        .map_err(io::Error::from)
}

/// One `send` on a plain socket, as [`plain_recv`]; `NOSIGNAL` as the standard library's (a
/// peer that closed gives `EPIPE`, not a `SIGPIPE` that would end the process).
fn plain_send(s: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    rustix::net::send(s, buf, rustix::net::SendFlags::NOSIGNAL).map_err(io::Error::from)
}

impl Read for Link {
    /// Plain: the socket's own read. TLS: plaintext the session holds, else one read of the
    /// socket and its records decrypted; `WouldBlock` when neither has any; 0 at the end.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = match self {
            Link::Plain(s) => return plain_recv(s, buf),
            Link::Tls(t) => t,
        };
        loop {
            match t.conn.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            if t.conn.read_tls(&mut t.sock)? == 0 {
                return Ok(0);
            }
            t.conn
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}")))?;
        }
    }
}

impl Write for Link {
    /// Plain: the socket's own write. TLS: the bytes are taken into the session (all of them)
    /// and as much as the socket accepts is sent; the rest waits ([`Link::pending_write`]).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => plain_send(s, buf),
            Link::Tls(t) => {
                let n = t.conn.writer().write(buf)?;
                match self.flush_tls() {
                    Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
                    _ => Ok(n),
                }
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Link::Plain(s) => s.flush(),
            Link::Tls(_) => self.flush_tls(),
        }
    }
}

impl AsFd for Link {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.tcp().as_fd()
    }
}

/// `--insecure`: every certificate passes; signatures are still checked by the provider so the
/// handshake is well formed.
#[derive(Debug)]
struct AcceptAnything(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
