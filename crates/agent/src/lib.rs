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

pub mod config;
pub mod exposition;
pub mod http;
pub mod mesh;
pub mod probing;
pub mod proto;
pub mod queue;
pub mod remote_write;
pub mod rolling;
pub mod runq;
pub mod sockets;
