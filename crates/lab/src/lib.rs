//! The lab: reproductions of the root causes tailhunt must catch.
//!
//! # Brief overview
//!
//! For now the lab holds [`synth`]: seeded generators of latency distributions with known
//! shape (log-normal, Pareto, mixtures, the trimodal "fragile p90" set). Tests use them as
//! ground truth, the demo imports one, and benchmarks use them as load. Later issues add network
//! namespaces, shaped links and scenarios here.
//! [`link`] emulates a wide-area link (delay, jitter, rate, queue, loss) between two namespaces.
//! [`scenario`] generates packet captures of the root causes with the ground truth recorded.
//! [`truth`] runs cases with independent ground truth through the real `tailhunt` binary and
//! scores its detectors (the `tailhunt-truth` binary, `bench/detectors.sh`).
#![deny(missing_docs)]

pub mod link;
pub mod netns;
pub mod scenario;
pub mod synth;
pub mod truth;
