//! The cases and the seeded matrices of them.
//!
//! In: a [`Scale`] and a seed. Out: the [`Case`]s to run, each planted case next to its healthy
//! twin. The seed draws what the matrix leaves open (round trips, request rates, connection and
//! source counts), so two seeds cover different corners while one seed always gives the same
//! list.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// How many cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// A few minutes: one case per class and its twin.
    Quick,
    /// On demand: every variant, several rates.
    Full,
}

/// One case of the matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Unique name (also its directory).
    pub name: String,
    /// A healthy twin: the same traffic without the cause.
    pub twin: bool,
    /// Seed of the matrix.
    pub seed: u64,
    /// What to run.
    pub spec: Spec,
}

/// What a case runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Spec {
    /// A download through the link emulator.
    Window(WindowSpec),
    /// A client that gives up.
    Timeout(TimeoutSpec),
    /// Bulk sources and small requests on a shaped link.
    Burst(BurstSpec),
    /// Two-piece writes without TCP_NODELAY.
    Nagle(NagleSpec),
    /// CPU workloads in cgroups, traced by `tailhunt runq`.
    Runq(RunqSpec),
}

/// A download over the emulator with a pinned or autotuned receive buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowSpec {
    /// Round trip of the emulated path, ms.
    pub rtt_ms: u64,
    /// Rate of the emulated path, bit/s.
    pub rate_bps: u64,
    /// The client's SO_RCVBUF (None: autotuning, the twin).
    pub rcvbuf: Option<u64>,
    /// Bytes to download.
    pub bytes: u64,
    /// The client's timeout, s (a transfer slower than it).
    pub timeout_s: Option<u64>,
    /// The round trip is queueing delay in a shared bottleneck (a tbf queue kept full by a
    /// competing download) instead of the emulator's propagation delay; `rtt_ms` is unused.
    pub shared: bool,
}

/// How the client's timeout meets the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeoutStyle {
    /// A large response over a slow link, read as it arrives: the client closes with FIN.
    Fin,
    /// A bulk transfer abandoned with unread data: the client's close is a RST.
    Rst,
    /// `tailhunt transfer client --timeout`: a transfer slower than the timeout, read until
    /// the deadline (its close is a FIN when nothing is queued).
    Transfer,
    /// The server thinks longer than the client waits: not one response byte before the close.
    ServerSlow,
    /// The server thinks longer than the client waits, and the client aborts at its timeout
    /// (SO_LINGER 0): one RST and, the server's late answer failing on the reset socket,
    /// nothing after it.
    ServerSlowAbort,
}

/// A client timeout (or, for the twin, a client that gets its answer in time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeoutSpec {
    /// How the timeout meets the server.
    pub style: TimeoutStyle,
    /// The client's timeout, s.
    pub timeout_s: u64,
    /// Rate of the shaped server-to-client direction, bit/s.
    pub rate_bps: u64,
}

/// Bulk sources and small requests sharing a shaped link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstSpec {
    /// Rate of both shaped directions, bit/s.
    pub rate_bps: u64,
    /// Sources whose replies cross towards the cache (each a "db" fetched 3 times a second).
    pub sources: u32,
    /// Sources in the other direction (a far client fetching from the cache).
    pub reverse: u32,
    /// One bulk transfer keeps the link full for most of the run instead of bursts.
    pub sustained: bool,
}

/// Who writes in two pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Split {
    /// The client's requests (`tailhunt load --split-writes`).
    Client,
    /// The server's replies (`tailhunt serve --split-writes`).
    Server,
}

/// Two-piece writes at a low rate, and (client side) a sweep of rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NagleSpec {
    /// Who splits.
    pub split: Split,
    /// Requests per second of the captured run.
    pub rate: u32,
    /// Connections.
    pub conns: u32,
    /// Also sweep 50, 500 and 5000 req/s for `latency-rises-as-load-falls`.
    pub sweep: bool,
}

/// The run-queue cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunqVariant {
    /// Three hogs in one cgroup with 32x the victim's weight (8192 against 64) join its CPU.
    Unequal,
    /// Two cgroups of two hogs each, the victim's weight, join its CPU.
    Equal,
    /// Three hogs in the root cgroup ("system") join the victim's CPU.
    System,
    /// As `Unequal`, on a host already busy (a half-duty load in the root cgroup all along).
    Busy,
    /// Hogs in two cgroups of equal weight (and one in the root) run from the start, beside the
    /// sleeper: nothing rises, nothing to blame.
    ControlEqual,
    /// A worker's CPU quota is cut to 10 ms per 100 ms mid-run.
    Quota,
}

/// A run-queue case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunqSpec {
    /// Which one.
    pub variant: RunqVariant,
}

const MBIT: u64 = 1_000_000;
const GBIT: u64 = 1_000_000_000;

fn rate_name(bps: u64) -> String {
    if bps >= GBIT {
        format!("{}gbit", bps / GBIT)
    } else {
        format!("{}mbit", bps / MBIT)
    }
}

fn case(name: String, twin: bool, seed: u64, spec: Spec) -> Case {
    Case {
        name,
        twin,
        seed,
        spec,
    }
}

/// A window case and its twin. The download lasts about 3 s at the pinned window's rate
/// (64 KiB pinned gives ~80 KiB of advertised window), on the shared queue at its 300 ms.
fn window_pair(
    rtt_ms: u64,
    rate_bps: u64,
    timeout_s: Option<u64>,
    shared: bool,
    seed: u64,
) -> Vec<Case> {
    let rtt_ms = if shared { 0 } else { rtt_ms };
    let felt_rtt_ms = if shared { 300 } else { rtt_ms };
    let bound_bps = 80.0 * 1024.0 * 8.0 / (felt_rtt_ms as f64 / 1e3);
    let bytes = ((bound_bps / 8.0 * 3.0) as u64).clamp(1_000_000, 20_000_000);
    // On the shared queue the download first runs at the link's rate: alone for 100 ms, then
    // sharing the link with the competitor while its slow start fills the queue. Measured at
    // 50 Mbit/s: 1.23 MB in the first 0.3 s, i.e. 0.2 s of the link's rate, before the round
    // trip reached the queue's 230-300 ms (with only 0.1 s of it added here, three quarters of
    // the bytes went before the queue was full and the window-limited part lasted 1.2 s, not
    // 3 s).
    let bytes = if shared {
        bytes + rate_bps / 8 / 5
    } else {
        bytes
    };
    let bytes = if timeout_s.is_some() {
        bytes * 3
    } else {
        bytes
    };
    let path = if shared {
        "shared-queue".to_string()
    } else {
        format!("rtt{rtt_ms}ms")
    };
    let tag = format!(
        "{path}-{}{}",
        rate_name(rate_bps),
        timeout_s
            .map(|t| format!("-timeout{t}s"))
            .unwrap_or_default()
    );
    let spec = |rcvbuf| {
        Spec::Window(WindowSpec {
            rtt_ms,
            rate_bps,
            rcvbuf,
            bytes,
            timeout_s,
            shared,
        })
    };
    let mut out = vec![case(
        format!("window-rcvbuf64k-{tag}"),
        false,
        seed,
        spec(Some(65536)),
    )];
    // A transfer slower than its timeout has no healthy twin of the same shape: the autotuned
    // download of the same bytes finishes long before it.
    out.push(case(
        format!("window-autotuned-{tag}"),
        true,
        seed,
        spec(None),
    ));
    out
}

fn timeout_case(style: TimeoutStyle, timeout_s: u64, twin: bool, seed: u64) -> Case {
    let name = match style {
        TimeoutStyle::Fin => "timeout-fin",
        TimeoutStyle::Rst => "timeout-rst",
        TimeoutStyle::Transfer => "timeout-transfer",
        TimeoutStyle::ServerSlow => "timeout-server-slow",
        TimeoutStyle::ServerSlowAbort => "timeout-server-slow-abort",
    };
    let name = format!("{name}-{timeout_s}s{}", if twin { "-twin" } else { "" });
    let spec = TimeoutSpec {
        style,
        timeout_s,
        rate_bps: 4 * MBIT,
    };
    case(name, twin, seed, Spec::Timeout(spec))
}

fn burst_case(spec: BurstSpec, twin: bool, seed: u64) -> Case {
    let shape = if spec.sustained {
        "sustained".to_string()
    } else {
        format!("{}fwd-{}rev", spec.sources, spec.reverse)
    };
    let name = format!(
        "burst-{shape}-{}{}",
        rate_name(spec.rate_bps),
        if twin { "-twin" } else { "" }
    );
    case(name, twin, seed, Spec::Burst(spec))
}

fn nagle_pair(spec: NagleSpec, seed: u64) -> Vec<Case> {
    let who = match spec.split {
        Split::Client => "client",
        Split::Server => "server",
    };
    let tag = format!("{who}-split-{}rps-{}conn", spec.rate, spec.conns);
    vec![
        case(
            format!("nagle-{tag}"),
            false,
            seed,
            Spec::Nagle(spec.clone()),
        ),
        case(
            format!("nagle-{tag}-nodelay"),
            true,
            seed,
            Spec::Nagle(spec),
        ),
    ]
}

fn runq_case(variant: RunqVariant, twin: bool, seed: u64) -> Case {
    let name = match variant {
        RunqVariant::Unequal => "runq-neighbour-unequal",
        RunqVariant::Equal => "runq-neighbour-equal",
        RunqVariant::System => "runq-neighbour-system",
        RunqVariant::Busy => "runq-neighbour-busy-host",
        RunqVariant::ControlEqual => "runq-control-equal",
        RunqVariant::Quota => "runq-quota",
    };
    let name = format!("{name}{}", if twin { "-twin" } else { "" });
    // The control plants nothing: it is scored as a healthy twin.
    let twin = twin || variant == RunqVariant::ControlEqual;
    case(name, twin, seed, Spec::Runq(RunqSpec { variant }))
}

/// The cases of a matrix, in the order they run.
pub fn matrix(scale: Scale, seed: u64) -> Vec<Case> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let pick = |rng: &mut StdRng, v: &[u64]| v[rng.random_range(0..v.len())];
    // Receive window: the classic 64 KiB buffer over a long path.
    let rtt = pick(&mut rng, &[40, 80]);
    out.extend(window_pair(rtt, 100 * MBIT, None, false, seed));
    out.extend(window_pair(0, 50 * MBIT, None, true, seed));
    // Timeouts, one of each style.
    let t = pick(&mut rng, &[2, 3]);
    out.push(timeout_case(TimeoutStyle::Rst, t, false, seed));
    out.push(timeout_case(TimeoutStyle::Fin, t, false, seed));
    out.push(timeout_case(TimeoutStyle::Transfer, t, false, seed));
    out.push(timeout_case(TimeoutStyle::ServerSlow, 1, false, seed));
    out.push(timeout_case(TimeoutStyle::ServerSlowAbort, t, false, seed));
    out.push(timeout_case(TimeoutStyle::Fin, t, true, seed));
    // Bursts from several sources in both directions, sustained saturation, the twin.
    let sources = rng.random_range(2..=4);
    let both = BurstSpec {
        rate_bps: 100 * MBIT,
        sources,
        reverse: 1,
        sustained: false,
    };
    out.push(burst_case(both.clone(), false, seed));
    out.push(burst_case(
        BurstSpec {
            sustained: true,
            sources: 0,
            reverse: 0,
            ..both.clone()
        },
        false,
        seed,
    ));
    out.push(burst_case(both, true, seed));
    // Nagle.
    let rate = pick(&mut rng, &[20, 50]) as u32;
    let conns = rng.random_range(1..=2);
    out.extend(nagle_pair(
        NagleSpec {
            split: Split::Client,
            rate,
            conns,
            sweep: true,
        },
        seed,
    ));
    // The run queue.
    for v in [
        RunqVariant::Unequal,
        RunqVariant::System,
        RunqVariant::Equal,
        RunqVariant::Quota,
        RunqVariant::ControlEqual,
    ] {
        out.push(runq_case(v, false, seed));
    }
    out.push(runq_case(RunqVariant::Unequal, true, seed));
    if scale == Scale::Full {
        out.extend(full_extra(&mut rng, seed));
    }
    out
}

/// What the full matrix adds to the quick one.
fn full_extra(rng: &mut StdRng, seed: u64) -> Vec<Case> {
    let mut out = Vec::new();
    out.extend(window_pair(20, GBIT, None, false, seed));
    out.extend(window_pair(150, 100 * MBIT, None, false, seed));
    out.extend(window_pair(0, 20 * MBIT, None, true, seed));
    out.extend(
        window_pair(80, 100 * MBIT, Some(2), false, seed)
            .into_iter()
            .take(1),
    );
    for (style, t, twin) in [
        (TimeoutStyle::Rst, 1, false),
        (TimeoutStyle::Fin, 1, false),
        (TimeoutStyle::ServerSlow, 2, false),
        (TimeoutStyle::ServerSlow, 2, true),
        (TimeoutStyle::Rst, 2, true),
        (TimeoutStyle::Transfer, 2, true),
        (TimeoutStyle::ServerSlowAbort, 1, false),
        (TimeoutStyle::ServerSlowAbort, 2, true),
    ] {
        out.push(timeout_case(style, t, twin, seed));
    }
    for rate in [GBIT, 10 * GBIT] {
        let spec = BurstSpec {
            rate_bps: rate,
            sources: 3,
            reverse: 1,
            sustained: false,
        };
        out.push(burst_case(spec.clone(), false, seed));
        out.push(burst_case(spec, true, seed));
    }
    for (sources, reverse) in [(4, 0), (0, 2)] {
        let spec = BurstSpec {
            rate_bps: 100 * MBIT,
            sources,
            reverse,
            sustained: false,
        };
        out.push(burst_case(spec, false, seed));
    }
    out.push(burst_case(
        BurstSpec {
            rate_bps: GBIT,
            sources: 0,
            reverse: 0,
            sustained: true,
        },
        false,
        seed,
    ));
    let conns = rng.random_range(2..=3);
    out.extend(nagle_pair(
        NagleSpec {
            split: Split::Server,
            rate: 20,
            conns,
            sweep: false,
        },
        seed,
    ));
    out.extend(nagle_pair(
        NagleSpec {
            split: Split::Client,
            rate: 100,
            conns,
            sweep: false,
        },
        seed,
    ));
    out.push(runq_case(RunqVariant::Busy, false, seed));
    out.push(runq_case(RunqVariant::Busy, true, seed));
    out.push(runq_case(RunqVariant::Quota, true, seed));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_matrix_and_names_are_unique() {
        for scale in [Scale::Quick, Scale::Full] {
            let a = matrix(scale, 7);
            assert_eq!(a, matrix(scale, 7));
            let mut names: Vec<&str> = a.iter().map(|c| c.name.as_str()).collect();
            names.sort_unstable();
            let n = names.len();
            names.dedup();
            assert_eq!(names.len(), n, "duplicate case names");
        }
        assert!(matrix(Scale::Full, 7).len() > matrix(Scale::Quick, 7).len());
    }

    #[test]
    fn every_planted_class_has_a_twin_in_the_quick_matrix() {
        let m = matrix(Scale::Quick, 1);
        for kind in ["window", "timeout", "burst", "nagle", "runq"] {
            let of = |twin: bool| {
                m.iter()
                    .filter(|c| c.name.starts_with(kind) && c.twin == twin)
                    .count()
            };
            assert!(of(false) > 0 && of(true) > 0, "{kind}: planted and twin");
        }
    }
}
