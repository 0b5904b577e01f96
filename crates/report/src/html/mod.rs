//! The self-contained HTML report: one file, findings first, then each run's trust facts and
//! the charts its evidence allows, and a comparison when there are several runs.
//!
//! In: a [`Store`] and a [`ReportRequest`] (run ids, their findings, optional labels such as
//! "before" and "after"). Out: an [`HtmlReport`]: the page as a string, plus what was drawn and
//! what was missing (for `--json` and for tests). Nothing is fetched when the page opens: the
//! charts are inline SVG, the style and the script inline too.
//!
//! ```no_run
//! # use tailhunt_report::html::{build, ReportRequest, ReportRun};
//! # let store = tailhunt_store::Store::open_read_only(std::path::Path::new("tailhunt.db")).unwrap();
//! let req = ReportRequest {
//!     runs: vec![ReportRun { id: "3f2a9c01de".into(), label: None, findings: Vec::new(), group: None }],
//!     title: None,
//! };
//! let report = build(&store, &req).unwrap();
//! std::fs::write("report.html", report.html).unwrap();
//! ```

pub mod charts;
pub mod compare;
pub mod decimate;
pub mod facts;
pub mod format;
pub mod page;
pub mod run;
pub mod svg;

use serde::Serialize;
use tailhunt_model::{Finding, RunKind, Verdict};
use tailhunt_store::{Store, StoreError};

use crate::html::charts::latency::{self, Group};
use crate::html::charts::sweep;
use crate::html::compare::Compared;
use crate::html::run::{Chart, ChartKind, RunData, RunSection};

/// Runs drawn together: their group and kind.
type GroupKey = (Option<String>, RunKind);

/// One run to draw.
#[derive(Debug, Clone)]
pub struct ReportRun {
    /// Its id (full).
    pub id: String,
    /// How to call it in headings and legends ("before", "after"); `None`: its kind and id.
    pub label: Option<String>,
    /// What the detectors found in it.
    pub findings: Vec<Finding>,
    /// Runs are compared with the runs of the same kind in the same group (`None` is a group
    /// too): `lab run` groups by scenario, so each before is drawn against its after.
    pub group: Option<String>,
}

/// What to draw.
#[derive(Debug, Clone)]
pub struct ReportRequest {
    /// The runs, in the order they are shown (and compared).
    pub runs: Vec<ReportRun>,
    /// The page title; `None`: "tailhunt report".
    pub title: Option<String>,
}

/// A chart in the report, for the JSON summary.
#[derive(Debug, Clone, Serialize)]
pub struct DrawnChart {
    /// Element id (`report.html#ID` links to it; `#only=ID` shows it alone).
    pub id: String,
    /// Chart kind.
    pub kind: &'static str,
    /// Heading.
    pub title: String,
    /// The run it belongs to (`None`: the comparison).
    pub run: Option<String>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct HtmlReport {
    /// The page.
    #[serde(skip)]
    pub html: String,
    /// Its runs.
    pub runs: Vec<String>,
    /// The charts drawn.
    pub charts: Vec<DrawnChart>,
    /// What could not be drawn, as `run: why`.
    pub missing: Vec<String>,
    /// Findings listed (all verdicts).
    pub findings: usize,
}

/// Builds the page.
pub fn build(store: &Store, req: &ReportRequest) -> Result<HtmlReport, StoreError> {
    let mut sections = Vec::new();
    let mut compared_hists = Vec::new();
    let mut rates = Vec::new();
    for (i, r) in req.runs.iter().enumerate() {
        let rd = RunData::open(store, &r.id, i)?;
        let (section, groups, rate_points) = draw_run(&rd, r.findings.clone())?;
        compared_hists.push(groups);
        rates.push(rate_points);
        sections.push(section);
    }
    let headings: Vec<String> = sections
        .iter()
        .zip(&req.runs)
        .map(|(s, r)| page::run_heading(s, r.label.as_deref()))
        .collect();
    let compared: Vec<Compared<'_>> = sections
        .iter()
        .zip(&req.runs)
        .zip(compared_hists.iter().zip(rates))
        .map(|((s, r), (groups, rates))| Compared {
            label: r.label.clone().unwrap_or_else(|| s.run.id.clone()),
            histogram: groups.first().map(|g: &Group| g.dist.histogram()),
            rates,
        })
        .collect();
    // Runs are compared with runs of the same kind in the same group, in the order given.
    let mut groups: Vec<(GroupKey, Vec<usize>)> = Vec::new();
    for (i, (s, r)) in sections.iter().zip(&req.runs).enumerate() {
        let key = (r.group.clone(), s.run.kind.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let mut comparison = Vec::new();
    for ((group, kind), members) in groups.iter().filter(|(_, v)| v.len() > 1) {
        let subset: Vec<&Compared<'_>> = members.iter().map(|&i| &compared[i]).collect();
        let name = match group {
            Some(g) => format!("{kind} runs of {g}"),
            None => format!("{kind} runs"),
        };
        comparison.extend(compare::charts(&subset, comparison.len(), &name));
    }
    let ranked = rank(&sections, &headings);
    let title = req
        .title
        .clone()
        .unwrap_or_else(|| "tailhunt report".into());
    let subtitle = format!(
        "{} run{} from {}",
        sections.len(),
        if sections.len() == 1 { "" } else { "s" },
        store.path().display()
    );
    let pairs: Vec<(String, &RunSection)> = headings.iter().cloned().zip(sections.iter()).collect();
    let html = page::page(&title, &subtitle, &ranked, &comparison, &pairs);
    let mut charts: Vec<DrawnChart> = comparison.iter().map(|c| drawn(c, None)).collect();
    let mut missing = Vec::new();
    for s in &sections {
        charts.extend(s.charts.iter().map(|c| drawn(c, Some(s.run.id.clone()))));
        missing.extend(s.missing.iter().map(|m| format!("{}: {m}", s.run.id)));
    }
    Ok(HtmlReport {
        html,
        runs: sections.iter().map(|s| s.run.id.clone()).collect(),
        charts,
        missing,
        findings: ranked.len(),
    })
}

/// Writes the page to `path`: beside it first, then renamed, so a reader never opens half a
/// page.
pub fn write(path: &std::path::Path, report: &HtmlReport) -> std::io::Result<()> {
    let tmp = path.with_extension("html.partial");
    std::fs::write(&tmp, &report.html)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn drawn(c: &Chart, run: Option<String>) -> DrawnChart {
    DrawnChart {
        id: c.id.clone(),
        kind: c.kind.name(),
        title: c.title.clone(),
        run,
    }
}

/// Every chart one run's series allow, and what is missing.
fn draw_run(
    rd: &RunData<'_>,
    findings: Vec<Finding>,
) -> Result<(RunSection, Vec<Group>, Vec<sweep::RatePoint>), StoreError> {
    let mut charts = Vec::new();
    let mut missing = Vec::new();
    if rd.infos.is_empty() {
        missing.push(
            "any series: the run recorded none (it stopped before its first measurement)".into(),
        );
    }
    let groups = if rd.is(&RunKind::Runq) {
        Vec::new()
    } else {
        latency::groups(rd)?
    };
    let rate_points = sweep::rate_points(rd)?;
    latency::charts(rd, &groups, &mut charts, &mut missing);
    if let Some(c) = sweep::sweep_chart(rd, rate_points.clone()) {
        charts.push(c);
    }
    if let Some(c) = sweep::breakdown(rd)? {
        charts.push(c);
    }
    match &rd.run.kind {
        RunKind::Pcap | RunKind::Capture => charts::capture::charts(rd, &mut charts, &mut missing)?,
        RunKind::Runq => charts::runq::charts(rd, &mut charts, &mut missing)?,
        RunKind::Transfer | RunKind::Sockets => {
            charts::tcpinfo::charts(rd, &mut charts, &mut missing)?
        }
        RunKind::Probe | RunKind::Import => {
            charts::probe::charts(rd, &mut charts, &mut missing)?;
            if groups.is_empty() && !rd.infos.is_empty() {
                missing.push("request latency: the run has no latency series".into());
            }
        }
        RunKind::Load | RunKind::Other(_) => {
            if groups.is_empty() && !rd.infos.is_empty() {
                missing.push("request latency: the run has no latency series".into());
            }
        }
    }
    charts.sort_by_key(|c| ChartKind::ALL.iter().position(|k| *k == c.kind));
    let section = RunSection {
        facts: facts::facts(rd),
        run: rd.run.clone(),
        findings,
        charts,
        missing,
    };
    Ok((section, groups, rate_points))
}

fn verdict_rank(v: Verdict) -> u8 {
    match v {
        Verdict::Detected => 0,
        Verdict::Warning => 1,
        Verdict::Inconclusive => 2,
        Verdict::RuledOut => 3,
    }
}

/// Chart kinds that show each detector's evidence, best first (when the finding's evidence
/// names no series a chart draws).
fn preferred(detector: &str) -> &'static [ChartKind] {
    match detector {
        d if d.contains("burst") || d.contains("saturated") => &[ChartKind::Bytes],
        d if d.contains("nagle") || d.contains("load-falls") => &[
            ChartKind::LatencyVsRate,
            ChartKind::Histogram,
            ChartKind::Flow,
        ],
        d if d.contains("fragile") => &[
            ChartKind::Histogram,
            ChartKind::Cdf,
            ChartKind::ProbeOverTime,
        ],
        "step-change" | "periodic-tail" | "latency-floor" => {
            &[ChartKind::ProbeOverTime, ChartKind::PercentilesOverTime]
        }
        "cold-path" => &[ChartKind::ProbeVariants, ChartKind::ProbeOverTime],
        d if d.contains("window") || d.contains("timeout") => {
            &[ChartKind::Flow, ChartKind::TcpInfo]
        }
        d if d.contains("noisy") || d.contains("throttled") => {
            &[ChartKind::RunqWaits, ChartKind::Runq]
        }
        _ => &[ChartKind::Histogram],
    }
}

/// The chart in `s` that shows `f`'s evidence: a chart of a preferred kind that draws the
/// evidence's series by its full name (one probe's chart among many), then the first chart of a
/// preferred kind, then any chart of the series.
fn chart_for(s: &RunSection, f: &Finding) -> Option<(String, String)> {
    let exact = preferred(&f.detector).iter().find_map(|k| {
        s.charts
            .iter()
            .find(|c| c.kind == *k && f.evidence.iter().any(|e| c.series.contains(&e.series)))
    });
    let by_pref = exact.or_else(|| {
        preferred(&f.detector)
            .iter()
            .find_map(|k| s.charts.iter().find(|c| c.kind == *k))
    });
    let by_series = f.evidence.iter().find_map(|e| {
        let base = e.series.split('{').next().unwrap_or(&e.series);
        s.charts.iter().find(|c| c.series.iter().any(|x| x == base))
    });
    by_pref
        .or(by_series)
        .map(|c| (c.id.clone(), c.title.clone()))
}

/// All findings, causes found first, then by confidence.
fn rank<'a>(sections: &'a [RunSection], headings: &[String]) -> Vec<page::Ranked<'a>> {
    let mut out: Vec<page::Ranked<'a>> = sections
        .iter()
        .zip(headings)
        .flat_map(|(s, h)| {
            s.findings.iter().map(move |f| page::Ranked {
                finding: f,
                run: h.clone(),
                chart: chart_for(s, f),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        verdict_rank(a.finding.verdict)
            .cmp(&verdict_rank(b.finding.verdict))
            .then(b.finding.confidence.total_cmp(&a.finding.confidence))
    });
    out
}
