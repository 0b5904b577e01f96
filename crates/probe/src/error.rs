//! The prober's errors: a configuration it cannot use, a probe that cannot start, a sink that
//! refused samples.

use thiserror::Error;

/// Why probing could not start or go on.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// The configuration (file or quick-form URLs) is wrong; the message names the key and
    /// the fix.
    #[error("{0}")]
    Config(String),
    /// A probe could not start (a device that refuses O_DIRECT, no ICMP socket).
    #[error("{0}")]
    Start(String),
    /// The store refused what was measured.
    #[error("storing the samples: {0}")]
    Sink(String),
}
