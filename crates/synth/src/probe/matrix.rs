//! The generator's matrix of cases: what each plants and the seeded ranges its sizes, moments
//! and periods are drawn from (see the module above for the list).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{Model, Planted, ProbeCase, ProbeSpec, ORIGIN_MONO_NS};
use crate::Component;

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
