//! What a CSV column or a JSON key means, from its name.
//!
//! In: a header field or JSON key such as `latency_ms`, `"Latency (ms)"`, `timeStamp`, `status`.
//! Out: its [`Role`] and, when the name carries one, the unit of its bare numbers. Names are
//! matched case-insensitively after trimming spaces and double quotes; a unit is either a
//! `_unit` suffix (`rt_s`, `ts_ms`) or a bracketed one (`latency (ms)`, `latency [us]`).

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The latency itself.
    Latency,
    /// When the request happened (the sample's time when nothing more precise is given).
    Timestamp,
    /// When the schedule wanted the request sent.
    Intended,
    /// When the request actually went out.
    Start,
    /// When the response (or error) arrived.
    End,
    /// How the request ended; see [`Polarity`].
    Outcome(Polarity),
    /// Which series the row belongs to.
    Series,
}

/// How to read an outcome column: its name says which way a yes/no answer points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polarity {
    /// `outcome`, `status`, `result`: names such as `ok`, `timeout` or HTTP status numbers.
    Named,
    /// `ok`, `success`: true means ok.
    Success,
    /// `error`: true, or any message, means an error; empty or false means ok.
    Failure,
}

/// A recognised column: its role and the unit its bare numbers are in, if the name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    /// What the column holds.
    pub role: Role,
    /// Canonical unit name (`ns`, `us`, `ms`, `s`, `m`, `h`) from the name's suffix.
    pub unit: Option<&'static str>,
}

/// Column names for each role. Latency names also match with any suffix after `duration`
/// (`duration_ms`, `duration(us)`), handled by the unit split.
const NAMES: &[(&str, Role)] = &[
    ("latency", Role::Latency),
    ("lat", Role::Latency),
    ("duration", Role::Latency),
    ("rt", Role::Latency),
    ("rtt", Role::Latency),
    ("elapsed", Role::Latency),
    ("response_time", Role::Latency),
    ("responsetime", Role::Latency),
    ("ts", Role::Timestamp),
    ("time", Role::Timestamp),
    ("timestamp", Role::Timestamp),
    ("datetime", Role::Timestamp),
    ("intended", Role::Intended),
    ("scheduled", Role::Intended),
    ("intended_time", Role::Intended),
    ("scheduled_time", Role::Intended),
    ("start", Role::Start),
    ("start_time", Role::Start),
    ("started", Role::Start),
    ("end", Role::End),
    ("end_time", Role::End),
    ("finish", Role::End),
    ("finished", Role::End),
    ("outcome", Role::Outcome(Polarity::Named)),
    ("status", Role::Outcome(Polarity::Named)),
    ("result", Role::Outcome(Polarity::Named)),
    ("ok", Role::Outcome(Polarity::Success)),
    ("success", Role::Outcome(Polarity::Success)),
    ("error", Role::Outcome(Polarity::Failure)),
    ("series", Role::Series),
    ("name", Role::Series),
];

/// Classifies a column name; `None` for columns tailhunt does not use.
pub(crate) fn classify(raw: &str) -> Option<Field> {
    let name = raw.trim().trim_matches('"').trim().to_ascii_lowercase();
    if let Some(role) = role_of(&name) {
        return Some(Field { role, unit: None });
    }
    let (base, unit) = split_unit(&name)?;
    let role = role_of(base)?;
    Some(Field {
        role,
        unit: Some(unit),
    })
}

/// The unit a column name carries (`value_ms` -> `ms`), whatever the rest of the name is.
pub(crate) fn unit_in(raw: &str) -> Option<&'static str> {
    let name = raw.trim().trim_matches('"').trim().to_ascii_lowercase();
    split_unit(&name).map(|(_, unit)| unit)
}

fn role_of(name: &str) -> Option<Role> {
    NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, role)| role)
}

/// Splits `latency_ms` / `latency (ms)` / `latency[ms]` into the base name and canonical unit.
fn split_unit(name: &str) -> Option<(&str, &'static str)> {
    if let Some(inner) = name.strip_suffix(')').or_else(|| name.strip_suffix(']')) {
        let open = inner.rfind(['(', '['])?;
        let unit = canonical_unit(inner.get(open + 1..)?.trim())?;
        let base = inner.get(..open)?.trim().trim_end_matches('_');
        return Some((base, unit));
    }
    let (base, suffix) = name.rsplit_once(['_', '-', ' '])?;
    Some((base.trim(), canonical_unit(suffix)?))
}

/// The canonical name of a time unit as `tailhunt_model::parse_duration_ns` accepts it.
pub(crate) fn canonical_unit(unit: &str) -> Option<&'static str> {
    Some(match unit {
        "ns" | "nsec" | "nanos" | "nanoseconds" => "ns",
        "us" | "µs" | "μs" | "usec" | "micros" | "microseconds" => "us",
        "ms" | "msec" | "millis" | "milliseconds" => "ms",
        "s" | "sec" | "secs" | "seconds" => "s",
        "m" | "min" | "minutes" => "m",
        "h" | "hr" | "hours" => "h",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(role: Role, unit: Option<&'static str>) -> Option<Field> {
        Some(Field { role, unit })
    }

    #[test]
    fn names_with_units() {
        assert_eq!(classify("latency_ms"), field(Role::Latency, Some("ms")));
        assert_eq!(
            classify(" \"Latency (ms)\" "),
            field(Role::Latency, Some("ms"))
        );
        assert_eq!(classify("latency[us]"), field(Role::Latency, Some("us")));
        assert_eq!(classify("duration_ns"), field(Role::Latency, Some("ns")));
        assert_eq!(classify("rt_s"), field(Role::Latency, Some("s")));
        assert_eq!(classify("ts_ms"), field(Role::Timestamp, Some("ms")));
        assert_eq!(classify("timestamp_us"), field(Role::Timestamp, Some("us")));
        assert_eq!(classify("time_ns"), field(Role::Timestamp, Some("ns")));
        assert_eq!(classify("start_time_ns"), field(Role::Start, Some("ns")));
    }

    #[test]
    fn names_without_units() {
        assert_eq!(classify("elapsed"), field(Role::Latency, None));
        assert_eq!(classify("timeStamp"), field(Role::Timestamp, None));
        assert_eq!(classify("scheduled"), field(Role::Intended, None));
        assert_eq!(
            classify("Status"),
            field(Role::Outcome(Polarity::Named), None)
        );
        assert_eq!(
            classify("success"),
            field(Role::Outcome(Polarity::Success), None)
        );
        assert_eq!(
            classify("error"),
            field(Role::Outcome(Polarity::Failure), None)
        );
        assert_eq!(classify("name"), field(Role::Series, None));
        assert_eq!(classify("start_time"), field(Role::Start, None));
    }

    #[test]
    fn unknown_names_are_ignored() {
        for name in [
            "bytes",
            "url",
            "latency_furlongs",
            "",
            "()",
            "(ms)",
            "_ms",
            "[",
            "latency(",
        ] {
            assert_eq!(classify(name), None, "{name:?}");
        }
    }
}
