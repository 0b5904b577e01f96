//! A log-linear, mergeable histogram with a documented error bound.
//!
//! # Brief overview
//!
//! Values (nanoseconds, normally) go into buckets whose width grows with the value: every power
//! of two is split into `2^sub_bits` equal buckets. With the default [`SUB_BITS`] = 7 there are
//! 128 buckets per octave, so a bucket is at most 1/128 = 0.78% wide relative to its lower edge,
//! and a quantile read back from the histogram is within **0.39%** of the exact sample quantile
//! at every value from 1 ns to 584 years (the whole `u64` range; tests check 1 ns .. 1 h).
//!
//! The bucket index needs only a shift, a subtraction and the position of the highest set bit,
//! so a BPF program computes the very same index in the kernel (see [`Layout::index`] for the C
//! version). Histograms with the same layout merge by adding counts.
//!
//! Every percentile in tailhunt is the nearest-rank one, its rank computed in integers by
//! [`quantile`], so one run gives one p99.9 in every command.
//!
//! [`hdr`] reads and writes HdrHistogram interval logs (`.hlog`, as written by wrk2, jHiccup and
//! the HdrHistogram libraries) so data moves between tailhunt and those tools.
//!
//! ```
//! use tailhunt_histogram::Histogram;
//!
//! let mut h = Histogram::new();
//! for v in 1..=1000u64 {
//!     h.record(v * 1_000); // 1 us .. 1 ms
//! }
//! let p99 = h.quantile(0.99).unwrap();
//! assert!((p99 as f64 - 990_000.0).abs() / 990_000.0 <= h.layout().relative_error_bound());
//! ```
#![deny(missing_docs)]

mod codec;
pub mod hdr;
mod histogram;
mod layout;
pub mod quantile;
pub mod varint;

pub use codec::DecodeError;
pub use histogram::{Bucket, Histogram};
pub use layout::{Layout, SUB_BITS};
pub use quantile::{nearest_rank, Quantile};
