//! Line-by-line reading for the text formats, with one reused buffer.
//!
//! In: any [`BufRead`]. Out: each line as `&str` with its 1-based number, without the line ending
//! (`\n` or `\r\n`) and without a UTF-8 byte-order mark on the first line (Windows tools write
//! both). A line that is not UTF-8, or is absurdly long, is an error naming the line.

use std::io::{BufRead, Read};
use std::path::PathBuf;

use crate::error::{shorten, LineError};
use crate::ImportError;

/// Longest line accepted: far beyond any real record, small enough that a file without line
/// breaks cannot exhaust memory.
pub(crate) const MAX_LINE_BYTES: u64 = 1 << 20;

const BOM: &str = "\u{feff}";

/// Reads lines from a reader, reusing one buffer.
pub(crate) struct Lines<'r> {
    reader: &'r mut dyn BufRead,
    file: &'r str,
    buf: Vec<u8>,
    line_no: u64,
}

impl<'r> Lines<'r> {
    /// Lines of `reader`; `file` names it in errors.
    pub fn new(file: &'r str, reader: &'r mut dyn BufRead) -> Lines<'r> {
        Lines {
            reader,
            file,
            buf: Vec::with_capacity(256),
            line_no: 0,
        }
    }

    /// The next line and its 1-based number, or `None` at the end.
    pub fn next_line(&mut self) -> Result<Option<(u64, &str)>, ImportError> {
        self.buf.clear();
        let n = (&mut *self.reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| ImportError::Io {
                path: PathBuf::from(self.file),
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line_no += 1;
        let line_no = self.line_no;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        } else if n as u64 >= MAX_LINE_BYTES {
            let shown = shorten(&String::from_utf8_lossy(
                &self.buf[..64.min(self.buf.len())],
            ));
            let reason = format!(
                "line is longer than {} MiB ('{shown}'); is this really a CSV or JSON-lines file?",
                MAX_LINE_BYTES >> 20
            );
            return Err(LineError::new(&shown, reason).at(self.file, line_no));
        }
        let text = match std::str::from_utf8(&self.buf) {
            Ok(text) => text,
            Err(_) => return Err(not_text(&self.buf, line_no).at(self.file, line_no)),
        };
        let text = if line_no == 1 {
            text.strip_prefix(BOM).unwrap_or(text)
        } else {
            text
        };
        Ok(Some((line_no, text)))
    }
}

pub(crate) fn not_text(bytes: &[u8], line_no: u64) -> LineError {
    let shown = shorten(&String::from_utf8_lossy(bytes));
    let utf16 =
        line_no == 1 && (bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]));
    let reason = if utf16 {
        "the file is UTF-16 text; save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)".to_string()
    } else {
        format!(
            "line is not UTF-8 text ('{shown}'); tailhunt imports CSV, JSON lines and \
             HdrHistogram logs (pass --format if it guessed wrong)"
        )
    };
    LineError::new(&shown, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8]) -> Result<Vec<(u64, String)>, ImportError> {
        let mut reader: &[u8] = input;
        let mut lines = Lines::new("f", &mut reader);
        let mut out = Vec::new();
        while let Some((n, line)) = lines.next_line()? {
            out.push((n, line.to_string()));
        }
        Ok(out)
    }

    #[test]
    fn strips_line_endings_and_bom() {
        let got = all(b"\xef\xbb\xbfa\r\nb\n\nc").unwrap();
        let want: Vec<(u64, String)> = vec![
            (1, "a".into()),
            (2, "b".into()),
            (3, "".into()),
            (4, "c".into()),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn binary_is_named() {
        let e = all(b"ok\n\xff\xfe\x00garbage\n").unwrap_err().to_string();
        assert!(e.starts_with("f:2: line is not UTF-8 text"), "{e}");
        let e = all(b"\xff\xfea\x00").unwrap_err().to_string();
        assert!(e.contains("UTF-16"), "{e}");
    }
}
