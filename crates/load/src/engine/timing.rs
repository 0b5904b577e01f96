//! How a worker keeps its timetable: when it polls instead of sleeping, and which CPU it runs on.
//!
//! In: the user's `--spin` and `--pin`, the number of workers and CPUs. Out: each worker's spin
//! window and CPU, and `wait_events`, the one place a worker waits. A worker's own lateness
//! comes from three places: the kernel's timer slack (tightened to 1 ns per thread, see
//! [`crate::clock::tighten_timer_slack`]), the wake-up after a sleep (on a VM often tens of
//! microseconds, and more when another task holds the CPU), and a reply that lands while the
//! worker sleeps (its wake-up then counts in the service time). Polling for the last `spin`
//! before a send is due takes the first out of the measurement; with an explicit `--spin`,
//! polling for `spin` after each send while its reply is expected takes the second out too, at
//! the price of that much CPU per request.

use std::time::Duration;

use rustix::event::epoll;
use rustix::fd::OwnedFd;

/// Spin window when the user gives none, each worker has a CPU of its own and others are left.
pub const AUTO_SPIN_NS: i64 = 50_000;

/// Longest spin window accepted: beyond this the client burns a CPU for nothing a sleep would
/// not do as well.
pub const MAX_SPIN: Duration = Duration::from_millis(10);

/// How the workers of a step keep time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timing {
    /// Poll instead of sleeping this long before each send is due, and when given, also after
    /// each send while its reply is expected ([`Timing::reply_spin`]). `None`: [`AUTO_SPIN_NS`]
    /// before sends when every worker has a CPU of its own and others are left, else 0.
    /// `Some(0)`: always sleep.
    pub spin: Option<Duration>,
    /// CPUs to pin worker threads to, worker `i` on `pin[i % len]` (empty: not pinned).
    pub pin: Vec<usize>,
}

impl Timing {
    /// The spin window of each of `workers` workers on a host with `cpus` usable CPUs, ns.
    pub fn spin_ns(&self, workers: usize, cpus: usize) -> i64 {
        // The CPUs the workers run on, and whether others are left: unpinned, two (the
        // scheduler may wake a server on the same host on a polling worker's CPU while the
        // other is busy with the kernel's network work); pinned, one (the user chose them).
        let (theirs, spare) = if self.pin.is_empty() {
            (cpus, workers + 2 <= cpus)
        } else {
            let mut distinct = self.pin.clone();
            distinct.sort_unstable();
            distinct.dedup();
            (distinct.len(), distinct.len() < cpus)
        };
        match self.spin {
            Some(d) => d.as_nanos().min(MAX_SPIN.as_nanos()) as i64,
            // Polling pays only when every worker has a CPU of its own and one more is left
            // for the kernel's network work and whatever answers on this host: workers that
            // share one (say `taskset -c 1 tailhunt load --threads 2`) would spend their turns
            // polling while the other waits to send, and on 2 CPUs one polling worker held the
            // CPU its server had been woken on (measured on a quiet 2-CPU host, 10k msg/s on
            // one connection: p99 from the intended send 0.9-12.8 ms polling, 77-97 us
            // sleeping).
            None if workers <= theirs && spare => AUTO_SPIN_NS,
            None => 0,
        }
    }

    /// Whether workers also poll after each send while its reply is expected: only when the
    /// user asked for a spin window. Polling for replies changes when the client reads and so
    /// when the kernel acknowledges, which can move a Nagle / delayed-ACK interaction the run is
    /// meant to show (the Nagle acceptance test stalls at 5k req/s with it), so the default
    /// polls only before sends.
    pub fn reply_spin(&self) -> bool {
        self.spin.is_some_and(|d| !d.is_zero())
    }

    /// Checks the flags before anything runs: the spin window within [`MAX_SPIN`], every CPU
    /// one this process may run on.
    pub fn check(&self) -> Result<(), String> {
        if self.spin.is_some_and(|d| d > MAX_SPIN) {
            return Err(format!(
                "--spin {:?} is above the limit of 10ms (polling longer only burns CPU; use a lower value or 0s to always sleep)",
                self.spin.unwrap_or_default()
            ));
        }
        if self.pin.is_empty() {
            return Ok(());
        }
        let allowed = rustix::thread::sched_getaffinity(None)
            .map_err(|e| format!("--pin: cannot read this process's CPUs: {e}"))?;
        for &cpu in &self.pin {
            if cpu >= rustix::thread::CpuSet::MAX_CPU || !allowed.is_set(cpu) {
                let list: Vec<String> = (0..rustix::thread::CpuSet::MAX_CPU)
                    .filter(|&c| allowed.is_set(c))
                    .map(|c| c.to_string())
                    .collect();
                return Err(format!(
                    "--pin {cpu}: this process may not run on CPU {cpu}; it may use {} (see taskset, cgroup cpusets)",
                    list.join(",")
                ));
            }
        }
        Ok(())
    }

    /// Pins the calling thread (worker `i`) to its CPU, if any was asked for.
    pub fn pin_worker(&self, i: usize) -> std::io::Result<()> {
        if self.pin.is_empty() {
            return Ok(());
        }
        let mut set = rustix::thread::CpuSet::new();
        set.set(self.pin[i % self.pin.len()]);
        rustix::thread::sched_setaffinity(None, &set)?;
        Ok(())
    }
}

/// Waits up to `wait_ns` for events (nanosecond precision: epoll_pwait2), polling instead when
/// `poll` says a reply is expected now, and sleeping only until `spin_ns` before the deadline
/// (the rest is polled on the next turns). A signal ends the wait early without an error.
pub(crate) fn wait_events(
    epoll: &OwnedFd,
    events: &mut Vec<epoll::Event>,
    wait_ns: i64,
    spin_ns: i64,
    poll: bool,
) -> rustix::io::Result<()> {
    let wait_ns = if poll || wait_ns <= spin_ns {
        0
    } else {
        wait_ns - spin_ns
    };
    let ts = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: wait_ns.clamp(0, 999_999_999),
    };
    events.clear();
    match epoll::wait(epoll, rustix::buffer::spare_capacity(events), Some(&ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_is_automatic_only_with_a_cpu_per_worker_and_bounded() {
        let auto = Timing::default();
        assert_eq!(auto.spin_ns(2, 4), AUTO_SPIN_NS);
        assert_eq!(auto.spin_ns(2, 3), 0);
        assert_eq!(auto.spin_ns(1, 2), 0, "no CPU left over: sleep");
        assert_eq!(auto.spin_ns(3, 2), 0);
        assert!(!auto.reply_spin());
        let off = Timing {
            spin: Some(Duration::ZERO),
            ..Timing::default()
        };
        assert_eq!(off.spin_ns(1, 2), 0);
        assert!(!off.reply_spin());
        let one_cpu = Timing {
            pin: vec![1, 1],
            ..Timing::default()
        };
        assert_eq!(one_cpu.spin_ns(2, 2), 0);
        let own_cpu = Timing {
            pin: vec![1],
            ..Timing::default()
        };
        assert_eq!(
            own_cpu.spin_ns(1, 2),
            AUTO_SPIN_NS,
            "pinned, with a CPU left"
        );
        assert_eq!(own_cpu.spin_ns(1, 1), 0, "pinned to the only CPU");
        let long = Timing {
            spin: Some(Duration::from_secs(1)),
            ..Timing::default()
        };
        assert!(long.check().unwrap_err().contains("--spin"));
        let bad_cpu = Timing {
            pin: vec![100_000],
            ..Timing::default()
        };
        assert!(bad_cpu.check().unwrap_err().contains("--pin 100000"));
    }

    #[test]
    fn a_worker_pins_to_a_cpu_it_may_use() {
        let allowed = rustix::thread::sched_getaffinity(None).unwrap();
        let cpu = (0..rustix::thread::CpuSet::MAX_CPU)
            .find(|&c| allowed.is_set(c))
            .unwrap();
        let t = Timing {
            pin: vec![cpu],
            ..Timing::default()
        };
        assert_eq!(t.check(), Ok(()));
        let on = std::thread::spawn(move || {
            t.pin_worker(0).unwrap();
            let set = rustix::thread::sched_getaffinity(None).unwrap();
            (set.count(), set.is_set(cpu))
        })
        .join()
        .unwrap();
        assert_eq!(on, (1, true));
    }
}
