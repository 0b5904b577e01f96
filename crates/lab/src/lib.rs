//! The lab: reproductions of the root causes tailhunt must catch.
//!
//! # Brief overview
//!
//! [`scenario`] generates packet captures of the root causes in network namespaces (built with
//! `tailhunt-netlab`), with the ground truth recorded by the programs that made the traffic.
#![deny(missing_docs)]

pub mod scenario;
