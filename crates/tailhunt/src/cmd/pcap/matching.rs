//! `tailhunt pcap FILE... --match OTHER`: the files (read in order as one capture, A) matched
//! against OTHER (B) with [`tailhunt_pcap::matching`]; the report goes into the capture
//! document's `matching` field.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tailhunt_model::evidence::capture::MatchReport;
use tailhunt_pcap::matching::{match_many, MatchConfig};
use tailhunt_pcap::{PacketSource, ReadError};

/// Matches `files` (A) against `other` (B).
pub fn run(files: &[PathBuf], other: &Path) -> Result<MatchReport> {
    let mut a: Vec<Box<dyn PacketSource>> = Vec::new();
    for f in files {
        match tailhunt_pcap::open(f) {
            Ok(s) => a.push(s),
            // An empty file (a rotated set's newest) has nothing to match; the analysis notes it.
            Err(ReadError::Empty { .. }) => {}
            Err(e) => return Err(e).with_context(|| format!("cannot match '{}'", f.display())),
        }
    }
    let mut b =
        tailhunt_pcap::open(other).with_context(|| format!("--match '{}'", other.display()))?;
    let mut refs: Vec<&mut dyn PacketSource> = a.iter_mut().map(|s| &mut **s as _).collect();
    match_many(&mut refs, &mut *b, MatchConfig::default()).with_context(|| {
        let names: Vec<String> = files.iter().map(|f| format!("'{}'", f.display())).collect();
        format!(
            "matching {} against --match '{}'",
            names.join(", "),
            other.display()
        )
    })
}
