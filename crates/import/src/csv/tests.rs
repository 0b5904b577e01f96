//! Reading CSV files.

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

#[test]
fn quoted_series_names_keep_their_commas_and_become_labels() {
    let text = "series,latency_ms\n\"latency{rate=100,repeat=1}\",5\n\"a \"\"b\"\"\",6\n";
    let (summary, series) = import(text);
    assert_eq!(summary.series, 2);
    assert_eq!(series[0].name, "latency");
    assert_eq!(series[0].display_name(), "latency{rate=100,repeat=1}");
    assert_eq!(series[1].name, "a \"b\"");
    assert!(series[1].labels.is_empty());
}

#[test]
fn end_time_wins_over_the_latency_column() {
    // An export: latency counts from the intended time, and start != intended.
    let text = "series,intended_ns,start_ns,end_ns,latency_ns,outcome\n\
                latency,100,150,400,300,timeout\n";
    let (_, series) = import(text);
    assert_eq!(
        series[0].samples().unwrap()[0],
        Sample::new(100, 150, 400, Outcome::Timeout)
    );
}

#[test]
fn empty_times_are_an_untimed_series_beside_timed_ones() {
    let text = "series,intended_ns,start_ns,end_ns,latency_ns,outcome\n\
                a,10,12,20,10,ok\n\
                b,,,,7,error\n\
                b,,,,8,ok\n";
    let (_, series) = import(text);
    assert_eq!(series[0].timing, Timing::Timed);
    assert_eq!(series[1].timing, Timing::Untimed);
    assert_eq!(
        series[1].samples().unwrap()[1],
        Sample::from_latency(1, 8, Outcome::Ok)
    );
}

#[test]
fn line_numbers_count_comments_blank_lines_crlf_and_quoted_newlines() {
    let text = "# c\n\nseries,latency\r\n\"two\nlines\",1ms\r\n\r\n# x\r\n  # y\nz,abc\r\n";
    let e = crate::import_text("data.csv", text, &ImportOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "data.csv:9: cannot read latency 'abc': 'abc' is not a number"
    );
    let e = crate::import_text(
        "data.csv",
        "latency\n\"1 x\n\n\"\n2ms",
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("data.csv:2: "), "{e}");
    let e =
        crate::import_text("data.csv", "latency\n1ms\nx", &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().starts_with("data.csv:3: "), "{e}");
}

#[test]
fn the_delimiter_is_found_outside_quotes() {
    let (_, series) = import("\"latency (ms)\";\"note, free text\"\n1.5;\"a, b\"\n2;c\n");
    assert_eq!(latencies(&series[0]), [1_500_000, 2 * MS]);
}
