//! Reading one value: a latency, a time or an outcome, written as text.
//!
//! In: the text of a CSV field or a JSON value, and the unit its column name gave.
//! Out: integer nanoseconds (or an [`Outcome`]), or a [`LineError`] that quotes the text and
//! says how to fix it. No allocation on the success path: these run once per field.

use std::time::UNIX_EPOCH;

use tailhunt_model::{parse_duration_ns, DurationParseError, Outcome};

use crate::error::{shorten, LineError};
use crate::names::Polarity;

/// A time read from an import, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Instant {
    /// Nanoseconds: since the Unix epoch when `absolute`, else since some start the tool chose.
    pub ns: i64,
    /// Whether `ns` is an epoch time.
    pub absolute: bool,
}

/// Where a unit for bare numbers could have been named, for the advice in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnitPlace {
    /// A CSV header.
    Header,
    /// A JSON key.
    Key,
}

/// Reads a latency: `12ms`, `0.45 ms`, or a bare number in `unit`.
pub(crate) fn latency(text: &str, unit: Option<&str>, place: UnitPlace) -> Result<i64, LineError> {
    parse_duration_ns(text, unit).map_err(|e| {
        let shown = shorten(text.trim());
        let reason = match e {
            _ if is_decimal_comma(text.trim()) => format!(
                "cannot read latency '{shown}': a decimal comma (write {} with a point)",
                shorten(&text.trim().replacen(',', ".", 1))
            ),
            DurationParseError::MissingUnit(_) => {
                let place = match place {
                    UnitPlace::Header => "in the header such as latency_ms",
                    UnitPlace::Key => "in the key such as latency_ms",
                };
                format!(
                    "'{shown}' has no unit (write e.g. 12ms or 450us, or name the unit {place}, \
                     or pass --unit ms)"
                )
            }
            DurationParseError::Empty => {
                "cannot read latency '': the field is empty (give every line a latency)".into()
            }
            DurationParseError::NotANumber(_) => {
                format!("cannot read latency '{shown}': '{shown}' is not a number")
            }
            DurationParseError::UnknownUnit { unit, .. } => format!(
                "cannot read latency '{shown}': unknown unit '{}' (use ns, us, ms or s)",
                shorten(&unit)
            ),
            DurationParseError::OutOfRange(_) => format!(
                "cannot read latency '{shown}': out of range (must be a finite, non-negative \
                 duration under 292 years)"
            ),
        };
        LineError::new(text.trim(), reason)
    })
}

/// `1,2` or `0,45ms`: digits, one comma, a digit (European spreadsheets write decimals so).
fn is_decimal_comma(text: &str) -> bool {
    let Some((int, rest)) = text.split_once(',') else {
        return false;
    };
    !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && rest.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && !rest.contains(',')
}

/// Epoch times start here: numbers above 1e9 seconds (2001-09-09) are read as epoch times,
/// smaller ones as relative to the tool's start.
const EPOCH_THRESHOLD_NS: i128 = 1_000_000_000 * 1_000_000_000;

/// Reads a time: a number of seconds (or of `unit`), an RFC 3339 time, or a duration with a unit
/// (`1.5s`, relative). `what` names the column in messages (`timestamp`, `start time`).
///
/// A unit-less number too large to be epoch seconds (after the year 5138) is read by magnitude
/// as epoch milliseconds, microseconds or nanoseconds; JMeter's `timeStamp` (epoch ms) needs it.
pub(crate) fn time(what: &str, text: &str, unit: Option<&str>) -> Result<Instant, LineError> {
    let t = text.trim();
    let scale = unit.and_then(unit_ns).unwrap_or(1_000_000_000);
    if let Some(mut ns) = decimal_scaled(t, scale) {
        if unit.is_none() {
            ns = by_magnitude(ns);
        }
        return match i64::try_from(ns) {
            Ok(ns) => Ok(Instant {
                ns,
                absolute: i128::from(ns) > EPOCH_THRESHOLD_NS,
            }),
            Err(_) => Err(LineError::new(
                t,
                format!(
                    "cannot read {what} '{}': out of range (after the year 2262)",
                    shorten(t)
                ),
            )),
        };
    }
    if let Some(ns) = rfc3339_ns(t) {
        return Ok(Instant { ns, absolute: true });
    }
    if t.bytes().any(|b| b.is_ascii_alphabetic()) {
        if let Ok(ns) = parse_duration_ns(t, None) {
            return Ok(Instant {
                ns,
                absolute: false,
            });
        }
    }
    let shown = shorten(t);
    Err(LineError::new(
        t,
        format!(
            "cannot read {what} '{shown}': expected seconds (1714560000.25), an RFC 3339 time \
             (2024-05-01T12:00:00Z) or a duration (1.5s)"
        ),
    ))
}

/// `seconds_ns` (a unit-less number read as seconds, in ns) re-read as epoch ms/us/ns when it is
/// too large to be seconds.
fn by_magnitude(seconds_ns: i128) -> i128 {
    const S: i128 = 1_000_000_000;
    let seconds = seconds_ns.abs() / S;
    if seconds >= 100_000_000_000_000_000 {
        seconds_ns / S
    } else if seconds >= 100_000_000_000_000 {
        seconds_ns / 1_000_000
    } else if seconds >= 100_000_000_000 {
        seconds_ns / 1_000
    } else {
        seconds_ns
    }
}

/// Nanoseconds per unit, for the canonical unit names of [`crate::names::canonical_unit`].
pub(crate) fn unit_ns(unit: &str) -> Option<i128> {
    Some(match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Parses a plain decimal number (`-12`, `1714560000.123456789`, `.5`, `1e3`) into
/// `value * scale`, rounded. Plain decimals are exact (an f64 would lose the nanoseconds of an
/// epoch time); exponents go through f64.
fn decimal_scaled(text: &str, scale: i128) -> Option<i128> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, text.get(1..)?),
        Some(b'+') => (false, text.get(1..)?),
        _ => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let is_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !is_digits(int) || !is_digits(frac) {
        return exponent_scaled(text, scale);
    }
    // 25 integer digits times the largest scale (3.6e12) stays far inside i128.
    if int.len() > 25 {
        return None;
    }
    let mut value: i128 = 0;
    for b in int.bytes() {
        value = value * 10 + i128::from(b - b'0');
    }
    let mut fraction: i128 = 0;
    let mut denominator: i128 = 1;
    for b in frac.bytes().take(18) {
        fraction = fraction * 10 + i128::from(b - b'0');
        denominator *= 10;
    }
    let scaled = value * scale + (fraction * scale + denominator / 2) / denominator;
    Some(if negative { -scaled } else { scaled })
}

/// `1e3`, `2.5E-2`: through f64, finite values only.
fn exponent_scaled(text: &str, scale: i128) -> Option<i128> {
    let plausible = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'+' | b'-' | b'e' | b'E'));
    if !plausible {
        return None;
    }
    let v = text.parse::<f64>().ok()? * scale as f64;
    (v.is_finite() && v.abs() < 1e30).then(|| v.round() as i128)
}

/// RFC 3339 (`2024-05-01T12:00:00.5Z`, `2024-05-01 12:00:00`, `...+02:00`) to epoch ns.
/// humantime reads UTC only, so a numeric offset is split off and applied here.
fn rfc3339_ns(text: &str) -> Option<i64> {
    let (base, offset_s) = split_offset(text);
    let t = humantime::parse_rfc3339_weak(base).ok()?;
    let ns = i64::try_from(t.duration_since(UNIX_EPOCH).ok()?.as_nanos()).ok()?;
    ns.checked_sub(offset_s.checked_mul(1_000_000_000)?)
}

/// Splits a trailing `+HH:MM` / `-HH:MM` off a date-time; the offset in seconds.
fn split_offset(text: &str) -> (&str, i64) {
    let b = text.as_bytes();
    let n = b.len();
    if n <= 19 {
        return (text, 0);
    }
    let tail = &b[n - 6..];
    let digit = |i: usize| tail[i].is_ascii_digit();
    let sign = match tail[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return (text, 0),
    };
    if !(digit(1) && digit(2) && tail[3] == b':' && digit(4) && digit(5)) {
        return (text, 0);
    }
    let two = |i: usize| i64::from(tail[i] - b'0') * 10 + i64::from(tail[i + 1] - b'0');
    match text.get(..n - 6) {
        Some(base) => (base, sign * (two(1) * 3600 + two(4) * 60)),
        None => (text, 0),
    }
}

/// Reads an outcome written as text, the way its column name says to (see [`Polarity`]).
pub(crate) fn outcome(text: &str, polarity: Polarity) -> Result<Outcome, LineError> {
    let t = text.trim().trim_matches('"');
    let lower_is = |words: &[&str]| words.iter().any(|w| t.eq_ignore_ascii_case(w));
    let parsed = match polarity {
        Polarity::Named => Outcome::parse(t),
        Polarity::Success if lower_is(&["1", "yes", "y", "t"]) => Some(Outcome::Ok),
        Polarity::Success if lower_is(&["0", "no", "n", "f"]) => Some(Outcome::Error),
        Polarity::Success => Outcome::parse(t),
        Polarity::Failure => Some(failure_outcome(t)),
    };
    parsed.ok_or_else(|| {
        let shown = shorten(t);
        LineError::new(
            t,
            format!("cannot read outcome '{shown}' (use ok, error, timeout, true/false or an HTTP status)"),
        )
    })
}

/// An `error` column: empty or false means no error; a message mentioning a timeout is one.
pub(crate) fn failure_outcome(text: &str) -> Outcome {
    let none = ["", "-", "0", "false", "no", "none", "null", "nil", "ok"];
    if none.iter().any(|w| text.eq_ignore_ascii_case(w)) {
        return Outcome::Ok;
    }
    let lower = text.to_ascii_lowercase();
    if lower.contains("timeout") || lower.contains("timed out") || lower.contains("timed_out") {
        Outcome::Timeout
    } else {
        Outcome::Error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: i64, absolute: bool) -> Result<Instant, LineError> {
        Ok(Instant { ns, absolute })
    }

    #[test]
    fn times_in_seconds_and_units() {
        assert_eq!(time("ts", "1.5", None), at(1_500_000_000, false));
        assert_eq!(time("ts", "-2", None), at(-2_000_000_000, false));
        assert_eq!(
            time("ts", "1714560000.123456789", None),
            at(1_714_560_000_123_456_789, true)
        );
        assert_eq!(time("ts", "1500", Some("ms")), at(1_500_000_000, false));
        assert_eq!(time("ts", "1e3", Some("us")), at(1_000_000, false));
        assert_eq!(time("ts", "2.5s", None), at(2_500_000_000, false));
        // JMeter's timeStamp: epoch milliseconds without a unit.
        assert_eq!(
            time("ts", "1714560000123", None),
            at(1_714_560_000_123_000_000, true)
        );
        assert_eq!(
            time("ts", "1714560000123456789", None),
            at(1_714_560_000_123_456_789, true)
        );
    }

    #[test]
    fn rfc3339_times() {
        let noon = 1_714_564_800_000_000_000;
        assert_eq!(time("ts", "2024-05-01T12:00:00Z", None), at(noon, true));
        assert_eq!(
            time("ts", "2024-05-01 12:00:00.25", None),
            at(noon + 250_000_000, true)
        );
        assert_eq!(
            time("ts", "2024-05-01T14:00:00+02:00", None),
            at(noon, true)
        );
        assert_eq!(
            time("ts", "2024-05-01T07:30:00-04:30", None),
            at(noon, true)
        );
    }

    #[test]
    fn bad_times_say_what_is_expected() {
        let e = time("timestamp", "yesterday", None).unwrap_err();
        assert!(
            e.reason
                .starts_with("cannot read timestamp 'yesterday': expected seconds"),
            "{}",
            e.reason
        );
        assert!(time("ts", "99999999999999999999999999", None).is_err());
        assert!(time("ts", "1e300", None).is_err());
        assert!(time("ts", "nan", None).is_err());
        assert!(time("ts", "-", None).is_err());
        assert!(time("ts", ".", None).is_err());
    }

    #[test]
    fn latencies() {
        assert_eq!(latency("12ms", None, UnitPlace::Header), Ok(12_000_000));
        assert_eq!(latency(" 0.45 ms ", None, UnitPlace::Header), Ok(450_000));
        assert_eq!(latency("7", Some("us"), UnitPlace::Header), Ok(7_000));
        let e = latency("12.5", None, UnitPlace::Key).unwrap_err();
        assert!(
            e.reason.contains("in the key such as latency_ms"),
            "{}",
            e.reason
        );
        let e = latency("abc", None, UnitPlace::Header).unwrap_err();
        assert_eq!(e.reason, "cannot read latency 'abc': 'abc' is not a number");
        assert_eq!(e.content, "abc");
    }

    #[test]
    fn outcomes_by_polarity() {
        use Polarity::*;
        assert_eq!(outcome("200", Named), Ok(Outcome::Ok));
        assert_eq!(outcome("TIMEOUT", Named), Ok(Outcome::Timeout));
        assert!(outcome("maybe", Named).is_err());
        assert_eq!(outcome("true", Success), Ok(Outcome::Ok));
        assert_eq!(outcome("0", Success), Ok(Outcome::Error));
        assert_eq!(outcome("", Failure), Ok(Outcome::Ok));
        assert_eq!(outcome("connection refused", Failure), Ok(Outcome::Error));
        assert_eq!(
            outcome("read: Timeout after 5s", Failure),
            Ok(Outcome::Timeout)
        );
    }
}
