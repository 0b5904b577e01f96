//! The chart builders, one file per family of evidence.

pub mod capture;
pub mod latency;
pub mod probe;
pub mod runq;
pub mod sweep;
pub mod tcpinfo;

/// A named line of (x, y) points and its largest y.
pub type Line = (String, Vec<(f64, f64)>, f64);
