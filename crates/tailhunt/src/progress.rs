//! Watching a long read: a progress line on a terminal, and Ctrl-C turned into a clean stop.
//!
//! The first Ctrl-C sets a flag; the next read fails with [`Interrupted`], the command keeps
//! what it has (a run marked partial) and exits 130. A second Ctrl-C is not needed, but the
//! default handler is not restored, so the store is never left mid-transaction by a signal.

use std::fmt;
use std::io::{self, IsTerminal, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The user pressed Ctrl-C.
#[derive(Debug)]
pub struct Interrupted;

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("interrupted (Ctrl-C)")
    }
}

impl std::error::Error for Interrupted {}

/// Installs the Ctrl-C handler (once; later calls are no-ops).
pub fn catch_ctrl_c() {
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
}

/// Whether Ctrl-C was pressed since [`catch_ctrl_c`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The Ctrl-C flag itself, for library loops that poll it.
pub fn flag() -> &'static AtomicBool {
    &INTERRUPTED
}

/// Whether an error chain contains [`Interrupted`].
pub fn is_interrupted(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<Interrupted>()
            || c.downcast_ref::<io::Error>()
                .and_then(|io| io.get_ref())
                .is_some_and(|inner| inner.is::<Interrupted>())
    })
}

/// A reader that reports progress on stderr (when it is a terminal) and stops on Ctrl-C.
pub struct Watched<R> {
    inner: R,
    label: String,
    total: Option<u64>,
    read: u64,
    last: Instant,
    tty: bool,
    shown: bool,
}

impl<R: Read> Watched<R> {
    /// Wraps `inner`; `total` is its size when known.
    pub fn new(inner: R, label: String, total: Option<u64>) -> Watched<R> {
        Watched {
            inner,
            label,
            total,
            read: 0,
            last: Instant::now(),
            tty: io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn show(&mut self) {
        let mb = |b: u64| b as f64 / 1e6;
        let line = match self.total {
            Some(t) if t > 0 => format!(
                "\r{}: {:.0} of {:.0} MB ({:.0}%)",
                self.label,
                mb(self.read),
                mb(t),
                self.read as f64 * 100.0 / t as f64
            ),
            _ => format!("\r{}: {:.0} MB", self.label, mb(self.read)),
        };
        let _ = io::stderr().write_all(line.as_bytes());
        self.shown = true;
    }
}

impl<R> Drop for Watched<R> {
    fn drop(&mut self) {
        if self.shown {
            let _ = io::stderr().write_all(b"\r\x1b[K");
        }
    }
}

impl<R: Read> Read for Watched<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if INTERRUPTED.load(Ordering::SeqCst) {
            return Err(io::Error::other(Interrupted));
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.tty && self.last.elapsed() >= Duration::from_millis(250) {
            self.last = Instant::now();
            self.show();
        }
        Ok(n)
    }
}
