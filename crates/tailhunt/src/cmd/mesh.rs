//! `tailhunt mesh --from URL`: the mesh's per-pair latency matrix from a Prometheus-API server.

use anyhow::{Context, Result};
use serde::Serialize;
use tailhunt_agent::mesh::{query_matrix, render_matrix, Matrix};

use crate::cli::{Cli, MeshArgs};
use crate::output;

/// One pair as `tailhunt mesh --json` prints it.
#[derive(Debug, Serialize)]
struct Pair {
    from: String,
    to: String,
    /// Seconds; null where the server had no answer.
    p50_s: Option<f64>,
    p99_s: Option<f64>,
}

#[derive(Debug, Serialize)]
struct MeshDoc {
    kind: String,
    range: String,
    pairs: Vec<Pair>,
    #[serde(skip)]
    matrix: Matrix,
    #[serde(skip)]
    worst: usize,
}

pub fn run(cli: &Cli, a: &MeshArgs) -> Result<()> {
    let matrix =
        query_matrix(&a.from, &a.kind, &a.range).with_context(|| format!("--from {}", a.from))?;
    if matrix.cells.is_empty() {
        anyhow::bail!(
            "--from {}: no mesh series ({} over {}): are the agents' [mesh] sections set and is the server scraping them?",
            a.from,
            a.kind,
            a.range
        );
    }
    let finite = |v: f64| v.is_finite().then_some(v);
    let doc = MeshDoc {
        kind: a.kind.clone(),
        range: a.range.clone(),
        pairs: matrix
            .cells
            .iter()
            .map(|((from, to), (p50, p99))| Pair {
                from: from.clone(),
                to: to.clone(),
                p50_s: finite(*p50),
                p99_s: finite(*p99),
            })
            .collect(),
        matrix,
        worst: a.worst,
    };
    output::print(cli.json, &doc, |d| {
        format!(
            "mesh {} over the last {}: {}",
            d.kind,
            d.range,
            render_matrix(&d.matrix, d.worst)
        )
    })?;
    Ok(())
}
