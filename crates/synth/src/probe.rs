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

const S: i64 = 1_000_000_000;

fn comp(median_ns: f64, sigma: f64, weight: f64) -> Component {
    Component {
        median_ns,
        sigma,
        weight,
    }
}

fn planted(detector: &'static str, probe: &str) -> Planted {
    Planted {
        detector,
        probe: probe.into(),
        at_ns: None,
        period_ns: None,
    }
}

fn case(
    name: &str,
    description: String,
    interval_s: i64,
    rounds: i64,
    probes: Vec<ProbeSpec>,
    planted: Vec<Planted>,
) -> ProbeCase {
    ProbeCase {
        name: name.into(),
        description,
        interval_ns: interval_s * S,
        rounds,
        probes,
        planted,
    }
}

/// A network probe beside the probe under test: the round trip of the path.
fn ping() -> ProbeSpec {
    ProbeSpec::new("ping", "icmp", "default", Model::lognormal(450e3, 0.15))
}

/// Every case of the matrix, drawn with `seed`.
pub fn cases(seed: u64) -> Vec<ProbeCase> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_ca5e);
    let mut out = Vec::new();
    out.extend(steps(&mut rng));
    out.extend(periods(&mut rng));
    out.extend(floors(&mut rng));
    out.extend(variants(&mut rng));
    out.extend(controls(&mut rng));
    out
}

/// Four hours at one round a second.
const SHORT_ROUNDS: i64 = 4 * 3600;

fn steps(rng: &mut StdRng) -> Vec<ProbeCase> {
    let mut out = Vec::new();
    for (name, lo, hi) in [
        ("step-small", 1.3, 1.5),
        ("step-medium", 1.8, 2.5),
        ("step-large", 4.0, 8.0),
    ] {
        let factor = rng.random_range(lo..hi);
        let at = rng.random_range(0.25..0.75) * SHORT_ROUNDS as f64;
        let at_ns = at as i64 * S;
        let mut m = Model::lognormal(rng.random_range(0.5e6..3e6), rng.random_range(0.2..0.6));
        m.step = Some((at_ns, factor));
        out.push(case(
            name,
            format!("every sample x{factor:.2} from {:.0} s", at),
            1,
            SHORT_ROUNDS,
            vec![ping(), ProbeSpec::new("api", "http", "default", m)],
            vec![Planted {
                at_ns: Some(ORIGIN_MONO_NS + at_ns),
                ..planted("step-change", "api")
            }],
        ));
    }
    // Mass moves into a slow mode: the tail steps, the median stays.
    let at = rng.random_range(0.3..0.7) * SHORT_ROUNDS as f64;
    let at_ns = at as i64 * S;
    let share = rng.random_range(0.05..0.10);
    let mut m = Model::mixture(vec![comp(1e6, 0.2, 0.99), comp(15e6, 0.2, 0.01)]);
    m.shift_to = Some((
        at_ns,
        vec![comp(1e6, 0.2, 1.0 - share), comp(15e6, 0.2, share)],
    ));
    out.push(case(
        "mode-shift",
        format!(
            "the 15 ms mode grows from 1% to {:.0}% at {:.0} s",
            share * 100.0,
            at
        ),
        1,
        SHORT_ROUNDS,
        vec![ping(), ProbeSpec::new("db", "postgres", "default", m)],
        vec![Planted {
            at_ns: Some(ORIGIN_MONO_NS + at_ns),
            ..planted("step-change", "db")
        }],
    ));
    out
}

fn periods(rng: &mut StdRng) -> Vec<ProbeCase> {
    let mut out = Vec::new();
    let p_tail = rng.random_range(15..40) * 60 * S;
    let share = rng.random_range(0.04..0.08);
    let mut m = Model::lognormal(2e6, 0.25);
    m.tail_period = Some((p_tail, comp(25e6, 0.2, 1.0), share));
    out.push(case(
        "period-tail",
        format!(
            "a 25 ms mode takes 0..{:.0}% of samples, period {} min",
            share * 100.0,
            p_tail / 60 / S
        ),
        1,
        SHORT_ROUNDS,
        vec![ping(), ProbeSpec::new("cache", "memcached", "default", m)],
        vec![Planted {
            period_ns: Some(p_tail),
            ..planted("periodic-tail", "cache")
        }],
    ));
    let p_whole = rng.random_range(20..45) * 60 * S;
    let amp = rng.random_range(0.3..0.5);
    let mut m = Model::lognormal(1.5e6, 0.3);
    m.period = Some((p_whole, amp));
    out.push(case(
        "period-whole",
        format!(
            "every sample x exp({amp:.2} sin), period {} min",
            p_whole / 60 / S
        ),
        1,
        SHORT_ROUNDS,
        vec![ping(), ProbeSpec::new("search", "http", "default", m)],
        vec![Planted {
            period_ns: Some(p_whole),
            ..planted("periodic-tail", "search")
        }],
    ));
    let amp = rng.random_range(0.25..0.45);
    let mut m = Model::lognormal(3e6, 0.3);
    m.period = Some((86_400 * S, amp));
    out.push(case(
        "daily-cycle",
        format!("every sample x exp({amp:.2} sin), period one day, three days at 10 s"),
        10,
        3 * 8640,
        vec![ProbeSpec::new("checkout", "http", "default", m)],
        vec![Planted {
            period_ns: Some(86_400 * S),
            ..planted("periodic-tail", "checkout")
        }],
    ));
    out
}

fn floors(rng: &mut StdRng) -> Vec<ProbeCase> {
    let floor = rng.random_range(3e6..6e6);
    let mut m = Model::lognormal(200e3, 0.5);
    m.floor_ns = floor;
    vec![case(
        "floor",
        format!(
            "an in-memory lookup never under {:.1} ms; ping 0.45 ms",
            floor / 1e6
        ),
        10,
        360,
        vec![ping(), ProbeSpec::new("lookup", "memcached", "default", m)],
        vec![planted("latency-floor", "lookup")],
    )]
}

/// A pair of variants; `cost_ns` 0 is a control.
fn pair(
    name: &str,
    probe: &str,
    kind: &str,
    variants: [&str; 2],
    base: f64,
    cost_ns: f64,
    rounds: i64,
) -> ProbeCase {
    let cold = {
        let mut m = Model::lognormal(base, 0.25);
        if cost_ns > 0.0 {
            m.extra = Some(comp(cost_ns, 0.3, 1.0));
        }
        m
    };
    let planted_list = if cost_ns > 0.0 {
        vec![planted("cold-path", probe)]
    } else {
        Vec::new()
    };
    case(
        name,
        if cost_ns > 0.0 {
            format!(
                "{} costs {:.2} ms more than {} ({rounds} rounds)",
                variants[0],
                cost_ns / 1e6,
                variants[1]
            )
        } else {
            format!(
                "{} and {} drawn alike ({rounds} rounds)",
                variants[0], variants[1]
            )
        },
        10,
        rounds,
        vec![
            ProbeSpec::new(probe, kind, variants[0], cold),
            ProbeSpec::new(probe, kind, variants[1], Model::lognormal(base, 0.25)),
        ],
        planted_list,
    )
}

fn variants(rng: &mut StdRng) -> Vec<ProbeCase> {
    vec![
        pair(
            "cold-dns",
            "resolver",
            "dns",
            ["by-name", "by-ip"],
            800e3,
            rng.random_range(250e3..400e3),
            60,
        ),
        pair(
            "cold-first",
            "kv",
            "redis",
            ["first", "second"],
            300e3,
            rng.random_range(150e3..600e3),
            120,
        ),
        pair(
            "cold-fresh",
            "pg",
            "postgres",
            ["fresh", "reused"],
            600e3,
            rng.random_range(400e3..1.5e6),
            120,
        ),
        pair(
            "same-dns",
            "resolver",
            "dns",
            ["by-name", "by-ip"],
            800e3,
            0.0,
            60,
        ),
        pair(
            "same-first",
            "kv",
            "redis",
            ["first", "second"],
            300e3,
            0.0,
            120,
        ),
        pair(
            "same-fresh",
            "pg",
            "postgres",
            ["fresh", "reused"],
            600e3,
            0.0,
            360,
        ),
    ]
}

fn controls(rng: &mut StdRng) -> Vec<ProbeCase> {
    let fragile = Model::mixture(crate::trimodal_components(0.0).unwrap_or_default());
    let mut pareto = Model::lognormal(1.0, 1.0);
    pareto.pareto = Some((rng.random_range(100e3..300e3), rng.random_range(1.1..1.6)));
    let bimodal = Model::mixture(vec![comp(500e3, 0.15, 0.7), comp(3e6, 0.15, 0.3)]);
    let mut heavy = Model::lognormal(1.0, 1.0);
    heavy.pareto = Some((300e3, 1.3));
    let mut near_ping = Model::lognormal(600e3, 0.3);
    near_ping.floor_ns = 150e3;
    vec![
        case(
            "control-heavy-variants",
            "by-name and by-ip drawn alike from a Pareto tail (shape 1.3), 120 rounds".into(),
            10,
            120,
            vec![
                ProbeSpec::new("resolver", "dns", "by-name", heavy.clone()),
                ProbeSpec::new("resolver", "dns", "by-ip", heavy),
            ],
            Vec::new(),
        ),
        case(
            "control-work-not-floor",
            "a database read 0.75 ms over a 0.45 ms ping: work, not a fixed cost".into(),
            10,
            360,
            vec![
                ping(),
                ProbeSpec::new("db", "postgres", "default", near_ping),
            ],
            Vec::new(),
        ),
        case(
            "fragile-p90",
            "modes at 0.45/10/20 ms holding 88/8/4%: p90 sits on the gap and flips per interval"
                .into(),
            1,
            SHORT_ROUNDS,
            vec![ping(), ProbeSpec::new("store", "http", "default", fragile)],
            vec![planted("fragile-percentile", "store")],
        ),
        case(
            "control-lognormal",
            "one log-normal, nothing planted".into(),
            1,
            SHORT_ROUNDS,
            vec![
                ping(),
                ProbeSpec::new(
                    "api",
                    "http",
                    "default",
                    Model::lognormal(rng.random_range(0.5e6..3e6), rng.random_range(0.2..0.8)),
                ),
            ],
            Vec::new(),
        ),
        case(
            "control-pareto",
            "heavy-tailed Pareto, nothing planted".into(),
            1,
            SHORT_ROUNDS,
            vec![ping(), ProbeSpec::new("api", "http", "default", pareto)],
            Vec::new(),
        ),
        case(
            "control-bimodal",
            "modes at 0.5 and 3 ms holding 70/30%, stable".into(),
            1,
            SHORT_ROUNDS,
            vec![ping(), ProbeSpec::new("api", "http", "default", bimodal)],
            Vec::new(),
        ),
    ]
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
