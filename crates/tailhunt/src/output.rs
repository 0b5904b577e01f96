//! Writing results: text or JSON to stdout, files, and broken pipes treated as success.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

/// Prints a document: JSON when asked, else its text rendering.
pub fn print<T: Serialize>(json: bool, doc: &T, text: impl FnOnce(&T) -> String) -> Result<()> {
    // Buffered: stdout alone writes a line at a time, and the JSON of a capture run has tens of
    // thousands of lines (10,352 writes for one of 66 flows).
    let mut out = BufWriter::new(io::stdout().lock());
    if json {
        // As an io::Error, so a closed pipe (`| head`) is one (serde_json's own error hides it
        // from `is_broken_pipe`).
        serde_json::to_writer_pretty(&mut out, doc)
            .map_err(io::Error::from)
            .context("writing JSON")?;
        out.write_all(b"\n")?;
    } else if colour() {
        out.write_all(paint(&text(doc)).as_bytes())?;
    } else {
        out.write_all(text(doc).as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// Colour when stdout is a terminal and `NO_COLOR` is not set (<https://no-color.org>); plain
/// text when piped.
fn colour() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The verdict tags of findings in colour: a cause found in red, a warning in yellow, ruled
/// out in green, inconclusive dimmed.
fn paint(text: &str) -> String {
    const TAGS: [(&str, &str); 4] = [
        ("[detected]", "\x1b[1;31m"),
        ("[warning]", "\x1b[33m"),
        ("[ruled-out]", "\x1b[32m"),
        ("[inconclusive]", "\x1b[2m"),
    ];
    let mut out = text.to_string();
    for (tag, on) in TAGS {
        out = out.replace(tag, &format!("{on}{tag}\x1b[0m"));
    }
    out
}

/// A buffered writer to `path`, or to stdout when `None` or `-`.
pub fn open_output(path: Option<&Path>) -> Result<Box<dyn Write>> {
    match path {
        Some(p) if p != Path::new("-") => {
            let f = File::create(p).with_context(|| format!("cannot create '{}'", p.display()))?;
            Ok(Box::new(BufWriter::with_capacity(1 << 16, f)))
        }
        _ => Ok(Box::new(BufWriter::with_capacity(1 << 16, io::stdout()))),
    }
}

/// Whether an error is a closed pipe on our output (`| head`), which is not a failure.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
