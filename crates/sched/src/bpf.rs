//! The kernel side: the skeleton libbpf-cargo generates from `src/bpf/runq.bpf.c`, and the one
//! BPF system call libbpf-rs does not wrap. All of tailhunt's unsafe code is in this file.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

#[allow(
    unsafe_code,
    missing_docs,
    dead_code,
    non_camel_case_types,
    clippy::all,
    clippy::pedantic
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/runq.skel.rs"));
}

pub(crate) use skel::*;

/// Turns on the kernel's per-program run-time statistics (`run_time_ns`, `run_cnt`) for as long
/// as the returned descriptor is open; closing it turns them off again, so a crash never leaves
/// them on for the rest of the host (the `kernel.bpf_stats_enabled` sysctl would).
#[allow(unsafe_code)]
pub(crate) fn enable_run_time_stats() -> io::Result<OwnedFd> {
    // SAFETY: bpf_enable_stats takes an enum by value and returns a new descriptor or -errno;
    // it touches no memory of ours.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: `fd` was just returned to us by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
