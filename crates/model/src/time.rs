//! Time origins, and durations written the way people write them (`450us`, `12ms`, `1.5s`).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The two clocks of a run, read at the same instant.
///
/// Sample times are on the monotonic clock (immune to NTP steps); reports want wall-clock time.
/// `wall = wall_ns + (t - mono_ns)` converts one to the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOrigin {
    /// Wall-clock time, ns since the Unix epoch.
    pub wall_ns: i64,
    /// Monotonic clock at the same instant, ns.
    pub mono_ns: i64,
}

impl ClockOrigin {
    /// Reads both clocks now.
    pub fn now() -> ClockOrigin {
        use rustix::time::{clock_gettime, ClockId};
        let mono = clock_gettime(ClockId::Monotonic);
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        ClockOrigin {
            wall_ns: wall,
            mono_ns: mono
                .tv_sec
                .saturating_mul(1_000_000_000)
                .saturating_add(mono.tv_nsec),
        }
    }

    /// An origin for data whose times are already wall-clock (imports): both clocks equal.
    pub fn wall(wall_ns: i64) -> ClockOrigin {
        ClockOrigin {
            wall_ns,
            mono_ns: wall_ns,
        }
    }

    /// Converts a monotonic time of this run to wall-clock ns since the epoch.
    pub fn to_wall(&self, mono_ns: i64) -> i64 {
        self.wall_ns
            .saturating_add(mono_ns.saturating_sub(self.mono_ns))
    }

    /// The same clocks read at monotonic time `mono_ns` instead (earlier, for a run whose
    /// first data was measured before it was stored).
    pub fn at(&self, mono_ns: i64) -> ClockOrigin {
        ClockOrigin {
            wall_ns: self.to_wall(mono_ns),
            mono_ns,
        }
    }
}

/// Why a duration could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DurationParseError {
    /// Nothing to parse.
    #[error("empty duration")]
    Empty,
    /// Not a number.
    #[error("'{0}' is not a number")]
    NotANumber(String),
    /// A suffix that is not a time unit.
    #[error("unknown unit '{unit}' in '{text}' (use ns, us, ms, s, m or h)")]
    UnknownUnit {
        /// The whole input.
        text: String,
        /// The suffix that was not understood.
        unit: String,
    },
    /// A number without a unit where no default unit was given.
    #[error("'{0}' has no unit (write e.g. 12ms or 450us, or name the unit)")]
    MissingUnit(String),
    /// Negative, NaN or too large for 64-bit nanoseconds.
    #[error("'{0}' is out of range (must be a finite, non-negative duration under 292 years)")]
    OutOfRange(String),
}

/// Nanoseconds per unit name; `None` for an unknown unit.
pub fn unit_scale_ns(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" | "nsec" | "nanoseconds" => 1.0,
        "us" | "µs" | "μs" | "usec" | "microseconds" => 1e3,
        "ms" | "msec" | "milliseconds" => 1e6,
        "s" | "sec" | "secs" | "seconds" => 1e9,
        "m" | "min" | "minutes" => 60e9,
        "h" | "hr" | "hours" => 3600e9,
        _ => return None,
    })
}

/// Parses `12ms`, `450us`, `0.45 ms`, `1.5s`, `2m`, `100ns`. A bare number uses `default_unit`
/// (a unit name such as `"ms"`), or is an error when there is none.
pub fn parse_duration_ns(
    text: &str,
    default_unit: Option<&str>,
) -> Result<i64, DurationParseError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DurationParseError::Empty);
    }
    let split = t
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == '+'
                || c == '-'
                || ((c == 'e' || c == 'E') && i > 0 && is_exponent(t, i)))
        })
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit = unit.trim();
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| DurationParseError::NotANumber(t.to_string()))?;
    let scale = if unit.is_empty() {
        let name = default_unit.ok_or_else(|| DurationParseError::MissingUnit(t.to_string()))?;
        unit_scale_ns(name).ok_or_else(|| DurationParseError::UnknownUnit {
            text: t.to_string(),
            unit: name.to_string(),
        })?
    } else {
        unit_scale_ns(unit).ok_or_else(|| DurationParseError::UnknownUnit {
            text: t.to_string(),
            unit: unit.to_string(),
        })?
    };
    let ns = value * scale;
    if !ns.is_finite() || ns < 0.0 || ns >= i64::MAX as f64 {
        return Err(DurationParseError::OutOfRange(t.to_string()));
    }
    Ok(ns.round() as i64)
}

/// An `e` at byte `i` is an exponent when a digit or sign follows it (`1e3`), not a unit letter.
fn is_exponent(t: &str, i: usize) -> bool {
    let rest = &t.as_bytes()[i + 1..];
    match rest.first() {
        Some(b'+') | Some(b'-') => rest.get(1).is_some_and(u8::is_ascii_digit),
        Some(c) => c.is_ascii_digit(),
        None => false,
    }
}

/// Formats a rate (per second) for people and for series labels: `50`, `1.5k`, `40k`, `2m`.
/// `tailhunt load` stores sweep steps under this label, and sweeps parse it back.
pub fn format_rate(r: f64) -> String {
    let (v, suffix) = if r >= 1e6 {
        (r / 1e6, "m")
    } else if r >= 1e3 {
        (r / 1e3, "k")
    } else {
        (r, "")
    };
    let s = format!("{v:.2}");
    format!("{}{suffix}", s.trim_end_matches('0').trim_end_matches('.'))
}

/// Formats nanoseconds for people with three significant digits: `452us`, `10.2ms`, `1.50s`.
pub fn format_duration_ns(ns: f64) -> String {
    DurationNs(ns).to_string()
}

/// [`DurationNs`] of a whole number of nanoseconds (what captures and clocks give), in integer
/// arithmetic: a float printed to a precision can take a big-number path that cost a
/// 100,000-connection capture 2% of its CPU in its close notes alone. Rounds half up, where
/// the float path rounds the binary value (1005ns: `1.01us` here, `1.00us` from 1.005_f64).
fn whole_ns(f: &mut std::fmt::Formatter<'_>, ns: i64) -> std::fmt::Result {
    let a = ns.unsigned_abs();
    let sign = if ns < 0 { "-" } else { "" };
    let (scale, unit) = match a {
        0..1_000 => return write!(f, "{ns}ns"),
        1_000..1_000_000 => (1_000, "us"),
        1_000_000..1_000_000_000 => (1_000_000, "ms"),
        _ => (1_000_000_000, "s"),
    };
    // Three significant digits: as many decimals as the whole part leaves.
    let (decimals, step) = match a / scale {
        0..10 => (2, scale / 100),
        10..100 => (1, scale / 10),
        _ => (0, scale),
    };
    let r = (a + step / 2) / step;
    match decimals {
        0 => write!(f, "{sign}{r}{unit}"),
        1 => write!(f, "{sign}{}.{}{unit}", r / 10, r % 10),
        _ => write!(f, "{sign}{}.{:02}{unit}", r / 100, r % 100),
    }
}

/// Nanoseconds written for people, as [`format_duration_ns`] does, straight into whatever is
/// being written (a capture's per-flow close notes are written a hundred thousand times a
/// run: one buffer each instead of a string per duration).
#[derive(Debug, Clone, Copy)]
pub struct DurationNs(pub f64);

impl std::fmt::Display for DurationNs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = self.0;
        if ns.fract() == 0.0 && ns.abs() < 1e15 {
            whole_ns(f, ns as i64)
        } else {
            fractional_ns(f, ns)
        }
    }
}

/// [`DurationNs`] of any number of nanoseconds, in floating point.
fn fractional_ns(f: &mut std::fmt::Formatter<'_>, ns: f64) -> std::fmt::Result {
    let a = ns.abs();
    let (v, unit) = if a < 1e3 {
        (ns, "ns")
    } else if a < 1e6 {
        (ns / 1e3, "us")
    } else if a < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let av = v.abs();
    if (unit == "ns" && av.fract() == 0.0) || av >= 100.0 {
        write!(f, "{v:.0}{unit}")
    } else if av >= 10.0 {
        write!(f, "{v:.1}{unit}")
    } else {
        write!(f, "{v:.2}{unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The float rule, which every duration went through before whole nanoseconds had their
    /// own path.
    fn by_float(ns: f64) -> String {
        struct ByFloat(f64);
        impl std::fmt::Display for ByFloat {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                fractional_ns(f, self.0)
            }
        }
        ByFloat(ns).to_string()
    }

    /// Moving an origin keeps the two clocks' offset: a time converts to the same wall time
    /// through either.
    #[test]
    fn an_origin_moved_earlier_keeps_its_clocks_offset() {
        let now = ClockOrigin {
            wall_ns: 1_700_000_000_000_000_000,
            mono_ns: 5_000_000_000,
        };
        let earlier = now.at(4_000_000_000);
        assert_eq!(earlier.mono_ns, 4_000_000_000);
        assert_eq!(earlier.wall_ns, 1_699_999_999_000_000_000);
        assert_eq!(earlier.to_wall(4_500_000_000), now.to_wall(4_500_000_000));
    }

    #[test]
    fn whole_nanoseconds_read_as_the_float_rule_except_at_ties() {
        assert_eq!(format_duration_ns(791_000.0), "791us");
        assert_eq!(format_duration_ns(1_490_123.0), "1.49ms");
        assert_eq!(format_duration_ns(11_849_999.0), "11.8ms");
        assert_eq!(format_duration_ns(9_996_000.0), "10.00ms");
        assert_eq!(format_duration_ns(999_999.0), "1000us");
        assert_eq!(format_duration_ns(-2_500.0), "-2.50us");
        assert_eq!(format_duration_ns(1_005.0), "1.01us");
        assert_eq!(format_duration_ns(7.0), "7ns");
        assert_eq!(format_duration_ns(0.5), "0.50ns");
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ns = (x % 10u64.pow(1 + (x >> 60) as u32 % 12)) as i64;
            let ns = if x & 1 == 0 { ns } else { -ns };
            // A tie at the last digit kept is the one case where the two rules part.
            let digits = ns.unsigned_abs().to_string();
            let cut = digits.len().saturating_sub(3);
            let dropped = &digits[digits.len() - cut..];
            let tie =
                cut > 0 && dropped.starts_with('5') && dropped[1..].bytes().all(|b| b == b'0');
            if !tie {
                assert_eq!(format_duration_ns(ns as f64), by_float(ns as f64), "{ns}");
            }
        }
    }

    #[test]
    fn parses_common_forms() {
        assert_eq!(parse_duration_ns("12ms", None), Ok(12_000_000));
        assert_eq!(parse_duration_ns("450us", None), Ok(450_000));
        assert_eq!(parse_duration_ns("450µs", None), Ok(450_000));
        assert_eq!(parse_duration_ns(" 0.45 ms ", None), Ok(450_000));
        assert_eq!(parse_duration_ns("1.5s", None), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("1e3us", None), Ok(1_000_000));
        assert_eq!(parse_duration_ns("7", Some("ms")), Ok(7_000_000));
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        assert_eq!(
            parse_duration_ns("7", None),
            Err(DurationParseError::MissingUnit("7".into()))
        );
        assert!(matches!(
            parse_duration_ns("7 furlongs", None),
            Err(DurationParseError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration_ns("-3ms", None),
            Err(DurationParseError::OutOfRange(_))
        ));
        assert!(matches!(
            parse_duration_ns("abc", None),
            Err(DurationParseError::NotANumber(_))
        ));
        assert_eq!(parse_duration_ns("", None), Err(DurationParseError::Empty));
        assert!(parse_duration_ns("1e400s", None).is_err());
    }

    #[test]
    fn formats_with_three_digits() {
        assert_eq!(format_duration_ns(450_000.0), "450us");
        assert_eq!(format_duration_ns(10_240_000.0), "10.2ms");
        assert_eq!(format_duration_ns(1_500_000_000.0), "1.50s");
        assert_eq!(format_duration_ns(999.0), "999ns");
    }
}
