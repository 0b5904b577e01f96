//! What produced a run: the one place that knows the run kinds and their names in the store.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The command (source) that recorded a run. Stored by [`RunKind::name`]; a store written by a
/// newer tailhunt may hold kinds this build does not know, which read back as
/// [`RunKind::Other`] and are listed, analysed and exported like any run (only the detectors
/// that need a known kind's evidence skip them).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunKind {
    /// `tailhunt import`: latencies from a file.
    Import,
    /// `tailhunt load`: an open-loop run or a rate sweep.
    Load,
    /// `tailhunt pcap`: capture files analysed.
    Pcap,
    /// `tailhunt capture`: a live capture analysed on the fly.
    Capture,
    /// `tailhunt runq`: run-queue latency per cgroup.
    Runq,
    /// `tailhunt transfer client|server`: one end of a bulk transfer.
    Transfer,
    /// `tailhunt sockets`: inet_diag sampling of every socket.
    Sockets,
    /// `tailhunt probe`: rounds of probes on a fixed cadence. Its series are
    /// `probe_latency{probe,kind,variant,...}` samples (intended = the probe's scheduled time,
    /// a timeout censored at the timeout with outcome `timeout`); the round of a sample is
    /// `(intended_ns - origin.mono_ns) / interval_ns` with `interval_ns` in the run's params.
    Probe,
    /// A kind this build does not know (written by another version), or a benchmark's own.
    Other(String),
}

impl RunKind {
    /// Every kind this build records, in the order `tailhunt runs --help` lists them.
    pub const KNOWN: [RunKind; 8] = [
        RunKind::Import,
        RunKind::Load,
        RunKind::Pcap,
        RunKind::Capture,
        RunKind::Runq,
        RunKind::Transfer,
        RunKind::Sockets,
        RunKind::Probe,
    ];

    /// The name in the store and in JSON (`load`).
    pub fn name(&self) -> &str {
        match self {
            RunKind::Import => "import",
            RunKind::Load => "load",
            RunKind::Pcap => "pcap",
            RunKind::Capture => "capture",
            RunKind::Runq => "runq",
            RunKind::Transfer => "transfer",
            RunKind::Sockets => "sockets",
            RunKind::Probe => "probe",
            RunKind::Other(name) => name,
        }
    }

    /// The kind stored under `name` (unknown names are kept as [`RunKind::Other`]).
    pub fn from_name(name: &str) -> RunKind {
        RunKind::KNOWN
            .into_iter()
            .find(|k| k.name() == name)
            .unwrap_or_else(|| RunKind::Other(name.to_string()))
    }

    /// Whether the run holds a capture analysis (files or live).
    pub fn is_capture(&self) -> bool {
        matches!(self, RunKind::Pcap | RunKind::Capture)
    }
}

impl fmt::Display for RunKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for RunKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for RunKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(RunKind::from_name(&String::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_kinds_are_kept() {
        for k in RunKind::KNOWN {
            assert_eq!(RunKind::from_name(k.name()), k);
        }
        let other = RunKind::from_name("probe-v9");
        assert_eq!(other, RunKind::Other("probe-v9".into()));
        assert_eq!(other.name(), "probe-v9");
        let json = serde_json::to_string(&RunKind::Runq).unwrap();
        assert_eq!(json, "\"runq\"");
        assert_eq!(
            serde_json::from_str::<RunKind>("\"capture\"").unwrap(),
            RunKind::Capture
        );
    }
}
