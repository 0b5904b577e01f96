//! The degraded mode, for hosts where BPF is not available: `/proc/<pid>/task/<tid>/schedstat`.
//!
//! Each thread's schedstat holds three cumulative numbers: time on the CPU (ns), time spent
//! runnable on a run queue (ns), and the number of timeslices it ran. Differences between two
//! readings, summed per cgroup (from `/proc/<pid>/cgroup`), give the total run-queue wait and
//! the mean wait per timeslice — but no distribution: no percentiles, no outliers, no
//! attribution. Threads that start and end between two readings are missed.

use std::collections::HashMap;
use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tailhunt_model::evidence::runq::{DegradedCgroup, DegradedInterval, Hierarchy};
use tailhunt_model::{ClockOrigin, SinkError};

use crate::cgroups::{cgroup_at, detect_mounts};
use crate::error::SchedError;

/// Parses a schedstat line: (on-CPU ns, run-queue wait ns, timeslices).
pub fn parse_schedstat(text: &str) -> Option<(u64, u64, u64)> {
    let mut it = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((it.next()??, it.next()??, it.next()??))
}

/// The cgroup path of a process in `hierarchy`, from `/proc/<pid>/cgroup` text.
pub fn cgroup_path(text: &str, hierarchy: Hierarchy) -> Option<String> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let hit = match hierarchy {
            Hierarchy::V2 => controllers.is_empty(),
            Hierarchy::V1Cpu => controllers.split(',').any(|c| c == "cpu"),
        };
        hit.then(|| path.to_string())
    })
}

/// Reads every thread's schedstat and keeps the previous reading.
pub struct Sampler {
    hierarchy: Hierarchy,
    root: Option<std::path::PathBuf>,
    last: HashMap<u32, (u64, u64)>,
}

impl Sampler {
    /// A sampler charging waits to cgroups of `hierarchy`.
    pub fn new(hierarchy: Hierarchy) -> Sampler {
        Sampler {
            hierarchy,
            root: detect_mounts().root(hierarchy).map(|p| p.to_path_buf()),
            last: HashMap::new(),
        }
    }

    /// Waits per cgroup since the previous call (the first call returns what the threads
    /// accumulated since they started).
    pub fn sample(&mut self) -> Result<Vec<DegradedCgroup>, SchedError> {
        let proc = fs::read_dir("/proc").map_err(|source| SchedError::Io {
            path: "/proc".into(),
            source,
        })?;
        let mut now: HashMap<u32, (u64, u64)> = HashMap::new();
        let mut per: HashMap<String, DegradedCgroup> = HashMap::new();
        for entry in proc.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            // A process can exit at any point here: every read failure just skips it.
            let Ok(cg) = fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
                continue;
            };
            let path = cgroup_path(&cg, self.hierarchy).unwrap_or_else(|| "/".into());
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                let Some((_, wait, slices)) = fs::read_to_string(t.path().join("schedstat"))
                    .ok()
                    .and_then(|s| parse_schedstat(&s))
                else {
                    continue;
                };
                now.insert(tid, (wait, slices));
                let (w0, s0) = self.last.get(&tid).copied().unwrap_or((0, 0));
                let (dw, ds) = (wait.saturating_sub(w0), slices.saturating_sub(s0));
                if dw == 0 && ds == 0 {
                    continue;
                }
                let root = self.root.clone();
                let e = per.entry(path.clone()).or_insert_with(|| {
                    let id = root
                        .as_ref()
                        .and_then(|r| {
                            crate::cgroups::id_of(&r.join(path.trim_start_matches('/'))).ok()
                        })
                        .unwrap_or(0);
                    DegradedCgroup {
                        cgroup: cgroup_at(id, &path),
                        wait_ns: 0,
                        timeslices: 0,
                        threads: 0,
                    }
                });
                e.wait_ns += dw;
                e.timeslices += ds;
                e.threads += 1;
            }
        }
        self.last = now;
        let mut out: Vec<DegradedCgroup> = per.into_values().collect();
        out.sort_by_key(|c| std::cmp::Reverse(c.wait_ns));
        Ok(out)
    }
}

/// Samples every `interval` until `duration` or `stop`, handing each interval to `each`.
/// Returns the number of intervals and whether `stop` ended it.
pub fn trace(
    hierarchy: Hierarchy,
    interval: Duration,
    duration: Option<Duration>,
    stop: &AtomicBool,
    mut each: impl FnMut(&DegradedInterval) -> Result<(), SinkError>,
) -> Result<(usize, bool), SchedError> {
    let mut sampler = Sampler::new(hierarchy);
    sampler.sample()?; // the baseline: waits from before the run are not its own
    let begin = Instant::now();
    let mut start_ns = ClockOrigin::now().mono_ns;
    let mut n = 0usize;
    loop {
        let due = begin + interval * (n as u32 + 1);
        let until = duration.map_or(due, |d| due.min(begin + d));
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(
                until
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50)),
            );
        }
        let stopped = stop.load(Ordering::SeqCst);
        let end_ns = ClockOrigin::now().mono_ns;
        let iv = DegradedInterval {
            start_ns,
            end_ns,
            cgroups: sampler.sample()?,
        };
        each(&iv)?;
        n += 1;
        start_ns = end_ns;
        if stopped || duration.is_some_and(|d| begin.elapsed() >= d) {
            return Ok((n, stopped));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_and_cgroup_lines() {
        assert_eq!(parse_schedstat("123 456 7\n"), Some((123, 456, 7)));
        assert_eq!(parse_schedstat("123 x 7"), None);
        let cg = "12:pids:/x\n4:cpu:/victim\n1:name=systemd:/\n0::/tailhunt/victim\n";
        assert_eq!(
            cgroup_path(cg, Hierarchy::V2).as_deref(),
            Some("/tailhunt/victim")
        );
        assert_eq!(
            cgroup_path(cg, Hierarchy::V1Cpu).as_deref(),
            Some("/victim")
        );
        let joint = "3:cpu,cpuacct:/docker/abc\n";
        assert_eq!(
            cgroup_path(joint, Hierarchy::V1Cpu).as_deref(),
            Some("/docker/abc")
        );
    }

    #[test]
    fn this_process_waits_are_found() {
        let mut s = Sampler::new(Hierarchy::V2);
        s.sample().unwrap();
        // Burn a little CPU so this thread runs timeslices.
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        std::thread::sleep(Duration::from_millis(5));
        let cgs = s.sample().unwrap();
        assert!(cgs.iter().map(|c| c.timeslices).sum::<u64>() > 0);
    }
}
