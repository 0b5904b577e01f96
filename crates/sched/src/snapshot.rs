//! Reading the kernel's maps into intervals: cumulative counts in, per-interval deltas out.
//!
//! The kernel never resets its maps (a reset would race with the programs); each interval is the
//! difference between two readings. Cgroups that no longer exist are read one last time and
//! then deleted from the maps, so short-lived cgroups do not fill them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use libbpf_rs::{MapCore, MapFlags, MapMut};
use tailhunt_histogram::Histogram;
use tailhunt_model::ClockOrigin;

use tailhunt_model::evidence::runq::{
    kernel_layout, Attribution, CgroupInterval, CgroupRef, Counters, Hierarchy, Mounts, Throttling,
    UNATTRIBUTED_ID,
};

use crate::cgroups::CgroupIndex;
use crate::cpu_stat;
use crate::error::SchedError;
use crate::event::RunqEvent;
use crate::interval::counters_from_slots;

/// Buckets per histogram (`RUNQ_BUCKETS`).
const BUCKETS: usize = 976;
/// Inline attribution slots per histogram (`RUNQ_OTHERS`).
const OTHERS: usize = 8;
/// Segments of a CPU's timeline (`RUNQ_SEGMENTS`).
const SEGMENTS: usize = 64;
/// Words of a histogram entry before its inline attribution slots: the buckets, `sum_ns`,
/// `cpu_cgroup_id`, `run_ns`.
const HEAD_WORDS: usize = BUCKETS + 3;

/// One cgroup's `struct runq_hist`, cumulative.
#[derive(Debug, Clone, Default)]
struct RawHist {
    slots: Vec<u64>,
    sum_ns: u64,
    cpu_cgroup_id: u64,
    /// Time its tasks ran, in the stretches that have ended.
    run_ns: u64,
    /// Its inline `struct runq_other` slots in use: (other cgroup id, [preemptions, waits, wait_ns]).
    others: Vec<(u64, RawPair)>,
}

/// `struct runq_pair`, cumulative: preemptions, waits, wait_ns.
type RawPair = [u64; 3];

fn u64s(b: &[u8]) -> impl Iterator<Item = u64> + '_ {
    b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
}

/// The maps the reader needs, borrowed from the loaded skeleton.
pub(crate) struct Maps<'a, 'obj> {
    pub hists: &'a MapMut<'obj>,
    pub pairs: &'a MapMut<'obj>,
    pub counters: &'a MapMut<'obj>,
    pub budgets: &'a MapMut<'obj>,
    pub filter: &'a MapMut<'obj>,
    pub timelines: &'a MapMut<'obj>,
}

/// Turns readings into intervals; keeps the previous reading and the cgroup indexes.
pub(crate) struct Reader {
    hierarchy: Hierarchy,
    charged: CgroupIndex,
    v1_cpu: Option<CgroupIndex>,
    v2: Option<CgroupIndex>,
    hists: HashMap<u64, RawHist>,
    pairs: HashMap<(u64, u64), RawPair>,
    counters: Counters,
    /// Each cgroup's run time in the CPUs' current stretches at the last reading.
    running: HashMap<u64, u64>,
    throttling: HashMap<PathBuf, Throttling>,
    pressure: HashMap<PathBuf, u64>,
    filter_roots: Vec<PathBuf>,
}

fn read_err(source: libbpf_rs::Error) -> SchedError {
    SchedError::bpf("read", source)
}

impl Reader {
    pub(crate) fn new(mounts: &Mounts, hierarchy: Hierarchy, filter_roots: Vec<PathBuf>) -> Reader {
        let charged = CgroupIndex::new(mounts.root(hierarchy));
        let other = |h: Hierarchy| {
            (h != hierarchy && mounts.root(h).is_some()).then(|| CgroupIndex::new(mounts.root(h)))
        };
        let mut reader = Reader {
            hierarchy,
            charged,
            v1_cpu: other(Hierarchy::V1Cpu),
            v2: other(Hierarchy::V2),
            hists: HashMap::new(),
            pairs: HashMap::new(),
            counters: Counters::default(),
            running: HashMap::new(),
            throttling: HashMap::new(),
            pressure: HashMap::new(),
            filter_roots,
        };
        reader.prime();
        reader
    }

    /// Reads every existing cgroup's throttling and pressure counters once, so the first
    /// interval's deltas are the first interval's. (A cgroup created later starts from zero,
    /// which is what a missing earlier reading means.)
    fn prime(&mut self) {
        let mut dirs = self.charged.dirs();
        for index in [&self.v1_cpu, &self.v2].into_iter().flatten() {
            dirs.extend(index.dirs());
        }
        for d in dirs {
            if let Some(t) = cpu_stat::read_throttling(&d) {
                self.throttling.insert(d.clone(), t);
            }
            if let Some(p) = cpu_stat::read_pressure_some_us(&d) {
                self.pressure.insert(d, p);
            }
        }
    }

    /// The cgroup charged with `id` (refreshing the index once per call site when unknown).
    pub(crate) fn cgroup(&mut self, id: u64) -> CgroupRef {
        if id == 0 {
            return CgroupRef::idle();
        }
        if id == UNATTRIBUTED_ID {
            return CgroupRef::unattributed();
        }
        self.charged
            .find(id)
            .unwrap_or_else(|| CgroupRef::unknown(id))
    }

    /// Puts the filtered cgroups and their descendants (new ones too) into the kernel's filter.
    pub(crate) fn update_filter(&mut self, maps: &Maps) -> Result<usize, SchedError> {
        let mut n = 0;
        for root in &self.filter_roots {
            let mut stack = vec![root.clone()];
            while let Some(dir) = stack.pop() {
                let Ok(id) = crate::cgroups::id_of(&dir) else {
                    continue;
                };
                maps.filter
                    .update(&id.to_ne_bytes(), &[1], MapFlags::ANY)
                    .map_err(read_err)?;
                n += 1;
                if let Ok(rd) = std::fs::read_dir(&dir) {
                    stack.extend(
                        rd.flatten()
                            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                            .map(|e| e.path()),
                    );
                }
            }
        }
        Ok(n)
    }

    /// Reads the maps and returns the interval since the last call.
    pub(crate) fn read(
        &mut self,
        maps: &Maps,
    ) -> Result<(Vec<CgroupInterval>, Counters), SchedError> {
        let hists = read_hists(maps)?;
        // The inline slots and the overflow map together: cumulative counts per pair.
        let mut pairs = read_pairs(maps)?;
        for (&victim, h) in &hists {
            for &(other, counts) in &h.others {
                let e = pairs.entry((victim, other)).or_default();
                for i in 0..3 {
                    e[i] += counts[i];
                }
            }
        }
        let counters = read_counters(maps)?;
        let running = read_running(maps, ClockOrigin::now().mono_ns)?;

        // New cgroups since the last interval are found by one walk per hierarchy at most.
        self.charged.expire();
        if let Some(v1) = self.v1_cpu.as_mut() {
            v1.expire();
        }
        // Deltas of the pairs, grouped by victim.
        let mut by: HashMap<u64, Vec<(u64, RawPair)>> = HashMap::new();
        for (&(victim, other), now) in &pairs {
            let before = self
                .pairs
                .get(&(victim, other))
                .copied()
                .unwrap_or_default();
            let d = [0, 1, 2].map(|i| now[i].saturating_sub(before[i]));
            if d.iter().any(|&x| x > 0) {
                by.entry(victim).or_default().push((other, d));
            }
        }
        let mut out = Vec::new();
        for (&id, now) in &hists {
            let before = self.hists.get(&id);
            let slots: Vec<u64> = now
                .slots
                .iter()
                .enumerate()
                .map(|(i, &c)| {
                    c.saturating_sub(before.and_then(|b| b.slots.get(i)).copied().unwrap_or(0))
                })
                .collect();
            let sum = now.sum_ns.saturating_sub(before.map_or(0, |b| b.sum_ns));
            let latency = Histogram::from_bucket_counts(kernel_layout(), &slots, u128::from(sum));
            let attributions = by.remove(&id).unwrap_or_default();
            // Ended stretches since the last reading, plus the current ones' growth: a
            // stretch that ended moved from `running` into `run_ns` whole.
            let run_ns = (now.run_ns + running.get(&id).copied().unwrap_or(0)).saturating_sub(
                before.map_or(0, |b| b.run_ns) + self.running.get(&id).copied().unwrap_or(0),
            );
            if latency.is_empty() && attributions.is_empty() && run_ns == 0 {
                continue;
            }
            let mut iv = self.cgroup_interval(id, now.cpu_cgroup_id, latency, attributions);
            iv.run_ns = Some(run_ns);
            out.push(iv);
        }
        // Cgroups that were preempted but never waited to completion in the interval.
        for (id, attributions) in by.into_iter().collect::<Vec<_>>() {
            let cpu = hists.get(&id).map_or(0, |h| h.cpu_cgroup_id);
            out.push(self.cgroup_interval(
                id,
                cpu,
                Histogram::with_layout(kernel_layout()),
                attributions,
            ));
        }
        out.sort_by(|a, b| {
            b.latency
                .count()
                .cmp(&a.latency.count())
                .then(a.cgroup.name.cmp(&b.cgroup.name))
        });

        let delta = counters.since(&self.counters);
        self.running = running;
        self.hists = hists;
        self.pairs = pairs;
        self.counters = counters;
        self.forget_gone(maps)?;
        Ok((out, delta))
    }

    fn cgroup_interval(
        &mut self,
        id: u64,
        cpu_cgroup_id: u64,
        latency: Histogram,
        attributions: Vec<(u64, RawPair)>,
    ) -> CgroupInterval {
        let cgroup = self.cgroup(id);
        let mut by: Vec<Attribution> = attributions
            .into_iter()
            .map(|(other, [preemptions, waits, wait_ns])| Attribution {
                other: self.cgroup(other),
                preemptions,
                waits,
                wait_ns,
            })
            .collect();
        by.sort_by(|a, b| {
            b.wait_ns
                .cmp(&a.wait_ns)
                .then(b.preemptions.cmp(&a.preemptions))
        });
        let (cpu_dir, cpu_cgroup) = self.cpu_controller_dir(&cgroup, cpu_cgroup_id);
        let throttling = cpu_dir.as_ref().and_then(|d| {
            let now = cpu_stat::read_throttling(d)?;
            let before = self.throttling.insert(d.clone(), now);
            Some(before.map_or(Throttling::default(), |b| now.since(&b)))
        });
        let quota = cpu_dir.as_deref().and_then(cpu_stat::read_quota);
        let pressure_some_us = self.v2_dir(&cgroup).and_then(|d| {
            let now = cpu_stat::read_pressure_some_us(&d)?;
            let before = self.pressure.insert(d, now);
            Some(before.map_or(0, |b| now.saturating_sub(b)))
        });
        CgroupInterval {
            cgroup,
            latency,
            run_ns: None,
            by,
            throttling,
            quota,
            pressure_some_us,
            cpu_cgroup,
        }
    }

    /// The directory whose `cpu.stat` tells this cgroup's throttling: the charged cgroup itself
    /// when its hierarchy has the cpu controller; else the v1 cpu cgroup its processes are in
    /// now (from `/proc/PID/cgroup` of one of them), or, when it has none left, the one the
    /// kernel saw, or the same path there. Returns it with that cgroup's path.
    fn cpu_controller_dir(
        &mut self,
        cg: &CgroupRef,
        cpu_cgroup_id: u64,
    ) -> (Option<PathBuf>, Option<String>) {
        let own = self.charged.dir(cg.id);
        if self.hierarchy == Hierarchy::V1Cpu {
            return (own, None);
        }
        if own
            .as_ref()
            .is_some_and(|d| cpu_stat::read_throttling(d).is_some())
        {
            return (own, None);
        }
        let Some(v1) = self.v1_cpu.as_mut() else {
            return (None, None);
        };
        let Some(v1_root) = v1.root().map(Path::to_path_buf) else {
            return (None, None);
        };
        if let Some(path) = own.as_deref().and_then(member_cpu_cgroup) {
            let dir = v1_root.join(path.trim_start_matches('/'));
            if dir.is_dir() {
                return (Some(dir), Some(path));
            }
        }
        let seen = (cpu_cgroup_id != 0)
            .then(|| v1.find(cpu_cgroup_id))
            .flatten();
        if let Some(c) = seen {
            return (v1.dir(cpu_cgroup_id), Some(c.path));
        }
        let same = v1_root.join(cg.path.trim_start_matches('/'));
        if !cg.path.is_empty() && same.is_dir() {
            return (Some(same), Some(cg.path.clone()));
        }
        (None, None)
    }

    /// The cgroup2 directory of a cgroup (for `cpu.pressure`).
    fn v2_dir(&self, cg: &CgroupRef) -> Option<PathBuf> {
        match self.hierarchy {
            Hierarchy::V2 => self.charged.dir(cg.id),
            Hierarchy::V1Cpu => {
                let root = self.v2.as_ref()?.root()?;
                let d = root.join(cg.path.trim_start_matches('/'));
                (!cg.path.is_empty() && d.is_dir()).then_some(d)
            }
        }
    }

    /// Deletes the map entries of cgroups that no longer exist (their last counts were just
    /// reported). A wait charged between the read and the delete is lost; the cgroup is gone.
    fn forget_gone(&mut self, maps: &Maps) -> Result<(), SchedError> {
        let gone: Vec<u64> = self
            .hists
            .keys()
            .copied()
            .filter(|&id| id != 0 && !self.charged.exists(id))
            .collect();
        for id in &gone {
            // Already deleted (by a previous pass) is fine.
            let _ = maps.hists.delete(&id.to_ne_bytes());
            let _ = maps.budgets.delete(&id.to_ne_bytes());
            self.hists.remove(id);
        }
        let stale: Vec<(u64, u64)> = self
            .pairs
            .keys()
            .copied()
            .filter(|(v, o)| gone.contains(v) || (*o != 0 && gone.contains(o)))
            .collect();
        for key in stale {
            let mut k = key.0.to_ne_bytes().to_vec();
            k.extend_from_slice(&key.1.to_ne_bytes());
            let _ = maps.pairs.delete(&k);
            self.pairs.remove(&key);
        }
        Ok(())
    }

    /// Resolves an event's two cgroups.
    pub(crate) fn name_event(&mut self, e: RunqEvent) -> (RunqEvent, CgroupRef, CgroupRef) {
        let a = self.cgroup(e.cgroup_id);
        let b = self.cgroup(e.prev_cgroup_id);
        (e, a, b)
    }
}

/// The v1 cpu cgroup path of the first process in the cgroup2 directory `dir`.
fn member_cpu_cgroup(dir: &Path) -> Option<String> {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
    let pid = procs.lines().next()?.trim();
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    crate::schedstat::cgroup_path(&text, Hierarchy::V1Cpu)
}

fn read_hists(maps: &Maps) -> Result<HashMap<u64, RawHist>, SchedError> {
    let mut out = HashMap::new();
    for key in maps.hists.keys() {
        let Some(v) = maps.hists.lookup(&key, MapFlags::ANY).map_err(read_err)? else {
            continue; // deleted meanwhile
        };
        let id = u64s(&key).next().unwrap_or(0);
        let words: Vec<u64> = u64s(&v).collect();
        if words.len() < HEAD_WORDS + 4 * OTHERS {
            continue;
        }
        let others = words[HEAD_WORDS..HEAD_WORDS + 4 * OTHERS]
            .chunks_exact(4)
            .filter(|o| o[0] != 0)
            .map(|o| (o[0] - 1, [o[1], o[2], o[3]]))
            .collect();
        out.insert(
            id,
            RawHist {
                slots: words[..BUCKETS].to_vec(),
                sum_ns: words[BUCKETS],
                cpu_cgroup_id: words[BUCKETS + 1],
                run_ns: words[BUCKETS + 2],
                others,
            },
        );
    }
    Ok(out)
}

fn read_pairs(maps: &Maps) -> Result<HashMap<(u64, u64), RawPair>, SchedError> {
    let mut out = HashMap::new();
    for key in maps.pairs.keys() {
        let Some(v) = maps.pairs.lookup(&key, MapFlags::ANY).map_err(read_err)? else {
            continue;
        };
        let k: Vec<u64> = u64s(&key).collect();
        let w: Vec<u64> = u64s(&v).collect();
        if k.len() == 2 && w.len() == 3 {
            out.insert((k[0], k[1]), [w[0], w[1], w[2]]);
        }
    }
    Ok(out)
}

/// Per cgroup, how long the stretches running on the CPUs now have lasted at `now_ns` (the
/// monotonic clock, as the kernel's timestamps): each CPU's newest timeline segment.
fn read_running(maps: &Maps, now_ns: i64) -> Result<HashMap<u64, u64>, SchedError> {
    let mut out = HashMap::new();
    let Some(per_cpu) = maps
        .timelines
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(read_err)?
    else {
        return Ok(out);
    };
    let now = u64::try_from(now_ns).unwrap_or(0);
    for value in per_cpu {
        let words: Vec<u64> = u64s(&value).collect();
        let Some(&head) = words.first() else {
            continue;
        };
        if head == 0 {
            continue;
        }
        let at = 1 + 2 * ((head as usize - 1) % SEGMENTS);
        let (Some(&start), Some(&cgroup)) = (words.get(at), words.get(at + 1)) else {
            continue;
        };
        if cgroup != 0 {
            *out.entry(cgroup).or_default() += now.saturating_sub(start);
        }
    }
    Ok(out)
}

fn read_counters(maps: &Maps) -> Result<Counters, SchedError> {
    let mut slots = [0u64; 7];
    for (i, slot) in slots.iter_mut().enumerate() {
        let key = (i as u32).to_ne_bytes();
        if let Some(per_cpu) = maps
            .counters
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(read_err)?
        {
            *slot = per_cpu.iter().flat_map(|b| u64s(b)).sum();
        }
    }
    Ok(counters_from_slots(&slots))
}

#[cfg(test)]
mod tests {
    use super::{BUCKETS, HEAD_WORDS, OTHERS, SEGMENTS};
    use crate::bpf::types;
    use crate::event::RunqEvent;
    use tailhunt_model::evidence::runq::kernel_layout;

    #[test]
    fn c_and_rust_agree_on_the_layouts() {
        assert_eq!(BUCKETS, kernel_layout().bucket_count());
        assert_eq!(
            std::mem::size_of::<types::runq_hist>(),
            (HEAD_WORDS + 4 * OTHERS) * 8
        );
        assert_eq!(
            std::mem::size_of::<types::runq_timeline>(),
            (1 + 2 * SEGMENTS + 2 * 6) * 8
        );
        assert_eq!(std::mem::size_of::<types::runq_pair>(), 3 * 8);
        assert_eq!(std::mem::size_of::<types::runq_pair_key>(), 2 * 8);
        assert_eq!(std::mem::size_of::<types::runq_event>(), RunqEvent::SIZE);
    }
}
