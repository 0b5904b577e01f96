//! The one way from a stored run to findings: [`diagnose_run`] reads a run of any kind back
//! through the model's evidence types and runs the detectors that apply to it.
//!
//! In: a [`Store`] and a run id. Out: a [`Diagnosis`] — the findings, and the detectors that
//! looked (silence from a detector that looked is a verdict; [`detectors_for`] says which
//! ones apply to a kind). Storing the findings is the caller's choice
//! ([`store_findings`]), so a read-only store can still be diagnosed.
//!
//! | run kind | evidence read | detectors |
//! |---|---|---|
//! | `load` | the `sweep` document, the `latency` series per step | `latency-rises-as-load-falls`, `fragile-percentile` |
//! | `import` | every `latency` series (timestamped ones over time too) | `fragile-percentile`, `step-change`, `periodic-tail` |
//! | unknown kinds | every `latency` series | `fragile-percentile` |
//! | `probe` | every `probe_latency` series over time; the variants of each probe by round; the network probes' minimum | `step-change`, `periodic-tail`, `latency-floor`, `cold-path`, `fragile-percentile` (per interval) |
//! | `pcap`, `capture` | the `capture` document, the paired request latencies and queue delays (and a `--requests` run's latencies) | `microburst`, `link-saturated`, `nagle-stall`, `receive-window-limited`, `application-timeout` |
//! | `runq` | the `runq` document and the `runq_*`/`cpu_*` series (and the `--baseline` run's) | `noisy-neighbor`, `cpu-throttled` |
//! | `transfer`, `sockets` | their report documents | `receive-window-limited`, `application-timeout` |

mod capture;
mod load;
mod probe;
mod runq;
mod sock;

use tailhunt_model::{Finding, RunKind};
use tailhunt_store::{Store, StoreError};

pub use capture::{capture_requests, requests_spec};
pub use load::{sweep_steps, RateSamples};
pub use probe::{round_interval_ns, time_analysis, timed_series, PROBE_SERIES};
pub use runq::{runq_run, timelines};

/// What [`diagnose_run`] could not do.
#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run lacks the evidence its kind's detectors need.
    #[error("run {run} has no stored {what} ({why}): re-run `tailhunt {kind}` on the input")]
    NoEvidence {
        /// The run.
        run: String,
        /// Its kind.
        kind: RunKind,
        /// What is missing (`capture report`).
        what: &'static str,
        /// Why it may be missing.
        why: &'static str,
    },
    /// A run named as extra evidence (`--requests RUN[:SERIES]`, `--baseline RUN`) that does
    /// not fit.
    #[error("{flag} {spec}: {reason}")]
    Reference {
        /// The flag that named it.
        flag: &'static str,
        /// What was given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
}

/// The outcome of [`diagnose_run`].
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// What the detectors found (empty: none of their causes is visible).
    pub findings: Vec<Finding>,
    /// The detectors that looked.
    pub detectors: &'static [&'static str],
}

/// The detectors that apply to runs of `kind`.
pub fn detectors_for(kind: &RunKind) -> &'static [&'static str] {
    match kind {
        RunKind::Pcap | RunKind::Capture => &crate::capture::DETECTORS,
        RunKind::Runq => &crate::runq::DETECTORS,
        RunKind::Transfer | RunKind::Sockets => &crate::sock::DETECTORS,
        RunKind::Probe => &crate::probe::DETECTORS,
        RunKind::Import => &load::IMPORT_DETECTORS,
        RunKind::Load | RunKind::Other(_) => &load::DETECTORS,
    }
}

/// Reads run `run_id` back and runs every detector that applies to its kind.
pub fn diagnose_run(store: &Store, run_id: &str) -> Result<Diagnosis, DiagnoseError> {
    let run = store.run(run_id)?;
    let findings = match &run.kind {
        RunKind::Pcap | RunKind::Capture => capture::diagnose(store, &run)?,
        RunKind::Runq => runq::diagnose(store, &run)?,
        RunKind::Transfer | RunKind::Sockets => sock::diagnose(store, &run)?,
        RunKind::Probe => probe::diagnose(store, &run)?,
        RunKind::Import => {
            let (over_time, changed) = probe::diagnose_timed_import(store, &run)?;
            let mut f = load::diagnose(store, &run)?;
            f.retain(|x| {
                x.detector != crate::fragile::DETECTOR
                    || x.evidence
                        .first()
                        .is_none_or(|e| !changed.contains(&e.series))
            });
            f.extend(over_time);
            f
        }
        RunKind::Load | RunKind::Other(_) => load::diagnose(store, &run)?,
    };
    Ok(Diagnosis {
        findings,
        detectors: detectors_for(&run.kind),
    })
}

/// [`diagnose_run`] of a capture run whose stored report the caller has already read back
/// (`tailhunt pcap` prints it): the report, which holds every flow, is parsed once, not twice.
pub fn diagnose_capture_run(
    store: &Store,
    run_id: &str,
    report: &tailhunt_model::evidence::capture::CaptureReport,
) -> Result<Diagnosis, DiagnoseError> {
    let run = store.run(run_id)?;
    Ok(Diagnosis {
        findings: capture::diagnose_report(store, &run, report)?,
        detectors: detectors_for(&run.kind),
    })
}

/// [`diagnose_run`], then [`store_findings`]: how a run ends in every command that makes one,
/// and in `tailhunt diagnose` and `tailhunt report` on a run already stored.
pub fn diagnose_and_store(store: &mut Store, run_id: &str) -> Result<Diagnosis, DiagnoseError> {
    let diagnosis = diagnose_run(store, run_id)?;
    store_findings(store, run_id, &diagnosis)?;
    Ok(diagnosis)
}

/// Stores a diagnosis' findings with the run, replacing earlier ones.
pub fn store_findings(
    store: &mut Store,
    run_id: &str,
    diagnosis: &Diagnosis,
) -> Result<(), StoreError> {
    store.replace_findings(run_id, &diagnosis.findings)
}
