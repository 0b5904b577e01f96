//! The continuous prober: probes of many kinds, run in rounds on a fixed cadence, every
//! measurement kept.
//!
//! # Brief overview
//!
//! - [`config`] reads a TOML file or quick-form URLs into checked [`spec::ProbeSpec`]s.
//! - [`kind`] holds one file per probe kind behind the [`kind::Probe`] trait; the
//!   connection-based kinds share their variants (by name / by IP, fresh / reused connection,
//!   first / second request) in [`kind::conversation`].
//! - [`schedule`] plans rounds: every probe once per round, in a random order, with start-up
//!   jitter, open loop.
//! - [`run`] runs the rounds (one worker thread per probe) and [`record`] stores each
//!   measurement as a `probe_latency{probe,kind,variant}` sample as it is taken, timeouts
//!   censored at the timeout, and counts what each probe gave (the `probe` document,
//!   [`tailhunt_model::evidence::probe::ProbeRecord`]).
//!
//! ```no_run
//! use std::sync::{atomic::AtomicBool, Arc};
//! use tailhunt_probe::{config, kind, run};
//!
//! let cfg = config::from_urls(&["tcp://127.0.0.1:6379".into()], &config::Overrides::default())?;
//! let probes = cfg.probes.iter().map(kind::build).collect::<Result<Vec<_>, _>>()?;
//! let mut series: Vec<tailhunt_model::Series> = Vec::new();
//! let origin = tailhunt_model::ClockOrigin::now().mono_ns;
//! let done = run::run(&cfg, probes, origin, run::Length::Once, &mut series,
//!     &run::Live::default(), &Arc::new(AtomicBool::new(false)))?;
//! println!("{} rounds", done.record.rounds);
//! # Ok::<(), tailhunt_probe::ProbeError>(())
//! ```
#![deny(missing_docs)]

pub mod config;
mod error;
pub mod kind;
pub mod record;
pub mod run;
pub mod schedule;
pub mod spec;

pub use error::ProbeError;
