//! JSON-lines export: one object per sample, keys in alphabetical order
//! (`end_ns`, `intended_ns`, `latency_ns`, `outcome`, `series`, `start_ns`; times `null` in
//! untimed series), or per point of a values series (`series`, `t_ns`, `value`).

use std::io::{BufWriter, Write};

use serde_json::json;
use tailhunt_model::SeriesData;

use super::{times, ExportError, Exporter, Series};

/// Writes JSON lines.
pub struct JsonLinesExporter<'w> {
    out: BufWriter<&'w mut dyn Write>,
}

impl<'w> JsonLinesExporter<'w> {
    /// An exporter writing to `out`.
    pub fn new(out: &'w mut dyn Write) -> JsonLinesExporter<'w> {
        JsonLinesExporter {
            out: BufWriter::with_capacity(1 << 16, out),
        }
    }
}

impl Exporter for JsonLinesExporter<'_> {
    fn write_series(&mut self, name: &str, series: &Series) -> Result<u64, ExportError> {
        match &series.data {
            SeriesData::Samples(samples) => {
                for s in samples {
                    let [intended, start, end] = times(series, s);
                    let line = json!({
                        "series": name,
                        "intended_ns": intended,
                        "start_ns": start,
                        "end_ns": end,
                        "latency_ns": s.latency_ns(),
                        "outcome": s.outcome.name(),
                    });
                    writeln!(self.out, "{line}")?;
                }
                Ok(samples.len() as u64)
            }
            SeriesData::Values(points) => {
                for p in points {
                    let line = json!({ "series": name, "t_ns": p.t_ns, "value": p.value });
                    writeln!(self.out, "{line}")?;
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
