//! `tailhunt report`: the HTML file, its structure (snapshot), every chart kind rendered in
//! headless Chromium, and what it says when a run has nothing to draw.
//!
//! The runs come from the committed store `fixtures/store-schema3.db` (real runs of every kind,
//! written by an older tailhunt: fixed data, so the structure snapshot is stable) plus two
//! sweeps with the per-request breakdown that the test records itself against `tailhunt serve`.
//! Regenerate the snapshot after an intended change with
//! `UPDATE_SNAPSHOTS=1 cargo test --release --test report`.

mod common;

use std::path::{Path, PathBuf};

use common::browser;
use common::servers::tailhunt_serve;
use common::Env;
use scraper::{ElementRef, Html, Selector};

/// The runs of the committed fixture store, oldest first.
const FIXTURE_RUNS: [&str; 10] = [
    "74b8b5a15a",
    "f59f01c07f",
    "8f87e52bb2",
    "8a9d7eefd7",
    "111be1cdaf",
    "f9a3986e8a",
    "11700d58e5",
    "4b9e40e00e",
    "34eb42338a",
    "9949130439",
];

/// Every chart kind the report knows.
const KINDS: [&str; 15] = [
    "histogram",
    "cdf",
    "percentiles-over-time",
    "heatmap",
    "latency-vs-rate",
    "breakdown",
    "fanout",
    "bytes",
    "flow",
    "rtt",
    "runq",
    "runq-waits",
    "tcp-info",
    "compare-histogram",
    "compare-rate",
];

/// An env whose store is a copy of the fixture (reports write findings into it).
fn fixture_env() -> Env {
    let env = Env::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-schema3.db");
    std::fs::copy(fixture, env.db()).expect("copy the fixture store");
    env
}

/// Where a test keeps its screenshots for people to look at.
fn artifact(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&dir).expect("artifact dir");
    dir.join(name)
}

fn sel(css: &str) -> Selector {
    Selector::parse(css).expect("selector")
}

/// The page's structure without coordinates: sections, figures with their kind and panels,
/// each panel's series with their mark counts, bands and rules by class, the legend.
fn outline(html: &str) -> String {
    let doc = Html::parse_document(html);
    let mut out = String::new();
    for li in doc.select(&sel("ol.findings > li")) {
        let verdict = li
            .select(&sel(".verdict"))
            .next()
            .map(|v| v.text().collect::<String>());
        let link = li
            .select(&sel("a"))
            .next()
            .and_then(|a| a.value().attr("href"));
        out.push_str(&format!(
            "finding {} -> {}\n",
            verdict.unwrap_or_default(),
            link.unwrap_or("-")
        ));
    }
    for section in doc.select(&sel("main > section")) {
        let id = section.value().attr("id").unwrap_or("?");
        out.push_str(&format!("section {id}\n"));
        let facts = section.select(&sel("table.facts tr")).count();
        let doubts = section.select(&sel("td.doubt")).count();
        if facts > 0 {
            out.push_str(&format!("  facts {facts} rows, {doubts} doubts\n"));
        }
        for m in section.select(&sel(".missing li")) {
            out.push_str(&format!("  missing {}\n", m.text().collect::<String>()));
        }
        for fig in section.select(&sel("figure")) {
            out.push_str(&format!(
                "  figure {} kind={}\n",
                fig.value().attr("id").unwrap_or("?"),
                fig.value().attr("data-kind").unwrap_or("?")
            ));
            for svg in fig.select(&sel("svg.chart")) {
                out.push_str(&panel(svg));
            }
        }
    }
    out
}

fn panel(svg: ElementRef<'_>) -> String {
    let mut s = format!(
        "    panel x={}\n",
        svg.value()
            .attr("data-x")
            .map_or("?", |x| x.split(',').next().unwrap_or("?"))
    );
    for g in svg.select(&sel("g.series")) {
        s.push_str(&format!(
            "      series '{}' marks={}\n",
            g.value().attr("data-series").unwrap_or("?"),
            g.select(&sel(".mark")).count()
        ));
    }
    let classes = |css: &str| {
        let mut v: Vec<String> = svg
            .select(&sel(css))
            .map(|e| e.value().attr("class").unwrap_or("").to_string())
            .collect();
        v.sort();
        v.dedup_by(|a, b| a == b);
        v
    };
    let bands = svg.select(&sel("g.band")).count();
    if bands > 0 {
        s.push_str(&format!("      bands {bands} {:?}\n", classes("g.band")));
    }
    for r in svg.select(&sel("g.rule text")) {
        s.push_str(&format!("      rule '{}'\n", r.text().collect::<String>()));
    }
    let legend: Vec<&str> = svg
        .select(&sel(".legend-item"))
        .filter_map(|e| e.value().attr("data-series"))
        .collect();
    if !legend.is_empty() {
        s.push_str(&format!("      legend {legend:?}\n"));
    }
    s
}

fn check_snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {}; run with UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "report structure changed from {} (UPDATE_SNAPSHOTS=1 regenerates it):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

#[test]
fn the_structure_of_the_fixture_runs_report_matches_its_snapshot() {
    let env = fixture_env();
    let out = env.path("fixture.html");
    let mut args = vec!["report"];
    args.extend(FIXTURE_RUNS);
    args.extend(["-o", out.to_str().unwrap()]);
    let doc = env.json("report", &args);
    let html = std::fs::read_to_string(&out).expect("report written");
    assert_eq!(doc["bytes"].as_u64(), Some(html.len() as u64));
    check_snapshot("report_fixture_outline.txt", &outline(&html));
}

/// Two short sweeps with the breakdown against a reference server: the latency-vs-rate,
/// breakdown and run-by-run comparison charts need them (the fixture has no such runs).
fn record_sweeps(env: &Env) -> Vec<String> {
    let server = tailhunt_serve("tcp", &[]);
    (0..2)
        .map(|_| {
            let doc = env.json(
                "load",
                &[
                    "load",
                    &format!("tcp://{}", server.addr),
                    "--sweep",
                    "100,400",
                    "--duration",
                    "700ms",
                    "--nodelay=true",
                    "--breakdown",
                ],
            );
            doc["run_id"].as_str().expect("run id").to_string()
        })
        .collect()
}

#[test]
fn every_chart_kind_renders_in_chromium_with_marks_and_no_errors() {
    let env = fixture_env();
    let sweeps = record_sweeps(&env);
    let out = env.path("every.html");
    let mut args = vec!["report"];
    args.extend(sweeps.iter().map(String::as_str));
    args.extend(FIXTURE_RUNS);
    args.extend([
        "--label",
        "sweep A",
        "--label",
        "sweep B",
        "-o",
        out.to_str().unwrap(),
    ]);
    let doc = env.json("report", &args);
    let kinds: Vec<&str> = doc["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    for k in KINDS {
        assert!(
            kinds.contains(&k),
            "no {k} chart in the report; charts: {kinds:?}"
        );
    }
    let png = artifact("every-chart.png");
    let page = browser::open(&out, None, &png).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        page.errors.is_empty(),
        "the page logged errors: {:?}",
        page.errors
    );
    assert_eq!(page.count("#findings"), 1, "no findings section");
    let charts = page.within("svg.chart", ".mark");
    assert!(
        charts.len() >= kinds.len(),
        "{} panels for {} charts",
        charts.len(),
        kinds.len()
    );
    for (chart, marks) in &charts {
        assert!(
            *marks > 0,
            "{chart} ({:?}) drew no marks",
            chart.attr("data-plot")
        );
    }
    let figures = page.select("figure");
    assert_eq!(
        figures.len(),
        kinds.len(),
        "one figure per chart in the JSON"
    );
    let (w, h) = browser::png_size(&png).unwrap();
    assert_eq!(w, browser::WIDTH);
    assert!(
        h > 2000,
        "a whole page of charts is tall; the screenshot is {h} px"
    );
    // A finding's link leads to a chart that exists.
    for a in page.select("ol.findings a") {
        let target = a.attr("href").unwrap().trim_start_matches('#').to_string();
        assert_eq!(
            page.count(&format!("figure[id='{target}']")),
            1,
            "finding links to missing {target}"
        );
    }
    // `#only=ID` shows one chart alone (what the README's screenshots use).
    let only = artifact("only-compare-rate.png");
    let alone =
        browser::open(&out, Some("only=compare-rate-0"), &only).unwrap_or_else(|e| panic!("{e}"));
    assert!(alone.errors.is_empty(), "{:?}", alone.errors);
    let (_, h) = browser::png_size(&only).unwrap();
    assert!(
        h < 1200,
        "#only=compare-rate should show one chart, the page is {h} px tall"
    );
}

#[test]
fn a_run_with_nothing_to_draw_still_renders_and_says_what_is_missing() {
    let env = Env::new();
    // A store with one run whose writer stopped before its first series (a partial run).
    let csv = env.path("empty.csv");
    std::fs::write(&csv, "latency_ms\n").unwrap();
    let empty = env.run(&["import", csv.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&empty.stderr);
    // Import refuses an empty file; a series with samples and an empty one are the next best.
    assert!(!empty.status.success(), "an empty CSV imported: {stderr}");
    let one = env.path("one.csv");
    std::fs::write(&one, "1700000000.5,1.5ms\n").unwrap();
    let run = env.import(&one, &[]);
    let out = env.path("thin.html");
    let doc = env.json("report", &["report", &run, "-o", out.to_str().unwrap()]);
    let missing: Vec<&str> = doc["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(
        missing
            .iter()
            .any(|m| m.contains("too few samples over time")),
        "a one-sample run should say what it cannot draw: {missing:?}"
    );
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(
        html.contains("Not in this run"),
        "the page does not list what is missing"
    );
    let page = browser::open(&out, None, &artifact("thin.png")).unwrap_or_else(|e| panic!("{e}"));
    assert!(page.errors.is_empty(), "{:?}", page.errors);
}

#[test]
fn an_unknown_run_is_one_line_and_nothing_is_written() {
    let env = fixture_env();
    let out = env.path("nope.html");
    let err = env.fails(&["report", "ffffffffff", "-o", out.to_str().unwrap()]);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("ffffffffff"), "{err}");
    assert!(!out.exists(), "a report was written for an unknown run");
    let err = env.fails(&["report", "latest", "--label", "a", "--label", "b"]);
    assert!(err.contains("--label"), "{err}");
}
