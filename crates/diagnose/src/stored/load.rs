//! Load and import runs: a sweep's steps at their exact rates, and every latency series'
//! distribution.

use std::collections::BTreeMap;

use tailhunt_analyze::{analyze, AnalyzeOptions, Distribution};
use tailhunt_model::evidence::sweep::SweepRecord;
use tailhunt_model::{Finding, Run, Sample, Series, SeriesData};
use tailhunt_store::{SeriesInfo, Store};

use super::DiagnoseError;
use crate::{fragile, nagle};

/// Detectors run on load and import runs.
pub const DETECTORS: [&str; 2] = [nagle::DETECTOR, fragile::DETECTOR];
/// Detectors run on import runs: a timestamped import is read over time too.
pub const IMPORT_DETECTORS: [&str; 4] = [
    nagle::DETECTOR,
    fragile::DETECTOR,
    crate::probe::step::DETECTOR,
    crate::probe::periodic::DETECTOR,
];

/// The measured latency series (warm-up left out), in the order they were written.
fn latency_series(store: &Store, run: &Run) -> Result<Vec<SeriesInfo>, DiagnoseError> {
    Ok(store
        .series(&run.id)?
        .into_iter()
        .filter(|s| s.name == "latency" && s.labels.get("phase").is_none_or(|p| p != "warmup"))
        .collect())
}

/// Each series' offered rate, from the run's sweep record. Series are matched to steps by
/// display name; where two steps share one (runs written before rates were labelled
/// exactly, where 1,234 and 1,231 req/s both read `1.23k`), the k-th step takes the k-th series.
/// A run whose writer was killed before it wrote the record has only its labels, which hold the
/// exact rate since then (`rate=1234`).
fn rates(series: &[SeriesInfo], sweep: &SweepRecord) -> Vec<Option<f64>> {
    if sweep.steps.is_empty() {
        return series
            .iter()
            .map(|s| {
                let exact = s.labels.get("rate")?;
                exact
                    .parse::<f64>()
                    .ok()
                    .filter(|r| r.is_finite() && *r > 0.0)
            })
            .collect();
    }
    let mut taken = vec![false; series.len()];
    let mut out = vec![None; series.len()];
    for step in &sweep.steps {
        if let Some(i) =
            (0..series.len()).find(|&i| !taken[i] && series[i].display_name == step.series)
        {
            taken[i] = true;
            out[i] = Some(step.rate_per_s);
        }
    }
    out
}

/// One offered rate of a sweep with every measured sample at it (repeats merged).
#[derive(Debug, Clone, PartialEq)]
pub struct RateSamples {
    /// Offered rate, requests/s, exactly as asked for.
    pub rate_per_s: f64,
    /// Display name of its (first) series.
    pub series: String,
    /// Its samples, warm-up left out.
    pub samples: Vec<Sample>,
}

/// A load run's sweep: each offered rate with its samples, lowest rate first. Empty for runs
/// without a sweep record (imports).
pub fn sweep_steps(store: &Store, run_id: &str) -> Result<Vec<RateSamples>, DiagnoseError> {
    Ok(split(store, &store.run(run_id)?)?.0)
}

/// Latency series that belong to no sweep step (an import's), loaded.
type Unswept = Vec<(SeriesInfo, Series)>;

/// The run's latency series split into sweep steps (by rate) and the others.
fn split(store: &Store, run: &Run) -> Result<(Vec<RateSamples>, Unswept), DiagnoseError> {
    let series = latency_series(store, run)?;
    let sweep = store.evidence::<SweepRecord>(&run.id)?.unwrap_or_default();
    let rates = rates(&series, &sweep);
    let mut by_rate: BTreeMap<u64, RateSamples> = BTreeMap::new();
    let mut others = Vec::new();
    for (info, rate) in series.into_iter().zip(rates) {
        let loaded = store.load_series(&info)?;
        match (rate, &loaded.data) {
            // Repeats of a rate merge into one distribution.
            (Some(rate), SeriesData::Samples(s)) => by_rate
                .entry(rate.to_bits())
                .or_insert_with(|| RateSamples {
                    rate_per_s: rate,
                    series: info.display_name.clone(),
                    samples: Vec::new(),
                })
                .samples
                .extend_from_slice(s),
            _ => others.push((info, loaded)),
        }
    }
    let mut steps: Vec<RateSamples> = by_rate.into_values().collect();
    steps.sort_by(|a, b| a.rate_per_s.total_cmp(&b.rate_per_s));
    Ok((steps, others))
}

pub(super) fn diagnose(store: &Store, run: &Run) -> Result<Vec<Finding>, DiagnoseError> {
    let (steps, others) = split(store, run)?;
    let opts = AnalyzeOptions::default();
    let mut findings = Vec::new();
    for (info, series) in &others {
        let dist = Distribution::from_series(series, false);
        if dist.count() > 0 {
            findings.extend(fragile::fragile_percentiles(
                &info.display_name,
                &analyze(&dist, &opts),
            ));
        }
    }
    let steps: Vec<nagle::RateStep> = steps
        .into_iter()
        .filter(|s| !s.samples.is_empty())
        .map(|s| nagle::RateStep {
            series: s.series,
            rate: s.rate_per_s,
            analysis: analyze(&Distribution::from_samples(&s.samples, false), &opts),
        })
        .collect();
    findings.extend(nagle::latency_rises_as_load_falls(&steps));
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use tailhunt_model::evidence::sweep::SweepStep;
    use tailhunt_model::{Labels, Timing, Unit};

    use super::*;

    fn info(id: i64, rate: &str) -> SeriesInfo {
        let labels: Labels = [("rate".to_string(), rate.to_string())]
            .into_iter()
            .collect();
        SeriesInfo {
            id,
            name: "latency".into(),
            display_name: format!("latency{{rate={rate}}}"),
            labels,
            unit: Unit::Nanoseconds,
            timing: Timing::Timed,
            kind: tailhunt_model::SeriesKind::Samples,
            count: 10,
        }
    }

    fn step(rate: f64, series: &str) -> SweepStep {
        SweepStep {
            rate_per_s: rate,
            repeat: 1,
            series: series.into(),
            ..SweepStep::default()
        }
    }

    #[test]
    fn close_rates_that_share_a_rounded_label_stay_two_steps() {
        // What a run of the previous format holds for `--sweep 50,1234,1231`.
        let series = [info(2, "50"), info(4, "1.23k"), info(6, "1.23k")];
        let sweep = SweepRecord {
            steps: vec![
                step(50.0, "latency{rate=50}"),
                step(1234.0, "latency{rate=1.23k}"),
                step(1231.0, "latency{rate=1.23k}"),
            ],
        };
        assert_eq!(
            rates(&series, &sweep),
            vec![Some(50.0), Some(1234.0), Some(1231.0)]
        );
    }

    #[test]
    fn a_killed_run_without_its_record_reads_the_exact_rate_labels() {
        let series = [
            info(2, "50"),
            info(4, "1234"),
            info(6, "1231"),
            info(8, "1.23k"),
        ];
        assert_eq!(
            rates(&series, &SweepRecord::default()),
            vec![Some(50.0), Some(1234.0), Some(1231.0), None]
        );
    }
}
