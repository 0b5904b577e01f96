//! What to load: `tcp://HOST:PORT`, `udp://HOST:PORT`, `http[s]://HOST:PORT/PATH`,
//! `redis://HOST:PORT/KEY`, `memcached://HOST:PORT/KEY`.

use std::net::{SocketAddr, ToSocketAddrs};

use thiserror::Error;

/// Protocol spoken to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// tailhunt length-prefixed frames over TCP.
    Tcp,
    /// tailhunt echo datagrams over UDP.
    Udp,
    /// HTTP/1.1 keep-alive GET.
    Http,
    /// HTTP/1.1 over TLS.
    Https,
    /// Redis `GET key`.
    Redis,
    /// memcached `get key`.
    Memcached,
}

impl Scheme {
    /// URL scheme name.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Tcp => "tcp",
            Scheme::Udp => "udp",
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Redis => "redis",
            Scheme::Memcached => "memcached",
        }
    }
}

/// A parsed target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Protocol.
    pub scheme: Scheme,
    /// Host as written (for the HTTP Host header).
    pub host: String,
    /// Resolved address.
    pub addr: SocketAddr,
    /// HTTP path, or the Redis/memcached key.
    pub path: String,
}

/// A URL that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TargetError {
    /// Not `scheme://host:port[/path]`.
    #[error("malformed target '{0}' (write e.g. tcp://127.0.0.1:7000, http://127.0.0.1:8080/, redis://127.0.0.1:6379/key)")]
    Malformed(String),
    /// A scheme tailhunt does not speak.
    #[error(
        "unsupported scheme '{scheme}' in '{url}' (use tcp, udp, http, https, redis or memcached)"
    )]
    Scheme {
        /// The scheme written.
        scheme: String,
        /// The URL.
        url: String,
    },
    /// The host did not resolve.
    #[error("cannot resolve '{host}' in '{url}': {reason}")]
    Resolve {
        /// Host.
        host: String,
        /// URL.
        url: String,
        /// Resolver's message.
        reason: String,
    },
}

fn default_port(scheme: Scheme) -> Option<u16> {
    match scheme {
        Scheme::Http => Some(80),
        Scheme::Https => Some(443),
        Scheme::Redis => Some(6379),
        Scheme::Memcached => Some(11211),
        Scheme::Tcp | Scheme::Udp => None,
    }
}

/// Parses and resolves a target URL.
pub fn parse_target(url: &str) -> Result<Target, TargetError> {
    let malformed = || TargetError::Malformed(url.to_string());
    let (scheme_text, rest) = url.split_once("://").ok_or_else(malformed)?;
    let scheme = match scheme_text.to_ascii_lowercase().as_str() {
        "tcp" => Scheme::Tcp,
        "udp" => Scheme::Udp,
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        "redis" => Scheme::Redis,
        "memcached" | "memcache" => Scheme::Memcached,
        other => {
            return Err(TargetError::Scheme {
                scheme: other.to_string(),
                url: url.to_string(),
            })
        }
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(malformed());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, p) = v6.split_once(']').ok_or_else(malformed)?;
        (h, p.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port: u16 = match port {
        Some(p) => p.parse().ok().filter(|&p| p > 0).ok_or_else(malformed)?,
        None => default_port(scheme).ok_or_else(malformed)?,
    };
    if host.is_empty() {
        return Err(malformed());
    }
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| TargetError::Resolve {
            host: host.to_string(),
            url: url.to_string(),
            reason: e.to_string(),
        })?
        .next()
        .ok_or_else(|| TargetError::Resolve {
            host: host.to_string(),
            url: url.to_string(),
            reason: "no addresses".into(),
        })?;
    let path = match scheme {
        Scheme::Http | Scheme::Https if path.is_empty() => "/".to_string(),
        Scheme::Redis | Scheme::Memcached => {
            let key = path.trim_start_matches('/');
            if key.is_empty() {
                "key".to_string()
            } else {
                key.to_string()
            }
        }
        _ => path.to_string(),
    };
    Ok(Target {
        scheme,
        host: host.to_string(),
        addr,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_scheme() {
        let t = parse_target("tcp://127.0.0.1:7000").unwrap();
        assert_eq!((t.scheme, t.addr.port()), (Scheme::Tcp, 7000));
        let t = parse_target("http://localhost:8080").unwrap();
        assert_eq!((t.scheme, t.path.as_str()), (Scheme::Http, "/"));
        let t = parse_target("redis://127.0.0.1/user:1").unwrap();
        assert_eq!((t.addr.port(), t.path.as_str()), (6379, "user:1"));
        let t = parse_target("memcached://[::1]:11211").unwrap();
        assert_eq!(t.path, "key");
        assert!(t.addr.is_ipv6());
    }

    #[test]
    fn rejects_with_a_reason() {
        assert!(matches!(
            parse_target("127.0.0.1:80"),
            Err(TargetError::Malformed(_))
        ));
        assert!(matches!(
            parse_target("tcp://127.0.0.1"),
            Err(TargetError::Malformed(_))
        ));
        assert!(matches!(
            parse_target("tcp://127.0.0.1:99999"),
            Err(TargetError::Malformed(_))
        ));
        assert!(matches!(
            parse_target("gopher://x:1"),
            Err(TargetError::Scheme { .. })
        ));
        assert!(matches!(
            parse_target("tcp://no-such-host.invalid:1"),
            Err(TargetError::Resolve { .. })
        ));
    }
}
