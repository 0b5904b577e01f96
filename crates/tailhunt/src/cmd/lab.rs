//! `tailhunt lab`.

use std::io::Write;

use anyhow::{Context, Result};
use tailhunt_lab::synth;
use tailhunt_report::doc::WrittenDoc;

use crate::cli::{Cli, Shape, SynthArgs};
use crate::output;

pub fn synth(cli: &Cli, a: &SynthArgs) -> Result<()> {
    let median = tailhunt_model::parse_duration_ns(&a.median, None)
        .with_context(|| format!("--median '{}' (write a duration such as 1ms)", a.median))?
        as f64;
    let values = match a.shape {
        Shape::Trimodal => synth::mixture(a.count, &synth::trimodal_components(a.shift)?, a.seed)?,
        Shape::Lognormal => synth::lognormal(a.count, median, a.sigma, a.seed)?,
        Shape::Pareto => synth::pareto(a.count, median, a.tail, a.seed)?,
    };
    let mut out = output::open_output(a.output.as_deref())?;
    writeln!(out, "latency_ns")?;
    for v in &values {
        writeln!(out, "{v}")?;
    }
    out.flush()?;
    drop(out);
    if let Some(path) = &a.output {
        let doc = WrittenDoc {
            file: path.display().to_string(),
            format: "csv".into(),
            values: values.len() as u64,
        };
        output::print(cli.json, &doc, |d| {
            format!("wrote {} samples to {}\n", d.values, d.file)
        })?;
    }
    Ok(())
}
