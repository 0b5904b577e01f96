//! CPU-quota throttling and CPU pressure of a cgroup, from its control files.
//!
//! - cgroup v1 `cpu` controller: `cpu.stat` has `nr_periods`, `nr_throttled` and
//!   `throttled_time` (ns); the quota is `cpu.cfs_quota_us` per `cpu.cfs_period_us` (-1: none).
//! - cgroup2 with the `cpu` controller: `cpu.stat` has `nr_periods`, `nr_throttled` and
//!   `throttled_usec`; the quota is `cpu.max` (`max 100000` or `10000 100000`).
//! - cgroup2 `cpu.pressure` (PSI): `some ... total=<us>` is the time some task was runnable but
//!   waiting for a CPU.
//!
//! Counters are cumulative; the tracer keeps the previous reading and reports deltas.

use std::fs;
use std::path::Path;

use tailhunt_model::evidence::runq::{Quota, Throttling};

/// Reads `cpu.stat` in `dir` (v1 or v2 format); `None` when it has no throttling counters
/// (cgroup2 without the cpu controller, or no such file).
pub fn read_throttling(dir: &Path) -> Option<Throttling> {
    parse_cpu_stat(&fs::read_to_string(dir.join("cpu.stat")).ok()?)
}

/// Parses `cpu.stat` text.
pub fn parse_cpu_stat(text: &str) -> Option<Throttling> {
    let mut t = Throttling::default();
    let mut seen = false;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(key), Some(value)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok()))
        else {
            continue;
        };
        match key {
            "nr_periods" => t.periods = value,
            "nr_throttled" => {
                t.throttled_periods = value;
                seen = true;
            }
            "throttled_time" => t.throttled_ns = value,
            "throttled_usec" => t.throttled_ns = value.saturating_mul(1000),
            _ => {}
        }
    }
    seen.then_some(t)
}

/// The CPU quota set on the cgroup at `dir`, v1 or v2; `None` when unlimited or unreadable.
pub fn read_quota(dir: &Path) -> Option<Quota> {
    if let Ok(max) = fs::read_to_string(dir.join("cpu.max")) {
        let mut it = max.split_whitespace();
        let quota = it.next()?.parse().ok()?; // "max" fails here: unlimited
        let period = it.next()?.parse().ok()?;
        return Some(Quota {
            quota_us: quota,
            period_us: period,
        });
    }
    let quota: i64 = fs::read_to_string(dir.join("cpu.cfs_quota_us"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let period: u64 = fs::read_to_string(dir.join("cpu.cfs_period_us"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (quota > 0).then_some(Quota {
        quota_us: quota as u64,
        period_us: period,
    })
}

/// Cumulative time (µs) some task of the cgroup at `dir` waited for a CPU, from `cpu.pressure`.
pub fn read_pressure_some_us(dir: &Path) -> Option<u64> {
    parse_pressure_some_us(&fs::read_to_string(dir.join("cpu.pressure")).ok()?)
}

/// Parses the `some` line's `total=` of a PSI file.
pub fn parse_pressure_some_us(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with("some "))?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_cpu_stat() {
        let v1 = "nr_periods 120\nnr_throttled 21\nthrottled_time 1890000000\nnr_bursts 0\n";
        assert_eq!(
            parse_cpu_stat(v1),
            Some(Throttling {
                periods: 120,
                throttled_periods: 21,
                throttled_ns: 1_890_000_000
            })
        );
        let v2 = "usage_usec 10\nuser_usec 5\nsystem_usec 5\nnr_periods 3\nnr_throttled 2\nthrottled_usec 150000\n";
        assert_eq!(parse_cpu_stat(v2).unwrap().throttled_ns, 150_000_000);
        // cgroup2 without the cpu controller: usage only, no throttling counters.
        assert_eq!(parse_cpu_stat("usage_usec 10\nuser_usec 5\n"), None);
    }

    #[test]
    fn deltas_saturate() {
        let a = Throttling {
            periods: 10,
            throttled_periods: 5,
            throttled_ns: 100,
        };
        let b = Throttling { periods: 4, ..a };
        assert_eq!(b.since(&a).periods, 0);
        assert_eq!(a.since(&b).periods, 6);
    }

    #[test]
    fn quota_in_words() {
        let q = Quota {
            quota_us: 10_000,
            period_us: 100_000,
        };
        assert_eq!(q.to_string(), "10.0ms per 100ms (0.10 CPU)");
    }

    #[test]
    fn pressure_total() {
        let text = "some avg10=3.55 avg60=14.18 avg300=16.00 total=88513978\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_pressure_some_us(text), Some(88_513_978));
    }
}
