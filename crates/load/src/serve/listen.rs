//! The server's socket: bound and (tcp/http) listening, or an error that says what to do.
//!
//! In: the protocol, address and timestamp setting of a [`ServeConfig`]. Out: a non-blocking,
//! close-on-exec socket (with kernel receive timestamps on when `timestamps` is),
//! or [`ServeError::Bind`] whose message names the address and the fix (another port, root, an
//! address of this host).

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

use super::{ServeConfig, ServeError, ServeProto};

/// Creates and binds the non-blocking socket (listening for tcp/http).
pub(crate) fn bind(cfg: &ServeConfig) -> Result<Socket, ServeError> {
    let addr = cfg.listen;
    let bind_err = |error| ServeError::Bind { addr, error };
    let (ty, proto) = match cfg.proto {
        ServeProto::Udp => (Type::DGRAM, Protocol::UDP),
        ServeProto::Tcp | ServeProto::Http => (Type::STREAM, Protocol::TCP),
    };
    let socket = Socket::new(
        Domain::for_address(addr),
        ty.nonblocking().cloexec(),
        Some(proto),
    )
    .map_err(bind_err)?;
    if cfg.proto != ServeProto::Udp {
        // Restart quickly over TIME_WAIT connections of a previous run. (Never for UDP, where
        // SO_REUSEADDR would let two servers share the port.)
        socket.set_reuse_address(true).map_err(bind_err)?;
    }
    socket.bind(&addr.into()).map_err(bind_err)?;
    if cfg.timestamps {
        // Software receive timestamps for `rx_kernel_ns`. Accepted sockets inherit the flags.
        // Here, before any connection, because the first socket to ask turns the kernel's
        // receive timestamping on asynchronously (`net_enable_timestamp` flips a static key
        // from a workqueue): requests in the first moments after start may still have none.
        // Best effort: a kernel that refuses leaves `rx_kernel_ns` 0.
        let _ = crate::tstamp::enable(
            &socket,
            crate::tstamp::Want {
                rx: true,
                ..crate::tstamp::Want::default()
            },
        );
    }
    if cfg.proto != ServeProto::Udp {
        socket.listen(4096).map_err(bind_err)?;
    }
    Ok(socket)
}

pub(crate) fn bind_message(addr: &SocketAddr, error: &std::io::Error) -> String {
    use rustix::io::Errno;
    let errno = error.raw_os_error().map(Errno::from_raw_os_error);
    match errno {
        Some(Errno::ADDRINUSE) => format!(
            "address {addr} is already in use (stop the other server or choose another --listen port)"
        ),
        Some(Errno::ACCESS) | Some(Errno::PERM) => format!(
            "cannot listen on {addr}: {error} (pick a port above 1024 or run as root)"
        ),
        Some(Errno::ADDRNOTAVAIL) => format!(
            "cannot listen on {addr}: {error} (the address is not on this machine; use 127.0.0.1, \
             0.0.0.0 or one of this host's addresses)"
        ),
        Some(Errno::AFNOSUPPORT) => format!(
            "cannot listen on {addr}: {error} (IPv6 is off on this machine; listen on an IPv4 address)"
        ),
        _ => format!("cannot listen on {addr}: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_errors_say_what_to_do() {
        let addr: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let err = |code| {
            ServeError::Bind {
                addr,
                error: std::io::Error::from_raw_os_error(code),
            }
            .to_string()
        };
        assert_eq!(
            err(13),
            "cannot listen on 127.0.0.1:80: Permission denied (os error 13) (pick a port above 1024 or run as root)"
        );
        assert_eq!(
            err(98),
            "address 127.0.0.1:80 is already in use (stop the other server or choose another --listen port)"
        );
        assert!(err(99).contains("not on this machine"));
    }
}
