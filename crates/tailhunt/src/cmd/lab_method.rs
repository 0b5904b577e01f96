//! `tailhunt lab list | run | clean`: flags in, the lab's report out (the scenarios live in
//! `tailhunt_lab::method`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;
use tailhunt_lab::method::{self, text, Options, Scale, ScenarioInfo, Verdict};
use tailhunt_lab::state;
use tailhunt_lab::truth::Tools;

use crate::cli::{Cli, LabRunArgs, LabScale, LabWorkArgs};
use crate::output;

/// `lab run` finished (or was interrupted) and a scenario did not pass: exit status 1 (the
/// table says why).
#[derive(Debug)]
pub struct NotAllPassed(pub String);

impl std::fmt::Display for NotAllPassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotAllPassed {}

#[derive(Serialize)]
struct ListDoc {
    scenarios: Vec<ScenarioInfo>,
}

pub fn list(cli: &Cli) -> Result<()> {
    let doc = ListDoc {
        scenarios: method::catalogue(),
    };
    output::print(cli.json, &doc, |d| text::list(&d.scenarios))
}

pub fn run(cli: &Cli, a: &LabRunArgs) -> Result<()> {
    let names = method::resolve(&a.names)?;
    let store = a.store.clone().unwrap_or_else(|| cli.db.clone());
    let store = absolute(&store)?;
    let work_dir = match &a.work_dir {
        Some(d) => absolute(d)?,
        None => store.with_extension("lab"),
    };
    let report = if a.no_report {
        None
    } else {
        Some(match &a.report {
            Some(r) => absolute(r)?,
            None => lab_report_beside(&store),
        })
    };
    let opts = Options {
        scale: match a.scale {
            LabScale::Quick => Scale::Quick,
            LabScale::Full => Scale::Full,
        },
        fix: !a.no_fix,
        keep: a.keep,
        store,
        work_dir: work_dir.clone(),
        report,
    };
    let mut tools = Tools::locate(std::env::current_exe().ok())?;
    // The run-queue scenarios' CPU workloads are this binary's own `lab work`.
    tools.worker = Some(tools.tailhunt.clone());
    tailhunt_lab::truth::stop_on_signals().context("installing the signal handlers")?;
    let progress = |s: &str| tell!("lab: {s}");
    let report = method::run(&names, &opts, &tools, &progress)?;
    if !report.cleaned_first.runs.is_empty() {
        tell!(
            "lab: removed what earlier runs left ({})",
            text::summary(&report.cleaned_first)
        );
    }
    output::print(cli.json, &report, text::verdicts)?;
    if a.keep && !cli.json {
        tell!("lab: captures and records kept in {}", work_dir.display());
    }
    let failed = report
        .scenarios
        .iter()
        .filter(|s| s.verdict != Verdict::Pass)
        .count();
    if report.interrupted {
        let why = "interrupted: what was measured is kept in the store, the lab's namespaces and processes are removed";
        return Err(NotAllPassed(why.into()).into());
    }
    if failed > 0 {
        let why = format!(
            "{failed} of {} scenarios did not pass",
            report.scenarios.len()
        );
        return Err(NotAllPassed(why).into());
    }
    Ok(())
}

pub fn clean(cli: &Cli) -> Result<()> {
    if !tailhunt_netlab::netns::is_root() {
        anyhow::bail!("lab clean removes namespaces, cgroups and processes: run as root");
    }
    let c = state::clean(Path::new(state::STATE_ROOT));
    output::print(cli.json, &c, text::cleaned)?;
    if !c.failures.is_empty() {
        anyhow::bail!(
            "{} leftovers could not be removed (listed above)",
            c.failures.len()
        );
    }
    Ok(())
}

/// One CPU workload of the run-queue scenarios; its record goes to `--out`.
pub fn work(a: &LabWorkArgs) -> Result<()> {
    use tailhunt_lab::truth::work::{self, WorkKind, WorkSpec};
    let kind = WorkKind::from_name(&a.kind).with_context(|| {
        format!(
            "unknown workload '{}': hog, half-hog, sleeper or worker",
            a.kind
        )
    })?;
    let record = work::run(&WorkSpec {
        kind,
        seconds: a.seconds,
        cpu: a.cpu,
        cgroups: a.cgroup.clone(),
    })?;
    std::fs::write(&a.out, record.to_string())
        .with_context(|| format!("writing '{}'", a.out.display()))?;
    Ok(())
}

/// `tailhunt.db` -> `tailhunt-lab-report.html` in the same directory.
fn lab_report_beside(store: &Path) -> PathBuf {
    let stem = store
        .file_stem()
        .map_or("tailhunt".into(), |s| s.to_string_lossy());
    store.with_file_name(format!("{stem}-lab-report.html"))
}

fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .context("reading the current directory")?
            .join(p)
    })
}
