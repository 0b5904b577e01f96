//! The lab: reproductions of the root causes tailhunt must catch.
//!
//! # Brief overview
//!
//! [`scenario`] generates packet captures of the root causes in network namespaces (built with
//! `tailhunt-netlab`), with the ground truth recorded by the programs that made the traffic.
//! [`truth`] runs cases with independent ground truth through the real `tailhunt` binary and
//! scores its detectors (the `tailhunt-truth` binary, `bench/detectors.sh`).
#![deny(missing_docs)]

pub mod method;
pub mod scenario;
pub mod state;
pub mod truth;
