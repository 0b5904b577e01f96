//! `tailhunt hunt TARGET`: reads the flags, shows the plan and the progress on stderr, prints
//! the ranked verdict (or `--json`). The method itself lives in `tailhunt_hunt`.

use std::io::Write as _;

use anyhow::Result;
use tailhunt_hunt::{text, HuntConfig, Plan, Progress, RequestShape};
use tailhunt_model::evidence::sweep::SweepStep;

use crate::cli::{Cli, HuntArgs};
use crate::signals::{self, Interrupted};
use crate::{output, request};

/// Progress lines on stderr, one per event (also when stderr is not a terminal: a hunt takes
/// minutes and a log should show where it was). The plan goes to stdout before the hunt
/// runs, or to stderr with `--json` (stdout is then one JSON document).
struct Stderr {
    json: bool,
}

impl Progress for Stderr {
    fn planned(&mut self, plan: &Plan) {
        let text = text::plan(plan);
        let _ = if self.json {
            std::io::stderr().write_all(text.as_bytes())
        } else {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|_| out.flush())
        };
    }

    fn phase(&mut self, what: &str) {
        tell!("hunt: {what}");
    }

    fn step_started(&mut self, rate: f64, repeat: usize) {
        tell!("hunt: {}", text::step_started(rate, repeat));
    }

    fn step_done(&mut self, s: &SweepStep) {
        tell!("hunt: {}", text::step_done(s));
    }
}

/// The directory of the store (the hunt's report is written there by default).
fn beside(store: &std::path::Path) -> std::path::PathBuf {
    match store.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

pub fn run(cli: &Cli, a: &HuntArgs) -> Result<()> {
    let store = a.store.clone().unwrap_or_else(|| cli.db.clone());
    let cfg = HuntConfig {
        url: a.target.clone(),
        budget: a.budget,
        max_rate: a.max_rate,
        conns: a.conns,
        store: store.clone(),
        seed: a.seed,
        report: (!a.no_report).then(|| a.report.clone().unwrap_or_else(|| beside(&store))),
        request: RequestShape {
            bytes: a.request.request_bytes,
            http: request::http(&a.request)?,
            tls: request::tls(&a.request),
        },
    };
    signals::install();
    let hunt = match tailhunt_hunt::run(&cfg, signals::flag(), &mut Stderr { json: cli.json }) {
        Ok(hunt) => hunt,
        Err(e @ tailhunt_hunt::HuntError::Interrupted { .. }) => {
            return Err(anyhow::Error::new(Interrupted).context(e.to_string()));
        }
        Err(e) => return Err(e.into()),
    };
    output::print(cli.json, &hunt, text::hunt)?;
    if hunt.interrupted {
        return Err(anyhow::Error::new(Interrupted).context(format!(
            "kept what was measured as the runs of hunt {}",
            hunt.hunt_id
        )));
    }
    // The target went away mid-sweep: the verdict is printed, the exit status says so (as
    // `load` does).
    if let Some(why) = &hunt.failure {
        anyhow::bail!(
            "{why}; kept what was measured as the partial runs of hunt {}",
            hunt.hunt_id
        );
    }
    Ok(())
}
