//! `tailhunt pcap --bins-csv`: every non-empty bin of the pass, for plotting elsewhere.
//!
//! In: the finished [`Analyzer`] (its bins per channel and per flow direction) and the
//! [`CaptureReport`] it produced. Out: rows `t_ns,scope,name,bytes,packets` of every channel
//! (`to`/`from` a host), host pair (`pair`, `A -> B`) and flow direction (`flow`,
//! `ID A -> B`), written with the `csv` crate.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;

use tailhunt_model::evidence::capture::CaptureReport;

use crate::analysis::Analyzer;
use crate::bins::{Bin, SparseBins};

/// Writes the bins of the pass as CSV.
pub fn write_bins_csv<W: Write>(
    out: W,
    report: &CaptureReport,
    an: &Analyzer,
) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(["t_ns", "scope", "name", "bytes", "packets"])?;
    let mut rows = |scope: &str, name: &str, bins: &[Bin]| -> Result<(), csv::Error> {
        for b in bins {
            w.write_record([
                (b.index * report.bin_ns).to_string(),
                scope.to_string(),
                name.to_string(),
                b.bytes.to_string(),
                b.packets.to_string(),
            ])?;
        }
        Ok(())
    };
    for ch in &report.channels {
        let Ok(host) = ch.host.parse() else { continue };
        if let Some(bins) = an.channel_bins(ch.dir, host) {
            for b in bins {
                rows(ch.dir.name(), &ch.host, &[b])?;
            }
        }
    }
    let mut pairs: BTreeMap<(IpAddr, IpAddr), SparseBins> = BTreeMap::new();
    for (_, src, dst, bins) in an.flow_bins() {
        let pair = pairs.entry((src.ip(), dst.ip())).or_default();
        for b in bins.bins() {
            pair.add_bin(b);
        }
    }
    for ((a, b), bins) in &pairs {
        rows("pair", &format!("{a} -> {b}"), bins.bins())?;
    }
    for (id, src, dst, bins) in an.flow_bins() {
        if !bins.bins().is_empty() {
            rows("flow", &format!("{id} {src} -> {dst}"), bins.bins())?;
        }
    }
    w.flush()?;
    Ok(())
}
