//! Watching a long read: a progress line on a terminal, and a stop on SIGINT, SIGTERM or
//! SIGHUP (see [`crate::signals`]).
//!
//! After a stopping signal the next read fails with [`Interrupted`]: the command keeps what it
//! has (a run marked partial) and exits with 128 + the signal's number.

use std::io::{self, IsTerminal, Read, Write};
use std::time::{Duration, Instant};

use crate::signals::{self, Interrupted};

/// A reader that reports progress on stderr (when it is a terminal) and stops on a signal.
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
        if signals::requested() {
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
