//! The headless-browser helper the report tests stand on (`tests/common/browser.rs` and
//! `scripts/render-report.sh`), checked on two committed pages (`fixtures/browser/`) and a few
//! written here. Needs the Debian `chromium` that `scripts/setup.sh` installs; without it these
//! tests fail with that advice.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::browser::{self, png_size};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/browser")
        .join(name)
}

fn open(page: &Path, fragment: Option<&str>, png: &Path) -> browser::Rendered {
    browser::open(page, fragment, png).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs the script itself with `TMPDIR` pointed at `tmp`, so a test can see what it left there.
fn script(tmp: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(browser::script());
    cmd.args(args).env("TMPDIR", tmp);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run render-report.sh")
}

fn leftovers(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .expect("read temp dir")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.starts_with("render-report."))
        .collect()
}

#[test]
fn the_dom_is_read_after_the_page_scripts_ran_and_the_screenshot_covers_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let png = tmp.path().join("ok.png");
    let r = open(&fixture("ok.html"), Some("only=chart-1"), &png);

    // The script's paragraph is in the DOM, and it saw the fragment.
    let added = r.select("#added");
    assert_eq!(
        added.len(),
        1,
        "script output missing from the DOM:\n{}",
        r.dom
    );
    assert_eq!(added[0].text, "added by the page's script");
    assert_eq!(added[0].attr("data-fragment"), Some("#only=chart-1"));

    // Marks per chart: the query tells a drawn chart from an empty one.
    let charts = r.within("svg.chart", ".mark");
    let drawn: Vec<(String, usize)> = charts.iter().map(|(c, n)| (c.to_string(), *n)).collect();
    assert_eq!(
        drawn,
        [
            ("svg#chart-1.chart".to_string(), 2),
            ("svg#chart-2.chart".to_string(), 0)
        ]
    );
    assert_eq!(r.count("g.mark rect"), 2);
    assert_eq!(r.count("#findings"), 0);

    assert!(r.errors.is_empty(), "unexpected errors: {:?}", r.errors);
    assert_eq!(r.console.len(), 1, "{:?}", r.console);
    assert!(
        r.console[0].starts_with("info console.log: rendered 2 marks (file://"),
        "{:?}",
        r.console
    );

    // A real PNG, the default width, and taller than the 800 px viewport: the whole page.
    let (w, h) = png_size(&png).unwrap();
    assert_eq!(w, browser::WIDTH);
    assert!(
        h > 1600,
        "screenshot {w}x{h} does not cover the 1600 px section"
    );
}

#[test]
fn console_errors_and_uncaught_exceptions_are_reported_as_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let png = tmp.path().join("throws.png");
    let r = open(&fixture("throws.html"), None, &png);

    assert_eq!(r.errors.len(), 2, "{:?}", r.console);
    assert!(
        r.errors[0].starts_with("error console.error: drawing failed: 3 series missing (file://"),
        "{:?}",
        r.errors
    );
    assert!(
        r.errors[1].starts_with(
            "error uncaught: TypeError: Cannot read properties of null (reading 'draw')"
        ),
        "{:?}",
        r.errors
    );
    assert!(r.errors[1].ends_with("throws.html:10)"), "{:?}", r.errors);
    // The warning is reported but is not an error.
    assert_eq!(r.console.len(), 3, "{:?}", r.console);
    assert!(r.console[0].starts_with("warning console.warning: a warning is not an error"));
    let (w, _) = png_size(&png).unwrap();
    assert_eq!(w, browser::WIDTH);
}

#[test]
fn a_page_that_reaches_for_the_network_gets_nothing_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("net.html");
    std::fs::write(
        &page,
        r#"<!doctype html><html><body><img src="http://example.com/logo.png">
<img src="http://192.0.2.1/chart.png"></body></html>"#,
    )
    .unwrap();
    let r = open(&page, None, &tmp.path().join("net.png"));
    assert_eq!(r.errors.len(), 2, "{:?}", r.console);
    for e in &r.errors {
        assert!(
            e.starts_with("error log.network: Failed to load resource: net::ERR_"),
            "{e}"
        );
    }
}

#[test]
fn a_page_that_never_finishes_is_stopped_and_nothing_is_left_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let page = t.join("spin.html");
    std::fs::write(
        &page,
        "<html><body><script>for (;;) {}</script></body></html>",
    )
    .unwrap();
    let out = script(
        t,
        &[
            page.to_str().unwrap(),
            t.join("spin.png").to_str().unwrap(),
            "--timeout",
            "2",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        "render-report: the page did not finish rendering within 2 s (--timeout)"
    );
    assert!(!t.join("spin.png").exists());
    assert_eq!(
        leftovers(t),
        Vec::<String>::new(),
        "profile left after a failure"
    );

    // And after a success, with an explicit size.
    let png = t.join("ok.png");
    let ok = fixture("ok.html");
    let args = [
        ok.to_str().unwrap(),
        png.to_str().unwrap(),
        "--width",
        "640",
        "--height",
        "300",
    ];
    let out = script(t, &args, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(png_size(&png).unwrap(), (640, 300));
    assert_eq!(
        leftovers(t),
        Vec::<String>::new(),
        "profile left after a success"
    );
}

#[test]
fn a_missing_browser_or_page_is_a_one_line_error_saying_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let ok = fixture("ok.html");
    let png = t.join("x.png");
    let args = [ok.to_str().unwrap(), png.to_str().unwrap()];
    let out = script(t, &args, &[("CHROMIUM", "/nonexistent/chromium")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "render-report: chromium not found at CHROMIUM=/nonexistent/chromium: \
         unset it or run scripts/setup.sh"
    );

    let missing = t.join("no-such-report.html");
    let err = browser::open(&missing, None, &png).unwrap_err();
    assert!(
        err.contains(&format!("page '{}' not found", missing.display())),
        "{err}"
    );
    assert!(!png.exists());
}
