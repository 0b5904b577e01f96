//! Run-queue latency per cgroup, traced in the kernel with eBPF, with who took the CPU.
//!
//! # Brief overview
//!
//! A task's run-queue latency is the time from becoming runnable (woken, or preempted while
//! still runnable) to getting a CPU. The BPF programs in `src/bpf/runq.bpf.c` hook the
//! `sched_wakeup`, `sched_wakeup_new` and `sched_switch` tracepoints (`tp_btf`, or `raw_tp` as a
//! fallback) and keep, in kernel maps:
//!
//! - per cgroup, a histogram of those latencies with the bucket layout of `crates/histogram`
//!   at 4 sub-bucket bits (buckets at most 6.25% wide;
//!   [`kernel_layout`](tailhunt_model::evidence::runq::kernel_layout));
//! - per (victim cgroup, other cgroup), the involuntary switches of the victim's tasks in favour
//!   of the other's (preemptions), and how long the other ran on the victim's CPU while the
//!   victim's tasks waited (each wait split among everyone who ran during it, from each CPU's
//!   recent history of which cgroup ran when);
//! - rate-limited outlier events through a ring buffer (every wait with
//!   [`TracerConfig::all_events`]), with the task and the one it waited behind.
//!
//! [`trace`] loads and attaches the programs, reads the maps every interval and hands an
//! [`Interval`] per interval to an [`Observer`]: per cgroup its histogram, its attributions,
//! its CPU-quota throttling (`cpu.stat`) and CPU pressure (`cpu.pressure`). The kernel's own
//! statistics give each program's cost per run. [`record::Recorder`] writes intervals into a
//! store as series. Without BPF, [`schedstat`] gives a degraded view from
//! `/proc/<pid>/schedstat` (mean waits only).
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//! use tailhunt_sched::{trace, Interval, Observer, TracerConfig};
//!
//! struct Print;
//! impl Observer for Print {
//!     fn interval(&mut self, iv: &Interval) -> Result<(), tailhunt_model::SinkError> {
//!         for cg in &iv.cgroups {
//!             println!("{}: p99 {:?} ns", cg.cgroup.name, cg.latency.quantile(0.99));
//!         }
//!         Ok(())
//!     }
//! }
//! let cfg = TracerConfig { duration: Some(Duration::from_secs(3)), ..TracerConfig::default() };
//! let summary = trace(&cfg, &AtomicBool::new(false), &mut Print)?;
//! println!("{} intervals", summary.intervals);
//! # Ok::<(), tailhunt_sched::SchedError>(())
//! ```
#![deny(missing_docs)]

mod bpf;
pub mod cgroups;
pub mod config;
pub mod cpu_stat;
mod error;
pub mod event;
pub mod interval;
pub mod record;
pub mod schedstat;
mod snapshot;
mod tracer;

pub use config::TracerConfig;
pub use error::SchedError;
pub use interval::Interval;
pub use tailhunt_bpf::{bpf_denied, tracing_unavailable};
pub use tracer::{trace, Observer, TraceSummary};
