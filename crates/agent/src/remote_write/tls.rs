//! TLS for `https://` endpoints: the receiver's certificate is checked against the endpoint's
//! `ca_file` (PEM, one or more certificates) or, without one, the system's trusted roots.
//!
//! In: an endpoint's name and CA file. Out: the TLS settings of its HTTP client, or an error
//! naming the file and what is wrong with it (missing, unreadable, no certificate in it).

use std::path::Path;
use std::sync::Arc;

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};

use super::RemoteWriteError;

fn tls_error(name: &str, message: String) -> RemoteWriteError {
    RemoteWriteError::Tls {
        name: name.to_string(),
        message,
    }
}

/// The certificates of a PEM file (keys and other sections are skipped).
fn ca_certificates(name: &str, path: &Path) -> Result<Vec<Certificate<'static>>, RemoteWriteError> {
    let bytes = std::fs::read(path).map_err(|e| {
        tls_error(
            name,
            format!("ca_file = \"{}\": cannot read it: {e}", path.display()),
        )
    })?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&bytes) {
        match item {
            Ok(PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => {
                return Err(tls_error(
                    name,
                    format!("ca_file = \"{}\": not valid PEM: {e}", path.display()),
                ))
            }
        }
    }
    if certs.is_empty() {
        return Err(tls_error(
            name,
            format!(
                "ca_file = \"{}\": holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the CA that signed the receiver's certificate",
                path.display()
            ),
        ));
    }
    Ok(certs)
}

/// The system's trusted roots.
fn system_roots(name: &str) -> Result<Vec<Certificate<'static>>, RemoteWriteError> {
    let found = rustls_native_certs::load_native_certs();
    let certs: Vec<Certificate<'static>> = found
        .certs
        .iter()
        .map(|c| Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    if certs.is_empty() {
        return Err(tls_error(
            name,
            "https endpoint without ca_file and no trusted roots found on this system: give ca_file".into(),
        ));
    }
    Ok(certs)
}

/// The TLS settings of an endpoint's client.
pub(super) fn config(name: &str, ca_file: Option<&Path>) -> Result<TlsConfig, RemoteWriteError> {
    let certs = match ca_file {
        Some(path) => ca_certificates(name, path)?,
        None => system_roots(name)?,
    };
    Ok(TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(RootCerts::Specific(Arc::new(certs)))
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .build())
}
