//! tailhunt's metrics export, the foundation of `tailhunt agent`.
//!
//! - [`exposition`]: a [`exposition::Snapshot`] (histograms, counters, gauges, findings) as
//!   OpenMetrics text with classic histograms, or as Prometheus protobuf with native
//!   histograms, chosen by the `Accept` header.
//! - [`http`]: a small HTTP server for `/metrics`, `/findings` and `/healthz`, loopback by
//!   default, with an optional bearer token; no endpoint changes anything.
//! - [`remote_write`]: Prometheus remote write 1.0 (snappy + protobuf) to several endpoints,
//!   each with classic, `vmrange` or native histograms, retry with backoff, and a fall back to
//!   classic when a receiver rejects native histograms.
//! - [`queue`]: the bounded on-disk queue in front of each endpoint, which survives `kill -9`.
//! - [`config`]: the agent's `agent.toml`, checked with errors naming line and key.
//! - [`probing`]: the prober's samples counted into exported histograms and counters while
//!   they are stored.
//! - [`mesh`]: mesh mode: echo for the peers, a probe to each, the per-pair matrix read back.
//! - [`rolling`]: the prober run continuously, one stored run per window, detectors on each
//!   closed window, old windows deleted by age and size.
//! - [`runq`], [`sockets`]: run-queue tracing and the socket sampler, run continuously.
//! - [`runner`]: the whole agent as one value ([`runner::Agent`]): started from the
//!   configuration, ticked, stopped; every status line handed to the caller.

pub mod config;
pub mod exposition;
pub mod http;
pub mod mesh;
pub mod probing;
pub mod proto;
pub mod queue;
pub mod remote_write;
pub mod rolling;
pub mod runner;
pub mod runq;
pub mod sockets;

use std::sync::{Arc, Mutex, MutexGuard};

/// A status shared between the thread that runs a part of the agent and the one that exports
/// it; clones share it. A thread that panicked while holding it leaves the last status readable
/// (the exporter keeps serving what was measured).
#[derive(Debug, Default)]
pub struct Shared<T>(Arc<Mutex<T>>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T> Shared<T> {
    /// Locks the status.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}
