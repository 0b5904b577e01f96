//! The chart builders, one file per family of evidence.

pub mod capture;
pub mod latency;
pub mod runq;
pub mod sweep;
pub mod tcpinfo;
