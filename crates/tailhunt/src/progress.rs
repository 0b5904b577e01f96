//! Progress on stderr for long work: one [`Line`], redrawn at most four times a second and
//! only on a terminal, cleared when the work ends; and [`Watched`], a reader that shows its
//! progress through one and stops on SIGINT, SIGTERM or SIGHUP (see [`crate::signals`]).
//!
//! After a stopping signal the next read fails with [`Interrupted`]: the command keeps what it
//! has (a run marked partial) and exits with 128 + the signal's number.

use std::io::{self, IsTerminal, Read, Write};
use std::time::{Duration, Instant};

use crate::signals::{self, Interrupted};

/// A progress line on stderr.
pub struct Line {
    tty: bool,
    last: Option<Instant>,
    shown: bool,
}

impl Line {
    /// A line that shows only when stderr is a terminal.
    pub fn new() -> Line {
        Line {
            tty: io::stderr().is_terminal(),
            last: None,
            shown: false,
        }
    }

    /// Shows the text `what()` gives, unless the line was drawn less than 250 ms ago (or stderr
    /// is not a terminal), so callers may call it as often as they like.
    pub fn show(&mut self, what: impl FnOnce() -> String) {
        if !self.tty
            || self
                .last
                .is_some_and(|t| t.elapsed() < Duration::from_millis(250))
        {
            return;
        }
        self.last = Some(Instant::now());
        let _ = write!(io::stderr(), "\r{}\x1b[K", what());
        self.shown = true;
    }

    /// Prints a line of its own on stderr (terminal or not), above the progress line, which
    /// the next [`Line::show`] draws again.
    pub fn note(&mut self, text: &str) {
        let clear = if self.shown { "\r\x1b[K" } else { "" };
        let _ = writeln!(io::stderr(), "{clear}{text}");
        self.shown = false;
        self.last = None;
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.shown {
            let _ = io::stderr().write_all(b"\r\x1b[K");
        }
    }
}

/// A reader that reports progress on stderr (when it is a terminal) and stops on a signal.
pub struct Watched<R> {
    inner: R,
    label: String,
    total: Option<u64>,
    read: u64,
    line: Line,
}

impl<R: Read> Watched<R> {
    /// Wraps `inner`; `total` is its size when known.
    pub fn new(inner: R, label: String, total: Option<u64>) -> Watched<R> {
        Watched {
            inner,
            label,
            total,
            read: 0,
            line: Line::new(),
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
        let (label, read, total) = (&self.label, self.read, self.total);
        self.line.show(|| {
            let mb = |b: u64| b as f64 / 1e6;
            match total {
                Some(t) if t > 0 => format!(
                    "{label}: {:.0} of {:.0} MB ({:.0}%)",
                    mb(read),
                    mb(t),
                    read as f64 * 100.0 / t as f64
                ),
                _ => format!("{label}: {:.0} MB", mb(read)),
            }
        });
        Ok(n)
    }
}
