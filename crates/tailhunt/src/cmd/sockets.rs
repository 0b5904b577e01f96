//! `tailhunt sockets`: sample every TCP socket (inet_diag) with the setsockopt audit, store
//! a run of kind `sockets` with each busy connection's TCP_INFO series, and run the window
//! detector.

use anyhow::Result;
use tailhunt_model::{ClockOrigin, RunKind};
use tailhunt_report::sock::{render_sockets, SocketsDoc};
use tailhunt_sock::monitor::{self, MonitorOptions};

use crate::cli::{Cli, SocketsArgs};
use crate::signals::{self, Interrupted};
use crate::{flags, output};

pub fn run(cli: &Cli, a: &SocketsArgs) -> Result<()> {
    let opts = MonitorOptions {
        duration: a.duration,
        interval: a.interval,
        netns: a.netns.clone(),
        pid: a.pid,
        port: a.port,
        audit: !a.no_audit,
    };
    if opts.interval.is_zero() {
        anyhow::bail!(
            "--interval {}: give a positive interval such as 100ms",
            flags::show(a.interval)
        );
    }
    // Every connection keeps one reading per round: bound the rounds, not the memory after.
    const MAX_ROUNDS: u128 = 1_000_000;
    let rounds = opts.duration.as_nanos() / opts.interval.as_nanos();
    if rounds > MAX_ROUNDS {
        anyhow::bail!(
            "--duration {} at --interval {} makes {rounds} sampling rounds, above the limit of {MAX_ROUNDS}: each connection keeps a reading per round; sample less often or for less time",
            flags::show(a.duration),
            flags::show(a.interval)
        );
    }
    let mut db = crate::cmd::open_tagged(cli)?;
    signals::install();
    let origin = ClockOrigin::now();
    let m = monitor::run(&opts, signals::flag(), || {
        tell!(
            "sampling TCP sockets{} every {} for {}",
            if opts.audit {
                " with the setsockopt audit"
            } else {
                ""
            },
            flags::show(a.interval),
            flags::show(a.duration)
        );
    })?;
    let params = serde_json::json!({ "namespaces": m.report.namespaces });
    let mut run = db.begin_run(RunKind::Sockets, params, origin)?;
    m.record(&mut run)
        .map_err(|e| anyhow::anyhow!("storing the sockets run: {e}"))?;
    // A signal before --duration ended cuts the sampling short: kept, marked partial.
    let cut_short = signals::requested();
    let (run_id, _) = run.finish_as(cut_short, serde_json::json!({}))?;
    let diagnosis = tailhunt_diagnose::diagnose_and_store(&mut db, &run_id)?;
    let doc = SocketsDoc {
        run_id: run_id.clone(),
        report: m.report,
        findings: diagnosis.findings,
    };
    output::print(cli.json, &doc, render_sockets)?;
    if cut_short {
        return Err(anyhow::Error::new(Interrupted).context(format!(
            "stopped before --duration ended: kept what was sampled as partial run {run_id}"
        )));
    }
    Ok(())
}
