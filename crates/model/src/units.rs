//! Reading quantities people type: the one parser per kind of unit, with one stated meaning of
//! every suffix, used by every flag and every input format.
//!
//! | kind | examples | meaning |
//! |---|---|---|
//! | duration | `10s`, `500ms`, `450us`, `0.45 ms`, `2m`, `1h` | see [`crate::parse_duration_ns`] |
//! | bit rate (links) | `100mbit`, `1gbit`, `10g`, `100mbps`, `1e9` | bits per second, decimal: k = 10^3, m = 10^6, g = 10^9, t = 10^12. `bps` means **bits** per second here (unlike `tc`, where it means bytes) |
//! | size (bytes) | `1500`, `64k`, `64KiB`, `1MB`, `10M` | as `dd` counts: `k`/`K`/`KiB` = 1024, `KB` = 1000, `M`/`MiB` = 1024², `MB` = 10^6, `G`/`GiB` = 1024³, `GB` = 10^9 |
//! | request rate | `50`, `0.5`, `5k`, `1.5k`, `2m` | requests per second, decimal: k = 10^3, m = 10^6 |
//!
//! In: the text. Out: an integer count (bits/s, bytes) or a rate, or a [`UnitError`] that
//! quotes the text and says what to write instead.

use std::fmt;

/// A quantity that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a bit rate.
    #[error("cannot read rate '{0}': write a number of bits per second with bit, kbit, mbit, gbit (or k, m, g), e.g. 100mbit")]
    BitRate(String),
    /// Not a size.
    #[error("cannot read size '{0}': write a number of bytes, with k/K/KiB (1024), KB (1000), M/MiB, MB, G/GiB or GB, e.g. 64k or 10MB")]
    Size(String),
    /// Not a request rate.
    #[error("cannot read rate '{0}': write requests per second such as 50, 500, 5k or 0.5")]
    RequestRate(String),
    /// A request rate of zero or less.
    #[error("rate '{0}' must be above 0 requests per second")]
    NotPositive(String),
}

/// Splits `12.5 mbit` into the number and the unit (`e` before a digit or sign is an
/// exponent, as in `1e9`).
fn split(text: &str) -> Option<(f64, &str)> {
    let t = text.trim();
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let exponent = matches!(c, b'e' | b'E')
            && i > 0
            && b.get(i + 1)
                .is_some_and(|n| n.is_ascii_digit() || matches!(n, b'+' | b'-'));
        if exponent {
            i += 2;
        } else if c.is_ascii_digit() || c == b'.' || (i == 0 && matches!(c, b'+' | b'-')) {
            i += 1;
        } else {
            break;
        }
    }
    let number: f64 = t[..i].parse().ok()?;
    Some((number, t[i..].trim()))
}

/// A finite, non-negative value that fits a u64, rounded.
fn whole(x: f64) -> Option<u64> {
    (x.is_finite() && x >= 0.0 && x < u64::MAX as f64).then(|| x.round() as u64)
}

/// Reads a link rate in bits per second: `100mbit`, `20m`, `1gbit`, `10gbps`, `1e9`.
pub fn parse_bit_rate(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError::BitRate(text.to_string());
    let (number, unit) = split(text).ok_or_else(err)?;
    let unit = unit.to_ascii_lowercase();
    let prefix = unit
        .strip_suffix("bit/s")
        .or_else(|| unit.strip_suffix("bit"))
        .or_else(|| unit.strip_suffix("bps"))
        .unwrap_or(&unit);
    let scale = match prefix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => return Err(err()),
    };
    whole(number * scale).ok_or_else(err)
}

/// Reads a size in bytes, counting as `dd` does: `64k` = `64KiB` = 65536, `64KB` = 64000.
pub fn parse_bytes(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Size(text.to_string());
    let (number, unit) = split(text).ok_or_else(err)?;
    const KI: f64 = 1024.0;
    let scale = match unit {
        "" | "b" | "B" => 1.0,
        "k" | "K" | "KiB" | "kiB" | "kib" => KI,
        "KB" | "kB" | "kb" => 1e3,
        "m" | "M" | "MiB" | "mib" => KI * KI,
        "MB" | "mb" => 1e6,
        "g" | "G" | "GiB" | "gib" => KI * KI * KI,
        "GB" | "gb" => 1e9,
        _ => return Err(err()),
    };
    whole(number * scale).ok_or_else(err)
}

/// Reads one request rate: `50`, `0.5`, `5k`, `2m` (requests per second).
pub fn parse_request_rate(text: &str) -> Result<f64, UnitError> {
    let t = text.trim();
    let err = || UnitError::RequestRate(t.to_string());
    let (number, unit) = split(t).ok_or_else(err)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "/s" => 1.0,
        "k" | "k/s" => 1e3,
        "m" | "m/s" => 1e6,
        _ => return Err(err()),
    };
    let rate = number * scale;
    if !rate.is_finite() {
        return Err(err());
    }
    if rate <= 0.0 {
        return Err(UnitError::NotPositive(t.to_string()));
    }
    Ok(rate)
}

/// Reads a comma-separated list of request rates: `50,200,1k,5k`.
pub fn parse_request_rates(text: &str) -> Result<Vec<f64>, UnitError> {
    text.split(',').map(parse_request_rate).collect()
}

/// A bit rate for people: `100 Mbit/s`.
pub fn format_bit_rate(bps: u64) -> String {
    let trim = |x: f64| {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    match bps {
        b if b >= 1_000_000_000 => format!("{} Gbit/s", trim(b as f64 / 1e9)),
        b if b >= 1_000_000 => format!("{} Mbit/s", trim(b as f64 / 1e6)),
        b if b >= 1_000 => format!("{} kbit/s", trim(b as f64 / 1e3)),
        b => format!("{b} bit/s"),
    }
}

/// A byte count for people, in the binary units [`parse_bytes`] reads back: `64 KiB`.
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        let (v, unit) = match self.0 {
            n if n >= 1 << 30 => (b / (1u64 << 30) as f64, "GiB"),
            n if n >= 1 << 20 => (b / (1u64 << 20) as f64, "MiB"),
            n if n >= 1 << 10 => (b / 1024.0, "KiB"),
            n => return write!(f, "{n} B"),
        };
        let s = format!("{v:.2}");
        write!(
            f,
            "{} {unit}",
            s.trim_end_matches('0').trim_end_matches('.')
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_rates_are_decimal_and_bps_means_bits() {
        assert_eq!(parse_bit_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_bit_rate("100mbps"), Ok(100_000_000));
        assert_eq!(parse_bit_rate("100Mbit/s"), Ok(100_000_000));
        assert_eq!(parse_bit_rate("2.5gbit"), Ok(2_500_000_000));
        assert_eq!(parse_bit_rate("10g"), Ok(10_000_000_000));
        assert_eq!(parse_bit_rate("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_bit_rate(" 64000 "), Ok(64_000));
        for bad in ["", "fast", "100 parsecs", "-5mbit", "1e999"] {
            assert!(parse_bit_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(format_bit_rate(100_000_000), "100 Mbit/s");
        assert_eq!(format_bit_rate(2_500_000_000), "2.5 Gbit/s");
    }

    #[test]
    fn sizes_count_as_dd_does() {
        assert_eq!(parse_bytes("1500"), Ok(1500));
        assert_eq!(parse_bytes("64k"), Ok(65_536));
        assert_eq!(parse_bytes("64K"), Ok(65_536));
        assert_eq!(parse_bytes("64KiB"), Ok(65_536));
        assert_eq!(parse_bytes("64KB"), Ok(64_000));
        assert_eq!(parse_bytes("10M"), Ok(10 * 1024 * 1024));
        assert_eq!(parse_bytes("10MB"), Ok(10_000_000));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5 MiB"), Ok(1_572_864));
        for bad in ["", "lots", "64 kilo", "-1k"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
        assert_eq!(Bytes(65_536).to_string(), "64 KiB");
        assert_eq!(Bytes(1_572_864).to_string(), "1.5 MiB");
        assert_eq!(Bytes(512).to_string(), "512 B");
    }

    #[test]
    fn request_rates_are_decimal_and_positive() {
        assert_eq!(
            parse_request_rates("50,0.5,1.5k,2m"),
            Ok(vec![50.0, 0.5, 1500.0, 2e6])
        );
        assert_eq!(parse_request_rate("1234"), Ok(1234.0));
        assert!(matches!(
            parse_request_rate("0"),
            Err(UnitError::NotPositive(_))
        ));
        assert!(parse_request_rate("fast").is_err());
        assert!(parse_request_rates("50,,100").is_err());
        assert!(parse_request_rate("1e999").is_err());
    }
}
