//! JSON lines: one object per line, such as `{"ts": 1714560000.25, "latency_ms": 12.5}`.
//!
//! In: lines of text; blank lines are skipped. Keys are read by name as CSV header columns are
//! (see [`crate::names`]); unknown keys are ignored, and when several keys name the same thing
//! the first in alphabetical order wins. Latencies and times are numbers (in the key's unit, or
//! the options' unit for latencies) or strings (`"12ms"`, `"2024-05-01T12:00:00Z"`); outcomes are
//! strings, booleans, HTTP status numbers or null.
//! Out: one [`Record`] per line, handed to the [`Emitter`].

use std::io::BufRead;

use serde_json::{Map, Value};
use tailhunt_model::Outcome;

use crate::emit::{Emitter, Record};
use crate::error::{shorten, LineError};
use crate::lines::Lines;
use crate::names::{classify, Polarity, Role};
use crate::values::{self, UnitPlace};
use crate::ImportError;

/// Reads JSON lines from `reader` into `em`; `unit` is the unit for bare latency numbers.
pub(crate) fn read(
    file: &str,
    reader: &mut dyn BufRead,
    unit: Option<&'static str>,
    em: &mut Emitter<'_>,
) -> Result<(), ImportError> {
    let mut lines = Lines::new(file, reader);
    let mut series_name = String::new();
    while let Some((line_no, line)) = lines.next_line()? {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        em.count_line();
        let object: Map<String, Value> = serde_json::from_str(trimmed).map_err(|e| {
            let reason = format!(
                "not a JSON object ({e}); write one object per line, e.g. {{\"latency_ms\": 12.5}}: '{}'",
                shorten(trimmed)
            );
            LineError::new(trimmed, reason).at(file, line_no)
        })?;
        let rec = record(&object, unit, &mut series_name).map_err(|e| e.at(file, line_no))?;
        em.push(&rec, trimmed, line_no)?;
    }
    Ok(())
}

/// Reads one object; a series name that is not a string is written into `series_name`.
fn record<'o>(
    object: &'o Map<String, Value>,
    unit: Option<&'static str>,
    series_name: &'o mut String,
) -> Result<Record<'o>, LineError> {
    let mut rec = Record::default();
    let mut series: Option<&'o Value> = None;
    for (key, value) in object {
        let Some(field) = classify(key) else { continue };
        match field.role {
            Role::Latency if rec.latency_ns.is_none() => {
                rec.latency_ns = Some(latency(key, value, field.unit.or(unit))?);
            }
            Role::Timestamp if rec.ts.is_none() => rec.ts = time(key, value, field.unit)?,
            Role::Intended if rec.intended.is_none() => {
                rec.intended = time(key, value, field.unit)?;
            }
            Role::Start if rec.start.is_none() => rec.start = time(key, value, field.unit)?,
            Role::End if rec.end.is_none() => rec.end = time(key, value, field.unit)?,
            Role::Outcome(polarity) if rec.outcome.is_none() => {
                rec.outcome = outcome(key, value, polarity)?;
            }
            Role::Series if series.is_none() => series = Some(value),
            _ => {}
        }
    }
    rec.series = match series {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => {
            *series_name = other.to_string();
            Some(series_name.as_str())
        }
    };
    Ok(rec)
}

fn latency(key: &str, value: &Value, unit: Option<&str>) -> Result<i64, LineError> {
    match value {
        Value::Number(n) => values::latency(&n.to_string(), unit, UnitPlace::Key),
        Value::String(s) => values::latency(s, unit, UnitPlace::Key),
        other => Err(wrong_type(
            key,
            other,
            "a number or a string such as \"12ms\"",
        )),
    }
}

/// A time; `null` counts as absent.
fn time(
    key: &str,
    value: &Value,
    unit: Option<&str>,
) -> Result<Option<values::Instant>, LineError> {
    match value {
        Value::Null => Ok(None),
        Value::Number(n) => values::time(key, &n.to_string(), unit).map(Some),
        Value::String(s) => values::time(key, s, unit).map(Some),
        other => Err(wrong_type(
            key,
            other,
            "seconds as a number or an RFC 3339 string such as \"2024-05-01T12:00:00Z\"",
        )),
    }
}

/// An outcome; `null` counts as absent (ok).
fn outcome(key: &str, value: &Value, polarity: Polarity) -> Result<Option<Outcome>, LineError> {
    let yes_no = |yes: bool| match polarity {
        Polarity::Failure if yes => Outcome::Error,
        Polarity::Failure => Outcome::Ok,
        _ if yes => Outcome::Ok,
        _ => Outcome::Error,
    };
    match value {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(yes_no(*b))),
        Value::Number(n) => values::outcome(&n.to_string(), polarity).map(Some),
        Value::String(s) => values::outcome(s, polarity).map(Some),
        // `"error": {"code": 14, "message": "..."}`: any error object is an error.
        Value::Object(_) | Value::Array(_) if polarity == Polarity::Failure => {
            Ok(Some(values::failure_outcome(&value.to_string())))
        }
        other => Err(wrong_type(
            key,
            other,
            "a string such as \"ok\", a boolean or a status number",
        )),
    }
}

fn wrong_type(key: &str, value: &Value, expected: &str) -> LineError {
    let text = value.to_string();
    let reason = format!(
        "cannot read {key} '{}': expected {expected}",
        shorten(&text)
    );
    LineError::new(&text, reason)
}

#[cfg(test)]
mod tests {
    use tailhunt_model::{Outcome, Sample, Series, Timing};

    use crate::{import_text, Format, ImportOptions, ImportSummary};

    const MS: i64 = 1_000_000;

    fn import(text: &str) -> (ImportSummary, Vec<Series>) {
        import_with(text, &ImportOptions::default())
    }

    fn import_with(text: &str, opts: &ImportOptions) -> (ImportSummary, Vec<Series>) {
        match import_text("data.jsonl", text, opts) {
            Ok(got) => got,
            Err(e) => panic!("import failed: {e}"),
        }
    }

    fn samples(s: &Series) -> &[Sample] {
        s.samples().unwrap()
    }

    #[test]
    fn latency_keys_with_units() {
        let text =
            "{\"latency_ms\": 12.5}\n\n{\"latency_us\": 7}\n{\"duration_ns\": 3}\n{\"rt_s\": 1}\n";
        let (summary, series) = import(text);
        assert_eq!(summary.format, Format::JsonLines);
        assert_eq!((summary.lines, summary.samples), (4, 4));
        assert_eq!(series[0].timing, Timing::Untimed);
        let got: Vec<i64> = samples(&series[0]).iter().map(Sample::latency_ns).collect();
        assert_eq!(got, [12_500_000, 7_000, 3, 1_000 * MS]);
    }

    #[test]
    fn string_latencies_and_bare_numbers_with_the_unit_option() {
        let (_, series) = import("{\"latency\": \"450us\"}\n{\"elapsed\": \"0.45 ms\"}\n");
        assert!(samples(&series[0])
            .iter()
            .all(|s| s.latency_ns() == 450_000));
        let opts = ImportOptions {
            unit: Some("us".into()),
            ..ImportOptions::default()
        };
        let (_, series) = import_with("{\"latency\": 450}\n", &opts);
        assert_eq!(samples(&series[0])[0].latency_ns(), 450_000);
    }

    #[test]
    fn timestamps_as_numbers_and_strings() {
        let text = "{\"ts\": \"2024-05-01T12:00:00Z\", \"latency\": \"1ms\"}\n\
                    {\"ts\": 1714564800.5, \"latency\": \"2ms\"}\n";
        let (summary, series) = import(text);
        let noon = 1_714_564_800_000_000_000;
        assert_eq!(summary.first_epoch_ns, Some(noon));
        assert_eq!(series[0].timing, Timing::Timed);
        assert_eq!(
            samples(&series[0])[1],
            Sample::from_latency(noon + 500 * MS, 2 * MS, Outcome::Ok)
        );
        let (summary, series) = import("{\"time_ms\": 250, \"latency_ms\": 1}\n");
        assert_eq!(summary.first_epoch_ns, None);
        assert_eq!(samples(&series[0])[0].intended_ns, 250 * MS);
    }

    #[test]
    fn outcomes_from_strings_booleans_statuses_and_errors() {
        let text = "{\"latency\": \"1ms\", \"status\": 200}\n\
                    {\"latency\": \"1ms\", \"status\": \"timeout\"}\n\
                    {\"latency\": \"1ms\", \"ok\": false}\n\
                    {\"latency\": \"1ms\", \"error\": null}\n\
                    {\"latency\": \"1ms\", \"error\": \"deadline: timed out\"}\n\
                    {\"latency\": \"1ms\", \"error\": {\"code\": 14}}\n\
                    {\"latency\": \"1ms\", \"success\": true}\n";
        let (summary, _) = import(text);
        assert_eq!(summary.outcomes, [3, 2, 2]);
    }

    #[test]
    fn series_key_splits_objects() {
        let text = "{\"series\": \"get\", \"ts_ms\": 0, \"latency_ms\": 1}\n\
                    {\"name\": 7, \"ts_ms\": 1, \"latency_ms\": 2}\n\
                    {\"series\": \"get\", \"ts_ms\": 2, \"latency_ms\": 3, \"url\": \"/x\"}\n";
        let (summary, series) = import(text);
        assert_eq!(summary.series, 2);
        assert_eq!(
            (series[0].name.as_str(), series[1].name.as_str()),
            ("get", "7")
        );
        assert_eq!(samples(&series[0]).len(), 2);
        assert!(series.iter().all(|s| s.timing == Timing::Timed));
    }

    #[test]
    fn intended_start_and_end_keys() {
        let text = "{\"intended_ms\": 10, \"start_ms\": 12, \"end_ms\": 15}\n";
        let (_, series) = import(text);
        assert_eq!(
            samples(&series[0])[0],
            Sample::new(10 * MS, 12 * MS, 15 * MS, Outcome::Ok)
        );
    }

    #[test]
    fn windows_line_endings_and_utf8_bom_import_fine() {
        let (summary, _) =
            import("\u{feff}{\"latency\": \"1ms\"}\r\n\r\n{\"latency\": \"2ms\"}\r\n");
        assert_eq!(summary.samples, 2);
    }
}
