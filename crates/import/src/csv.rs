//! CSV (and TSV, and `;`-separated) latency files.
//!
//! In: lines of text. Comments (`#`) and blank lines are skipped. The first other line decides
//! the delimiter (comma, else tab, else `;`) and whether there is a header (a field that is
//! neither a number, a duration nor a time). With a header, columns are found by name (see
//! [`crate::names`]; the first column of each role wins, unknown columns are ignored); without
//! one, a single column is the latency and two columns are `timestamp,latency`.
//! Out: one [`Record`] per data line, handed to the [`Emitter`].
//!
//! Fields are split without allocating, so a large file imports at several million lines per
//! second. Quoted fields containing the delimiter are not supported; surrounding double quotes
//! are stripped.

use std::io::BufRead;

use crate::emit::{Emitter, Record};
use crate::error::{shorten, LineError};
use crate::lines::Lines;
use crate::names::{classify, unit_in, Field, Role};
use crate::values::{self, UnitPlace};
use crate::ImportError;

/// How to read the data lines of one file.
#[derive(Debug)]
struct Layout {
    delimiter: char,
    /// The role of each used column, by column index.
    columns: Vec<Option<Field>>,
    /// Unit of bare latency numbers: from the header, else from the options.
    latency_unit: Option<&'static str>,
}

/// Reads CSV from `lines` into `em`; `unit` is the unit for bare latency numbers, if given.
pub(crate) fn read(
    file: &str,
    reader: &mut dyn BufRead,
    unit: Option<&'static str>,
    em: &mut Emitter<'_>,
) -> Result<(), ImportError> {
    let mut lines = Lines::new(file, reader);
    let mut layout: Option<Layout> = None;
    while let Some((line_no, line)) = lines.next_line()? {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let layout = match &layout {
            Some(l) => l,
            None => {
                let (l, is_header) = layout_of(trimmed, unit).map_err(|e| e.at(file, line_no))?;
                let l = layout.insert(l);
                if is_header {
                    continue;
                }
                l
            }
        };
        em.count_line();
        let rec = record(layout, trimmed).map_err(|e| e.at(file, line_no))?;
        em.push(&rec, trimmed, line_no)?;
    }
    Ok(())
}

/// The layout from the first non-comment line, and whether that line is a header.
fn layout_of(line: &str, unit: Option<&'static str>) -> Result<(Layout, bool), LineError> {
    let delimiter = [',', '\t', ';']
        .into_iter()
        .find(|&d| line.contains(d))
        .unwrap_or(',');
    let is_header = line.split(delimiter).map(clean).any(|f| !is_data(f));
    let width = line.split(delimiter).count();
    let mut columns: Vec<Option<Field>> = if is_header {
        line.split(delimiter).map(classify).collect()
    } else {
        vec![None; width]
    };
    let latency = Field {
        role: Role::Latency,
        unit: None,
    };
    match (is_header, columns.as_mut_slice()) {
        // One column is the latency, whatever its header says (its unit still counts).
        (_, [only]) => {
            let unit = if is_header { unit_in(line) } else { None };
            *only = Some(Field { unit, ..latency });
        }
        (false, [ts, lat]) => {
            *ts = Some(Field {
                role: Role::Timestamp,
                unit: None,
            });
            *lat = Some(latency);
        }
        (false, _) => {
            let reason = format!(
                "{width} columns but no header line; add one naming the columns, e.g. \
                 ts,latency_ms,outcome: '{}'",
                shorten(line)
            );
            return Err(LineError::new(line, reason));
        }
        (true, _) => {}
    }
    keep_first_of_each_role(&mut columns);
    let has = |role: Role| columns.iter().flatten().any(|f| f.role == role);
    let timed = has(Role::Timestamp) || has(Role::Intended) || has(Role::Start);
    let latency_from_times = has(Role::End) && timed;
    if !(has(Role::Latency) || latency_from_times) {
        let reason = format!(
            "the header names no latency column (name one latency, latency_ms, duration_us, rt \
             or elapsed): '{}'",
            shorten(line)
        );
        return Err(LineError::new(line, reason));
    }
    while columns.last().is_some_and(Option::is_none) {
        columns.pop();
    }
    let latency_unit = columns
        .iter()
        .flatten()
        .find(|f| f.role == Role::Latency)
        .and_then(|f| f.unit)
        .or(unit);
    Ok((
        Layout {
            delimiter,
            columns,
            latency_unit,
        },
        is_header,
    ))
}

/// Later columns with a role already taken are ignored (JMeter has both `elapsed` and
/// `Latency`; the first, `elapsed`, is the response time).
fn keep_first_of_each_role(columns: &mut [Option<Field>]) {
    let mut seen: Vec<Role> = Vec::new();
    for c in columns.iter_mut() {
        if let Some(f) = c {
            if seen.contains(&f.role) {
                *c = None;
            } else {
                seen.push(f.role);
            }
        }
    }
}

/// Whether a field of the first line is a value (so the line is data, not a header). Anything
/// starting like a number counts, so a bad first value (`12furlongs`) is reported as bad data
/// instead of being taken for a header.
fn is_data(field: &str) -> bool {
    let numeric_start = field
        .bytes()
        .next()
        .is_none_or(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.'));
    numeric_start || values::time("", field, None).is_ok()
}

/// A field without surrounding spaces and double quotes.
fn clean(field: &str) -> &str {
    field.trim().trim_matches('"').trim()
}

/// Reads one data line.
fn record<'l>(layout: &Layout, line: &'l str) -> Result<Record<'l>, LineError> {
    let mut rec = Record::default();
    let mut found = 0;
    for (field, text) in layout.columns.iter().zip(line.split(layout.delimiter)) {
        found += 1;
        let Some(field) = field else { continue };
        let text = clean(text);
        match field.role {
            Role::Latency => {
                let unit = layout.latency_unit;
                rec.latency_ns = Some(values::latency(text, unit, UnitPlace::Header)?);
            }
            Role::Timestamp => rec.ts = Some(values::time("timestamp", text, field.unit)?),
            Role::Intended => rec.intended = Some(values::time("intended time", text, field.unit)?),
            Role::Start => rec.start = Some(values::time("start time", text, field.unit)?),
            Role::End => rec.end = Some(values::time("end time", text, field.unit)?),
            Role::Outcome(polarity) => rec.outcome = Some(values::outcome(text, polarity)?),
            Role::Series => rec.series = Some(text),
        }
    }
    if found < layout.columns.len() {
        let reason = format!(
            "expected at least {} columns, found {found}: '{}'",
            layout.columns.len(),
            shorten(line)
        );
        return Err(LineError::new(line, reason));
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use tailhunt_model::{Outcome, Sample, Series, Timing};

    use crate::{import_text, Format, ImportOptions, ImportSummary};

    const MS: i64 = 1_000_000;
    const EPOCH_NS: i64 = 1_714_560_000_000_000_000;

    fn import(text: &str) -> (ImportSummary, Vec<Series>) {
        import_with(text, &ImportOptions::default())
    }

    fn import_with(text: &str, opts: &ImportOptions) -> (ImportSummary, Vec<Series>) {
        match import_text("data.csv", text, opts) {
            Ok(got) => got,
            Err(e) => panic!("import failed: {e}"),
        }
    }

    fn in_unit(unit: &str) -> ImportOptions {
        ImportOptions {
            unit: Some(unit.into()),
            ..ImportOptions::default()
        }
    }

    fn latencies(s: &Series) -> Vec<i64> {
        s.samples()
            .unwrap()
            .iter()
            .map(Sample::latency_ns)
            .collect()
    }

    #[test]
    fn bare_numbers_take_the_unit_option() {
        let (summary, series) = import_with("12\n13.5\n\n", &in_unit("ms"));
        assert_eq!(summary.format, Format::Csv);
        assert_eq!((summary.series, summary.samples, summary.lines), (1, 2, 2));
        assert_eq!(summary.first_epoch_ns, None);
        assert_eq!(series[0].name, "latency");
        assert_eq!(series[0].timing, Timing::Untimed);
        let samples = series[0].samples().unwrap();
        assert_eq!(samples[0], Sample::from_latency(0, 12 * MS, Outcome::Ok));
        assert_eq!(samples[1], Sample::from_latency(1, 13_500_000, Outcome::Ok));
    }

    #[test]
    fn values_with_units_need_no_option() {
        let (_, series) = import("# from a tool\n12ms\n450us\n0.45 ms\n1.5s\n\"7ns\"\n");
        assert_eq!(
            latencies(&series[0]),
            [12 * MS, 450_000, 450_000, 1_500 * MS, 7]
        );
    }

    #[test]
    fn header_gives_the_unit() {
        let (summary, series) = import("latency_ms\n12\n0.5\n");
        assert_eq!((summary.lines, summary.samples), (2, 2));
        assert_eq!(latencies(&series[0]), [12 * MS, MS / 2]);
        let (_, series) = import("\"Latency (us)\"\n12\n");
        assert_eq!(latencies(&series[0]), [12_000]);
        // Any single column is the latency; its unit still counts.
        let (_, series) = import("value_ms\n3\n");
        assert_eq!(latencies(&series[0]), [3 * MS]);
    }

    #[test]
    fn unit_in_the_header_wins_over_the_option() {
        let (_, series) = import_with("rt_s\n2\n", &in_unit("ms"));
        assert_eq!(latencies(&series[0]), [2_000 * MS]);
    }

    #[test]
    fn timestamp_latency_with_epoch_seconds() {
        let (summary, series) = import("1714560000.5,12ms\n1714560000.25,13ms\n");
        assert_eq!(series[0].timing, Timing::Timed);
        assert_eq!(summary.first_epoch_ns, Some(EPOCH_NS + 250 * MS));
        let samples = series[0].samples().unwrap();
        assert_eq!(
            samples[0],
            Sample::from_latency(EPOCH_NS + 500 * MS, 12 * MS, Outcome::Ok)
        );
        assert_eq!(samples[1].intended_ns, EPOCH_NS + 250 * MS);
    }

    #[test]
    fn timestamp_latency_with_rfc3339() {
        let text = "2024-05-01T12:00:00Z,1ms\n2024-05-01T12:00:00.5Z,2ms\n";
        let (summary, series) = import(text);
        let noon = 1_714_564_800_000_000_000;
        assert_eq!(summary.first_epoch_ns, Some(noon));
        let samples = series[0].samples().unwrap();
        assert_eq!(
            samples[1],
            Sample::from_latency(noon + 500 * MS, 2 * MS, Outcome::Ok)
        );
    }

    #[test]
    fn relative_timestamps_have_no_epoch() {
        let (summary, series) = import("ts_ms,latency_us\n0,100\n250,200\n");
        assert_eq!(summary.first_epoch_ns, None);
        let samples = series[0].samples().unwrap();
        assert_eq!(
            samples[1],
            Sample::from_latency(250 * MS, 200_000, Outcome::Ok)
        );
    }

    #[test]
    fn outcome_column_counts_outcomes() {
        let text = "latency_ms,status\n1,200\n2,503\n3,timeout\n4,ok\n";
        let (summary, series) = import(text);
        assert_eq!(summary.outcomes, [2, 1, 1]);
        let outcomes: Vec<Outcome> = series[0]
            .samples()
            .unwrap()
            .iter()
            .map(|s| s.outcome)
            .collect();
        assert_eq!(
            outcomes,
            [Outcome::Ok, Outcome::Error, Outcome::Timeout, Outcome::Ok]
        );
        let (summary, _) = import("latency_ms,error\n1,\n2,connection refused\n3,read timeout\n");
        assert_eq!(summary.outcomes, [1, 1, 1]);
    }

    #[test]
    fn series_column_splits_rows() {
        let text = "series,latency_ms,bytes\nget,1,10\nput,2,20\nget,3,30\n,4,0\n";
        let (summary, series) = import(text);
        assert_eq!(summary.series, 3);
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["get", "put", "latency"]);
        assert_eq!(latencies(&series[0]), [MS, 3 * MS]);
        // Untimed samples are numbered within their series.
        assert_eq!(series[0].samples().unwrap()[1].intended_ns, 1);
        assert!(series.iter().all(|s| s.timing == Timing::Untimed));
    }

    #[test]
    fn tab_and_semicolon_separated() {
        let (_, series) = import("ts\tlatency_us\n0.5\t100\n1.0\t200\n");
        let samples = series[0].samples().unwrap();
        assert_eq!(
            samples[1],
            Sample::from_latency(1_000 * MS, 200_000, Outcome::Ok)
        );
        let (_, series) = import("ts;latency\n0.5;1ms\n");
        assert_eq!(latencies(&series[0]), [MS]);
    }

    #[test]
    fn intended_and_start_keep_the_schedule() {
        let text = "scheduled,start,latency_ms\n1.0,1.5,2\n";
        let (_, series) = import(text);
        let s = series[0].samples().unwrap()[0];
        assert_eq!(
            s,
            Sample::new(1_000 * MS, 1_500 * MS, 1_502 * MS, Outcome::Ok)
        );
        assert_eq!(s.latency_ns(), 502 * MS);
        let (_, series) = import("start_ms,end_ms\n10,15\n");
        assert_eq!(
            series[0].samples().unwrap()[0],
            Sample::new(10 * MS, 10 * MS, 15 * MS, Outcome::Ok)
        );
    }

    #[test]
    fn jmeter_results_import_with_the_unit_option() {
        let text = "timeStamp,elapsed,label,responseCode,success,Latency\n\
                    1714560000000,120,home,200,true,80\n\
                    1714560000100,3000,home,504,false,2900\n";
        let (summary, series) = import_with(text, &in_unit("ms"));
        assert_eq!(summary.first_epoch_ns, Some(1_714_560_000_000 * MS));
        assert_eq!(summary.outcomes, [1, 1, 0]);
        assert_eq!(latencies(&series[0]), [120 * MS, 3_000 * MS]);
    }

    #[test]
    fn many_lines_are_pushed_in_chunks_in_order() {
        let text: String = (0..20_000).map(|i| format!("{i}us\n")).collect();
        let (summary, series) = import(&text);
        assert_eq!(summary.samples, 20_000);
        let got = latencies(&series[0]);
        assert!(got.iter().enumerate().all(|(i, &l)| l == i as i64 * 1_000));
    }

    #[test]
    fn windows_line_endings_and_utf8_bom_import_fine() {
        let text = "\u{feff}ts,latency_ms\r\n0.5,12\r\n# note\r\n\r\n1.0,13\r\n";
        let (summary, series) = import(text);
        assert_eq!((summary.lines, summary.samples), (2, 2));
        assert_eq!(latencies(&series[0]), [12 * MS, 13 * MS]);
        let (_, series) = import("\u{feff}12ms\r\n");
        assert_eq!(latencies(&series[0]), [12 * MS]);
    }
}
