//! Think time: how long the reference server's "application" works before each reply.
//!
//! In: a spec as written on the command line (`0`, `2ms`, `exp:1ms`, `uniform:1ms:3ms`,
//! `lognormal:1ms:0.5`). Out: a [`ThinkTime`] (which prints back as the same spec) and, per
//! worker thread, a [`ThinkSampler`] that draws nanoseconds from it.

use std::fmt;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal};

use super::ServeError;

const SPEC_HELP: &str = "forms: 0, 2ms, exp:1ms, uniform:1ms:3ms, lognormal:1ms:0.5";

/// Server "application" time before each reply.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum ThinkTime {
    /// Reply as soon as the request is read.
    #[default]
    None,
    /// The same delay every time.
    Fixed(Duration),
    /// Exponentially distributed (memoryless) with this mean.
    Exponential {
        /// Mean delay.
        mean: Duration,
    },
    /// Uniform between `low` and `high` (inclusive).
    Uniform {
        /// Shortest delay.
        low: Duration,
        /// Longest delay.
        high: Duration,
    },
    /// Log-normal: `median * exp(sigma * N(0,1))`, a long right tail like real services.
    LogNormal {
        /// Median delay.
        median: Duration,
        /// Standard deviation of the logarithm (0 = always the median).
        sigma: f64,
    },
}

impl ThinkTime {
    /// Parses `0` (or `none`), `2ms`, `exp:1ms`, `uniform:1ms:3ms`, `lognormal:1ms:0.5`.
    pub fn parse(text: &str) -> Result<ThinkTime, ServeError> {
        let bad =
            |why: String| ServeError::Config(format!("think time '{text}': {why}; {SPEC_HELP}"));
        let dur = |part: &str| -> Result<Duration, ServeError> {
            let part = part.trim();
            if part == "0" {
                return Ok(Duration::ZERO);
            }
            tailhunt_model::parse_duration_ns(part, None)
                .map(|ns| Duration::from_nanos(ns as u64))
                .map_err(|e| bad(e.to_string()))
        };
        let lower = text.trim().to_ascii_lowercase();
        let parts: Vec<&str> = lower.split(':').collect();
        let think = match parts.as_slice() {
            ["none"] => ThinkTime::None,
            [d] => ThinkTime::Fixed(dur(d)?),
            ["exp" | "exponential", mean] => ThinkTime::Exponential { mean: dur(mean)? },
            ["uniform", low, high] => ThinkTime::Uniform {
                low: dur(low)?,
                high: dur(high)?,
            },
            ["lognormal", median, sigma] => ThinkTime::LogNormal {
                median: dur(median)?,
                sigma: sigma
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("sigma '{}' is not a number", sigma.trim())))?,
            },
            [kind, ..] if matches!(*kind, "exp" | "exponential" | "uniform" | "lognormal") => {
                return Err(bad(format!(
                    "wrong number of ':'-separated values for '{kind}'"
                )))
            }
            _ => return Err(bad("not a duration or distribution".to_string())),
        };
        think.validate().map_err(|e| bad(e.to_string()))?;
        Ok(think.normalized())
    }

    /// Checks values that a hand-built `ThinkTime` may get wrong.
    pub(crate) fn validate(&self) -> Result<(), ServeError> {
        match *self {
            ThinkTime::Uniform { low, high } if low > high => Err(ServeError::Config(format!(
                "uniform think time: low {} is above high {}",
                Spec(low),
                Spec(high)
            ))),
            ThinkTime::LogNormal { sigma, .. } if !(sigma.is_finite() && sigma >= 0.0) => {
                Err(ServeError::Config(format!(
                    "lognormal think time: sigma {sigma} must be a finite number >= 0"
                )))
            }
            _ => Ok(()),
        }
    }

    /// All-zero variants become `None`.
    fn normalized(self) -> ThinkTime {
        match self {
            ThinkTime::Fixed(d)
            | ThinkTime::Exponential { mean: d }
            | ThinkTime::LogNormal { median: d, .. }
                if d.is_zero() =>
            {
                ThinkTime::None
            }
            ThinkTime::Uniform { high, .. } if high.is_zero() => ThinkTime::None,
            other => other,
        }
    }
}

impl std::str::FromStr for ThinkTime {
    type Err = ServeError;

    fn from_str(s: &str) -> Result<ThinkTime, ServeError> {
        ThinkTime::parse(s)
    }
}

/// Prints a duration exactly, in the largest unit that divides it.
struct Spec(Duration);

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        match ns {
            0 => f.write_str("0"),
            _ if ns.is_multiple_of(1_000_000_000) => write!(f, "{}s", ns / 1_000_000_000),
            _ if ns.is_multiple_of(1_000_000) => write!(f, "{}ms", ns / 1_000_000),
            _ if ns.is_multiple_of(1_000) => write!(f, "{}us", ns / 1_000),
            _ => write!(f, "{ns}ns"),
        }
    }
}

impl fmt::Display for ThinkTime {
    /// The spec [`ThinkTime::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ThinkTime::None => f.write_str("0"),
            ThinkTime::Fixed(d) => write!(f, "{}", Spec(d)),
            ThinkTime::Exponential { mean } => write!(f, "exp:{}", Spec(mean)),
            ThinkTime::Uniform { low, high } => write!(f, "uniform:{}:{}", Spec(low), Spec(high)),
            ThinkTime::LogNormal { median, sigma } => {
                write!(f, "lognormal:{}:{sigma}", Spec(median))
            }
        }
    }
}

/// Draws think times (ns) for one worker thread.
pub(crate) struct ThinkSampler {
    kind: Kind,
    rng: SmallRng,
}

enum Kind {
    Zero,
    Fixed(u64),
    Exp(Exp<f64>),
    Uniform(u64, u64),
    LogNormal(LogNormal<f64>),
}

impl ThinkSampler {
    /// A sampler for `think` (validated), seeded from the OS.
    pub(crate) fn new(think: &ThinkTime) -> ThinkSampler {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let kind = match think.normalized() {
            ThinkTime::None => Kind::Zero,
            ThinkTime::Fixed(d) => Kind::Fixed(ns(d)),
            ThinkTime::Exponential { mean } => {
                Exp::new(1.0 / ns(mean) as f64).map_or(Kind::Fixed(ns(mean)), Kind::Exp)
            }
            ThinkTime::Uniform { low, high } => Kind::Uniform(ns(low), ns(high).max(ns(low))),
            ThinkTime::LogNormal { median, sigma } => {
                LogNormal::new((ns(median) as f64).ln(), sigma)
                    .map_or(Kind::Fixed(ns(median)), Kind::LogNormal)
            }
        };
        ThinkSampler {
            kind,
            rng: SmallRng::from_os_rng(),
        }
    }

    /// One think time, ns.
    pub(crate) fn sample_ns(&mut self) -> u64 {
        match &self.kind {
            Kind::Zero => 0,
            Kind::Fixed(ns) => *ns,
            // `as` saturates: a far tail sample becomes u64::MAX ns rather than wrapping.
            Kind::Exp(d) => d.sample(&mut self.rng) as u64,
            Kind::Uniform(low, high) => self.rng.random_range(*low..=*high),
            Kind::LogNormal(d) => d.sample(&mut self.rng) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn parses_every_form_and_prints_it_back() {
        let cases = [
            ("0", ThinkTime::None),
            ("none", ThinkTime::None),
            ("0ms", ThinkTime::None),
            ("2ms", ThinkTime::Fixed(2 * MS)),
            ("exp:1ms", ThinkTime::Exponential { mean: MS }),
            (
                "uniform:1ms:3ms",
                ThinkTime::Uniform {
                    low: MS,
                    high: 3 * MS,
                },
            ),
            (
                "lognormal:1ms:0.5",
                ThinkTime::LogNormal {
                    median: MS,
                    sigma: 0.5,
                },
            ),
            ("250us", ThinkTime::Fixed(Duration::from_micros(250))),
        ];
        for (text, want) in cases {
            let got = ThinkTime::parse(text).unwrap();
            assert_eq!(got, want, "{text}");
            assert_eq!(
                ThinkTime::parse(&got.to_string()).unwrap(),
                want,
                "{text} -> {got}"
            );
        }
    }

    #[test]
    fn rejects_bad_specs_with_the_forms_in_the_message() {
        for text in [
            "",
            "2",
            "fast",
            "exp",
            "exp:1ms:2ms",
            "uniform:3ms:1ms",
            "lognormal:1ms:x",
            "lognormal:1ms:-1",
            "uniform:1ms",
            "-2ms",
        ] {
            let err = ThinkTime::parse(text).unwrap_err().to_string();
            assert!(err.contains(&format!("'{text}'")), "{err}");
            assert!(err.contains("uniform:1ms:3ms"), "{err}");
        }
    }

    #[test]
    fn samples_stay_in_range_and_centre() {
        let mut s = ThinkSampler::new(&ThinkTime::Uniform {
            low: MS,
            high: 3 * MS,
        });
        for _ in 0..1000 {
            let v = s.sample_ns();
            assert!((1_000_000..=3_000_000).contains(&v), "{v}");
        }
        let mut s = ThinkSampler::new(&ThinkTime::Exponential { mean: MS });
        let mean = (0..20_000).map(|_| s.sample_ns() as f64).sum::<f64>() / 20_000.0;
        assert!((0.9e6..1.1e6).contains(&mean), "{mean}");
        let mut s = ThinkSampler::new(&ThinkTime::LogNormal {
            median: MS,
            sigma: 0.5,
        });
        let below = (0..20_000).filter(|_| s.sample_ns() < 1_000_000).count();
        assert!((9_000..11_000).contains(&below), "{below}");
        assert_eq!(ThinkSampler::new(&ThinkTime::None).sample_ns(), 0);
        assert_eq!(
            ThinkSampler::new(&ThinkTime::Fixed(2 * MS)).sample_ns(),
            2_000_000
        );
    }
}
