//! The run-queue tracer and the socket sampler: each off (with why) or running in a thread.
//!
//! In: the configuration and the agent's stop flag. Out: their shared states (read into every
//! snapshot with [`Parts::fill`]), a description for the banner, the lines to tell when a
//! part's state changes, and the run-queue summary when they stop.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::{scalar, show, AgentError};
use crate::config::AgentConfig;
use crate::exposition::Snapshot;
use crate::runq::{self, RunqState};
use crate::sockets::{self, SocketState};

/// The two parts.
pub(super) struct Parts {
    runq: RunqState,
    sockets: SocketState,
    threads: Vec<std::thread::JoinHandle<()>>,
    described: String,
}

impl Parts {
    /// Starts the parts the configuration and the host allow.
    pub(super) fn start(cfg: &AgentConfig, stop: &Arc<AtomicBool>) -> Result<Parts, AgentError> {
        let mut parts = Parts {
            runq: RunqState::default(),
            sockets: SocketState::default(),
            threads: Vec::new(),
            described: String::new(),
        };
        let why_not = if !cfg.runq.enabled {
            Some("[runq] enabled = false".to_string())
        } else {
            tailhunt_sched::tracing_unavailable()
        };
        let runq_text = match why_not {
            Some(why) => {
                parts.runq.lock().off_reason = Some(why.clone());
                format!("run-queue tracing off: {why}")
            }
            None => {
                let (settings, retention, state, stop) = (
                    cfg.runq.clone(),
                    cfg.retention.clone(),
                    parts.runq.clone(),
                    Arc::clone(stop),
                );
                parts.spawn("runq", move || {
                    // A failure to start is in the state's off_reason, told by `changes`.
                    let _ = runq::run(&runq::Tracing {
                        settings: &settings,
                        retention: Some(&retention),
                        state: &state,
                        stop: &stop,
                    });
                })?;
                format!(
                    "run-queue tracing every {}{}",
                    show(cfg.runq.interval),
                    if cfg.runq.store_windows {
                        " (a runq run per window)"
                    } else {
                        ""
                    }
                )
            }
        };
        let sockets_text = if cfg.sockets.enabled {
            let (settings, state, stop) =
                (cfg.sockets.clone(), parts.sockets.clone(), Arc::clone(stop));
            parts.spawn("sockets", move || sockets::run(&settings, &state, &stop))?;
            format!("TCP sockets sampled every {}", show(cfg.sockets.interval))
        } else {
            parts.sockets.lock().off_reason = Some("[sockets] enabled = false".into());
            "socket sampler off: [sockets] enabled = false".to_string()
        };
        parts.described = format!("{runq_text}; {sockets_text}");
        Ok(parts)
    }

    fn spawn(
        &mut self,
        what: &'static str,
        f: impl FnOnce() + Send + 'static,
    ) -> Result<(), AgentError> {
        let handle = std::thread::Builder::new()
            .name(what.into())
            .spawn(f)
            .map_err(|source| AgentError::Thread { what, source })?;
        self.threads.push(handle);
        Ok(())
    }

    /// What runs and what does not, for the banner.
    pub(super) fn describe(&self) -> &str {
        &self.described
    }

    /// Adds both parts' metrics, findings and which parts run.
    pub(super) fn fill(&self, snap: &mut Snapshot, probing: bool) {
        let r = self.runq.lock();
        r.fill(snap);
        snap.findings.extend(r.findings.iter().cloned());
        let s = self.sockets.lock();
        s.fill(snap);
        for (part, on) in [
            ("probes", probing),
            ("runq", r.running),
            ("sockets", s.running),
        ] {
            let mut g = scalar(
                "tailhunt_agent_part_running",
                "1 while the part runs (probes, runq, sockets); a part that cannot run is switched off and the agent says why.",
                f64::from(u8::from(on)),
            );
            g.labels = vec![("part".into(), part.into())];
            snap.gauges.push(g);
        }
    }

    /// The lines to tell: a part's reason to be off, or its window error, each when it
    /// changes from what `told` holds (which is updated).
    pub(super) fn changes(&self, told: &mut [Option<String>; 3]) -> Vec<String> {
        // One lock at a time: a guard held over the array's end would deadlock the next.
        let (runq_off, runq_error) = {
            let r = self.runq.lock();
            (r.off_reason.clone(), r.last_error.clone())
        };
        let sockets_off = {
            let s = self.sockets.lock();
            s.off_reason.clone().or_else(|| s.last_error.clone())
        };
        let now = [
            runq_off
                .filter(|r| r != "stopped")
                .map(|r| format!("run-queue tracing off: {r}")),
            runq_error.map(|e| format!("run-queue window: {e}")),
            sockets_off
                .filter(|r| r != "stopped")
                .map(|r| format!("socket sampler: {r}")),
        ];
        let mut lines = Vec::new();
        for (n, t) in now.into_iter().zip(told.iter_mut()) {
            if let Some(line) = n.as_ref().filter(|n| Some(*n) != t.as_ref()) {
                lines.push(line.clone());
            }
            *t = n;
        }
        lines
    }

    /// Waits for both threads (the stop flag is set) and gives the run-queue summary line.
    pub(super) fn join(&mut self) -> Vec<String> {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let r = self.runq.lock();
        if r.intervals == 0 {
            return Vec::new();
        }
        vec![format!(
            "run-queue intervals {}, {} window(s) stored, {} failed; {} cgroup label(s), {} cgroup interval(s) folded into \"other\"",
            r.intervals,
            r.windows,
            r.failed_windows,
            r.exported_cgroups(),
            r.folded
        )]
    }
}
