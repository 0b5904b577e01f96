//! CPU workloads for the run-queue cases, and what they record about themselves.
//!
//! In: a [`WorkSpec`] (kind, seconds, CPU, cgroup directories). The process starts a session
//! of its own, moves itself into the cgroups (before doing any work), pins itself to the CPU,
//! works, and returns a record
//! ([`run`]): its start and end (realtime clock, epoch ns), CPU time and run-queue wait from the
//! kernel's own `/proc/self/schedstat`, and for the sleeper, its lateness per second —
//! the victim's own view of what it suffered, independent of any tracer.
//!
//! - `hog`: spins.
//! - `half-hog`: 5 ms of work, 5 ms of sleep (a host that is busy, not saturated).
//! - `sleeper`: wakes every millisecond (absolute monotonic deadlines) and works 50 µs of CPU,
//!   like a latency-sensitive service; its lateness is how much later than deadline + 50 µs each
//!   round finished (waiting to wake up and being preempted mid-work both count).
//! - `worker`: 2 ms of work, 1 ms of sleep: two thirds of a CPU, enough to run out of a 10%
//!   quota.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::thread::{clock_nanosleep_absolute, sched_setaffinity, CpuSet};
use rustix::time::{clock_gettime, ClockId, Timespec};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{wall_ns, TruthError};

/// Which workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkKind {
    /// Spins.
    Hog,
    /// 5 ms on, 5 ms off.
    HalfHog,
    /// Wakes every millisecond, works 50 µs.
    Sleeper,
    /// 2 ms on, 1 ms off.
    Worker,
}

impl WorkKind {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WorkKind::Hog => "hog",
            WorkKind::HalfHog => "half-hog",
            WorkKind::Sleeper => "sleeper",
            WorkKind::Worker => "worker",
        }
    }

    /// From its name.
    pub fn from_name(s: &str) -> Option<WorkKind> {
        [
            WorkKind::Hog,
            WorkKind::HalfHog,
            WorkKind::Sleeper,
            WorkKind::Worker,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkSpec {
    /// Which workload.
    pub kind: WorkKind,
    /// For how long.
    pub seconds: f64,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
    /// Cgroup directories to join (cgroup2 and v1 cpu), before any work.
    pub cgroups: Vec<PathBuf>,
}

/// Runs the workload in this process and returns its record.
pub fn run(spec: &WorkSpec) -> Result<Value, TruthError> {
    let me = std::process::id();
    // A session of its own, as a host daemon has: with autogroup scheduling on (the default
    // of many distributions, and this machine's), workloads left in the root cgroup would
    // otherwise share their parent's autogroup and weigh as one task together, not as one
    // each. (Already a session leader: nothing to do.)
    let _ = rustix::process::setsid();
    for dir in &spec.cgroups {
        let procs = dir.join("cgroup.procs");
        std::fs::write(&procs, me.to_string()).map_err(|source| TruthError::Cgroup {
            path: procs,
            source,
        })?;
    }
    if let Some(cpu) = spec.cpu {
        let mut set = CpuSet::new();
        set.set(cpu);
        sched_setaffinity(None, &set)
            .map_err(|e| TruthError::Work(format!("cannot pin to CPU {cpu}: {e}")))?;
    }
    let (run0, wait0, _) = schedstat();
    let start = wall_ns();
    let until = Instant::now() + Duration::from_secs_f64(spec.seconds);
    let seconds = match spec.kind {
        WorkKind::Hog => {
            spin_until(until);
            Value::Null
        }
        WorkKind::HalfHog => {
            duty(until, Duration::from_millis(5), Duration::from_millis(5));
            Value::Null
        }
        WorkKind::Worker => {
            duty(until, Duration::from_millis(2), Duration::from_millis(1));
            Value::Null
        }
        WorkKind::Sleeper => sleeper(until),
    };
    let (run1, wait1, slices) = schedstat();
    Ok(json!({
        "kind": spec.kind.name(),
        "pid": me,
        "cpu": spec.cpu,
        "cgroups": spec.cgroups,
        "start_wall_ns": start,
        "end_wall_ns": wall_ns(),
        "cpu_ns": run1.saturating_sub(run0),
        "runq_wait_ns": wait1.saturating_sub(wait0),
        "timeslices": slices,
        "seconds": seconds,
    }))
}

fn spin_until(until: Instant) {
    let mut x = 0u64;
    while Instant::now() < until {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

fn duty(until: Instant, on: Duration, off: Duration) {
    while Instant::now() < until {
        spin_until((Instant::now() + on).min(until));
        std::thread::sleep(off);
    }
}

fn clock_ns(id: ClockId) -> i64 {
    let t = clock_gettime(id);
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// Spins until this thread has had `ns` of CPU: time spent runnable but waiting (preempted)
/// does not count, so it shows in the caller's completion time.
fn work_cpu_ns(ns: i64) {
    let end = clock_ns(ClockId::ThreadCPUTime) + ns;
    let mut x = 0u64;
    while clock_ns(ClockId::ThreadCPUTime) < end {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

/// The 1 kHz sleeper; returns its lateness per second of wall time: how much later than its
/// deadline plus its 50 µs of CPU each round finished, so a wait to wake up and a preemption in
/// the middle of the work both count.
fn sleeper(until: Instant) -> Value {
    const PERIOD_NS: i64 = 1_000_000;
    const WORK_NS: i64 = 50_000;
    let mut seconds = Vec::new();
    let mut late: Vec<i64> = Vec::with_capacity(1000);
    let mut second_start = wall_ns();
    let mut next = clock_ns(ClockId::Monotonic) + PERIOD_NS;
    while Instant::now() < until {
        let ts = Timespec {
            tv_sec: next / 1_000_000_000,
            tv_nsec: next % 1_000_000_000,
        };
        let _ = clock_nanosleep_absolute(ClockId::Monotonic, &ts);
        work_cpu_ns(WORK_NS);
        let done = clock_ns(ClockId::Monotonic);
        late.push((done - next - WORK_NS).max(0));
        // A round later than a period starts a fresh timetable instead of catching up.
        next = (next + PERIOD_NS).max(done + PERIOD_NS / 2);
        let now = wall_ns();
        if now - second_start >= 1_000_000_000 {
            seconds.push(second_summary(second_start, now, &mut late));
            second_start = now;
        }
    }
    Value::from(seconds)
}

fn second_summary(start: i64, end: i64, late: &mut Vec<i64>) -> Value {
    late.sort_unstable();
    let q = |p: f64| late.get(((late.len() as f64 * p) as usize).min(late.len().saturating_sub(1)));
    let v = json!({
        "start_wall_ns": start,
        "end_wall_ns": end,
        "wakeups": late.len(),
        "p50_late_ns": q(0.5),
        "p99_late_ns": q(0.99),
        "max_late_ns": late.last(),
    });
    late.clear();
    v
}

/// (time on CPU, time runnable waiting, timeslices) of this process from
/// `/proc/self/schedstat`; zeros when the kernel has no schedstats.
fn schedstat() -> (u64, u64, u64) {
    let text = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
    let mut f = text
        .split_whitespace()
        .map(|w| w.parse::<u64>().unwrap_or(0));
    (
        f.next().unwrap_or(0),
        f.next().unwrap_or(0),
        f.next().unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for k in [
            WorkKind::Hog,
            WorkKind::HalfHog,
            WorkKind::Sleeper,
            WorkKind::Worker,
        ] {
            assert_eq!(WorkKind::from_name(k.name()), Some(k));
        }
        assert_eq!(WorkKind::from_name("spin"), None);
    }

    #[test]
    fn a_short_sleeper_records_its_wakeups_and_cpu() {
        let r = run(&WorkSpec {
            kind: WorkKind::Sleeper,
            seconds: 1.3,
            cpu: None,
            cgroups: Vec::new(),
        })
        .unwrap();
        let s = r["seconds"].as_array().unwrap();
        assert_eq!(s.len(), 1, "{r}");
        let wakeups = s[0]["wakeups"].as_u64().unwrap();
        assert!((200..=1001).contains(&wakeups), "{r}");
        assert!(r["cpu_ns"].as_u64().unwrap() > 0, "{r}");
    }
}
