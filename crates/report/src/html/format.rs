//! How values read on axes, in hover text and in tables. The page's script has the same rules
//! (by [`Fmt::name`]) so a hovered value reads like the tick beside it.

use tailhunt_model::{format_duration_ns, format_rate};

/// The kind of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fmt {
    /// Nanoseconds: `450us`, `10.2ms`.
    Duration,
    /// Seconds from the start of the run: `12.5s`.
    Seconds,
    /// Bytes: `64KiB`, `1.5MiB`.
    Bytes,
    /// Per second: `50/s`, `40k/s`.
    Rate,
    /// Bits per second: `100Mbit/s`.
    Bits,
    /// A fraction shown as a percentage.
    Share,
    /// A plain count: `1.2k`.
    Count,
}

impl Fmt {
    /// The name the page's script knows the format by.
    pub fn name(self) -> &'static str {
        match self {
            Fmt::Duration => "ns",
            Fmt::Seconds => "s",
            Fmt::Bytes => "B",
            Fmt::Rate => "rate",
            Fmt::Bits => "bit",
            Fmt::Share => "share",
            Fmt::Count => "n",
        }
    }
}

/// `v` written for people.
pub fn fmt_value(fmt: Fmt, v: f64) -> String {
    match fmt {
        Fmt::Duration => format_duration_ns(v),
        Fmt::Seconds => {
            if v.abs() >= 100.0 || v.fract() == 0.0 {
                format!("{v:.0}s")
            } else {
                format!("{}s", trim(format!("{v:.2}")))
            }
        }
        Fmt::Bytes => binary(v, "B"),
        Fmt::Rate => format!("{}/s", format_rate(v)),
        Fmt::Bits => decimal(v, "bit/s"),
        Fmt::Share => {
            let p = v * 100.0;
            if p != 0.0 && p.abs() < 1.0 {
                format!("{}%", trim(format!("{p:.2}")))
            } else {
                format!("{p:.0}%")
            }
        }
        Fmt::Count => decimal(v, ""),
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn scaled(v: f64, base: f64, prefixes: &[&str], unit: &str) -> String {
    let mut x = v;
    let mut i = 0;
    while x.abs() >= base && i + 1 < prefixes.len() {
        x /= base;
        i += 1;
    }
    let digits = if x.abs() >= 100.0 || x.fract() == 0.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{}{}{unit}", trim(format!("{x:.digits$}")), prefixes[i])
}

fn binary(v: f64, unit: &str) -> String {
    scaled(v, 1024.0, &["", "Ki", "Mi", "Gi", "Ti"], unit)
}

fn decimal(v: f64, unit: &str) -> String {
    scaled(v, 1000.0, &["", "k", "M", "G", "T"], unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_in_their_units() {
        assert_eq!(fmt_value(Fmt::Duration, 450_000.0), "450us");
        assert_eq!(fmt_value(Fmt::Bytes, 65536.0), "64KiB");
        assert_eq!(fmt_value(Fmt::Bytes, 1536.0 * 1024.0), "1.5MiB");
        assert_eq!(fmt_value(Fmt::Bits, 1e8), "100Mbit/s");
        assert_eq!(fmt_value(Fmt::Rate, 40_000.0), "40k/s");
        assert_eq!(fmt_value(Fmt::Share, 0.25), "25%");
        assert_eq!(fmt_value(Fmt::Share, 0.005), "0.5%");
        assert_eq!(fmt_value(Fmt::Seconds, 2.5), "2.5s");
        assert_eq!(fmt_value(Fmt::Count, 1200.0), "1.2k");
    }
}
