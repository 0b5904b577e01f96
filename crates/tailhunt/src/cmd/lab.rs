//! `tailhunt lab`: synthetic data sets (`synth`) and the link emulator (`link`).

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tailhunt_model::units;
use tailhunt_netlab::link::{EmulatedLink, LinkConfig};
use tailhunt_netlab::netns::Netns;
use tailhunt_report::doc::WrittenDoc;
use tailhunt_report::link::{render_link, LinkDoc};
use tailhunt_synth as synth;

use crate::cli::{Cli, LinkArgs, Shape, SynthArgs};
use crate::output;
use crate::{flags, signals};

/// Most values `lab synth` generates: they are held in memory (8 bytes each) before writing.
const MAX_SYNTH_COUNT: usize = 100_000_000;

pub fn synth(cli: &Cli, a: &SynthArgs) -> Result<()> {
    if a.count > MAX_SYNTH_COUNT {
        anyhow::bail!(
            "--count {} is above the limit of {MAX_SYNTH_COUNT}: the values are held in memory (8 bytes each) before they are written; generate several files with different --seed",
            a.count
        );
    }
    let median = tailhunt_model::parse_duration_ns(&a.median, None)
        .with_context(|| format!("--median '{}' (write a duration such as 1ms)", a.median))?
        as f64;
    let values = match a.shape {
        Shape::Trimodal => synth::mixture(a.count, &synth::trimodal_components(a.shift)?, a.seed)?,
        Shape::Lognormal => synth::lognormal(a.count, median, a.sigma, a.seed)?,
        Shape::Pareto => synth::pareto(a.count, median, a.tail, a.seed)?,
    };
    let mut out = output::open_output(a.output.as_deref())?;
    writeln!(out, "latency_ns")?;
    for v in &values {
        writeln!(out, "{v}")?;
    }
    out.flush()?;
    drop(out);
    if let Some(path) = &a.output {
        let doc = WrittenDoc {
            file: path.display().to_string(),
            format: "csv".into(),
            values: values.len() as u64,
        };
        output::print(cli.json, &doc, |d| {
            format!("wrote {} samples to {}\n", d.values, d.file)
        })?;
    }
    Ok(())
}

fn link_config(a: &LinkArgs) -> Result<LinkConfig> {
    Ok(LinkConfig {
        delay_ns: a.delay.as_nanos() as u64,
        jitter_ns: a.jitter.as_nanos() as u64,
        rate_bps: a.rate,
        queue_bytes: a.queue,
        loss: a.loss,
        seed: a.seed,
    })
}

pub fn link(cli: &Cli, a: &LinkArgs) -> Result<()> {
    let cfg = link_config(a)?;
    // Check the flags before creating anything.
    cfg.validate("link")?;
    let until = a.duration;
    // Namespaces made with --create live as long as this command.
    let created = if a.create {
        let na = Netns::new("link-a").context("--create: creating namespace A")?;
        let nb = Netns::new("link-b").context("--create: creating namespace B")?;
        Some((na, nb))
    } else {
        None
    };
    let (a_ns, b_ns) = match &created {
        Some((na, nb)) => (na.name().to_string(), nb.name().to_string()),
        None => (
            a.a_ns.clone().unwrap_or_default(),
            a.b_ns.clone().unwrap_or_default(),
        ),
    };
    signals::install();
    let emulator = EmulatedLink::start_in(&a_ns, &a.a_addr, &b_ns, &a.b_addr, cfg, cfg)
        .with_context(|| format!("starting the link between '{a_ns}' and '{b_ns}'"))?;
    let (ia, ib) = (emulator.a_addr(), emulator.b_addr());
    let shape = match cfg.rate_bps {
        Some(r) => format!(
            "{}, queue {} bytes",
            units::format_bit_rate(r),
            cfg.queue_bytes
        ),
        None => "no rate limit".to_string(),
    };
    // Status goes to stderr so that stdout holds only the final report (or JSON).
    tell!(
        "link up: {a_ns} ({ia}) <-> {b_ns} ({ib}): delay {} +/- {} one way, {shape}, loss {}",
        flags::show(a.delay),
        flags::show(a.jitter),
        cfg.loss
    );
    if a.create {
        tell!("try: ip netns exec {a_ns} ping {ib}");
    }
    tell!("Ctrl-C to stop");
    let _ = std::io::stderr().flush();
    let started = Instant::now();
    let mut stats = emulator.stats();
    // A namespace deleted under the link ends it: nothing more can cross.
    while !signals::requested()
        && until.is_none_or(|u| started.elapsed() < u)
        && !(stats.forward.input_gone || stats.reverse.input_gone)
    {
        std::thread::sleep(Duration::from_millis(50));
        stats = emulator.stats();
    }
    drop(emulator);
    let doc = LinkDoc {
        a_ns,
        b_ns,
        a_addr: ia.to_string(),
        b_addr: ib.to_string(),
        delay_ns: cfg.delay_ns,
        jitter_ns: cfg.jitter_ns,
        rate_bps: cfg.rate_bps,
        queue_bytes: cfg.queue_bytes,
        loss: cfg.loss,
        ran_ns: started.elapsed().as_nanos() as u64,
        forward: stats.forward,
        reverse: stats.reverse,
    };
    output::print(cli.json, &doc, render_link)?;
    for (ns, x) in [(&doc.a_ns, &doc.forward), (&doc.b_ns, &doc.reverse)] {
        if x.input_gone {
            anyhow::bail!(
                "the link stopped early: its device in '{ns}' disappeared (was the namespace deleted?)"
            );
        }
    }
    Ok(())
}
