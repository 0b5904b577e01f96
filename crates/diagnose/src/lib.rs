//! Detectors: one module per root cause, each taking the evidence it needs and returning
//! [`Finding`]s. A detector that finds nothing returns nothing: silence is the verdict for a
//! healthy system.
//!
//! # Brief overview
//!
//! - [`nagle`]: `latency-rises-as-load-falls` over a rate sweep (Nagle's algorithm meeting the
//!   peer's delayed ACK).
//! - [`fragile`]: `fragile-percentile`, the analysis' gap warnings as findings.
//!
//! ```
//! use tailhunt_diagnose::nagle::{latency_rises_as_load_falls, RateStep};
//! assert!(latency_rises_as_load_falls(&[]).is_none());
//! ```
#![deny(missing_docs)]

pub mod fragile;
pub mod nagle;

pub use tailhunt_model::Finding;
