//! Faults a reference server can plant on top of its think time, for the lab's `cold-path`
//! scenario and for tests of the over-time detectors: a cost on each connection's first request,
//! a step, and a tail that comes and goes on a period.
//!
//! In: an [`Injected`] (parsed from `--first-request D`, `--step AT+D`, `--tail-wave
//! PERIOD:SHARE:D`). Out: per worker an [`InjectSampler`] that says how many nanoseconds a
//! reply waits on top of its think time, given the time (since the server started) and whether
//! it is its connection's first request.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::ServeError;

/// Faults added to the think time (all off by default).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Injected {
    /// The first request on each connection waits this much more: a per-connection cold start
    /// (a session looked up, a pool connection checked out, a TLS session resumed).
    pub first_request: Option<Duration>,
    /// `(at, add)`: from `at` after start, every reply waits `add` more (a deploy, a route
    /// change, a config push: a step on one date).
    pub step: Option<(Duration, Duration)>,
    /// A tail that rises and falls on a period.
    pub wave: Option<TailWave>,
}

/// During the first half of every `period` (counted from the server's start), `share` of the
/// replies wait `delay` more; the median stays where it was while p99 oscillates (a cron job,
/// a garbage collector, a cache refresh).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TailWave {
    /// The period.
    pub period: Duration,
    /// The share of replies delayed while the wave is up, 0..=1.
    pub share: f64,
    /// How much they wait.
    pub delay: Duration,
}

impl TailWave {
    /// Parses `PERIOD:SHARE:DELAY`, e.g. `60s:15%:8ms` or `60s:0.15:8ms`.
    pub fn parse(text: &str) -> Result<TailWave, ServeError> {
        let bad = |why: &str| {
            ServeError::Config(format!(
                "tail wave '{text}': {why} (write PERIOD:SHARE:DELAY, e.g. 60s:15%:8ms)"
            ))
        };
        let parts: Vec<&str> = text.split(':').map(str::trim).collect();
        let [period, share, delay] = parts.as_slice() else {
            return Err(bad("three ':'-separated values are needed"));
        };
        let dur = |t: &str| {
            tailhunt_model::parse_duration_ns(t, None)
                .map(|ns| Duration::from_nanos(ns.max(0) as u64))
                .map_err(|e| bad(&e.to_string()))
        };
        let share = match share.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
            None => share.parse::<f64>(),
        }
        .map_err(|_| bad(&format!("share '{share}' is not a number or percentage")))?;
        if !(0.0..=1.0).contains(&share) {
            return Err(bad(&format!("share {share} is outside 0..1")));
        }
        let period = dur(period)?;
        if period.is_zero() {
            return Err(bad("the period must be above 0"));
        }
        Ok(TailWave {
            period,
            share,
            delay: dur(delay)?,
        })
    }
}

/// Draws the injected extra wait (ns) for one worker thread.
pub(crate) struct InjectSampler {
    cfg: Injected,
    /// The server's start, monotonic ns.
    origin_ns: u64,
    rng: SmallRng,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl InjectSampler {
    pub(crate) fn new(cfg: Injected, origin_ns: u64) -> InjectSampler {
        InjectSampler {
            cfg,
            origin_ns,
            rng: SmallRng::from_os_rng(),
        }
    }

    /// The extra wait of a reply whose request was read at `now` (monotonic ns); `first`: the
    /// first request of its connection.
    pub(crate) fn extra_ns(&mut self, now: u64, first: bool) -> u64 {
        let since = now.saturating_sub(self.origin_ns);
        let mut extra = 0u64;
        if let (true, Some(d)) = (first, self.cfg.first_request) {
            extra = extra.saturating_add(ns(d));
        }
        if let Some((at, add)) = self.cfg.step {
            if since >= ns(at) {
                extra = extra.saturating_add(ns(add));
            }
        }
        if let Some(w) = self.cfg.wave {
            let period = ns(w.period).max(1);
            let up = since % period < period / 2;
            if up && self.rng.random::<f64>() < w.share {
                extra = extra.saturating_add(ns(w.delay));
            }
        }
        extra
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_wave_parses_with_a_percentage_or_a_fraction_and_refuses_nonsense() {
        let w = TailWave::parse("60s:15%:8ms").unwrap();
        assert_eq!(w.period, Duration::from_secs(60));
        assert!((w.share - 0.15).abs() < 1e-12);
        assert_eq!(w.delay, Duration::from_millis(8));
        assert_eq!(TailWave::parse("1m:0.15:8ms").unwrap(), w);
        for bad in [
            "60s:15%",
            "60s:150%:8ms",
            "0s:0.1:8ms",
            "60s:x:8ms",
            "a:0.1:8ms",
        ] {
            let e = TailWave::parse(bad).unwrap_err().to_string();
            assert!(e.contains("PERIOD:SHARE:DELAY"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_first_request_the_step_and_the_wave_add_where_they_should() {
        let cfg = Injected {
            first_request: Some(Duration::from_millis(3)),
            step: Some((Duration::from_secs(10), Duration::from_millis(2))),
            wave: Some(TailWave {
                period: Duration::from_secs(60),
                share: 1.0,
                delay: Duration::from_millis(8),
            }),
        };
        let origin = 1_000 * MS;
        let mut s = InjectSampler::new(cfg, origin);
        let at = |sec: u64| origin + sec * 1_000 * MS;
        // 5 s in: the wave is up (first half of the minute), no step yet.
        assert_eq!(s.extra_ns(at(5), false), 8 * MS);
        assert_eq!(s.extra_ns(at(5), true), 11 * MS);
        // 40 s in: the wave is down, the step is on.
        assert_eq!(s.extra_ns(at(40), false), 2 * MS);
        // 65 s in: both.
        assert_eq!(s.extra_ns(at(65), false), 10 * MS);
        let mut none = InjectSampler::new(Injected::default(), origin);
        assert_eq!(none.extra_ns(at(65), true), 0);
    }

    #[test]
    fn the_wave_delays_about_its_share_of_replies() {
        let cfg = Injected {
            wave: Some(TailWave {
                period: Duration::from_secs(60),
                share: 0.2,
                delay: Duration::from_millis(1),
            }),
            ..Injected::default()
        };
        let mut s = InjectSampler::new(cfg, 0);
        let hit = (0..10_000).filter(|_| s.extra_ns(MS, false) > 0).count();
        assert!((1_600..2_400).contains(&hit), "{hit}");
    }
}
