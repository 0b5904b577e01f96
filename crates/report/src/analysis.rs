//! `tailhunt analyze` on a stored run: which series, their analyses, the breakdown beside them,
//! a floor from another run, and a comparison with another run.
//!
//! In: a [`Store`] and an [`AnalyzeRequest`] (what the flags asked for, already parsed).
//! Out: the [`AnalyzeDoc`] the binary prints, or an [`AnalysisError`] that names the run,
//! series or flag that does not fit.

use tailhunt_analyze::breakdown::{tail_owner, PartShare};
use tailhunt_analyze::timeline::{analyze_over_time, interval_origin, TimeAnalysis, TimeOptions};
use tailhunt_analyze::{analyze, compare::compare, AnalyzeOptions, Distribution};
use tailhunt_model::{Run, Sample, Series, SeriesData, Timing};
use tailhunt_store::{SeriesInfo, Store, StoreError};

use crate::doc::{AnalyzeDoc, ComparisonDoc, OverTime, SeriesAnalysis};

/// What could not be analysed.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run has no series at all.
    #[error("run {0} has no series (its writer stopped before writing any)")]
    NoSeries(String),
    /// `--series` matched nothing.
    #[error("run {run} has no series named {wanted}; it has: {have}")]
    NoSuchSeries {
        /// The run.
        run: String,
        /// What was asked for.
        wanted: String,
        /// What it has.
        have: String,
    },
    /// A selected series holds nothing to analyse.
    #[error("series {series} of run {run} has no samples to analyse")]
    Empty {
        /// The run.
        run: String,
        /// The series.
        series: String,
    },
    /// A run named by a flag (`--compare RUN[:SERIES]`, `--floor-from RUN[:SERIES]`).
    #[error("{flag} {spec}: {reason}")]
    Reference {
        /// The flag.
        flag: &'static str,
        /// What was given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
}

/// What `tailhunt analyze` was asked for.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeRequest {
    /// The run (a full id).
    pub run: String,
    /// Series names or display names (`--series`); empty: the run's latency distributions.
    pub series: Vec<String>,
    /// Percentiles, confidence and the expected floor.
    pub opts: AnalyzeOptions,
    /// Leave errors and timeouts out of the distribution (`--ok-only`).
    pub ok_only: bool,
    /// `--floor-from RUN[:SERIES]`: the expected floor is that series' minimum.
    pub floor_from: Option<String>,
    /// `--compare RUN[:SERIES]`: the "before" to compare the first series with.
    pub compare: Option<String>,
    /// `--over-time`: percentiles per interval, change points and periods of timed series.
    pub over_time: bool,
    /// `--interval`: the interval width, ns (`None` chooses one).
    pub interval_ns: Option<i64>,
}

/// The series of `run` selected by `wanted` (names or display names). With none asked for:
/// the latency distributions (`latency`, or a source's own such as `runq_latency`) without the
/// warm-up, else every measured series, else all.
pub fn select_series(
    store: &Store,
    run: &str,
    wanted: &[String],
) -> Result<Vec<SeriesInfo>, AnalysisError> {
    let all = store.series(run)?;
    if all.is_empty() {
        return Err(AnalysisError::NoSeries(run.to_string()));
    }
    if wanted.is_empty() {
        // Warm-up series are kept but not analysed unless asked for by name.
        let measured: Vec<SeriesInfo> = all
            .iter()
            .filter(|s| s.labels.get("phase").is_none_or(|p| p != "warmup"))
            .cloned()
            .collect();
        // Counts and readings over time (`runq_waits`, `cpu_throttled_ns`) only when asked for.
        let latency: Vec<SeriesInfo> = measured
            .iter()
            .filter(|s| s.name == "latency" || s.name.ends_with("_latency"))
            .cloned()
            .collect();
        return Ok(if !latency.is_empty() {
            latency
        } else if measured.is_empty() {
            all
        } else {
            measured
        });
    }
    let picked: Vec<SeriesInfo> = all
        .iter()
        .filter(|s| wanted.iter().any(|w| *w == s.name || *w == s.display_name))
        .cloned()
        .collect();
    if picked.is_empty() {
        let have: Vec<&str> = all.iter().map(|s| s.display_name.as_str()).collect();
        return Err(AnalysisError::NoSuchSeries {
            run: run.to_string(),
            wanted: wanted.join(", "),
            have: have.join(", "),
        });
    }
    Ok(picked)
}

/// Windows of the terminal's p99 sparkline.
const SPARK_WINDOWS: usize = 48;

/// A timed series' p99 per window (interval histograms: per interval, the last
/// [`SPARK_WINDOWS`]); `None` for untimed or short series.
fn p99_over_time(series: &Series) -> Option<OverTime> {
    if series.timing != Timing::Timed {
        return None;
    }
    if let SeriesData::Histograms(h) = &series.data {
        let last = &h[h.len().saturating_sub(SPARK_WINDOWS)..];
        let first = last.first()?;
        return (last.len() >= 4).then(|| OverTime {
            window_ns: first.end_ns - first.start_ns,
            values_ns: last.iter().map(|i| i.histogram.quantile(0.99)).collect(),
        });
    }
    let samples = series.samples()?;
    let (lo, hi) = samples.iter().fold((i64::MAX, i64::MIN), |(a, b), s| {
        (a.min(s.intended_ns), b.max(s.intended_ns))
    });
    if samples.len() < 10 * SPARK_WINDOWS || hi <= lo {
        return None;
    }
    let width = (hi - lo) / SPARK_WINDOWS as i64 + 1;
    let mut windows = vec![Vec::new(); SPARK_WINDOWS];
    for s in samples {
        windows[((s.intended_ns - lo) / width) as usize].push(s.latency_ns().max(0) as u64);
    }
    Some(OverTime {
        window_ns: width,
        values_ns: windows
            .into_iter()
            .map(|mut w| {
                w.sort_unstable();
                tailhunt_histogram::quantile::of_sorted(&w, 0.99)
            })
            .collect(),
    })
}

/// Splits `RUN[:SERIES]`.
pub fn split_run_series(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once(':') {
        Some((r, s)) if !s.is_empty() => (r, Some(s)),
        Some((r, _)) => (r, None),
        None => (spec, None),
    }
}

/// A series of another run, from `RUN[:SERIES]`; without SERIES, the one named like `like`
/// or else the first of its latency distributions.
fn other_series(
    store: &Store,
    spec: &str,
    like: Option<&str>,
    flag: &'static str,
) -> Result<(String, SeriesInfo), AnalysisError> {
    let reference = |reason: String| AnalysisError::Reference {
        flag,
        spec: spec.to_string(),
        reason,
    };
    let (run_spec, series) = split_run_series(spec);
    let run = store
        .resolve_run(run_spec)
        .map_err(|e| reference(e.to_string()))?;
    let wanted: Vec<String> = series.map(|s| vec![s.to_string()]).unwrap_or_default();
    let candidates = select_series(store, &run, &wanted).map_err(|e| reference(e.to_string()))?;
    let pick = like
        .and_then(|name| {
            candidates
                .iter()
                .find(|c| c.display_name == name || c.name == name)
        })
        .unwrap_or(&candidates[0])
        .clone();
    Ok((run, pick))
}

/// Parts of the request path stored next to a latency series (same labels), if any.
const PARTS: [&str; 4] = ["client_stack", "network", "server_stack", "server_app"];

/// Which part owns the tail of `latency` (the loaded series of `info`), from the parts stored
/// beside it among `all` (the run's series).
fn breakdown(
    store: &Store,
    all: &[SeriesInfo],
    info: &SeriesInfo,
    latency: &[Sample],
) -> Result<Option<Vec<PartShare>>, StoreError> {
    if info.name != "latency" {
        return Ok(None);
    }
    let siblings: Vec<&SeriesInfo> = all
        .iter()
        .filter(|s| {
            PARTS.contains(&s.name.as_str()) && s.labels == info.labels && s.count == info.count
        })
        .collect();
    if siblings.is_empty() || latency.is_empty() {
        return Ok(None);
    }
    let totals: Vec<i64> = latency.iter().map(|s| s.latency_ns()).collect();
    let mut parts = vec![(
        "send_lag".to_string(),
        latency.iter().map(|s| s.send_lag_ns()).collect(),
    )];
    for s in siblings {
        parts.push((
            s.name.clone(),
            store
                .load_samples(s.id)?
                .iter()
                .map(|x| x.latency_ns())
                .collect(),
        ));
    }
    Ok(tail_owner(&totals, &parts, 0.99))
}

fn distribution(
    store: &Store,
    info: &SeriesInfo,
    ok_only: bool,
) -> Result<(Series, Distribution), StoreError> {
    let series = store.load_series(info)?;
    let dist = Distribution::from_series(&series, ok_only);
    Ok((series, dist))
}

/// A timed sample series over time (`None` for others: without times there is no "when").
fn timeline(run: &Run, series: &Series, interval_ns: Option<i64>) -> Option<TimeAnalysis> {
    let samples = series
        .samples()
        .filter(|_| series.timing == Timing::Timed)?;
    let opts = TimeOptions {
        interval_ns,
        origin_ns: interval_origin(run, samples)?,
        ..TimeOptions::default()
    };
    analyze_over_time(samples, &opts)
}

/// Analyses the run's selected series: each one's distribution (and breakdown), against the
/// expected floor, and the first compared with `--compare`'s series.
pub fn analyze_run(store: &Store, req: &AnalyzeRequest) -> Result<AnalyzeDoc, AnalysisError> {
    let run = store.run(&req.run)?;
    let selected = select_series(store, &req.run, &req.series)?;
    let mut opts = req.opts.clone();
    if let Some(spec) = &req.floor_from {
        let (other, info) = other_series(store, spec, None, "--floor-from")?;
        let min = distribution(store, &info, true)?
            .1
            .histogram()
            .min()
            .ok_or_else(|| AnalysisError::Reference {
                flag: "--floor-from",
                spec: spec.clone(),
                reason: format!("series {} is empty", info.display_name),
            })?;
        opts.expected_floor_ns = Some(min);
        opts.floor_source = Some(format!(
            "minimum of run {other} series {}",
            info.display_name
        ));
    }
    let all = store.series(&req.run)?;
    let mut series = Vec::new();
    for info in selected {
        let (loaded, dist) = distribution(store, &info, req.ok_only)?;
        if dist.count() == 0 {
            return Err(AnalysisError::Empty {
                run: req.run.clone(),
                series: info.display_name,
            });
        }
        series.push(SeriesAnalysis {
            timeline: req
                .over_time
                .then(|| timeline(&run, &loaded, req.interval_ns))
                .flatten(),
            p99_over_time: p99_over_time(&loaded),
            analysis: analyze(&dist, &opts),
            breakdown: breakdown(store, &all, &info, loaded.samples().unwrap_or_default())?,
            series: info,
        });
    }
    let comparison = match &req.compare {
        None => None,
        Some(spec) => {
            let after = &series[0];
            let (other, info) =
                other_series(store, spec, Some(&after.series.display_name), "--compare")?;
            let before = analyze(&distribution(store, &info, req.ok_only)?.1, &opts);
            Some(ComparisonDoc {
                baseline_run: other,
                baseline_series: info.display_name,
                series: after.series.display_name.clone(),
                comparison: compare(&before, &after.analysis),
            })
        }
    };
    Ok(AnalyzeDoc {
        run,
        series,
        comparison,
    })
}
