//! Every error names the file, the line, the offending text and the fix.

use tailhunt_import::{import_reader, Format, ImportError, ImportOptions, ImportSummary};
use tailhunt_model::{IntervalHistogram, Sample, Series, SeriesMeta, SeriesSink, SinkError};

fn import(name: &str, text: &str) -> Result<ImportSummary, ImportError> {
    import_into(name, text, &mut Vec::new())
}

fn import_into(
    name: &str,
    text: &str,
    series: &mut Vec<Series>,
) -> Result<ImportSummary, ImportError> {
    import_reader(
        name,
        &mut text.as_bytes(),
        &ImportOptions::default(),
        series,
    )
}

fn message(name: &str, text: &str) -> String {
    match import(name, text) {
        Ok(summary) => panic!("expected an error, imported {summary:?}"),
        Err(e) => e.to_string(),
    }
}

/// A CSV whose line 17 (1-based) is `bad`, after a header and good lines.
fn csv_with_line_17(bad: &str) -> String {
    let mut text = String::from("latency\n");
    for i in 2..17 {
        text.push_str(&format!("{i}ms\n"));
    }
    text.push_str(bad);
    text.push('\n');
    text
}

#[test]
fn errors_can_cross_threads_for_anyhow() {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    send_sync_static::<ImportError>();
}

#[test]
fn latency_that_is_not_a_number() {
    let e = import("data.csv", &csv_with_line_17("abc")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "data.csv:17: cannot read latency 'abc': 'abc' is not a number"
    );
    match e {
        ImportError::Malformed {
            file,
            line,
            content,
            ..
        } => {
            assert_eq!(
                (file.as_str(), line, content.as_str()),
                ("data.csv", 17, "abc")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bare_number_without_unit() {
    assert_eq!(
        message("data.csv", "# bare\n\n12.5\n"),
        "data.csv:3: '12.5' has no unit (write e.g. 12ms or 450us, or name the unit in the header \
         such as latency_ms, or pass --unit ms)"
    );
    assert_eq!(
        message("data.jsonl", "{\"latency\": 12.5}\n"),
        "data.jsonl:1: '12.5' has no unit (write e.g. 12ms or 450us, or name the unit in the key \
         such as latency_ms, or pass --unit ms)"
    );
}

#[test]
fn empty_files() {
    let want = "empty.csv: no samples found (the file is empty or only has comments)";
    for text in [
        "",
        "\n\n",
        "# only\n# comments\n",
        "ts,latency_ms\n",
        "\u{feff}",
    ] {
        let e = import("empty.csv", text).unwrap_err();
        assert!(matches!(e, ImportError::Empty { .. }), "{text:?}: {e:?}");
        assert_eq!(e.to_string(), want);
    }
    assert_eq!(
        message("empty.jsonl", "\n"),
        "empty.jsonl: no samples found (the file is empty or only has comments)"
    );
}

#[test]
fn long_content_is_shortened() {
    let long = "x".repeat(1000);
    let e = import("data.csv", &csv_with_line_17(&long)).unwrap_err();
    let ImportError::Malformed { content, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(content, &format!("{}...", "x".repeat(60)));
    assert!(e.to_string().len() < 200, "{e}");
}

#[test]
fn unknown_unit_in_a_value() {
    assert_eq!(
        message("data.csv", "12furlongs\n"),
        "data.csv:1: cannot read latency '12furlongs': unknown unit 'furlongs' (use ns, us, ms or s)"
    );
}

#[test]
fn bad_timestamp() {
    assert_eq!(
        message("data.csv", "ts,latency\n0,1ms\nsoon,2ms\n"),
        "data.csv:3: cannot read timestamp 'soon': expected seconds (1714560000.25), an RFC 3339 \
         time (2024-05-01T12:00:00Z) or a duration (1.5s)"
    );
}

#[test]
fn bad_outcome() {
    assert_eq!(
        message("data.csv", "latency,status\n1ms,maybe\n"),
        "data.csv:2: cannot read outcome 'maybe' (use ok, error, timeout, true/false or an HTTP status)"
    );
}

#[test]
fn missing_columns() {
    assert_eq!(
        message("data.csv", "ts,latency,status\n0,1ms,ok\n1,2ms\n"),
        "data.csv:3: 2 fields but the header has 3: '1,2ms'"
    );
}

/// `1,2` under `latency_ms` once read as 1 ms: a row with more fields than the header is an
/// error naming the line, and says what a decimal comma looks like.
#[test]
fn decimal_comma_is_an_error_not_a_smaller_number() {
    let e = message("data.csv", "latency_ms\n1.5\n1,2\n");
    assert_eq!(
        e,
        "data.csv:3: 2 fields but the header has 1 (a decimal comma? write 1.2, not 1,2, or \
         quote the field): '1,2'"
    );
    // With `;` between fields, the comma is inside the value.
    let e = message("data.csv", "latency_ms;status\n1,2;200\n");
    assert_eq!(
        e,
        "data.csv:2: cannot read latency '1,2': a decimal comma (write 1.2 with a point)"
    );
    // Without a header, the first line sets the width.
    let e = message("data.csv", "1.5ms\n1,2ms\n");
    assert!(
        e.starts_with("data.csv:2: 2 fields but the first line has 1"),
        "{e}"
    );
}

#[test]
fn more_fields_than_the_header_is_an_error() {
    assert_eq!(
        message("data.csv", "ts,latency\n0,1ms\n1,2ms,x\n"),
        "data.csv:3: 3 fields but the header has 2 (quote a field that holds the delimiter): \
         '1,2ms,x'"
    );
}

#[test]
fn a_line_without_end_is_refused() {
    let long = format!("latency\n1ms\n{}", "9".repeat(3 << 20));
    let e = message("data.csv", &long);
    assert_eq!(
        e,
        "data.csv:3: line is longer than 1 MiB; is this really a CSV or JSON-lines file?"
    );
    let e = message("data.csv", &"9".repeat(3 << 20));
    assert!(
        e.starts_with("data.csv:1: line is longer than 1 MiB"),
        "{e}"
    );
}

#[test]
fn three_columns_without_a_header() {
    assert_eq!(
        message("data.csv", "0,1ms,2ms\n"),
        "data.csv:1: 3 columns but no header line; add one naming the columns, e.g. \
         ts,latency_ms,outcome: '0,1ms,2ms'"
    );
}

#[test]
fn header_without_latency() {
    assert_eq!(
        message("data.csv", "# x\nts,bytes\n0,10\n"),
        "data.csv:2: the header names no latency column (name one latency, latency_ms, \
         duration_us, rt or elapsed): 'ts,bytes'"
    );
}

#[test]
fn epoch_and_relative_times_do_not_mix() {
    let e = message("data.csv", "1714560000,1ms\n5,1ms\n");
    assert!(
        e.starts_with("data.csv:2: this line has a relative time but earlier times are epoch"),
        "{e}"
    );
    assert!(e.ends_with(": '5,1ms'"), "{e}");
}

#[test]
fn json_that_is_not_an_object() {
    let e = message("data.jsonl", "{\"latency\": \"1ms\"}\n[1, 2]\n");
    assert!(e.starts_with("data.jsonl:2: not a JSON object ("), "{e}");
    assert!(e.ends_with("e.g. {\"latency_ms\": 12.5}: '[1, 2]'"), "{e}");
    let e = message("data.jsonl", "{\"latency\": \"1ms\"\n");
    assert!(e.starts_with("data.jsonl:1: not a JSON object"), "{e}");
}

#[test]
fn json_without_latency_or_with_a_wrong_type() {
    assert_eq!(
        message("data.jsonl", "{\"url\": \"/\"}\n"),
        "data.jsonl:1: no latency on this line (name it latency, latency_ms, duration_us, rt or \
         elapsed): '{\"url\": \"/\"}'"
    );
    assert_eq!(
        message("data.jsonl", "{\"latency_ms\": [1]}\n"),
        "data.jsonl:1: cannot read latency_ms '[1]': expected a number or a string such as \"12ms\""
    );
}

#[test]
fn a_bad_first_line_opens_no_series() {
    let mut series = Vec::new();
    assert!(import_into("data.jsonl", "{\"url\": \"/\"}\n", &mut series).is_err());
    assert!(series.is_empty());
}

#[test]
fn json_lines_must_agree_on_having_times() {
    let e = message(
        "data.jsonl",
        "{\"ts\": 1, \"latency\": \"1ms\"}\n{\"latency\": \"1ms\"}\n",
    );
    assert!(
        e.starts_with(
            "data.jsonl:2: this line has no time but the lines before it of the same series have one"
        ),
        "{e}"
    );
}

#[test]
fn binary_input() {
    let mut series = Vec::new();
    let bytes: &[u8] = b"\x00\x01\xff\xfe\n";
    let e = import_reader(
        "capture.bin",
        &mut &bytes[..],
        &ImportOptions::default(),
        &mut series,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("capture.bin:1: line is not UTF-8 text"),
        "{e}"
    );
}

#[test]
fn stdin_is_named() {
    assert_eq!(
        message("-", "abc\n1ms\nx\n"),
        "<stdin>:3: cannot read latency 'x': 'x' is not a number"
    );
}

#[test]
fn unknown_format_and_unit() {
    let e = Format::from_name("xml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown import format 'xml' (use csv, jsonl or hlog)"
    );
    assert_eq!(Format::from_name("JSON").unwrap(), Format::JsonLines);
    for f in [Format::Csv, Format::JsonLines, Format::HdrLog] {
        assert_eq!(Format::from_name(f.name()).unwrap(), f);
    }
    let opts = ImportOptions {
        unit: Some("furlongs".into()),
        ..ImportOptions::default()
    };
    let e = import_reader("d.csv", &mut &b"1\n"[..], &opts, &mut Vec::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown unit 'furlongs' for bare numbers (use ns, us, ms or s)"
    );
}

#[test]
fn bad_interval_log() {
    let text = "#[StartTime: 1.0 (seconds since epoch)]\n0.1,1.0,2.0,HISTFAAAA\n";
    let e = message("run.hlog", text);
    assert!(
        e.starts_with("run.hlog:2: the interval's histogram does not decode"),
        "{e}"
    );
    assert_eq!(
        message("run.hlog", "#[StartTime: 1.0 (seconds since epoch)]\n"),
        "run.hlog: no samples found (the file is empty or only has comments)"
    );
}

#[test]
fn data_error_keeps_the_lines_before_it() {
    let mut series = Vec::new();
    let e = import_into("data.csv", &csv_with_line_17("abc"), &mut series).unwrap_err();
    assert!(matches!(e, ImportError::Malformed { line: 17, .. }));
    assert_eq!(series[0].count(), 15);
}

/// Accepts `limit` pushes, then fails.
struct FullSink {
    inner: Vec<Series>,
    limit: usize,
}

impl SeriesSink for FullSink {
    fn open_series(&mut self, meta: &SeriesMeta) -> Result<usize, SinkError> {
        self.inner.open_series(meta)
    }

    fn push_samples(&mut self, series: usize, samples: &[Sample]) -> Result<(), SinkError> {
        if self.limit == 0 {
            return Err("disk full".into());
        }
        self.limit -= 1;
        self.inner.push_samples(series, samples)
    }

    fn push_histogram(&mut self, series: usize, h: &IntervalHistogram) -> Result<(), SinkError> {
        self.inner.push_histogram(series, h)
    }
}

#[test]
fn sink_error_aborts_and_keeps_what_was_pushed() {
    let text: String = (0..20_000).map(|i| format!("{i}us\n")).collect();
    let mut sink = FullSink {
        inner: Vec::new(),
        limit: 1,
    };
    let e = import_reader(
        "big.csv",
        &mut text.as_bytes(),
        &ImportOptions::default(),
        &mut sink,
    )
    .unwrap_err();
    assert!(matches!(e, ImportError::Sink { .. }));
    assert_eq!(
        e.to_string(),
        "big.csv: could not store the imported series: disk full"
    );
    let kept = sink.inner[0].count();
    assert!(kept > 0 && kept < 20_000, "{kept}");
}
