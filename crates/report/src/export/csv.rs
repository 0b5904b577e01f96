//! CSV export through the `csv` crate: fields that need it are quoted (series names such as
//! `latency{rate=100,repeat=1}` hold commas), and so is any field holding `#`, so a reader
//! that skips `#` comments never mistakes a row for one.
//!
//! Sample series: `series,intended_ns,start_ns,end_ns,latency_ns,outcome`. Values series (bins,
//! windows): `series,t_ns,value`. A file holds one kind.

use std::io::Write;

use tailhunt_model::{SeriesData, SeriesKind};

use super::{times, ExportError, Exporter, Series};

/// Columns of sample rows.
pub const SAMPLE_HEADER: [&str; 6] = [
    "series",
    "intended_ns",
    "start_ns",
    "end_ns",
    "latency_ns",
    "outcome",
];

/// Columns of values rows.
pub const VALUES_HEADER: [&str; 3] = ["series", "t_ns", "value"];

/// Writes CSV.
pub struct CsvExporter<'w> {
    out: ::csv::Writer<&'w mut dyn Write>,
}

impl<'w> CsvExporter<'w> {
    /// Writes the header for a selection of `kinds` (values only, or no values at all).
    pub fn new(
        out: &'w mut dyn Write,
        kinds: &[SeriesKind],
    ) -> Result<CsvExporter<'w>, ExportError> {
        let values = kinds.iter().filter(|k| **k == SeriesKind::Values).count();
        let all_values = !kinds.is_empty() && values == kinds.len();
        if values > 0 && !all_values {
            return Err(ExportError::MixedCsv);
        }
        let mut out = ::csv::WriterBuilder::new()
            .comment(Some(b'#'))
            .from_writer(out);
        if all_values {
            out.write_record(VALUES_HEADER)?;
        } else {
            out.write_record(SAMPLE_HEADER)?;
        }
        Ok(CsvExporter { out })
    }
}

impl Exporter for CsvExporter<'_> {
    fn write_series(&mut self, name: &str, series: &Series) -> Result<u64, ExportError> {
        match &series.data {
            SeriesData::Samples(samples) => {
                for s in samples {
                    let [intended, start, end] = times(series, s);
                    self.out.serialize((
                        name,
                        intended,
                        start,
                        end,
                        s.latency_ns(),
                        s.outcome.name(),
                    ))?;
                }
                Ok(samples.len() as u64)
            }
            SeriesData::Values(points) => {
                for p in points {
                    self.out.serialize((name, p.t_ns, p.value))?;
                }
                Ok(points.len() as u64)
            }
            SeriesData::Histograms(_) => Err(ExportError::HistogramsAsText(name.to_string())),
        }
    }

    fn finish(mut self: Box<Self>) -> Result<(), ExportError> {
        self.out.flush()?;
        Ok(())
    }
}
