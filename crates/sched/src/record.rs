//! Writes the tracer's intervals into a store (any [`SeriesSink`]) as series.
//!
//! | series | kind | labels |
//! |---|---|---|
//! | `runq_latency` | interval histograms, ns | `cgroup` |
//! | `runq_run_ns` | values per interval: time its tasks ran, all CPUs | `cgroup` |
//! | `runq_preemptions` | values per interval, count | `cgroup`, `by` (itself, `idle`, `unattributed`, the 8 others with the most wait time, `other cgroups` for the rest) |
//! | `runq_waits`, `runq_wait_ns` | values per interval: waits during which `by` ran on the waiter's CPU, and how long it ran | `cgroup`, `by` |
//! | `cpu_periods`, `cpu_throttled_periods`, `cpu_throttled_ns` | values per interval | `cgroup` |
//! | `cpu_pressure_some_ns` | values per interval | `cgroup` |
//! | `runq_event` | raw samples (woken -> on CPU) | `cgroup` |
//!
//! A value point's time is its interval's end; a missing point means zero. What does not fit
//! in a series (cgroup paths, quotas, the processes behind outliers) is kept in
//! [`Recorder::record`] for the run's `runq` document.

use std::collections::{BTreeMap, HashMap};

use tailhunt_model::evidence::runq::{
    Attribution, Blocker, CgroupInfo, CgroupKind, CgroupRef, Counters, DegradedInterval,
    ProgramCost, RunqMode, RunqRecord, TracerSetup, WaitCharge,
};
use tailhunt_model::{
    IntervalHistogram, Labels, Outcome, Point, Sample, SeriesKind, SeriesMeta, SeriesSink,
    SinkError, Timing, Unit,
};

use crate::interval::Interval;
use crate::tracer::Observer;

/// An [`Observer`] that writes into a sink.
pub struct Recorder<'s> {
    sink: &'s mut dyn SeriesSink,
    handles: HashMap<(String, Labels), usize>,
    cgroups: BTreeMap<String, CgroupInfo>,
    blockers: HashMap<(String, String, String, u32), Blocker>,
    counters: Counters,
    programs: Vec<ProgramCost>,
    started: Option<TracerSetup>,
}

impl<'s> Recorder<'s> {
    /// A recorder writing into `sink`.
    pub fn new(sink: &'s mut dyn SeriesSink) -> Recorder<'s> {
        Recorder {
            sink,
            handles: HashMap::new(),
            cgroups: BTreeMap::new(),
            blockers: HashMap::new(),
            counters: Counters::default(),
            programs: Vec::new(),
            started: None,
        }
    }

    fn handle(
        &mut self,
        name: &str,
        labels: Labels,
        unit: Unit,
        kind: SeriesKind,
    ) -> Result<usize, SinkError> {
        let key = (name.to_string(), labels);
        if let Some(&h) = self.handles.get(&key) {
            return Ok(h);
        }
        let meta = SeriesMeta {
            name: key.0.clone(),
            labels: key.1.clone(),
            unit,
            timing: Timing::Timed,
            kind,
        };
        let h = self.sink.open_series(&meta)?;
        self.handles.insert(key, h);
        Ok(h)
    }

    fn point(
        &mut self,
        name: &str,
        labels: Labels,
        unit: Unit,
        t_ns: i64,
        value: u64,
    ) -> Result<(), SinkError> {
        let h = self.handle(name, labels, unit, SeriesKind::Values)?;
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        self.sink.push_values(h, &[Point { t_ns, value }])
    }

    fn note(&mut self, cg: &CgroupRef) {
        self.cgroups
            .entry(cg.name.clone())
            .or_insert_with(|| CgroupInfo {
                id: cg.id,
                path: cg.path.clone(),
                kind: cg.kind,
                cpu_cgroup: None,
                quota: None,
            });
    }

    /// The run's `runq` document, to store at the end: set-up, cgroups, outlier blockers,
    /// overhead.
    pub fn record(&self) -> RunqRecord {
        let mut blockers: Vec<Blocker> = self.blockers.values().cloned().collect();
        blockers.sort_by(|a, b| b.count.cmp(&a.count).then(b.max_ns.cmp(&a.max_ns)));
        blockers.truncate(200);
        RunqRecord {
            mode: RunqMode::Bpf,
            started: self.started.clone(),
            cgroups: self.cgroups.clone(),
            blockers,
            counters: self.counters,
            programs: self.programs.clone(),
            wait_charge: WaitCharge::RanDuring,
            ..RunqRecord::default()
        }
    }
}

/// Other cgroups stored per cgroup per interval, besides itself and the idle CPU; the rest are
/// summed into one `by=other cgroups` entry, so a host with hundreds of containers does not
/// store a series for every pair that ever met.
pub const MAX_STORED_OTHERS: usize = 8;

/// Name of the entry the attributions beyond [`MAX_STORED_OTHERS`] are summed into.
pub use tailhunt_model::evidence::runq::OTHER_CGROUPS;

/// The attributions worth a series: the cgroup itself, the idle CPU, and the
/// [`MAX_STORED_OTHERS`] other cgroups with the most wait time; the rest summed.
fn stored_attributions(me: &CgroupRef, by: &[Attribution]) -> Vec<Attribution> {
    let mut kept = Vec::new();
    let mut rest: Option<Attribution> = None;
    let mut others = 0;
    let mut sorted: Vec<&Attribution> = by.iter().collect();
    sorted.sort_by_key(|a| std::cmp::Reverse(a.wait_ns));
    for a in sorted {
        let special = a.other.id == me.id
            || matches!(a.other.kind, CgroupKind::Idle | CgroupKind::Unattributed);
        if special || others < MAX_STORED_OTHERS {
            others += usize::from(!special);
            kept.push(a.clone());
            continue;
        }
        let r = rest.get_or_insert_with(|| Attribution {
            other: CgroupRef {
                id: u64::MAX,
                path: String::new(),
                name: OTHER_CGROUPS.into(),
                kind: CgroupKind::Cgroup,
            },
            preemptions: 0,
            waits: 0,
            wait_ns: 0,
        });
        r.preemptions += a.preemptions;
        r.waits += a.waits;
        r.wait_ns += a.wait_ns;
    }
    kept.extend(rest);
    kept
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Observer for Recorder<'_> {
    fn started(&mut self, started: &TracerSetup) -> Result<(), SinkError> {
        self.started = Some(started.clone());
        Ok(())
    }

    fn interval(&mut self, iv: &Interval) -> Result<(), SinkError> {
        let t = iv.end_ns;
        for cg in &iv.cgroups {
            self.note(&cg.cgroup);
            if let Some(info) = self.cgroups.get_mut(&cg.cgroup.name) {
                info.cpu_cgroup = info.cpu_cgroup.take().or_else(|| cg.cpu_cgroup.clone());
                info.quota = cg.quota.or(info.quota);
            }
            let name = cg.cgroup.name.as_str();
            if !cg.latency.is_empty() {
                let h = self.handle(
                    "runq_latency",
                    labels(&[("cgroup", name)]),
                    Unit::Nanoseconds,
                    SeriesKind::Histograms,
                )?;
                self.sink.push_histogram(
                    h,
                    &IntervalHistogram {
                        start_ns: iv.start_ns,
                        end_ns: iv.end_ns,
                        histogram: cg.latency.clone(),
                    },
                )?;
            }
            for a in &stored_attributions(&cg.cgroup, &cg.by) {
                if a.other.name != OTHER_CGROUPS {
                    self.note(&a.other);
                }
                let l = labels(&[("cgroup", name), ("by", &a.other.name)]);
                if a.preemptions > 0 {
                    self.point("runq_preemptions", l.clone(), Unit::Count, t, a.preemptions)?;
                }
                if a.waits > 0 {
                    self.point("runq_waits", l.clone(), Unit::Count, t, a.waits)?;
                    self.point("runq_wait_ns", l, Unit::Nanoseconds, t, a.wait_ns)?;
                }
            }
            let l = labels(&[("cgroup", name)]);
            if let Some(run) = cg.run_ns.filter(|&r| r > 0) {
                self.point("runq_run_ns", l.clone(), Unit::Nanoseconds, t, run)?;
            }
            if let Some(th) = cg.throttling {
                self.point("cpu_periods", l.clone(), Unit::Count, t, th.periods)?;
                self.point(
                    "cpu_throttled_periods",
                    l.clone(),
                    Unit::Count,
                    t,
                    th.throttled_periods,
                )?;
                self.point(
                    "cpu_throttled_ns",
                    l.clone(),
                    Unit::Nanoseconds,
                    t,
                    th.throttled_ns,
                )?;
            }
            if let Some(us) = cg.pressure_some_us {
                self.point(
                    "cpu_pressure_some_ns",
                    l,
                    Unit::Nanoseconds,
                    t,
                    us.saturating_mul(1000),
                )?;
            }
        }
        let mut by_series: HashMap<usize, Vec<Sample>> = HashMap::new();
        for (e, cg, prev) in &iv.events {
            self.note(cg);
            let h = self.handle(
                "runq_event",
                labels(&[("cgroup", &cg.name)]),
                Unit::Nanoseconds,
                SeriesKind::Samples,
            )?;
            let end = i64::try_from(e.switch_ns).unwrap_or(i64::MAX);
            let start = end.saturating_sub(i64::try_from(e.latency_ns).unwrap_or(i64::MAX));
            by_series
                .entry(h)
                .or_default()
                .push(Sample::new(start, start, end, Outcome::Ok));
            let key = (
                cg.name.clone(),
                prev.name.clone(),
                e.prev_comm.clone(),
                e.prev_pid,
            );
            let b = self.blockers.entry(key).or_insert_with(|| Blocker {
                cgroup: cg.name.clone(),
                by: prev.name.clone(),
                comm: if e.prev_pid == 0 {
                    "(idle)".into()
                } else {
                    e.prev_comm.clone()
                },
                pid: e.prev_pid,
                count: 0,
                max_ns: 0,
            });
            b.count += 1;
            b.max_ns = b.max_ns.max(e.latency_ns);
        }
        for (h, samples) in by_series {
            self.sink.push_samples(h, &samples)?;
        }
        self.counters = self.counters + iv.counters;
        if self.programs.is_empty() {
            self.programs = iv.programs.clone();
        } else {
            for (total, p) in self.programs.iter_mut().zip(&iv.programs) {
                total.run_cnt += p.run_cnt;
                total.run_time_ns += p.run_time_ns;
            }
        }
        Ok(())
    }
}

/// Writes the degraded mode's intervals: `runq_wait_total_ns`, `runq_timeslices` and
/// `runq_wait_mean_ns` per cgroup, one point per interval.
pub struct DegradedRecorder<'s> {
    inner: Recorder<'s>,
}

impl<'s> DegradedRecorder<'s> {
    /// A recorder writing into `sink`.
    pub fn new(sink: &'s mut dyn SeriesSink) -> DegradedRecorder<'s> {
        DegradedRecorder {
            inner: Recorder::new(sink),
        }
    }

    /// Writes one interval.
    pub fn interval(&mut self, iv: &DegradedInterval) -> Result<(), SinkError> {
        let t = iv.end_ns;
        for c in &iv.cgroups {
            self.inner.note(&c.cgroup);
            let l = labels(&[("cgroup", &c.cgroup.name)]);
            let r = &mut self.inner;
            r.point(
                "runq_wait_total_ns",
                l.clone(),
                Unit::Nanoseconds,
                t,
                c.wait_ns,
            )?;
            r.point("runq_timeslices", l.clone(), Unit::Count, t, c.timeslices)?;
            if let Some(m) = c.mean_wait_ns() {
                r.point(
                    "runq_wait_mean_ns",
                    l,
                    Unit::Nanoseconds,
                    t,
                    m.round() as u64,
                )?;
            }
        }
        Ok(())
    }

    /// The run's `runq` document: the cgroups seen and why the degraded mode was used.
    pub fn record(&self, why: &str) -> RunqRecord {
        RunqRecord {
            mode: RunqMode::Schedstat,
            degraded_reason: Some(why.to_string()),
            cgroups: self.inner.cgroups.clone(),
            ..RunqRecord::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(id: u64, name: &str, wait_ns: u64) -> Attribution {
        Attribution {
            other: if id == 0 {
                CgroupRef::idle()
            } else {
                crate::cgroups::cgroup_at(id, name)
            },
            preemptions: 1,
            waits: 1,
            wait_ns,
        }
    }

    #[test]
    fn many_neighbours_are_summed_beyond_the_busiest() {
        let me = crate::cgroups::cgroup_at(7, "/me");
        let mut by: Vec<Attribution> = (100..120)
            .map(|i| a(i, &format!("/n{i}"), i * 10))
            .collect();
        by.push(a(7, "/me", 1));
        by.push(a(0, "", 2));
        let kept = stored_attributions(&me, &by);
        // itself, idle, the 8 busiest others, and one sum of the other 12
        assert_eq!(kept.len(), 11);
        assert!(kept.iter().any(|k| k.other.id == 7) && kept.iter().any(|k| k.other.id == 0));
        assert!(kept.iter().any(|k| k.other.name == "/n119"));
        assert!(!kept.iter().any(|k| k.other.name == "/n100"));
        let rest = kept.iter().find(|k| k.other.name == OTHER_CGROUPS).unwrap();
        assert_eq!(rest.waits, 12);
        assert_eq!(rest.wait_ns, (100..112).map(|i| i * 10).sum::<u64>());
        let total: u64 = kept.iter().map(|k| k.wait_ns).sum();
        assert_eq!(total, by.iter().map(|k| k.wait_ns).sum::<u64>());
        // Few neighbours: kept as they are.
        assert_eq!(stored_attributions(&me, &by[..3]).len(), 3);
    }
}
