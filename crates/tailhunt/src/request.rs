//! What each request carries, from the flags `load` and `hunt` share ([`RequestArgs`]): the
//! HTTP method, headers and body, and how an https:// server's certificate is checked.

use anyhow::{Context, Result};
use tailhunt_load::engine::tls::TlsOptions;
use tailhunt_load::proto::HttpRequest;

use crate::cli::RequestArgs;

/// Largest request body read from `--body-file`.
const MAX_BODY_FILE: u64 = 16 << 20;

/// The HTTP method, headers and body from the flags (GET without either: the default request,
/// which every scheme accepts); the body of `--body-file` is read here, the rest is checked by
/// [`HttpRequest::new`].
pub fn http(a: &RequestArgs) -> Result<HttpRequest> {
    let body = match (&a.body, &a.body_file) {
        (Some(text), _) => text.clone().into_bytes(),
        (None, Some(path)) => {
            let size = std::fs::metadata(path)
                .with_context(|| format!("cannot read --body-file '{}'", path.display()))?
                .len();
            if size > MAX_BODY_FILE {
                anyhow::bail!(
                    "--body-file '{}' is {size} bytes; the limit is {MAX_BODY_FILE} (16 MiB)",
                    path.display()
                );
            }
            std::fs::read(path)
                .with_context(|| format!("cannot read --body-file '{}'", path.display()))?
        }
        (None, None) => Vec::new(),
    };
    Ok(HttpRequest::new(&a.method, &a.headers, body)?)
}

/// How an https:// target's certificate is checked.
pub fn tls(a: &RequestArgs) -> TlsOptions {
    TlsOptions {
        ca_file: a.ca_file.clone(),
        insecure: a.insecure,
    }
}
