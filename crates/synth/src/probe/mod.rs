//! Seeded, labelled probe-like series: what a `tailhunt probe` run would store, with the
//! causes planted in it written down beside it.
//!
//! In: a seed. Out: [`ProbeCase`]s, each a run's worth of `probe_latency{probe,kind,variant}`
//! sample series on a fixed round cadence (the contract of `RunKind::Probe`: intended time =
//! the round's scheduled time plus the probe's place in the round, timeouts censored at the
//! timeout), the run parameters a prober writes (`interval_ns`, `timeout_ns`, `probes`), and
//! the [`Planted`] truth the benchmark scores detectors against. The truth never goes into the
//! run: detectors see only what a real probe run would hold.
//!
//! The matrix: steps of several sizes (the whole distribution scaled, or mass moved into a
//! slow mode), periods of the tail only and of the whole distribution, a daily cycle, a
//! latency floor against a sibling network probe, variant pairs with and without a real cost
//! (by name vs by IP, first vs second request, fresh vs reused connection), a percentile on a
//! gap between modes, and clean controls (lognormal, heavy-tailed Pareto, bimodal but stable,
//! and variant pairs with no difference). The seed draws the sizes, times and periods within
//! each case's range.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Pareto};
use tailhunt_model::{
    Labels, Outcome, Sample, Series, SeriesData, SeriesMeta, SeriesSink, SinkError,
};

use crate::Component;

mod matrix;

pub use matrix::cases;

/// The run's monotonic origin, ns: rounds count from here.
pub const ORIGIN_MONO_NS: i64 = 1_000_000_000_000;
/// Every probe's timeout, ns.
pub const TIMEOUT_NS: i64 = 1_000_000_000;

/// A cause planted in a case.
#[derive(Debug, Clone, PartialEq)]
pub struct Planted {
    /// The detector that should name it (`step-change`).
    pub detector: &'static str,
    /// The probe it is in (the `probe` label).
    pub probe: String,
    /// For a step: when it happens, ns on the run's clock.
    pub at_ns: Option<i64>,
    /// For a period: its length, ns.
    pub period_ns: Option<i64>,
}

/// How one probe variant's latency is drawn in each round.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The base distribution: a mixture of log-normal components.
    pub base: Vec<Component>,
    /// Instead of the base: Pareto (scale ns, shape).
    pub pareto: Option<(f64, f64)>,
    /// A fixed cost added to every sample, ns.
    pub floor_ns: f64,
    /// From this time (ns after the origin), every sample multiplied by this factor.
    pub step: Option<(i64, f64)>,
    /// From this time, the base replaced by these components (mass moving between modes).
    pub shift_to: Option<(i64, Vec<Component>)>,
    /// A slow mode whose share oscillates between 0 and the given share with this period
    /// (ns): the tail moves, the median does not.
    pub tail_period: Option<(i64, Component, f64)>,
    /// The whole distribution multiplied by `exp(amp * sin)` with this period (ns).
    pub period: Option<(i64, f64)>,
    /// An extra cost paid by this variant (a log-normal draw added), ns.
    pub extra: Option<Component>,
}

impl Model {
    /// One log-normal, nothing planted.
    pub fn lognormal(median_ns: f64, sigma: f64) -> Model {
        Model::mixture(vec![Component {
            median_ns,
            sigma,
            weight: 1.0,
        }])
    }

    /// A mixture, nothing planted.
    pub fn mixture(base: Vec<Component>) -> Model {
        Model {
            base,
            pareto: None,
            floor_ns: 0.0,
            step: None,
            shift_to: None,
            tail_period: None,
            period: None,
            extra: None,
        }
    }

    fn draw(&self, t_ns: i64, rng: &mut StdRng) -> f64 {
        let phase = |p: i64| (2.0 * std::f64::consts::PI * (t_ns % p) as f64 / p as f64).sin();
        let comps = match &self.shift_to {
            Some((at, to)) if t_ns >= *at => to,
            _ => &self.base,
        };
        let mut v = match self.pareto {
            Some((scale, shape)) => sample(&Pareto::new(scale, shape).ok(), rng),
            None => pick(comps, rng),
        };
        if let Some((p, slow, share)) = &self.tail_period {
            if rng.random::<f64>() < share * (0.5 + 0.5 * phase(*p)) {
                v = pick(std::slice::from_ref(slow), rng);
            }
        }
        if let Some((p, amp)) = self.period {
            v *= (amp * phase(p)).exp();
        }
        if let Some((at, factor)) = self.step {
            if t_ns >= at {
                v *= factor;
            }
        }
        if let Some(extra) = &self.extra {
            v += pick(std::slice::from_ref(extra), rng);
        }
        v + self.floor_ns
    }
}

fn sample<D: Distribution<f64>>(d: &Option<D>, rng: &mut StdRng) -> f64 {
    d.as_ref().map_or(1.0, |d| d.sample(rng))
}

fn pick(comps: &[Component], rng: &mut StdRng) -> f64 {
    let total: f64 = comps.iter().map(|c| c.weight).sum();
    let mut u = rng.random::<f64>() * total;
    let c = comps
        .iter()
        .find(|c| {
            u -= c.weight;
            u <= 0.0
        })
        .unwrap_or(&comps[comps.len() - 1]);
    sample(&LogNormal::new(c.median_ns.ln(), c.sigma).ok(), rng)
}

/// One probe variant of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSpec {
    /// The probe's name (`probe` label).
    pub probe: String,
    /// Its kind (`icmp`, `dns`, ...).
    pub kind: String,
    /// Its variant (`default`, `by-name`, ...).
    pub variant: String,
    /// How its latency is drawn.
    pub model: Model,
}

impl ProbeSpec {
    fn new(probe: &str, kind: &str, variant: &str, model: Model) -> ProbeSpec {
        ProbeSpec {
            probe: probe.into(),
            kind: kind.into(),
            variant: variant.into(),
            model,
        }
    }
}

/// One generated run with its truth.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeCase {
    /// Case name (`step-large`).
    pub name: String,
    /// What it plants, in words.
    pub description: String,
    /// Round cadence, ns.
    pub interval_ns: i64,
    /// Rounds.
    pub rounds: i64,
    /// The probes (one entry per variant).
    pub probes: Vec<ProbeSpec>,
    /// What was planted; empty for a control.
    pub planted: Vec<Planted>,
}

impl ProbeCase {
    /// Whether nothing is planted.
    pub fn is_control(&self) -> bool {
        self.planted.is_empty()
    }

    /// The parameters a prober stores with its run.
    pub fn params(&self) -> serde_json::Value {
        let probes: Vec<serde_json::Value> = self
            .probes
            .iter()
            .map(|p| serde_json::json!({"name": p.probe, "kind": p.kind, "variant": p.variant}))
            .collect();
        serde_json::json!({
            "interval_ns": self.interval_ns,
            "timeout_ns": TIMEOUT_NS,
            "probes": probes,
            "source": "tailhunt-synth",
        })
    }

    /// The series, drawn with `seed`.
    pub fn series(&self, seed: u64) -> Vec<Series> {
        let mut out = Vec::new();
        // Infallible: the in-memory sink takes every sample.
        let _ = self.write(&mut out, seed);
        out
    }

    /// Streams the series into `sink` as a probe run would.
    pub fn write(&self, sink: &mut dyn SeriesSink, seed: u64) -> Result<(), SinkError> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut handles = Vec::new();
        for p in &self.probes {
            let labels: Labels = [
                ("probe".to_string(), p.probe.clone()),
                ("kind".to_string(), p.kind.clone()),
                ("variant".to_string(), p.variant.clone()),
            ]
            .into_iter()
            .collect();
            let meta = SeriesMeta {
                labels,
                ..SeriesMeta::latency("probe_latency")
            };
            handles.push(sink.open_series(&meta)?);
        }
        let mut batch: Vec<Vec<Sample>> = vec![Vec::new(); self.probes.len()];
        for round in 0..self.rounds {
            let mut order: Vec<usize> = (0..self.probes.len()).collect();
            rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut rng);
            for (place, &i) in order.iter().enumerate() {
                let offset = place as i64 * 2_000_000 + rng.random_range(0..500_000);
                let t = round * self.interval_ns + offset;
                let intended = ORIGIN_MONO_NS + t;
                let start = intended + rng.random_range(5_000..50_000);
                let lat = self.probes[i].model.draw(t, &mut rng).round().max(1.0) as i64;
                let s = if lat >= TIMEOUT_NS {
                    Sample::new(intended, start, start + TIMEOUT_NS, Outcome::Timeout)
                } else {
                    Sample::new(intended, start, start + lat, Outcome::Ok)
                };
                batch[i].push(s);
            }
            if round % 4096 == 4095 || round == self.rounds - 1 {
                for (i, b) in batch.iter_mut().enumerate() {
                    sink.push_samples(handles[i], b)?;
                    b.clear();
                }
            }
        }
        Ok(())
    }
}

/// The samples of a generated series, by probe and variant (for tests).
pub fn samples_of<'a>(series: &'a [Series], probe: &str, variant: &str) -> &'a [Sample] {
    series
        .iter()
        .find(|s| {
            s.labels.get("probe").map(String::as_str) == Some(probe)
                && s.labels.get("variant").map(String::as_str) == Some(variant)
        })
        .and_then(|s| match &s.data {
            SeriesData::Samples(v) => Some(v.as_slice()),
            _ => None,
        })
        .unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_writes_the_probe_contract() {
        let c = cases(1).into_iter().find(|c| c.name == "cold-dns").unwrap();
        let series = c.series(7);
        assert_eq!(series.len(), 2);
        for s in &series {
            assert_eq!(s.name, "probe_latency");
            assert_eq!(s.labels["kind"], "dns");
            let samples = samples_of(&series, "resolver", &s.labels["variant"]);
            assert_eq!(samples.len(), 60);
            // Each sample lies in its own round.
            for (r, x) in samples.iter().enumerate() {
                assert_eq!((x.intended_ns - ORIGIN_MONO_NS) / c.interval_ns, r as i64);
            }
        }
        assert_eq!(c.params()["interval_ns"], 10_000_000_000i64);
        assert_eq!(c.series(7), series, "same seed, same data");
    }

    #[test]
    fn a_step_raises_the_level_after_its_time() {
        let c = cases(3)
            .into_iter()
            .find(|c| c.name == "step-large")
            .unwrap();
        let at = c.planted[0].at_ns.unwrap();
        let series = c.series(1);
        let s = samples_of(&series, "api", "default");
        let mean = |f: &dyn Fn(&&Sample) -> bool| {
            let v: Vec<f64> = s
                .iter()
                .filter(f)
                .map(|x| (x.latency_ns() as f64).ln())
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        let gain = (mean(&|x| x.intended_ns >= at) - mean(&|x| x.intended_ns < at)).exp();
        assert!(gain > 3.5, "{gain}");
    }

    #[test]
    fn controls_plant_nothing_and_names_are_unique() {
        let all = cases(2);
        let mut names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert!(all.iter().filter(|c| c.is_control()).count() >= 6);
    }
}
