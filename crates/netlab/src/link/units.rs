//! Reading link rates and sizes written the way `tc` users write them.
//!
//! In: text such as `100mbit`, `1.5gbit`, `20m` (rates, decimal, bits) and `1MB`, `64KiB`,
//! `1500` (sizes in bytes). Out: bits per second or bytes, or an error naming the text and the
//! accepted units. `bps` is refused on purpose: `tc` reads it as *bytes* per second, most
//! people as bits.

/// A rate or size that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a rate.
    #[error("cannot read rate '{0}': write a number and bit, kbit, mbit or gbit (e.g. 100mbit)")]
    Rate(String),
    /// Not a size.
    #[error("cannot read size '{0}': write a number of bytes with B, KB, MB, GB, KiB, MiB or GiB (e.g. 1MB)")]
    Size(String),
}

/// Reads a rate in bits per second: `100mbit`, `20m`, `1gbit`, `64000bit`, `500kbit`.
pub fn parse_rate_bps(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Rate(text.to_string());
    let (number, unit) = split(text).ok_or_else(err)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" => 1.0,
        "k" | "kbit" => 1e3,
        "m" | "mbit" => 1e6,
        "g" | "gbit" => 1e9,
        _ => return Err(err()),
    };
    to_u64(number * scale).ok_or_else(err)
}

/// Reads a size in bytes: `1MB` (10^6), `64KiB` (2^16), `1500`, `1500B`.
pub fn parse_bytes(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Size(text.to_string());
    let (number, unit) = split(text).ok_or_else(err)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(err()),
    };
    to_u64(number * scale).ok_or_else(err)
}

/// Formats a rate for people: `100 Mbit/s`.
pub fn format_rate(bps: u64) -> String {
    match bps {
        b if b >= 1_000_000_000 => format!("{} Gbit/s", trim(b as f64 / 1e9)),
        b if b >= 1_000_000 => format!("{} Mbit/s", trim(b as f64 / 1e6)),
        b if b >= 1_000 => format!("{} kbit/s", trim(b as f64 / 1e3)),
        b => format!("{b} bit/s"),
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn split(text: &str) -> Option<(f64, &str)> {
    let t = text.trim();
    let at = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let number: f64 = t[..at].parse().ok()?;
    Some((number, t[at..].trim()))
}

fn to_u64(x: f64) -> Option<u64> {
    (x.is_finite() && x >= 0.0 && x < u64::MAX as f64).then(|| x.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_sizes() {
        assert_eq!(parse_rate_bps("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate_bps("1.5Gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate_bps("20m"), Ok(20_000_000));
        assert_eq!(parse_rate_bps("0"), Ok(0));
        assert!(parse_rate_bps("100mbps").is_err());
        assert!(parse_rate_bps("fast").is_err());
        assert_eq!(parse_bytes("1MB"), Ok(1_000_000));
        assert_eq!(parse_bytes("64KiB"), Ok(65_536));
        assert_eq!(parse_bytes("1500"), Ok(1500));
        let e = parse_bytes("1 potato").unwrap_err().to_string();
        assert!(e.contains("'1 potato'"), "{e}");
        assert_eq!(format_rate(100_000_000), "100 Mbit/s");
        assert_eq!(format_rate(1_500_000), "1.5 Mbit/s");
    }
}
