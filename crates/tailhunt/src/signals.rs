//! The one way a long-running command stops early: SIGINT (Ctrl-C), SIGTERM (`timeout`,
//! systemd, Kubernetes) and SIGHUP (a closed terminal or SSH session) all do the same thing.
//!
//! In: [`install`], called by every command that measures for a while (load, capture, runq,
//! sockets, transfer, serve, pcap, import, lab link); it is idempotent, so the handlers exist
//! once per process. Out: a stop flag that library loops poll ([`flag`]), the signal that set
//! it ([`received`]) and the exit status the binary ends with ([`exit_code`]: 128 + the signal
//! number, as shells report a process a signal ended: 130, 143, 129).
//!
//! The first signal only sets the flag: the command stops measuring, keeps what it measured
//! (the run marked `partial` when it was cut short), prints its summary and exits through
//! `main`. The handlers never exit themselves and never touch the store, so a signal cannot
//! leave a transaction half done. A second signal (of any of the three) while the first is
//! being handled ends the process at once with the same status, for a command stuck in a
//! blocking call; what the store had committed stays (at most the last second is lost, as with
//! `kill -9`).

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Once};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Set by the first of SIGINT, SIGTERM or SIGHUP.
static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));
/// The number of the signal that set [`STOP`] (0: none yet).
static SIGNAL: LazyLock<Arc<AtomicUsize>> = LazyLock::new(|| Arc::new(AtomicUsize::new(0)));
static INSTALL: Once = Once::new();

/// The signals that stop a command.
const STOPPING: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP (once; later calls do nothing).
pub fn install() {
    INSTALL.call_once(|| {
        for sig in STOPPING {
            // Registration order is the order the actions run in: the forced exit checks the
            // flag before this signal sets it, so only a second signal exits.
            let registered =
                signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&STOP))
                    .and_then(|_| {
                        signal_hook::flag::register_usize(sig, Arc::clone(&SIGNAL), sig as usize)
                    })
                    .and_then(|_| signal_hook::flag::register(sig, Arc::clone(&STOP)));
            if let Err(e) = registered {
                // Without the handler the signal keeps its default action (the process ends,
                // keeping what the store committed): worth a line, not a refusal to run.
                tell!(
                    "tailhunt: cannot handle {}: {e}; it will end the process at once",
                    name(sig)
                );
            }
        }
    });
}

/// The stop flag, for library loops that poll it.
pub fn flag() -> &'static AtomicBool {
    &STOP
}

/// Whether a stopping signal arrived since [`install`].
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The signal that stopped the command, if one did.
pub fn received() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => i32::try_from(s).ok(),
    }
}

/// The exit status of a command a signal stopped: 128 + its number (130 when the stop came
/// some other way, as for Ctrl-C).
pub fn exit_code() -> u8 {
    received()
        .and_then(|s| u8::try_from(128 + s).ok())
        .unwrap_or(130)
}

fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT (Ctrl-C)",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// A command stopped early by a signal; its message names the signal.
#[derive(Debug)]
pub struct Interrupted;

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "interrupted by {}", name(received().unwrap_or(SIGINT)))
    }
}

impl std::error::Error for Interrupted {}

/// Whether an error chain contains [`Interrupted`].
pub fn is_interrupted(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<Interrupted>()
            || c.downcast_ref::<io::Error>()
                .and_then(|io| io.get_ref())
                .is_some_and(|inner| inner.is::<Interrupted>())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_names_the_signal() {
        assert_eq!(name(SIGTERM), "SIGTERM");
        assert_eq!(128 + SIGTERM, 143);
        assert_eq!(128 + SIGHUP, 129);
        assert_eq!(128 + SIGINT, 130);
        // Nothing received in this test process.
        assert_eq!(exit_code(), 130);
        let e = anyhow::Error::new(Interrupted).context("kept run x");
        assert!(is_interrupted(&e));
        assert!(e.root_cause().to_string().contains("interrupted by SIGINT"));
    }
}
