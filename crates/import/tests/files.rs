//! Importing from paths: detection by extension and by content, and unreadable files.

use std::io::Write;

use tailhunt_import::{import_path, Format, ImportError, ImportOptions};
use tailhunt_model::Series;

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    path
}

#[test]
fn format_comes_from_extension_then_content() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("a.csv", "12ms\n", Format::Csv),
        ("a.TSV", "ts\tlatency\n0\t1ms\n", Format::Csv),
        ("a.txt", "12ms\n", Format::Csv),
        ("a.ndjson", "{\"latency\": \"1ms\"}\n", Format::JsonLines),
        ("a.log", "  {\"latency\": \"1ms\"}\n", Format::JsonLines),
        ("results", "12ms\n", Format::Csv),
    ];
    for (name, text, want) in cases {
        let path = write(&dir, name, text);
        let mut series: Vec<Series> = Vec::new();
        let summary = import_path(&path, &ImportOptions::default(), &mut series).unwrap();
        assert_eq!(summary.format, want, "{name}");
        assert_eq!(summary.samples, series[0].count());
    }
}

#[test]
fn forced_format_overrides_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "a.csv", "{\"latency\": \"1ms\"}\n");
    let opts = ImportOptions {
        format: Some(Format::JsonLines),
        ..ImportOptions::default()
    };
    let summary = import_path(&path, &opts, &mut Vec::new()).unwrap();
    assert_eq!((summary.format, summary.samples), (Format::JsonLines, 1));
}

#[test]
fn missing_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.csv");
    let e = import_path(&path, &ImportOptions::default(), &mut Vec::new()).unwrap_err();
    assert!(matches!(e, ImportError::Io { .. }));
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("cannot read '{}': ", path.display())),
        "{msg}"
    );
}

#[test]
fn messages_use_the_path_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "bad.csv", "1ms\nabc\n");
    let e = import_path(&path, &ImportOptions::default(), &mut Vec::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2: cannot read latency 'abc': 'abc' is not a number",
            path.display()
        )
    );
}
