//! Fuzzing the text readers with proptest (cargo-fuzz needs nightly): no input makes them panic,
//! and every failure is a data error (`Malformed` or `Empty`), never anything else.

use proptest::prelude::*;
use tailhunt_import::{import_reader, Format, ImportError, ImportOptions};
use tailhunt_model::Series;

/// Pieces that make the readers take interesting paths.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "0",
        "1",
        "7",
        "12",
        "1714560000",
        "1714560000123",
        "99999999999999999999",
        ".",
        ",",
        ";",
        "\t",
        " ",
        "-",
        "+",
        "e",
        "e9",
        "ms",
        "us",
        "ns",
        "s",
        "µs",
        "h",
        "#",
        "\"",
        "\n",
        "\r\n",
        "{",
        "}",
        ":",
        "[",
        "]",
        "null",
        "true",
        "ok",
        "timeout",
        "503",
        "latency",
        "latency_ms",
        "ts",
        "ts_ms",
        "start",
        "intended",
        "end_us",
        "status",
        "error",
        "series",
        "name",
        "(ms)",
        "2024-05-01T12:00:00Z",
        "2024-05-01 12:00:00+02:00",
        "\u{feff}",
        "\"latency\"",
        "\"ts\"",
        "\"series\"",
        "\"12ms\"",
        "é",
        "\u{0}",
    ])
}

fn fragments() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..40).prop_map(|parts| parts.concat())
}

fn check(format: Format, unit: Option<&str>, text: &str) -> Result<(), TestCaseError> {
    let opts = ImportOptions {
        format: Some(format),
        unit: unit.map(String::from),
        ..ImportOptions::default()
    };
    let mut series: Vec<Series> = Vec::new();
    match import_reader("fuzz", &mut text.as_bytes(), &opts, &mut series) {
        Ok(summary) => {
            let stored: u64 = series.iter().map(Series::count).sum();
            prop_assert_eq!(summary.samples, stored);
            prop_assert_eq!(summary.outcomes.iter().sum::<u64>(), summary.samples);
            prop_assert_eq!(summary.series, series.len());
        }
        Err(ImportError::Malformed { file, line, .. }) => {
            prop_assert_eq!(file, "fuzz");
            prop_assert!(line >= 1 && line <= text.split('\n').count() as u64);
        }
        Err(ImportError::Empty { .. }) => {}
        Err(other) => prop_assert!(false, "unexpected error kind: {other:?}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn csv_reader_never_panics_on_fragments(text in fragments(), ms in any::<bool>()) {
        check(Format::Csv, ms.then_some("ms"), &text)?;
    }

    #[test]
    fn csv_reader_never_panics_on_any_string(text in any::<String>()) {
        check(Format::Csv, None, &text)?;
    }

    #[test]
    fn jsonl_reader_never_panics_on_fragments(text in fragments(), ms in any::<bool>()) {
        check(Format::JsonLines, ms.then_some("ms"), &text)?;
    }

    #[test]
    fn jsonl_reader_never_panics_on_any_string(text in any::<String>()) {
        check(Format::JsonLines, None, &text)?;
    }

    #[test]
    fn csv_reader_never_panics_on_table_like_lines(
        header in prop::option::of(prop::collection::vec(
            prop::sample::select(vec!["latency", "latency_ms", "rt (us)", "ts", "ts_ms", "time", "start", "end_ms", "scheduled", "status", "ok", "error", "series", "bytes", "\"latency\""]),
            1..5,
        )),
        rows in prop::collection::vec(
            prop::collection::vec(
                prop::sample::select(vec!["1", "-1", "1.5", "12ms", "0.45 ms", "abc", "", "200", "timeout", "true", "get", "1714560000", "2024-05-01T12:00:00Z", "1e3", "\"7us\""]),
                1..5,
            ),
            0..6,
        ),
        delimiter in prop::sample::select(vec![",", "\t", ";"]),
        crlf in any::<bool>(),
    ) {
        let end = if crlf { "\r\n" } else { "\n" };
        let mut text = String::new();
        for row in header.iter().chain(rows.iter()) {
            text.push_str(&row.join(delimiter));
            text.push_str(end);
        }
        check(Format::Csv, None, &text)?;
    }

    #[test]
    fn jsonl_reader_never_panics_on_object_like_lines(
        lines in prop::collection::vec(
            prop::collection::vec(
                (
                    prop::sample::select(vec!["latency", "latency_ms", "ts", "ts_us", "start", "end", "intended", "status", "ok", "error", "series", "x"]),
                    prop::sample::select(vec!["1", "-1", "1.5", "1e400", "\"12ms\"", "\"abc\"", "null", "true", "[]", "{}", "\"2024-05-01T12:00:00Z\"", "1714560000", "\"\""]),
                ),
                0..5,
            ),
            1..6,
        )
    ) {
        let text: String = lines
            .iter()
            .map(|kv| {
                let body: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                format!("{{{}}}\n", body.join(", "))
            })
            .collect();
        check(Format::JsonLines, None, &text)?;
    }
}
