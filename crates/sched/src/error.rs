//! What can go wrong while tracing, phrased so the user knows what to do.

use std::path::PathBuf;

/// Errors of the run-queue tracer.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    /// The kernel refused to load or attach the programs for lack of privilege.
    #[error("not permitted to load BPF programs ({0}): run as root or grant CAP_BPF and CAP_PERFMON (or use --degraded for /proc/PID/schedstat)")]
    NotPermitted(String),
    /// No kernel BTF: the CO-RE programs cannot be relocated.
    #[error("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): it needs CONFIG_DEBUG_INFO_BTF=y; use --degraded for /proc/PID/schedstat")]
    NoBtf,
    /// Loading or attaching failed for another reason.
    #[error("cannot {what} the run-queue programs: {source}")]
    Bpf {
        /// The step that failed (`open`, `load`, `attach`, `read`).
        what: &'static str,
        /// libbpf's error.
        #[source]
        source: libbpf_rs::Error,
    },
    /// A `--cgroup` path that is not a cgroup.
    #[error("'{path}' is not a cgroup directory ({reason}): give a directory under {roots}, e.g. /sys/fs/cgroup/unified/system.slice")]
    NotACgroup {
        /// The path as given.
        path: PathBuf,
        /// Why it was refused.
        reason: String,
        /// The cgroup mounts found.
        roots: String,
    },
    /// The configuration does not make sense.
    #[error("{0}")]
    Config(String),
    /// Reading `/proc` or a cgroup file failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The observer (normally the store) refused an interval.
    #[error("cannot record the interval: {0}")]
    Sink(#[from] tailhunt_model::SinkError),
}

impl SchedError {
    /// A libbpf error at step `what`. (A verifier rejection is EACCES too, so privilege is
    /// checked before loading, by [`crate::privileges`], not guessed from the error kind.)
    pub(crate) fn bpf(what: &'static str, source: libbpf_rs::Error) -> SchedError {
        SchedError::Bpf { what, source }
    }
}
