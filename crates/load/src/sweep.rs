//! Sweeps: which rates, in which order, how often; and the sanity checks that say when a step's
//! numbers describe the client rather than the server.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use tailhunt_model::Sample;

use crate::engine::StepOutcome;
use crate::health::Health;
use crate::tally::{longest_silence, Counts, Silence, Tally};

/// Order of the steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Order {
    /// Lowest rate first.
    Asc,
    /// Highest first.
    Desc,
    /// Shuffled (default), so drift over time is not mistaken for an effect of the rate.
    Random,
}

/// One planned step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// Offered rate, requests/s.
    pub rate: f64,
    /// Which repetition (1-based).
    pub repeat: usize,
}

/// The steps of a sweep: every rate `repeat` times, each round in `order`.
pub fn plan(rates: &[f64], order: Order, repeat: usize, seed: u64) -> Vec<Step> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for k in 1..=repeat.max(1) {
        let mut round: Vec<f64> = rates.to_vec();
        match order {
            Order::Asc => round.sort_by(f64::total_cmp),
            Order::Desc => round.sort_by(|a, b| b.total_cmp(a)),
            Order::Random => round.shuffle(&mut rng),
        }
        out.extend(round.into_iter().map(|rate| Step { rate, repeat: k }));
    }
    out
}

/// The numbers of one step that the sanity checks and the summary table need.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFacts {
    /// Offered rate.
    pub rate: f64,
    /// What became of the step's requests.
    pub counts: Counts,
    /// Ok completions per second of the time the step actually ran.
    pub achieved_rate: f64,
    /// 99th percentile of send lag over the sent requests, ns.
    pub send_lag_p99_ns: i64,
    /// Most requests waiting in the client for a connection.
    pub max_backlog: u64,
    /// Connections that broke or were closed for a timeout, and reconnects that failed.
    pub connection_failures: u64,
    /// CPU share the busiest client thread used (0..1).
    pub client_cpu: f64,
    /// The longest time no response came while requests were outstanding (from 100 ms, and
    /// 5x the median latency, up); `from_ns` counts from the start of the measured window.
    pub silence: Option<Silence>,
    /// Whether a signal cut the step short.
    pub interrupted: bool,
    /// Host health during the step.
    pub health: Health,
    /// With `--breakdown`: ok replies that carried no server timestamps.
    pub untimed_replies: u64,
}

/// Computes the facts of a step from its measured samples and its tally.
pub fn facts(
    rate: f64,
    measured: &[Sample],
    tally: &Tally,
    out: &StepOutcome,
    health: Health,
) -> StepFacts {
    let mut lags = tally.lags.clone();
    lags.sort_unstable();
    let p99 = tailhunt_model::quantile::of_sorted(&lags, 0.99).unwrap_or(0);
    // Completions per second until sending stopped (the planned end, or a signal) or the last
    // reply, whichever is later: a client that falls behind its timetable finishes late, so
    // this drops below the offered rate instead of hiding it.
    let until = tally.last_ok_end_ns.unwrap_or(0).max(out.sent_until_ns);
    let secs = (until - out.measure_from_ns).max(1) as f64 / 1e9;
    let mut ok_latencies: Vec<i64> = measured
        .iter()
        .filter(|s| s.outcome == tailhunt_model::Outcome::Ok)
        .map(Sample::latency_ns)
        .collect();
    let median = if ok_latencies.is_empty() {
        0
    } else {
        let mid = ok_latencies.len() / 2;
        *ok_latencies.select_nth_unstable(mid).1
    };
    let silence_min = SILENCE_NS.max(median.saturating_mul(5));
    StepFacts {
        rate,
        counts: tally.counts,
        achieved_rate: tally.counts.ok as f64 / secs,
        send_lag_p99_ns: p99,
        max_backlog: out.counters.max_backlog,
        connection_failures: out.counters.disconnects + out.counters.connect_failures,
        client_cpu: out.client_cpu,
        silence: longest_silence(measured, out.measure_from_ns, silence_min).map(|s| Silence {
            from_ns: s.from_ns - out.measure_from_ns,
            ..s
        }),
        interrupted: out.interrupted,
        health,
        untimed_replies: tally.untimed,
    }
}

/// Send lag p99 above which requests went out late enough to matter.
pub const SATURATED_LAG_NS: i64 = 1_000_000;
/// CPU share of the busiest client thread above which the client itself is the bottleneck.
pub const BUSY_CPU: f64 = 0.8;
/// Steal share above which a run is untrustworthy.
pub const STEAL_LIMIT: f64 = 0.05;
/// Shortest silence (no response while requests were outstanding) worth naming, ns.
pub const SILENCE_NS: i64 = 100_000_000;

/// What held a step's requests back, when something did (late sends, or fewer completions
/// than offered with requests waiting in the client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bottleneck {
    /// The client's own thread was busy: it could not keep up.
    ClientCpu,
    /// Connections were full of unanswered requests: the server stopped or failed.
    Server,
    /// Connections were full although the server answered: too few for the rate.
    Pool,
    /// The client was mostly idle yet sent late: the host woke it late.
    HostLate,
}

impl Bottleneck {
    /// Its name in documents: `client-cpu`, `server`, `pool`, `host-late`.
    pub fn name(self) -> &'static str {
        match self {
            Bottleneck::ClientCpu => "client-cpu",
            Bottleneck::Server => "server",
            Bottleneck::Pool => "pool",
            Bottleneck::HostLate => "host-late",
        }
    }
}

/// Which side the figures point to, if requests were held back at all.
pub fn bottleneck(f: &StepFacts) -> Option<Bottleneck> {
    let late = f.send_lag_p99_ns > SATURATED_LAG_NS;
    let c = &f.counts;
    let short = c.sent > 0 && f.achieved_rate < 0.9 * f.rate && f.max_backlog > 0;
    if !late && !short {
        return None;
    }
    Some(if f.client_cpu >= BUSY_CPU {
        Bottleneck::ClientCpu
    } else if f.silence.is_some() || c.timeouts + c.errors + f.connection_failures > 0 {
        Bottleneck::Server
    } else if short {
        Bottleneck::Pool
    } else {
        Bottleneck::HostLate
    })
}

/// Warnings about the measurement itself, each naming the side the figures point to and, when
/// it is the client's, what to change.
pub fn warnings(f: &StepFacts, conns: usize, max_inflight: usize) -> Vec<String> {
    let mut w = Vec::new();
    let rate = tailhunt_model::format_rate(f.rate);
    let lag = f.send_lag_p99_ns as f64 / 1e6;
    let cpu = f.client_cpu * 100.0;
    if let Some(s) = f.silence {
        w.push(format!(
            "at {rate}/s no response came for {:.2} s (from {:.2} s into the step) while requests were outstanding: the server paused or stopped answering; the latency includes that wait",
            s.len_ns as f64 / 1e9,
            s.from_ns as f64 / 1e9
        ));
    }
    match bottleneck(f) {
        Some(Bottleneck::ClientCpu) => w.push(format!(
            "at {rate}/s the client is saturated: its busiest thread used {cpu:.0}% of a CPU and send lag p99 is {lag:.1} ms (the latency includes that wait). Use more --threads or a lower rate"
        )),
        Some(Bottleneck::Server) => w.push(format!(
            "at {rate}/s send lag p99 {lag:.1} ms and {}/s completed: requests waited in the client because the server did not answer or its connections failed ({} timeouts, {} errors, {} connection failures); the client was not the bottleneck (its busiest thread used {cpu:.0}% of a CPU)",
            tailhunt_model::format_rate(f.achieved_rate),
            f.counts.timeouts,
            f.counts.errors,
            f.connection_failures
        )),
        Some(Bottleneck::Pool) => w.push(format!(
            "at {rate}/s only {}/s completed and up to {} requests waited for a connection: the pool ({conns} connections x {max_inflight} in flight) cannot carry the offered rate; raise --conns or --max-inflight",
            tailhunt_model::format_rate(f.achieved_rate),
            f.max_backlog
        )),
        Some(Bottleneck::HostLate) => w.push(format!(
            "at {rate}/s send lag p99 {lag:.1} ms although the client's busiest thread used only {cpu:.1}% of a CPU (host CPU {:.0}% busy, steal {:.1}%): the host woke it late (virtualisation, power saving or another busy process); the latency includes that wait, so read the service columns (actual send -> reply) for the server's own time",
            f.health.cpu_busy * 100.0,
            f.health.steal * 100.0
        )),
        None => {}
    }
    if f.health.steal > STEAL_LIMIT {
        w.push(format!(
            "at {rate}/s the hypervisor stole {:.0}% of CPU time: timings from this run are untrustworthy; repeat it (--repeat) or use a quieter machine",
            f.health.steal * 100.0
        ));
    }
    if f.untimed_replies > 0 {
        w.push(format!(
            "at {rate}/s {} of {} replies carried no server timestamps (not a tailhunt reference server, or one started with --timestamps=false): --breakdown could not split their time, and their server and network parts are stored as 0",
            f.untimed_replies, f.counts.ok
        ));
    }
    if f.health.tcp_retransmits > 0 {
        w.push(format!(
            "at {rate}/s this host retransmitted {} TCP segments during the step",
            f.health.tcp_retransmits
        ));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_format_for_people() {
        assert_eq!(tailhunt_model::format_rate(1500.0), "1.5k");
        assert_eq!(tailhunt_model::format_rate(50.0), "50");
    }

    fn quiet(rate: f64) -> StepFacts {
        StepFacts {
            rate,
            counts: Counts {
                sent: 1000,
                ok: 1000,
                ..Counts::default()
            },
            achieved_rate: rate,
            send_lag_p99_ns: 50_000,
            max_backlog: 0,
            connection_failures: 0,
            client_cpu: 0.05,
            silence: None,
            interrupted: false,
            health: Health::default(),
            untimed_replies: 0,
        }
    }

    #[test]
    fn the_warning_names_the_side_the_figures_point_to() {
        let ok = quiet(200.0);
        assert_eq!(bottleneck(&ok), None);
        assert!(warnings(&ok, 4, 1000).is_empty());
        let late = StepFacts {
            send_lag_p99_ns: 20_000_000,
            ..quiet(200.0)
        };
        assert_eq!(bottleneck(&late), Some(Bottleneck::HostLate));
        let busy = StepFacts {
            client_cpu: 0.97,
            ..late.clone()
        };
        assert_eq!(bottleneck(&busy), Some(Bottleneck::ClientCpu));
        assert!(warnings(&busy, 4, 1000)[0].contains("client is saturated"));
        let paused = StepFacts {
            silence: Some(Silence {
                from_ns: 1_000_000_000,
                len_ns: 3_000_000_000,
            }),
            max_backlog: 40,
            achieved_rate: 120.0,
            ..late.clone()
        };
        assert_eq!(bottleneck(&paused), Some(Bottleneck::Server));
        let w = warnings(&paused, 4, 1000).join(" ");
        assert!(w.contains("no response came for 3.00 s"), "{w}");
        assert!(!w.contains("saturated") && !w.contains("--conns"), "{w}");
        let small_pool = StepFacts {
            max_backlog: 40,
            achieved_rate: 120.0,
            ..late
        };
        assert_eq!(bottleneck(&small_pool), Some(Bottleneck::Pool));
        assert!(warnings(&small_pool, 1, 1)[0].contains("raise --conns"));
        let untimed = StepFacts {
            untimed_replies: 40,
            ..quiet(200.0)
        };
        assert!(warnings(&untimed, 4, 1000)[0]
            .contains("40 of 1000 replies carried no server timestamps"));
    }

    #[test]
    fn plans_cover_every_rate_each_round() {
        let p = plan(&[50.0, 500.0, 5000.0], Order::Random, 2, 3);
        assert_eq!(p.len(), 6);
        for k in 1..=2 {
            let mut round: Vec<f64> = p.iter().filter(|s| s.repeat == k).map(|s| s.rate).collect();
            round.sort_by(f64::total_cmp);
            assert_eq!(round, [50.0, 500.0, 5000.0]);
        }
        let asc: Vec<f64> = plan(&[5.0, 1.0], Order::Asc, 1, 0)
            .iter()
            .map(|s| s.rate)
            .collect();
        assert_eq!(asc, [1.0, 5.0]);
    }
}
