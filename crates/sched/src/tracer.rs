//! The tracer's life: open -> configure -> load -> attach -> poll -> read -> destroy.

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, OpenObject, RingBufferBuilder};
use serde::Serialize;
use tailhunt_model::{ClockOrigin, SinkError};

use crate::bpf::{RunqSkel, RunqSkelBuilder};
use tailhunt_model::evidence::runq::{
    Attach, CgroupRef, Counters, Hierarchy, Mounts, ProgramCost, TimestampStore, TracerSetup,
};

use crate::cgroups::detect_mounts;
use crate::config::TracerConfig;
use crate::error::SchedError;
use crate::event::RunqEvent;
use crate::interval::Interval;
use crate::snapshot::{Maps, Reader};

/// How tracing ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceSummary {
    /// Set-up.
    pub started: TracerSetup,
    /// Intervals reported.
    pub intervals: usize,
    /// Stopped by the stop flag (Ctrl-C) rather than by the duration.
    pub interrupted: bool,
    /// Kernel-side counters over the whole run.
    pub counters: Counters,
    /// Each program's cost over the whole run.
    pub programs: Vec<ProgramCost>,
}

/// Receives what the tracer measures; the store's recorder implements it.
pub trait Observer {
    /// Called once the programs are attached.
    fn started(&mut self, started: &TracerSetup) -> Result<(), SinkError> {
        let _ = started;
        Ok(())
    }
    /// Called at the end of every interval (the last one may be shorter).
    fn interval(&mut self, interval: &Interval) -> Result<(), SinkError>;
}

/// Traces run-queue latency until `cfg.duration` has passed or `stop` is set, reporting every
/// `cfg.interval` to `observer`.
pub fn trace(
    cfg: &TracerConfig,
    stop: &AtomicBool,
    observer: &mut dyn Observer,
) -> Result<TraceSummary, SchedError> {
    cfg.validate()?;
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(SchedError::NoBtf);
    }
    if let Some(why) = tailhunt_bpf::bpf_denied() {
        return Err(SchedError::NotPermitted(why));
    }
    let mounts = detect_mounts();
    let Some(root) = mounts.root(cfg.hierarchy) else {
        return Err(SchedError::Config(format!(
            "no {:?} cgroup hierarchy is mounted here (found: {}): choose the other with --hierarchy",
            cfg.hierarchy,
            mounts.describe()
        )));
    };
    let filter_roots = cfg
        .cgroups
        .iter()
        .map(|p| filter_root(p, root, &mounts))
        .collect::<Result<Vec<_>, _>>()?;

    let mut first = MaybeUninit::uninit();
    let mut second = MaybeUninit::uninit();
    let filtered = !filter_roots.is_empty();
    let v1_cpu = mounts.v1_cpu.is_some();
    let (skel, attach, store, fallback_reason) = match cfg.attach {
        Attach::Auto => match load(&mut first, cfg, Attach::TpBtf, filtered, v1_cpu) {
            Ok((s, st)) => (s, Attach::TpBtf, st, None),
            Err(e) => {
                let (s, st) = load(&mut second, cfg, Attach::RawTp, filtered, v1_cpu)?;
                (s, Attach::RawTp, st, Some(e.to_string()))
            }
        },
        a => {
            let (s, st) = load(&mut first, cfg, a, filtered, v1_cpu)?;
            (s, a, st, None)
        }
    };
    run(
        cfg,
        stop,
        observer,
        &skel,
        Setup {
            attach,
            store,
            fallback_reason,
            mounts,
            filter_roots,
        },
    )
}

struct Setup {
    attach: Attach,
    store: TimestampStore,
    fallback_reason: Option<String>,
    mounts: Mounts,
    filter_roots: Vec<PathBuf>,
}

/// A `--cgroup` path as a directory of the charged hierarchy (a path in the other hierarchy
/// is taken to mean the cgroup with the same relative path).
fn filter_root(p: &Path, root: &Path, mounts: &Mounts) -> Result<PathBuf, SchedError> {
    let refuse = |reason: &str| SchedError::NotACgroup {
        path: p.to_path_buf(),
        reason: reason.to_string(),
        roots: mounts.describe(),
    };
    let canon = p.canonicalize().map_err(|e| refuse(&e.to_string()))?;
    if !canon.join("cgroup.procs").exists() {
        return Err(refuse("it has no cgroup.procs"));
    }
    if canon.starts_with(root) {
        return Ok(canon);
    }
    for other in [mounts.v2.as_deref(), mounts.v1_cpu.as_deref()]
        .into_iter()
        .flatten()
    {
        if let Ok(rel) = canon.strip_prefix(other) {
            let same = root.join(rel);
            if same.join("cgroup.procs").exists() {
                return Ok(same);
            }
            return Err(refuse(&format!(
                "waits are charged to {} and it has no cgroup {}",
                root.display(),
                rel.display()
            )));
        }
    }
    Err(refuse("it is not under a cgroup mount"))
}

fn pid_max() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304)
}

/// Opens, configures and loads the object with one kind of program.
fn load<'o>(
    obj: &'o mut MaybeUninit<OpenObject>,
    cfg: &TracerConfig,
    attach: Attach,
    filtered: bool,
    v1_cpu_mounted: bool,
) -> Result<(RunqSkel<'o>, TimestampStore), SchedError> {
    let store = cfg.store.unwrap_or(TimestampStore::Array);
    if store == TimestampStore::TaskStorage && attach == Attach::RawTp {
        return Err(SchedError::Config(
            "task storage needs tp_btf programs (raw_tp task pointers are untrusted): use --store array or hash".into(),
        ));
    }
    let mut open = RunqSkelBuilder::default()
        .open(obj)
        .map_err(|e| SchedError::bpf("open", e))?;
    let ro =
        open.maps.rodata_data.as_deref_mut().ok_or_else(|| {
            SchedError::Config("the BPF object has no read-only data section".into())
        })?;
    ro.targ_store = crate::config::store_code(store);
    ro.targ_hierarchy = u32::from(cfg.hierarchy == Hierarchy::V1Cpu);
    ro.targ_v1_cpu = cfg.hierarchy == Hierarchy::V2 && v1_cpu_mounted;
    ro.targ_skip_kthreads = !cfg.kernel_threads;
    ro.targ_filter = filtered;
    ro.targ_all_events = cfg.all_events;
    ro.targ_outlier_ns = cfg.outlier_ns;
    ro.targ_budget_gap_ns = cfg.outlier_gap_ns.max(1);
    ro.targ_budget_burst = cfg.outlier_burst;
    let pids = pid_max();
    let m = &mut open.maps;
    let sized = |want: bool, n: u32| if want { n } else { 1 };
    let res = [
        m.start_array
            .set_max_entries(sized(store == TimestampStore::Array, pids)),
        m.start_hash
            .set_max_entries(sized(store == TimestampStore::Hash, pids.min(1 << 20))),
        m.hists.set_max_entries(cfg.max_cgroups.max(1)),
        m.budgets.set_max_entries(cfg.max_cgroups.max(1)),
        // Every wait at ~2 µs of ring-buffer cost needs room for a burst of them.
        m.events
            .set_max_entries(if cfg.all_events { 64 << 20 } else { 4 << 20 }),
    ];
    for r in res {
        r.map_err(|e| SchedError::bpf("configure", e))?;
    }
    let btf = attach != Attach::RawTp;
    let p = &mut open.progs;
    for prog in [
        &mut p.runq_wakeup,
        &mut p.runq_wakeup_new,
        &mut p.runq_switch,
    ] {
        prog.set_autoload(btf);
    }
    for prog in [
        &mut p.runq_wakeup_raw,
        &mut p.runq_wakeup_new_raw,
        &mut p.runq_switch_raw,
    ] {
        prog.set_autoload(!btf);
    }
    let skel = open.load().map_err(|e| SchedError::bpf("load", e))?;
    Ok((skel, store))
}

/// The chosen set of programs: tp_btf or raw_tp.
fn chosen<'a, 'o>(skel: &'a RunqSkel<'o>, attach: Attach) -> [&'a libbpf_rs::ProgramMut<'o>; 3] {
    let p = &skel.progs;
    if attach == Attach::RawTp {
        [
            &p.runq_wakeup_raw,
            &p.runq_wakeup_new_raw,
            &p.runq_switch_raw,
        ]
    } else {
        [&p.runq_wakeup, &p.runq_wakeup_new, &p.runq_switch]
    }
}

/// Events from the ring buffer land in the shared vector.
type Received = Rc<RefCell<Vec<RunqEvent>>>;

fn ring_buffer<'a>(
    skel: &'a RunqSkel<'_>,
    received: &Received,
) -> Result<libbpf_rs::RingBuffer<'a>, SchedError> {
    let into = Rc::clone(received);
    let mut rb = RingBufferBuilder::new();
    rb.add(&skel.maps.events, move |data: &[u8]| {
        if let Some(e) = RunqEvent::parse(data) {
            into.borrow_mut().push(e);
        }
        0
    })
    .map_err(|e| SchedError::bpf("set up the ring buffer of", e))?;
    rb.build()
        .map_err(|e| SchedError::bpf("set up the ring buffer of", e))
}

/// Attaches, polls, reads every interval, and detaches (links drop) at the end.
fn run(
    cfg: &TracerConfig,
    stop: &AtomicBool,
    observer: &mut dyn Observer,
    skel: &RunqSkel<'_>,
    setup: Setup,
) -> Result<TraceSummary, SchedError> {
    let programs = chosen(skel, setup.attach);
    let mut ids = Vec::new();
    for p in programs {
        let id =
            libbpf_rs::Program::id_from_fd(p.as_fd()).map_err(|e| SchedError::bpf("inspect", e))?;
        ids.push((id, p.name().to_string_lossy().into_owned()));
    }
    let stats = tailhunt_bpf::enable_run_time_stats().ok();
    let received = Received::default();
    let ring = ring_buffer(skel, &received)?;
    let maps = Maps {
        hists: &skel.maps.hists,
        pairs: &skel.maps.pairs,
        counters: &skel.maps.counters,
        budgets: &skel.maps.budgets,
        filter: &skel.maps.cgroup_filter,
        timelines: &skel.maps.timelines,
    };
    let mut reader = Reader::new(&setup.mounts, cfg.hierarchy, setup.filter_roots);
    reader.update_filter(&maps)?;
    let filter = filter_refs(&mut reader, &maps)?;

    let mut links: Vec<Link> = Vec::new();
    for p in programs {
        links.push(p.attach().map_err(|e| SchedError::bpf("attach", e))?);
    }
    let started = TracerSetup {
        attach: setup.attach,
        fallback_reason: setup.fallback_reason,
        store: setup.store,
        hierarchy: cfg.hierarchy,
        mounts: setup.mounts,
        filter,
        program_stats: stats.is_some(),
        origin: ClockOrigin::now(),
    };
    observer.started(&started)?;
    let mut session = Session {
        cfg,
        ring: &ring,
        received: &received,
        maps: &maps,
        reader: &mut reader,
        costs: ProgramCosts::new(ids, stats.is_some()),
    };
    let (intervals, interrupted, counters) =
        session.intervals(stop, observer, &mut links, started.origin.mono_ns)?;
    let programs = session.costs.totals();
    drop(stats);
    Ok(TraceSummary {
        started,
        intervals,
        interrupted,
        counters,
        programs,
    })
}

/// What the interval loop reads from.
struct Session<'s, 'r> {
    cfg: &'s TracerConfig,
    ring: &'s libbpf_rs::RingBuffer<'r>,
    received: &'s Received,
    maps: &'s Maps<'s, 's>,
    reader: &'s mut Reader,
    costs: ProgramCosts,
}

impl Session<'_, '_> {
    /// Polls and reports every interval until the duration ends or `stop` is set. Returns the
    /// number of intervals, whether `stop` ended it, and the counters' totals.
    fn intervals(
        &mut self,
        stop: &AtomicBool,
        observer: &mut dyn Observer,
        links: &mut Vec<Link>,
        mut start_ns: i64,
    ) -> Result<(usize, bool, Counters), SchedError> {
        let begin = Instant::now();
        let end = self.cfg.duration.map(|d| begin + d);
        let mut n = 0;
        let mut totals = Counters::default();
        loop {
            let due = begin + self.cfg.interval * (n as u32 + 1);
            let until = end.map_or(due, |e| e.min(due));
            while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                let left = until.saturating_duration_since(Instant::now());
                // EINTR (a signal such as Ctrl-C) just ends this wait early.
                let _ = self.ring.poll(left.min(Duration::from_millis(100)));
            }
            let stopped = stop.load(Ordering::SeqCst);
            let last = stopped || end.is_some_and(|e| Instant::now() >= e);
            if last {
                // Detach first: the final reading then holds every wait the programs saw.
                links.clear();
            }
            let interval = self.read(start_ns)?;
            totals = totals + interval.counters;
            observer.interval(&interval)?;
            n += 1;
            start_ns = interval.end_ns;
            if last {
                return Ok((n, stopped, totals));
            }
        }
    }

    /// Drains the ring buffer and reads the maps: the interval since `start_ns`.
    fn read(&mut self, start_ns: i64) -> Result<Interval, SchedError> {
        let _ = self.ring.consume();
        if !self.cfg.cgroups.is_empty() {
            self.reader.update_filter(self.maps)?;
        }
        let (cgroups, counters) = self.reader.read(self.maps)?;
        let end_ns = ClockOrigin::now().mono_ns;
        let events = self
            .received
            .borrow_mut()
            .drain(..)
            .map(|e| self.reader.name_event(e))
            .collect();
        Ok(Interval {
            start_ns,
            end_ns,
            cgroups,
            events,
            counters,
            programs: self.costs.read_delta(),
        })
    }
}

fn filter_refs(reader: &mut Reader, maps: &Maps) -> Result<Vec<CgroupRef>, SchedError> {
    let mut out = Vec::new();
    for key in maps.filter.keys() {
        let id = u64::from_ne_bytes(
            key.get(..8)
                .and_then(|k| k.try_into().ok())
                .unwrap_or_default(),
        );
        out.push(reader.cgroup(id));
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The kernel's statistics of our programs, cumulative, and deltas between readings.
struct ProgramCosts {
    ids: Vec<(u32, String)>,
    enabled: bool,
    last: Vec<ProgramCost>,
}

impl ProgramCosts {
    fn new(ids: Vec<(u32, String)>, enabled: bool) -> ProgramCosts {
        let last = ids
            .iter()
            .map(|(_, name)| ProgramCost {
                name: name.clone(),
                run_cnt: 0,
                run_time_ns: 0,
            })
            .collect();
        ProgramCosts { ids, enabled, last }
    }

    fn read(&self) -> Vec<ProgramCost> {
        let mut out = self.last.clone();
        if !self.enabled {
            return out;
        }
        let ids: Vec<u32> = self.ids.iter().map(|(id, _)| *id).collect();
        for (cost, (runs, ns)) in out.iter_mut().zip(tailhunt_bpf::program_stats(&ids)) {
            cost.run_cnt = runs;
            cost.run_time_ns = ns;
        }
        out
    }

    fn read_delta(&mut self) -> Vec<ProgramCost> {
        if !self.enabled {
            return Vec::new();
        }
        let now = self.read();
        let delta = now
            .iter()
            .zip(&self.last)
            .map(|(n, l)| ProgramCost {
                name: n.name.clone(),
                run_cnt: n.run_cnt.saturating_sub(l.run_cnt),
                run_time_ns: n.run_time_ns.saturating_sub(l.run_time_ns),
            })
            .collect();
        self.last = now;
        delta
    }

    fn totals(&self) -> Vec<ProgramCost> {
        if self.enabled {
            self.last.clone()
        } else {
            Vec::new()
        }
    }
}
