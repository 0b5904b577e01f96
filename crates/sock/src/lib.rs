//! tailhunt's socket sources: what TCP itself says about a connection.
//!
//! # Brief overview
//!
//! - [`transfer`]: the bulk-transfer test (`tailhunt transfer server|client`): a download with
//!   chosen socket options and a client timeout, each end sampling its own TCP_INFO every few
//!   milliseconds.
//! - [`tcp_info`]: the kernel's `struct tcp_info` read from bytes, in honest units.
//! - [`kernel`]: the kernel version and the TCP sysctls every run records.
//! - [`diag`]: every TCP socket of a namespace through netlink inet_diag (what `ss -ti` shows);
//!   [`monitor`] samples them over time (`tailhunt sockets`), [`owners`] names the process
//!   holding each, [`netns`] enters named namespaces.
//! - [`audit`]: the setsockopt audit (eBPF on the syscall tracepoint): who set SO_RCVBUF,
//!   TCP_NODELAY, ... with what value on which socket.
//!
//! Sources produce values and series; they never print and never decide what is wrong (that is
//! `tailhunt-diagnose`). This crate denies unsafe code except in one module (`sys`): the
//! libbpf-rs skeleton and `getsockopt(TCP_INFO)`.
//!
//! ```
//! use tailhunt_sock::tcp_info::TcpInfo;
//! assert!(TcpInfo::parse(&[0u8; 104]).is_some());
//! ```
#![deny(missing_docs)]

pub mod audit;
pub mod diag;
pub mod error;
pub mod kernel;
pub mod monitor;
pub mod netns;
pub mod owners;
mod sys;
pub mod tcp_info;
pub mod transfer;

pub use error::SockError;
pub use sys::tcp_info as read_tcp_info;
