//! Writing results: text or JSON to stdout, files, and broken pipes treated as success.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

/// Prints a document: JSON when asked, else its text rendering.
pub fn print<T: Serialize>(json: bool, doc: &T, text: impl FnOnce(&T) -> String) -> Result<()> {
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, doc).context("writing JSON")?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(text(doc).as_bytes())?;
    }
    out.flush()?;
    Ok(())
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
