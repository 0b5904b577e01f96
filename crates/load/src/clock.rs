//! Clocks, in integer nanoseconds.

use rustix::time::{clock_gettime, ClockId};

/// CLOCK_MONOTONIC, ns: sample times.
#[inline]
pub fn mono_ns() -> i64 {
    let t = clock_gettime(ClockId::Monotonic);
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// CLOCK_REALTIME, ns: the clock kernel socket timestamps use.
#[inline]
pub fn real_ns() -> i64 {
    let t = clock_gettime(ClockId::Realtime);
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// CLOCK_THREAD_CPUTIME_ID, ns: CPU time the calling thread has used (to tell a busy client
/// from a host that woke it late).
pub fn thread_cpu_ns() -> i64 {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// Asks the kernel to wake this thread on time: the default 50 us timer slack would add up to
/// 50 us of send lag to every scheduled request.
pub fn tighten_timer_slack() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
}
