//! What can go wrong, phrased so the user knows what to do.

use std::net::SocketAddr;

/// Errors of the socket sources.
#[derive(Debug, thiserror::Error)]
pub enum SockError {
    /// The client could not connect.
    #[error("cannot connect to {addr}: {source} (is `tailhunt transfer server` listening there, and is the address reachable from this namespace?)")]
    Connect {
        /// The server address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The server could not listen.
    #[error(
        "cannot listen on {addr}: {source} (give a free local address, or port 0 to pick one)"
    )]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// A socket option was refused.
    #[error("cannot set {option}={value}: {source}")]
    SetOption {
        /// The option (`SO_RCVBUF`).
        option: &'static str,
        /// The value asked for.
        value: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A transfer setting makes no sense.
    #[error("{0}")]
    Config(String),
    /// The peer spoke something other than the transfer protocol.
    #[error("the peer is not a tailhunt transfer {expected}: {detail}")]
    Protocol {
        /// `server` or `client`.
        expected: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// An I/O error on the transfer socket.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// `--pid` names no process.
    #[error(
        "no process with pid {0} (is it running? `ps -p {0}`): give the pid of a running process"
    )]
    UnknownPid(u32),
    /// A network namespace could not be entered.
    #[error("cannot enter network namespace '{name}': {reason}")]
    Netns {
        /// The name given.
        name: String,
        /// Why, with the fix.
        reason: String,
    },
    /// The netlink sock_diag socket failed.
    #[error("inet_diag over netlink failed: {0} (the kernel needs CONFIG_INET_DIAG; `ss -ti` uses the same interface)")]
    Netlink(std::io::Error),
    /// The kernel refused the BPF programs for lack of privilege.
    #[error("the setsockopt audit needs BPF ({0}): run as root or grant CAP_BPF and CAP_PERFMON, or pass --no-audit")]
    BpfNotPermitted(String),
    /// No kernel BTF.
    #[error("the setsockopt audit needs kernel BTF (/sys/kernel/btf/vmlinux is missing: CONFIG_DEBUG_INFO_BTF=y); pass --no-audit to sample sockets without it")]
    NoBtf,
    /// Loading or attaching failed for another reason.
    #[error("cannot {what} the setsockopt audit programs: {source}")]
    Bpf {
        /// The step.
        what: &'static str,
        /// libbpf's error.
        #[source]
        source: libbpf_rs::Error,
    },
}

impl SockError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SockError {
        let what = what.into();
        move |source| SockError::Io { what, source }
    }
}
