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

/// Turns on the kernel's per-program run-time statistics (`run_time_ns`, `run_cnt`) for as long
/// as the returned descriptor is open; closing it turns them off again, so a crash never leaves
/// them on for the rest of the host (the `kernel.bpf_stats_enabled` sysctl would).
#[allow(unsafe_code)]
pub(crate) fn enable_run_time_stats() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: bpf_enable_stats takes an enum by value and returns a new descriptor or -errno;
    // it touches no memory of ours.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: `fd` was just returned to us by the kernel and nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

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
