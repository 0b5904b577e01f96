//! The CSV reader's input and positions.
//!
//! In: the file's reader. Out: the leading lines up to the first data line (to choose the
//! delimiter before the `csv` crate starts), an input that refuses endless lines, the 1-based
//! line each record starts on, and reader errors as import errors with a line.

use std::io::{BufRead, Read};
use std::path::PathBuf;

use ::csv::ByteRecord;

use crate::error::LineError;
use crate::lines::{not_text, MAX_LINE_BYTES};
use crate::ImportError;

/// The lines up to and including the first one that is neither blank nor a comment (a UTF-8
/// byte-order mark dropped), and that line; `None` when there is none. Read ahead so the
/// delimiter is known before the CSV reader starts, and handed back to it unread.
pub(super) fn leading_lines(
    file: &str,
    reader: &mut dyn BufRead,
) -> Result<(Vec<u8>, Option<String>), ImportError> {
    let mut prefix = Vec::new();
    let mut line_no = 0;
    loop {
        let start = prefix.len();
        let n = (&mut *reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut prefix)
            .map_err(|source| ImportError::Io {
                path: PathBuf::from(file),
                source,
            })?;
        if n == 0 {
            return Ok((prefix, None));
        }
        line_no += 1;
        if line_no == 1 && prefix.starts_with(b"\xef\xbb\xbf") {
            prefix.drain(..3);
        }
        let raw = &prefix[start.min(prefix.len())..];
        if !raw.ends_with(b"\n") && n as u64 >= MAX_LINE_BYTES {
            return Err(too_long().at(file, line_no));
        }
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(_) => return Err(not_text(raw, line_no).at(file, line_no)),
        };
        let trimmed = text.trim();
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            let line = trimmed.to_string();
            return Ok((prefix, Some(line)));
        }
    }
}

/// The delimiter a first line uses outside quoted fields: comma, else tab, else `;`
/// (`"latency (ms, p50)";status` is `;`-separated).
pub(super) fn delimiter_of(line: &str) -> char {
    let mut quoted = false;
    let unquoted: String = line
        .chars()
        .filter(|&c| {
            if c == '"' {
                quoted = !quoted;
            }
            !quoted
        })
        .collect();
    [',', '\t', ';']
        .into_iter()
        .find(|&d| unquoted.contains(d))
        .unwrap_or(',')
}

fn too_long() -> LineError {
    let reason = format!(
        "line is longer than {} MiB; is this really a CSV or JSON-lines file?",
        MAX_LINE_BYTES >> 20
    );
    LineError::new("", reason)
}

/// A CSV reader error as an import error at the line after `last_line`.
pub(super) fn csv_error(file: &str, last_line: u64, e: ::csv::Error) -> ImportError {
    let line = e
        .position()
        .map_or(last_line + 1, |p| p.line().max(last_line + 1));
    match e.into_kind() {
        ::csv::ErrorKind::Io(source) if source.kind() == std::io::ErrorKind::InvalidData => {
            too_long().at(file, line)
        }
        ::csv::ErrorKind::Io(source) => ImportError::Io {
            path: PathBuf::from(file),
            source,
        },
        other => {
            LineError::new("", format!("cannot read this line as CSV: {other:?}")).at(file, line)
        }
    }
}

/// The 1-based line a record just read starts on.
///
/// The reader's position after a record counts the newlines consumed so far, blank and comment
/// lines included (which the position it stamps on the record, taken before skipping them,
/// does not). The record's terminator is consumed with it when it is `\n` (not yet when it is
/// the `\r` of `\r\n`, nor at the end of the input), and quoted fields may hold newlines.
pub(super) fn first_line_of<R: Read>(rows: &::csv::Reader<Source<R>>, record: &ByteRecord) -> u64 {
    let end = rows.position();
    let terminated = end
        .byte()
        .checked_sub(1)
        .and_then(|at| rows.get_ref().byte_at(at))
        == Some(b'\n');
    let inside = record.as_slice().iter().filter(|&&b| b == b'\n').count() as u64;
    end.line()
        .saturating_sub(u64::from(terminated))
        .saturating_sub(inside)
        .max(1)
}

/// The CSV reader's input: refuses a line longer than [`MAX_LINE_BYTES`] (a file without line
/// breaks would otherwise grow the reader's buffer without bound), and keeps the last chunk it
/// handed out so [`first_line_of`] can look at the byte that ended a record (the reader asks
/// for more only when it has consumed everything before).
pub(super) struct Source<R> {
    inner: R,
    since_newline: u64,
    chunk: Vec<u8>,
    /// Offset of `chunk` in the input.
    chunk_start: u64,
    /// The byte just before `chunk`.
    before_chunk: Option<u8>,
}

impl<R> Source<R> {
    /// Reads from `inner`.
    pub(super) fn new(inner: R) -> Source<R> {
        Source {
            inner,
            since_newline: 0,
            chunk: Vec::new(),
            chunk_start: 0,
            before_chunk: None,
        }
    }

    /// The input's byte at `offset`, if it is in the last chunk or just before it.
    fn byte_at(&self, offset: u64) -> Option<u8> {
        if offset + 1 == self.chunk_start {
            return self.before_chunk;
        }
        let i = usize::try_from(offset.checked_sub(self.chunk_start)?).ok()?;
        self.chunk.get(i).copied()
    }
}

impl<R: Read> Read for Source<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let got = &buf[..n];
        if n > 0 {
            self.before_chunk = self.chunk.last().copied().or(self.before_chunk);
            self.chunk_start += self.chunk.len() as u64;
            self.chunk.clear();
            self.chunk.extend_from_slice(got);
        }
        match got.iter().rposition(|&b| b == b'\n') {
            Some(i) => self.since_newline = (n - i - 1) as u64,
            None => self.since_newline += n as u64,
        }
        if self.since_newline > MAX_LINE_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "line too long",
            ));
        }
        Ok(n)
    }
}
