//! Detectors: one module per root cause, each taking the evidence it needs and returning
//! [`Finding`]s. A detector that finds nothing returns nothing: silence is the verdict for a
//! healthy system.
//!
//! # Brief overview
//!
//! - [`nagle`]: `latency-rises-as-load-falls` over a rate sweep (Nagle's algorithm meeting the
//!   peer's delayed ACK).
//! - [`fragile`]: `fragile-percentile`, the analysis' gap warnings as findings.
//! - [`capture`]: all capture detectors over one capture report.
//! - [`microburst`]: `microburst`, slow requests that coincide with bins at link rate.
//! - [`saturated`]: `link-saturated`, a link full for seconds and the requests slower then.
//! - [`channels`]: what those two share (bursts per channel, request series, sources).
//! - [`nagle_stall`]: `nagle-stall`, small segments held until a delayed ACK, in a capture.
//! - [`runq`]: `noisy-neighbor` and `cpu-throttled`, from per-cgroup run-queue latency,
//!   preemption attribution and throttling.
//! - [`window`]: `receive-window-limited`, from a capture's flows (or any source of
//!   [`window::WindowEvidence`]).
//! - [`timeout`]: `application-timeout`, from a capture's closes or a transfer's own timeout.
//! - [`sock`]: the same two from TCP_INFO and inet_diag (`tailhunt transfer`, `tailhunt sockets`).
//! - [`probe`]: `step-change`, `periodic-tail`, `latency-floor`, `cold-path` and the
//!   per-interval `fragile-percentile`, over the series of probe runs and timestamped imports.
//! - [`stored`]: [`diagnose_run`], the one way from a stored run of any kind to its findings.
//!
//! ```
//! use tailhunt_diagnose::nagle::{latency_rises_as_load_falls, RateStep};
//! assert!(latency_rises_as_load_falls(&[]).is_none());
//! ```
#![deny(missing_docs)]

pub mod capture;
pub mod channels;
pub mod fragile;
pub mod microburst;
pub mod nagle;
pub mod nagle_stall;
pub mod probe;
pub mod runq;
pub mod saturated;
pub mod sock;
pub mod stored;
pub mod timeout;
pub mod window;

pub use stored::{
    detectors_for, diagnose_and_store, diagnose_capture_run, diagnose_run, store_findings,
    DiagnoseError, Diagnosis,
};

pub use tailhunt_model::Finding;
