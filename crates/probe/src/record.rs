//! Turning measurements into stored samples, and counting what each probe gave.
//!
//! In: each [`Measured`] with its slot, as the workers send them. Out: one
//! `probe_latency{probe,kind,variant,...labels}` sample per measurement, pushed to the sink as
//! it arrives (the sink commits on its timer), and the counts behind the `probe` document:
//! per probe its outcomes, failure runs and last error, and the schedule's drift (how late each
//! slot started).
//!
//! | sample field | value |
//! |---|---|
//! | `intended_ns` | the slot's scheduled time (`second`: when the first ended) |
//! | `start_ns` | when the measurement began |
//! | `end_ns` | when it ended; a timeout is censored at `start_ns + timeout` |
//! | outcome | `ok`, `error`, `timeout` |

use std::collections::HashMap;
use std::time::Duration;

use tailhunt_histogram::Histogram;
use tailhunt_model::evidence::probe::{ProbeRecord, ProbeStatus, ScheduleDrift};
use tailhunt_model::{Labels, Outcome, Sample, SeriesMeta, SeriesSink};

use crate::kind::{Failure, Measured};
use crate::schedule::Slot;
use crate::spec::ProbeSpec;
use crate::ProbeError;

/// The series every probe sample goes to.
pub const SERIES: &str = "probe_latency";

/// What a worker reports for one measurement.
#[derive(Debug, Clone)]
pub struct Report {
    /// The slot it was measured in.
    pub slot: Slot,
    /// The measurement.
    pub measured: Measured,
    /// Whether it is the slot's first measurement (its start is the slot's actual start).
    pub first_of_slot: bool,
}

/// Writes samples and keeps the counts.
pub struct Recorder {
    /// Per probe: its own labels, `probe` and `kind`.
    labels: Vec<Labels>,
    timeouts: Vec<Duration>,
    series: HashMap<(usize, &'static str, u8), usize>,
    status: Vec<ProbeStatus>,
    drift: Histogram,
    late_rounds: u64,
    interval_ns: i64,
    origin_ns: i64,
}

impl Recorder {
    /// A recorder for `probes` on a cadence of `interval` from `origin_ns` (monotonic).
    pub fn new(probes: &[ProbeSpec], interval: Duration, origin_ns: i64) -> Recorder {
        Recorder {
            labels: probes
                .iter()
                .map(|p| {
                    let mut l: Labels = p
                        .labels
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    l.insert("probe".into(), p.name.clone());
                    l.insert("kind".into(), p.kind.name().into());
                    l
                })
                .collect(),
            timeouts: probes.iter().map(|p| p.timeout).collect(),
            series: HashMap::new(),
            status: probes
                .iter()
                .map(|p| ProbeStatus {
                    name: p.name.clone(),
                    kind: p.kind.name().to_string(),
                    variants: p.variants().iter().map(|v| v.to_string()).collect(),
                    host: p.host(),
                    timeout_ns: p.timeout.as_nanos() as u64,
                    ..ProbeStatus::default()
                })
                .collect(),
            drift: Histogram::new(),
            late_rounds: 0,
            interval_ns: (interval.as_nanos() as i64).max(1),
            origin_ns,
        }
    }

    fn series(
        &mut self,
        sink: &mut dyn SeriesSink,
        probe: usize,
        variant: &'static str,
        hop: u8,
    ) -> Result<usize, ProbeError> {
        if let Some(&h) = self.series.get(&(probe, variant, hop)) {
            return Ok(h);
        }
        let mut meta = SeriesMeta::latency(SERIES);
        meta.labels = self.labels[probe].clone();
        meta.labels.insert("variant".into(), variant.into());
        if hop > 0 {
            meta.labels.insert("hop".into(), hop.to_string());
        }
        let h = sink
            .open_series(&meta)
            .map_err(|e| ProbeError::Sink(e.to_string()))?;
        self.series.insert((probe, variant, hop), h);
        Ok(h)
    }

    /// Stores one measurement and counts it. Returns the sample stored.
    pub fn add(&mut self, sink: &mut dyn SeriesSink, r: &Report) -> Result<Sample, ProbeError> {
        let p = r.slot.probe;
        let timeout_ns = self.timeouts[p].as_nanos() as i64;
        let m = &r.measured;
        let mut intended = r.slot.intended_ns;
        if !r.first_of_slot {
            // A later measurement of the slot (`second`) was due when the one before it ended,
            // kept inside the slot's round so pairing by round holds.
            let round_end = self.origin_ns + (r.slot.round as i64 + 1) * self.interval_ns;
            intended = m.start_ns.min(round_end - 1).max(intended);
        } else {
            let lag = (m.start_ns - intended).max(0) as u64;
            self.drift.record(lag);
            if r.slot.position == 0 && lag as i64 * 10 > self.interval_ns {
                self.late_rounds += 1;
            }
        }
        let timed_out =
            matches!(m.failure, Some(Failure::Timeout)) || m.end_ns - m.start_ns > timeout_ns;
        let (end, outcome) = match &m.failure {
            _ if timed_out => (m.start_ns + timeout_ns, Outcome::Timeout),
            None => (m.end_ns, Outcome::Ok),
            Some(_) => (m.end_ns, Outcome::Error),
        };
        let sample = Sample::new(intended.min(m.start_ns), m.start_ns, end, outcome);
        let h = self.series(sink, p, m.variant, m.hop)?;
        sink.push_samples(h, &[sample])
            .map_err(|e| ProbeError::Sink(e.to_string()))?;
        let s = &mut self.status[p];
        s.samples += 1;
        match outcome {
            Outcome::Ok => {
                s.ok += 1;
                s.failing_now = 0;
            }
            Outcome::Error | Outcome::Timeout => {
                if outcome == Outcome::Error {
                    s.errors += 1;
                } else {
                    s.timeouts += 1;
                }
                s.failing_now += 1;
                s.longest_failure_run = s.longest_failure_run.max(s.failing_now);
                s.last_error = Some(match &m.failure {
                    Some(Failure::Error(msg)) if outcome == Outcome::Error => {
                        format!("{}: {msg}", m.variant)
                    }
                    _ if m.hop > 0 => format!(
                        "hop {}: no answer within {}",
                        m.hop,
                        tailhunt_model::format_duration_ns(timeout_ns as f64)
                    ),
                    _ => format!(
                        "{}: no answer within {}",
                        m.variant,
                        tailhunt_model::format_duration_ns(timeout_ns as f64)
                    ),
                });
            }
        }
        Ok(sample)
    }

    /// The counts so far.
    pub fn status(&self) -> &[ProbeStatus] {
        &self.status
    }

    /// The `probe` document of what was recorded.
    pub fn record(&self, rounds: u64, seed: u64) -> ProbeRecord {
        let q = |q: f64| self.drift.quantile(q).unwrap_or(0);
        ProbeRecord {
            interval_ns: self.interval_ns as u64,
            rounds,
            seed,
            probes: self.status.clone(),
            drift: ScheduleDrift {
                started: self.drift.count(),
                p50_ns: q(0.5),
                p99_ns: q(0.99),
                max_ns: self.drift.max().unwrap_or(0),
                late_rounds: self.late_rounds,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{from_urls, Overrides};
    use crate::kind::Op;
    use tailhunt_model::{Series, SeriesData};

    fn slot(round: u64, intended_ns: i64) -> Slot {
        Slot {
            probe: 0,
            op: Op::Pair,
            round,
            position: 0,
            intended_ns,
        }
    }

    fn report(
        slot: Slot,
        variant: &'static str,
        start: i64,
        end: i64,
        f: Option<Failure>,
    ) -> Report {
        Report {
            slot,
            first_of_slot: variant != "second",
            measured: Measured {
                variant,
                hop: 0,
                start_ns: start,
                end_ns: end,
                failure: f,
            },
        }
    }

    #[test]
    fn timeouts_are_censored_failures_counted_and_a_second_request_stays_in_its_round() {
        let over = Overrides {
            interval: Some(Duration::from_millis(100)),
            timeout: Some(Duration::from_millis(10)),
            seed: None,
        };
        let cfg = from_urls(&["redis://127.0.0.1:1/k".into()], &over).unwrap();
        let origin = 1_000_000_000;
        let mut rec = Recorder::new(&cfg.probes, cfg.interval, origin);
        let mut sink: Vec<Series> = Vec::new();
        let s0 = slot(0, origin + 5_000_000);
        // Late by 1 ms; the answer took 30 ms of a 10 ms timeout: censored at 10 ms.
        let a = rec
            .add(
                &mut sink,
                &report(s0, "first", origin + 6_000_000, origin + 36_000_000, None),
            )
            .unwrap();
        assert_eq!(a.outcome, Outcome::Timeout);
        assert_eq!(a.end_ns - a.start_ns, 10_000_000);
        assert_eq!(a.intended_ns, origin + 5_000_000);
        // The second began past the round's end: its intended time stays inside round 0.
        let b = rec
            .add(
                &mut sink,
                &report(
                    s0,
                    "second",
                    origin + 120_000_000,
                    origin + 121_000_000,
                    None,
                ),
            )
            .unwrap();
        assert_eq!(b.outcome, Outcome::Ok);
        assert_eq!((b.intended_ns - origin) / 100_000_000, 0);
        let err = Some(Failure::error("boom"));
        for k in 1..5 {
            let s = slot(k, origin + k as i64 * 100_000_000);
            rec.add(
                &mut sink,
                &report(s, "first", s.intended_ns, s.intended_ns + 1, err.clone()),
            )
            .unwrap();
        }
        let st = &rec.status()[0];
        assert_eq!((st.samples, st.ok, st.errors, st.timeouts), (6, 1, 4, 1));
        assert_eq!((st.failing_now, st.longest_failure_run), (4, 4));
        assert!(st.keeps_failing());
        assert_eq!(st.last_error.as_deref(), Some("first: boom"));
        // One series per variant, labelled.
        assert_eq!(sink.len(), 2);
        assert_eq!(sink[0].labels["variant"], "first");
        assert_eq!(sink[0].labels["kind"], "redis");
        let SeriesData::Samples(v) = &sink[0].data else {
            panic!()
        };
        assert_eq!(v.len(), 5);
        let doc = rec.record(5, 1);
        // Slots that started: the five firsts; the late one was 1 ms late.
        assert_eq!(doc.drift.started, 5);
        assert!(doc.drift.max_ns >= 1_000_000 && doc.drift.max_ns < 1_100_000);
    }
}
