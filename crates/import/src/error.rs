//! Why an import failed. Every message names the file; data errors add the 1-based line, the
//! offending text (shortened) and what would fix it.

use std::path::PathBuf;

use tailhunt_histogram::hdr::HdrError;
use tailhunt_model::SinkError;
use thiserror::Error;

/// Why an import failed.
#[derive(Debug, Error)]
pub enum ImportError {
    /// The input could not be opened or read.
    #[error("cannot read '{}': {source}", path.display())]
    Io {
        /// The file (or the name given for a reader).
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line that could not be read as data.
    #[error("{file}:{line}: {reason}")]
    Malformed {
        /// The file (or the name given for a reader).
        file: String,
        /// 1-based line number.
        line: u64,
        /// The offending text, shortened to about 60 characters.
        content: String,
        /// What is wrong and how to fix it; quotes `content`.
        reason: String,
    },
    /// Nothing to import.
    #[error("{file}: no samples found (the file is empty or only has comments)")]
    Empty {
        /// The file (or the name given for a reader).
        file: String,
    },
    /// A format name that is not one of `csv`, `jsonl`, `hlog`.
    #[error("unknown import format '{name}' (use csv, jsonl or hlog)")]
    UnknownFormat {
        /// The name given.
        name: String,
    },
    /// A unit name (for bare numbers) that is not a time unit.
    #[error("unknown unit '{unit}' for bare numbers (use ns, us, ms or s)")]
    UnknownUnit {
        /// The name given.
        unit: String,
    },
    /// An HdrHistogram interval log that could not be read.
    #[error("{file}: {source}")]
    Hdr {
        /// The file (or the name given for a reader).
        file: String,
        /// What the interval-log reader found.
        source: HdrError,
    },
    /// The sink refused the data; what was pushed before stays pushed.
    #[error("{file}: could not store the imported series: {source}")]
    Sink {
        /// The file (or the name given for a reader).
        file: String,
        /// The sink's error, untouched.
        source: SinkError,
    },
}

/// A data error found in one line, before the file name and line number are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineError {
    /// The offending text, shortened.
    pub content: String,
    /// What is wrong and how to fix it.
    pub reason: String,
}

impl LineError {
    /// An error about `content`; `reason` should quote `shorten(content)`.
    pub fn new(content: &str, reason: String) -> LineError {
        LineError {
            content: shorten(content),
            reason,
        }
    }

    /// Attaches the file and the 1-based line number.
    pub fn at(self, file: &str, line: u64) -> ImportError {
        ImportError::Malformed {
            file: file.to_string(),
            line,
            content: self.content,
            reason: self.reason,
        }
    }
}

/// Longest content quoted in a message, in characters.
const SHOWN_CHARS: usize = 60;

/// `text` cut to about 60 characters (with `...` when cut), control characters shown as `?` so a
/// message stays on one line.
pub(crate) fn shorten(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(SHOWN_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().nth(SHOWN_CHARS).is_some() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_content_is_cut() {
        let long = "x".repeat(500);
        let short = shorten(&long);
        assert_eq!(short.len(), SHOWN_CHARS + 3);
        assert!(short.ends_with("..."));
        assert_eq!(shorten("a\tb"), "a?b");
        assert_eq!(shorten(&"é".repeat(60)), "é".repeat(60));
    }
}
