//! The system calls no safe wrapper covers: `getsockopt(TCP_INFO)`, and the skeleton
//! libbpf-cargo generates from `src/bpf/setsockopt.bpf.c`. All of this crate's unsafe code is
//! in this file.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use crate::tcp_info::{TcpInfo, TCP_INFO_LEN};

#[allow(
    unsafe_code,
    missing_docs,
    dead_code,
    unused_imports,
    non_camel_case_types,
    clippy::all,
    clippy::pedantic
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/setsockopt.skel.rs"));
}

pub(crate) use skel::*;

/// Reads `TCP_INFO` of a TCP socket.
#[allow(unsafe_code)]
pub fn tcp_info<Fd: AsFd>(fd: Fd) -> io::Result<TcpInfo> {
    let mut buf = [0u8; TCP_INFO_LEN];
    let mut len = TCP_INFO_LEN as libc::socklen_t;
    // SAFETY: `buf` is valid for `len` bytes and the kernel writes at most `len` of them,
    // storing the length it wrote back into `len`; the descriptor is borrowed for the call.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let n = (len as usize).min(TCP_INFO_LEN);
    TcpInfo::parse(&buf[..n])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "TCP_INFO too short"))
}
