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
use tailhunt_model::{ClockOrigin, RunKind};
use tailhunt_store::Store;
use tailhunt_synth::probe::{Model, ProbeCase, ProbeSpec, ORIGIN_MONO_NS};
use tailhunt_synth::Component;

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

/// Every chart kind the fixture and the recorded sweeps draw (the probe charts have their own
/// tests below).
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

const S: i64 = 1_000_000_000;

/// A generated four-hour probe run (one round a second) with three causes planted: the
/// `api` probe five times slower from the second hour on, a slow mode in the `cache` probe's
/// tail that comes and goes every 20 minutes, and a DNS lookup adding ~300us to the
/// `resolver` probe's by-name variant against its by-ip sibling.
fn planted_probe_run(env: &Env) -> String {
    let spec = |probe: &str, kind: &str, variant: &str, model: Model| ProbeSpec {
        probe: probe.into(),
        kind: kind.into(),
        variant: variant.into(),
        model,
    };
    let mut api = Model::lognormal(1e6, 0.3);
    api.step = Some((2 * 3600 * S, 5.0));
    let mut cache = Model::lognormal(2e6, 0.25);
    let slow = Component {
        median_ns: 25e6,
        sigma: 0.2,
        weight: 1.0,
    };
    cache.tail_period = Some((20 * 60 * S, slow, 0.08));
    let mut by_name = Model::lognormal(800e3, 0.2);
    by_name.extra = Some(Component {
        median_ns: 300e3,
        sigma: 0.3,
        weight: 1.0,
    });
    let case = ProbeCase {
        name: "report".into(),
        description: "a step, a tail period and a cold path".into(),
        interval_ns: S,
        rounds: 4 * 3600,
        probes: vec![
            spec("api", "http", "default", api),
            spec("cache", "memcached", "default", cache),
            spec("resolver", "dns", "by-name", by_name),
            spec("resolver", "dns", "by-ip", Model::lognormal(800e3, 0.2)),
        ],
        planted: Vec::new(),
    };
    let mut store = Store::open(&env.db()).expect("open the store");
    let origin = ClockOrigin {
        wall_ns: 1_700_000_000_000_000_000,
        mono_ns: ORIGIN_MONO_NS,
    };
    let mut w = store
        .begin_run(RunKind::Probe, case.params(), origin)
        .expect("begin run");
    w.set_commit_interval(None);
    case.write(&mut w, 7).expect("write the series");
    w.finish(serde_json::json!({})).expect("finish the run")
}

/// The text of every element of the rendered page matching `css`, whitespace collapsed.
fn texts(dom: &Html, css: &str) -> Vec<String> {
    dom.select(&sel(css))
        .map(|e| e.text().collect::<Vec<_>>().join(" "))
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn count(dom: &Html, css: &str) -> usize {
    dom.select(&sel(css)).count()
}

/// The id of the figure titled `title`.
fn figure_titled(dom: &Html, title: &str) -> Option<String> {
    dom.select(&sel("figure"))
        .find(|f| {
            f.select(&sel("h3"))
                .next()
                .is_some_and(|h| h.text().collect::<String>() == title)
        })
        .and_then(|f| f.value().attr("id").map(str::to_string))
}

/// The figure a finding of `detector` links to, and that figure's title.
fn finding_link(dom: &Html, detector: &str) -> Option<(String, String)> {
    let li = dom
        .select(&sel("ol.findings > li"))
        .find(|li| li.text().collect::<String>().contains(detector))?;
    let href = li.select(&sel("a")).next()?.value().attr("href")?;
    let target = href.trim_start_matches('#').to_string();
    let title = texts(dom, &format!("figure[id='{target}'] h3")).pop()?;
    Some((target, title))
}

#[test]
fn a_probe_run_draws_its_percentiles_over_time_with_the_planted_step_period_and_cold_path() {
    let env = Env::new();
    let run = planted_probe_run(&env);
    let out = env.path("probe.html");
    let doc = env.json("report", &["report", &run, "-o", out.to_str().unwrap()]);
    let charts: Vec<(String, String)> = doc["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap().to_string(),
                c["title"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for title in [
        "api (http) over time",
        "cache (memcached) over time",
        "resolver (dns) over time",
    ] {
        assert!(
            charts
                .iter()
                .any(|(k, t)| k == "probe-over-time" && t == title),
            "no '{title}' chart: {charts:?}"
        );
    }
    assert!(
        charts
            .iter()
            .any(|(k, t)| k == "probe-variants" && t == "resolver (dns): by-name against by-ip"),
        "no variant chart: {charts:?}"
    );
    let png = artifact("probe-planted.png");
    let page = browser::open(&out, None, &png).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        page.errors.is_empty(),
        "the page logged errors: {:?}",
        page.errors
    );
    for (chart, marks) in page.within("svg.chart", ".mark") {
        assert!(marks > 0, "{:?} drew no marks", chart.attr("data-plot"));
    }
    let dom = Html::parse_document(&page.dom);
    // Each finding links to its own probe's chart, and that chart marks what was found.
    let (step, title) = finding_link(&dom, "step-change").expect("a step-change finding");
    assert_eq!(title, "api (http) over time");
    let rules = texts(&dom, &format!("figure[id='{step}'] g.rule.change text"));
    assert_eq!(rules.len(), 1, "one change point in api's panel: {rules:?}");
    let label = &rules[0];
    assert!(
        label.starts_with("p50 ") && label.contains(" -> ") && label.contains("p99 "),
        "the change point is labelled with its levels: {label}"
    );
    let (period, title) = finding_link(&dom, "periodic-tail").expect("a periodic-tail finding");
    assert_eq!(title, "cache (memcached) over time");
    let bands = count(&dom, &format!("figure[id='{period}'] g.band.period"));
    assert!(
        (9..=15).contains(&bands),
        "a 20-minute period over 4 hours has ~12 high phases shaded, got {bands}"
    );
    let band_labels = texts(&dom, &format!("figure[id='{period}'] g.band.period text"));
    // `p99 period 20m00s`: the period's length labels the first band (within an interval).
    let minutes = band_labels
        .first()
        .and_then(|l| l.split(" period ").nth(1))
        .and_then(|p| p.split('m').next())
        .and_then(|m| m.parse::<i64>().ok());
    assert!(
        band_labels.len() == 1 && minutes.is_some_and(|m| (18..=22).contains(&m)),
        "the period's length labels its first band: {band_labels:?}"
    );
    let (cold, title) = finding_link(&dom, "cold-path").expect("a cold-path finding");
    assert_eq!(title, "resolver (dns): by-name against by-ip");
    // Variants' levels with their intervals, and the paired differences above zero.
    assert_eq!(count(&dom, &format!("figure[id='{cold}'] svg.chart")), 2);
    assert_eq!(
        count(
            &dom,
            &format!("figure[id='{cold}'] svg.chart g.series .mark")
        ),
        6,
        "two levels per variant and two differences"
    );
    let caption = texts(&dom, &format!("figure[id='{cold}'] figcaption")).join("");
    assert!(
        caption.contains("the interval excludes zero"),
        "the planted 300us cost is shown as real: {caption}"
    );
    // The resolver's panels carry no change point: nothing was planted there.
    let resolver = figure_titled(&dom, "resolver (dns) over time").expect("the resolver's chart");
    assert_eq!(
        count(&dom, &format!("figure[id='{resolver}'] g.rule.change")),
        0
    );
    assert_eq!(
        count(&dom, &format!("figure[id='{resolver}'] svg.chart")),
        2,
        "one panel per variant"
    );
}

#[test]
fn a_real_probe_run_draws_its_variants_and_its_failing_probe_in_the_trust_facts() {
    let env = Env::new();
    let server = tailhunt_serve("tcp", &[]);
    // A port nobody listens on any more.
    let refused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = format!(
        r#"
interval = "20ms"
timeout = "2500us"
[[probe]]
name = "echo"
kind = "tcp-echo"
target = "{}"
compare = ["connection", "pair"]
[[probe]]
name = "refuses"
kind = "tcp-connect"
target = "{refused}"
"#,
        server.addr
    );
    let file = env.path("probes.toml");
    std::fs::write(&file, config).unwrap();
    let output = env.run(&[
        "probe",
        "--config",
        file.to_str().unwrap(),
        "--duration",
        "4s",
        "--json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "probe gave no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let run = doc["run_id"].as_str().expect("run id").to_string();
    let out = env.path("real.html");
    let rep = env.json("report", &["report", &run, "-o", out.to_str().unwrap()]);
    let kinds: Vec<(&str, &str)> = rep["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["kind"].as_str().unwrap(), c["title"].as_str().unwrap()))
        .collect();
    for want in [
        ("probe-over-time", "echo (tcp-echo) over time"),
        ("probe-variants", "echo (tcp-echo): fresh against reused"),
        ("probe-variants", "echo (tcp-echo): first against second"),
    ] {
        assert!(kinds.contains(&want), "no {want:?}: {kinds:?}");
    }
    let png = artifact("probe-real.png");
    let page = browser::open(&out, None, &png).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        page.errors.is_empty(),
        "the page logged errors: {:?}",
        page.errors
    );
    let dom = Html::parse_document(&page.dom);
    let echo = figure_titled(&dom, "echo (tcp-echo) over time").expect("echo's chart");
    assert_eq!(
        count(&dom, &format!("figure[id='{echo}'] svg.chart")),
        4,
        "one panel per variant (fresh, reused, first, second)"
    );
    // Every panel drew something: lines, or (the probe that never answered: errors are not
    // latency) its failing band.
    for (chart, marks) in page.within("svg.chart", ".mark, g.band.failing") {
        assert!(marks > 0, "{:?} drew nothing", chart.attr("data-plot"));
    }
    // A probe that never answered: marked failing throughout.
    let refuses = figure_titled(&dom, "refuses (tcp-connect) over time").expect("its chart");
    assert_eq!(
        texts(&dom, &format!("figure[id='{refuses}'] g.band.failing text")),
        ["failing"]
    );
    let caption = texts(&dom, &format!("figure[id='{refuses}'] figcaption")).join("");
    assert!(caption.contains("samples failed"), "{caption}");
    // The trust facts: the schedule's drift, and the failing probe in red with its error.
    let facts = texts(&dom, "table.facts tr");
    assert!(
        facts
            .iter()
            .any(|f| f.starts_with("probe schedule") && f.contains("drift p50")),
        "{facts:?}"
    );
    let doubts = texts(&dom, "td.doubt");
    assert!(
        doubts
            .iter()
            .any(|d| d.contains("0 ok") && d.contains("failing now") && d.contains("last error")),
        "the refused probe is marked as failing: {doubts:?}"
    );
    // (A loaded host may time out a few of the echo's 2.5 ms measurements: not asserted.)
    assert!(
        facts
            .iter()
            .any(|f| f.starts_with("probe echo (tcp-echo)") && f.contains(" ok, ")),
        "{facts:?}"
    );
}

#[test]
fn a_timestamped_import_with_a_step_gets_the_over_time_chart_and_a_steady_one_does_not() {
    let env = Env::new();
    // Two generated series, one sample a second for two hours: one five times slower from the
    // first hour on, one steady. Written as `epoch seconds,latency` lines an import reads.
    let mut stepped = Model::lognormal(1e6, 0.3);
    stepped.step = Some((3600 * S, 5.0));
    let case = ProbeCase {
        name: "import".into(),
        description: "a step, and a steady control".into(),
        interval_ns: S,
        rounds: 2 * 3600,
        probes: vec![
            ProbeSpec {
                probe: "stepped".into(),
                kind: "http".into(),
                variant: "default".into(),
                model: stepped,
            },
            ProbeSpec {
                probe: "steady".into(),
                kind: "http".into(),
                variant: "default".into(),
                model: Model::lognormal(1e6, 0.3),
            },
        ],
        planted: Vec::new(),
    };
    let series = case.series(3);
    let mut runs = Vec::new();
    for name in ["stepped", "steady"] {
        let csv: String = tailhunt_synth::probe::samples_of(&series, name, "default")
            .iter()
            .map(|s| {
                let wall = 1_700_000_000.0 + (s.intended_ns - ORIGIN_MONO_NS) as f64 / 1e9;
                format!("{wall:.6},{}ns\n", s.latency_ns())
            })
            .collect();
        let file = env.path(&format!("{name}.csv"));
        std::fs::write(&file, csv).unwrap();
        runs.push(env.import(&file, &[]));
    }
    let out = env.path("import.html");
    let doc = env.json(
        "report",
        &["report", &runs[0], &runs[1], "-o", out.to_str().unwrap()],
    );
    let over_time: Vec<&str> = doc["charts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "probe-over-time")
        .map(|c| c["run"].as_str().unwrap())
        .collect();
    assert_eq!(
        over_time,
        [runs[0].as_str()],
        "only the stepped import gets the over-time chart with its change point"
    );
    let page =
        browser::open(&out, None, &artifact("import-step.png")).unwrap_or_else(|e| panic!("{e}"));
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    let dom = Html::parse_document(&page.dom);
    let (target, _) = finding_link(&dom, "step-change").expect("a step-change finding");
    let rules = texts(&dom, &format!("figure[id='{target}'] g.rule.change text"));
    assert_eq!(
        rules.len(),
        1,
        "the step-change finding links to its change point: {rules:?}"
    );
}
