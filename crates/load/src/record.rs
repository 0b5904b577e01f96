//! Recording a sweep into a run: every request as it finishes, and each step's summary.
//!
//! In: the plan ([`crate::sweep::plan`]), the step configuration and a [`SeriesSink`] (the
//! store's run writer). Out: the series of every step, written while the step runs, and one
//! [`SweepStep`] per step that ran — the rows `tailhunt load` prints and the `sweep` document
//! the detectors read.
//!
//! | series | labels | what |
//! |---|---|---|
//! | `latency` | `rate` (the exact rate asked for), `repeat` (with `--repeat`) | every measured request: intended, sent, ended, outcome |
//! | `latency` | the same and `phase=warmup` | the warm-up's requests, kept apart |
//! | `client_lateness` | the same as `latency` | every measured request's send lag: intended to actual send (the client's own lateness) |
//! | `service` | the same as `latency` | every measured request's service time: actual send to its end; `client_lateness + service = latency` per request |
//! | `server_app`, `server_stack`, `network`, `client_stack` | the same as `latency` | the breakdown parts (`--breakdown`) |

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tailhunt_model::evidence::sweep::{StepLatency, SweepRecord, SweepStep};
use tailhunt_model::{quantile, Sample, SamplePart, SeriesMeta, SeriesSink, SinkError};

use crate::breakdown::Breakdown;
use crate::engine::{self, Finished, Live, ServerLost, StepConfig, StepOutcome, StepSink};
use crate::health;
use crate::sweep::{self, Step};
use crate::tally::Tally;

/// The parameters a load run is stored with: what its steps share (`base`, whose rate and
/// duration the steps set), the target as written, the rates, the order of the steps and how
/// often each rate is run. `load` and `hunt`'s sweep add their own keys to it.
pub fn run_params(
    url: &str,
    base: &StepConfig,
    rates: &[f64],
    order: &str,
    repeat: usize,
) -> serde_json::Value {
    let ns = |d: std::time::Duration| d.as_nanos() as u64;
    let http = &base.http;
    serde_json::json!({
        "target": url, "rates": rates, "duration_ns": ns(base.duration), "warmup_ns": ns(base.warmup),
        "conns": base.conns, "threads": base.threads, "max_inflight": base.max_inflight,
        "timeout_ns": ns(base.timeout), "nodelay": base.nodelay, "split_writes": base.split_writes,
        "request_bytes": base.request_bytes, "arrival": format!("{:?}", base.arrival).to_lowercase(),
        "order": order, "repeat": repeat, "seed": base.seed, "breakdown": base.breakdown,
        "spin_ns": base.timing.spin.map(ns), "pin": base.timing.pin,
        "http": {"method": http.method_name(), "headers": http.headers.len(), "body_bytes": http.body.len()},
    })
}

/// A sweep to run: the steps, what they share, and what the summaries name.
#[derive(Debug, Clone)]
pub struct SweepRun {
    /// Configuration every step shares (its rate and seed are set per step).
    pub base: StepConfig,
    /// The steps in the order they run.
    pub plan: Vec<Step>,
    /// Repetitions asked for (steps get a `repeat` label when above 1).
    pub repeats: usize,
    /// The target as the user wrote it, for messages.
    pub url: String,
}

/// What the steps of a sweep gave.
#[derive(Debug)]
pub struct Ran {
    /// One summary per step that ran, in order.
    pub steps: Vec<SweepStep>,
    /// First error seen, for the message.
    pub first_error: Option<String>,
    /// Why the plan stopped before its end, other than a stop request: the step that could
    /// not run, or the server that went away.
    pub failure: Option<String>,
}

impl Ran {
    /// The `sweep` document of these steps.
    pub fn record(&self) -> SweepRecord {
        SweepRecord {
            steps: self.steps.clone(),
        }
    }

    /// Why the run measured no success at all: requests were sent and every one ended in an
    /// error or a timeout (a wrong path, a command the server refuses, a server that never
    /// answers). Its latencies are those of the failures, not of the service. `None` when a
    /// request succeeded, or none ended.
    pub fn nothing_succeeded(&self) -> Option<String> {
        let sum = |f: fn(&SweepStep) -> u64| self.steps.iter().map(f).sum::<u64>();
        let (ok, errors, timeouts) = (sum(|s| s.ok), sum(|s| s.errors), sum(|s| s.timeouts));
        if ok > 0 || errors + timeouts == 0 {
            return None;
        }
        let mut why = format!("no request succeeded: {errors} errors, {timeouts} timeouts");
        if let Some(first) = &self.first_error {
            why.push_str(&format!(" (first: {first})"));
        }
        Some(why)
    }
}

/// Runs the plan's steps until it ends, `stop` is set, or a step fails (no connection, the
/// server went away); each step's requests go to `sink` as they finish. Errors are the sink's.
pub fn run_sweep(
    run: &SweepRun,
    sink: &mut dyn SeriesSink,
    live: &Arc<Live>,
    stop: &Arc<AtomicBool>,
) -> Result<Ran, SinkError> {
    let mut ran = Ran {
        steps: Vec::new(),
        first_error: None,
        failure: None,
    };
    for (i, step) in run.plan.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let cfg = StepConfig {
            rate: step.rate,
            seed: run.base.seed.wrapping_add(i as u64 * 1000),
            ..run.base.clone()
        };
        let before = health::snapshot();
        let mut sw = StepWriter::new(sink, labels_for(step.rate, step.repeat, run.repeats));
        let out = match engine::run_step(&cfg, live, stop, &mut sw) {
            Ok(o) => o,
            Err(e) => {
                ran.failure = Some(e.to_string());
                break;
            }
        };
        sw.latency_series()?;
        let h = health::between(before, health::snapshot());
        ran.first_error = ran.first_error.take().or(out.first_error.clone());
        let summary = step_summary(run, *step, &sw, &out, h);
        sink.commit_now()?;
        let lost = summary.server_lost.clone();
        ran.steps.push(summary);
        if let Some(why) = lost {
            ran.failure = Some(why);
            break;
        }
    }
    Ok(ran)
}

/// A step's labels: the exact rate asked for (`1234`, `0.5`), not a rounded one, so two steps
/// never share a series name.
fn labels_for(rate: f64, repeat: usize, repeats: usize) -> Vec<(String, String)> {
    let mut l = vec![("rate".to_string(), rate.to_string())];
    if repeats > 1 {
        l.push(("repeat".to_string(), repeat.to_string()));
    }
    l
}

fn latency_meta(name: &str, labels: &[(String, String)]) -> SeriesMeta {
    let mut meta = SeriesMeta::latency(name);
    for (k, v) in labels {
        meta.labels.insert(k.clone(), v.clone());
    }
    meta
}

fn open_series(
    sink: &mut dyn SeriesSink,
    name: &str,
    labels: &[(String, String)],
) -> Result<usize, SinkError> {
    sink.open_series(&latency_meta(name, labels))
}

/// The handles of the series `names`, opened on first use and kept in `slot`.
fn opened<const N: usize>(
    slot: &mut Option<[usize; N]>,
    sink: &mut dyn SeriesSink,
    names: [&str; N],
    labels: &[(String, String)],
) -> Result<[usize; N], SinkError> {
    if let Some(h) = *slot {
        return Ok(h);
    }
    let mut h = [0; N];
    for (h, name) in h.iter_mut().zip(names) {
        *h = open_series(sink, name, labels)?;
    }
    *slot = Some(h);
    Ok(h)
}

/// A breakdown part: its series name and how it is read from a [`Breakdown`].
type Part = (&'static str, fn(&Breakdown) -> i64);

/// Breakdown parts stored as series of their own.
const PARTS: [Part; 4] = [
    ("server_app", |b| b.server_app_ns),
    ("server_stack", |b| b.server_stack_ns),
    ("network", |b| b.network_ns),
    ("client_stack", |b| b.client_stack_ns),
];

/// Stores a step's requests as they finish — measured ones in the step's `latency` series (and
/// the breakdown parts), warm-up ones in their own series — and keeps the measured samples
/// and the counts for the step's summary.
struct StepWriter<'w> {
    sink: &'w mut dyn SeriesSink,
    labels: Vec<(String, String)>,
    latency: Option<usize>,
    warmup: Option<usize>,
    parts: Option<[usize; 4]>,
    timing: Option<[usize; 2]>,
    measured: Vec<Sample>,
    tally: Tally,
    scratch: Vec<Sample>,
}

impl<'w> StepWriter<'w> {
    fn new(sink: &'w mut dyn SeriesSink, labels: Vec<(String, String)>) -> Self {
        StepWriter {
            sink,
            labels,
            latency: None,
            warmup: None,
            parts: None,
            timing: None,
            measured: Vec::new(),
            tally: Tally::default(),
            scratch: Vec::new(),
        }
    }

    /// The step's series, opened with its first request (a step that could not connect
    /// leaves none), before any other of the step's series.
    fn latency_series(&mut self) -> Result<usize, SinkError> {
        if let Some(h) = self.latency {
            return Ok(h);
        }
        let h = open_series(self.sink, "latency", &self.labels)?;
        self.latency = Some(h);
        Ok(h)
    }

    fn push(
        &mut self,
        series: usize,
        samples: impl Iterator<Item = Sample>,
    ) -> Result<(), SinkError> {
        self.scratch.clear();
        self.scratch.extend(samples);
        if self.scratch.is_empty() {
            return Ok(());
        }
        self.sink.push_samples(series, &self.scratch)
    }

    fn warmup_series(&mut self) -> Result<usize, SinkError> {
        if let Some(h) = self.warmup {
            return Ok(h);
        }
        let mut labels = self.labels.clone();
        labels.push(("phase".into(), "warmup".into()));
        let h = open_series(self.sink, "latency", &labels)?;
        self.warmup = Some(h);
        Ok(h)
    }

    /// The two parts of every request's latency as series of their own, derived from the
    /// step's latency series (the store keeps the derivation, not the samples): the
    /// client's own lateness and the service time after it.
    fn timing_series(&mut self, latency: usize) -> Result<[usize; 2], SinkError> {
        if let Some(h) = self.timing {
            return Ok(h);
        }
        let mut h = [0; 2];
        for (h, part) in h.iter_mut().zip(SamplePart::ALL) {
            let meta = latency_meta(part.name(), &self.labels);
            *h = self.sink.open_derived(&meta, latency, part)?;
        }
        self.timing = Some(h);
        Ok(h)
    }

    fn part_series(&mut self) -> Result<[usize; 4], SinkError> {
        let names = PARTS.map(|(name, _)| name);
        opened(&mut self.parts, self.sink, names, &self.labels)
    }
}

impl StepSink for StepWriter<'_> {
    fn finished(&mut self, batch: &[Finished]) -> Result<(), SinkError> {
        batch.iter().for_each(|f| self.tally.add(f));
        let latency = self.latency_series()?;
        if batch.iter().any(|f| !f.measured) {
            let h = self.warmup_series()?;
            self.push(h, batch.iter().filter(|f| !f.measured).map(|f| f.sample))?;
        }
        let measured = || batch.iter().filter(|f| f.measured);
        self.push(latency, measured().map(|f| f.sample))?;
        self.measured.extend(measured().map(|f| f.sample));
        if measured().next().is_some() {
            for (h, part) in self
                .timing_series(latency)?
                .into_iter()
                .zip(SamplePart::ALL)
            {
                self.push(h, measured().map(|f| part.of(&f.sample)))?;
            }
        }
        if measured().any(|f| f.breakdown.is_some()) {
            for (h, (_, part)) in self.part_series()?.into_iter().zip(PARTS) {
                let samples = measured().map(|f| {
                    let ns = f.breakdown.as_ref().map_or(0, part);
                    Sample::from_latency(f.sample.intended_ns, ns, f.sample.outcome)
                });
                self.push(h, samples)?;
            }
        }
        Ok(())
    }

    fn tick(&mut self) -> Result<(), SinkError> {
        self.sink.commit_if_due()
    }
}

/// Latency percentiles of the measured samples (every outcome: a timeout took at least that
/// long), by the one nearest-rank rule.
fn step_latency(measured: &[Sample]) -> Option<StepLatency> {
    percentiles(measured.iter().map(Sample::latency_ns).collect())
}

/// Nearest-rank percentiles of `values`, ns (negative ones count as 0); `None` when empty.
fn percentiles(values: Vec<i64>) -> Option<StepLatency> {
    let mut v: Vec<u64> = values
        .into_iter()
        .map(|x| u64::try_from(x).unwrap_or(0))
        .collect();
    v.sort_unstable();
    let q = |q: f64| quantile::of_sorted(&v, q);
    Some(StepLatency {
        p50: q(0.5)?,
        p90: q(0.9)?,
        p99: q(0.99)?,
        p999: q(0.999)?,
        max: *v.last()?,
    })
}

/// The summary of a step that ran.
fn step_summary(
    run: &SweepRun,
    step: Step,
    sw: &StepWriter<'_>,
    out: &StepOutcome,
    h: health::Health,
) -> SweepStep {
    let facts = sweep::facts(step.rate, &sw.measured, &sw.tally, out, h);
    SweepStep {
        rate_per_s: step.rate,
        repeat: step.repeat,
        series: tailhunt_model::display_name("latency", &sw.labels.iter().cloned().collect()),
        scheduled: facts.counts.scheduled(),
        sent: facts.counts.sent,
        unsent: facts.counts.unsent,
        ok: facts.counts.ok,
        errors: facts.counts.errors,
        timeouts: facts.counts.timeouts,
        achieved_rate: facts.achieved_rate,
        warmup_samples: facts.counts.warmup,
        latency_ns: step_latency(&sw.measured),
        send_lag_p99_ns: facts.send_lag_p99_ns,
        client_lateness_ns: percentiles(sw.tally.lags.clone()),
        service_ns: percentiles(sw.tally.services.clone()),
        client_cpu: facts.client_cpu,
        cpu_busy: facts.health.cpu_busy,
        steal: facts.health.steal,
        tcp_retransmits: facts.health.tcp_retransmits,
        silence_ns: facts.silence.map(|s| s.len_ns),
        bottleneck: sweep::bottleneck(&facts).map(|b| b.name().to_string()),
        interrupted: out.interrupted,
        server_lost: out
            .server_lost
            .as_ref()
            .map(|l| lost_message(&run.url, step, out, l)),
        warnings: sweep::warnings(&facts, run.base.conns, run.base.max_inflight),
    }
}

/// Names a server that went away as the cause of what followed.
fn lost_message(url: &str, step: Step, out: &StepOutcome, l: &ServerLost) -> String {
    let rate = tailhunt_model::format_rate(step.rate);
    let when = match l.last_response_ns {
        Some(t) if t >= out.measure_from_ns => format!(
            "its last response came {:.2} s into the step",
            (t - out.measure_from_ns) as f64 / 1e9
        ),
        Some(_) => "its last response came during the warm-up".to_string(),
        None => "it never answered".to_string(),
    };
    format!(
        "the server {url} went away during the step at {rate}/s: {when}, then {}; the requests after that are errors or never sent",
        l.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::Outcome;

    #[test]
    fn labels_keep_the_exact_rate_and_the_repeat_only_when_repeating() {
        assert_eq!(
            labels_for(1234.0, 1, 1),
            vec![("rate".to_string(), "1234".to_string())]
        );
        assert_eq!(labels_for(0.5, 2, 3)[0].1, "0.5");
        assert_eq!(labels_for(0.5, 2, 3)[1], ("repeat".into(), "2".into()));
    }

    #[test]
    fn step_percentiles_use_the_nearest_rank_rule() {
        // 3000 samples of 1..=3000 us: p99.9 is rank 2997 (not 2998 from a float error).
        let samples: Vec<Sample> = (1..=3000)
            .map(|i| Sample::from_latency(0, i * 1000, Outcome::Ok))
            .collect();
        let l = step_latency(&samples).unwrap();
        assert_eq!((l.p50, l.p999, l.max), (1_500_000, 2_997_000, 3_000_000));
        assert!(step_latency(&[]).is_none());
    }

    /// A run with no success is named so; one success anywhere in the sweep, or nothing
    /// ended at all, is not.
    #[test]
    fn a_run_of_only_errors_and_timeouts_is_named() {
        let step = |ok, errors, timeouts| SweepStep {
            ok,
            errors,
            timeouts,
            sent: ok + errors + timeouts,
            ..SweepStep::default()
        };
        let ran = |steps| Ran {
            steps,
            first_error: Some("error reply: HTTP/1.1 404 Not Found".into()),
            failure: None,
        };
        let why = ran(vec![step(0, 90, 10), step(0, 100, 0)]).nothing_succeeded();
        assert_eq!(
            why.as_deref(),
            Some("no request succeeded: 190 errors, 10 timeouts (first: error reply: HTTP/1.1 404 Not Found)")
        );
        assert!(ran(vec![step(0, 100, 0), step(1, 99, 0)])
            .nothing_succeeded()
            .is_none());
        assert!(ran(vec![step(0, 0, 0)]).nothing_succeeded().is_none());
        assert!(ran(vec![]).nothing_succeeded().is_none());
    }
}
