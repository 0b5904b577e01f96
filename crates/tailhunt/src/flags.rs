//! Typed flag values: clap reads durations, sizes and link rates with the model's one parser
//! per kind of unit (`tailhunt_model::units`), so a bad value is refused before anything runs,
//! with the flag named and the accepted forms said.

use std::time::Duration;

use tailhunt_model::units;

/// `10s`, `500ms`, `450us`.
pub fn duration(text: &str) -> Result<Duration, String> {
    tailhunt_model::parse_duration_ns(text, None)
        .map(|ns| Duration::from_nanos(ns as u64))
        .map_err(|e| format!("{e} (write a duration such as 10s or 500ms)"))
}

/// `64k`, `10MB`, `1500` (bytes, as `dd` counts them).
pub fn bytes(text: &str) -> Result<u64, String> {
    units::parse_bytes(text).map_err(|e| e.to_string())
}

/// `100mbit`, `1gbit`, `10g` (bits per second).
pub fn bit_rate(text: &str) -> Result<u64, String> {
    units::parse_bit_rate(text).map_err(|e| e.to_string())
}

/// `50`, `0.5`, `20k` (requests per second).
pub fn request_rate(text: &str) -> Result<f64, String> {
    units::parse_request_rate(text).map_err(|e| e.to_string())
}

/// `--commit-interval`: a duration in the store's range for it
/// ([`tailhunt_store::USER_COMMIT_INTERVALS`]).
pub fn commit_interval(text: &str) -> Result<Duration, String> {
    tailhunt_store::user_commit_interval(duration(text)?)
}

/// A duration flag's value as people write it back (`10.0s`, `500ms`).
pub fn show(d: Duration) -> String {
    tailhunt_model::format_duration_ns(d.as_nanos() as f64)
}
