//! `rcvbuf`: a download over an 80 ms round trip with the client's receive buffer pinned to
//! 64 KiB, and a client timeout shorter than the window lets the download take.
//!
//! ```text
//!  client ── gw ══ emulator (80 ms round trip, 40 Mbit/s) ══ server :7400
//!    └ capture (tcpdump), then tailhunt pcap       (tailhunt transfer server)
//! ```
//!
//! Before: `tailhunt transfer client --rcvbuf 64KiB --timeout T`; the window allows about 8
//! Mbit/s, so the client gives up. Expected: `receive-window-limited` (naming the process and
//! its SO_RCVBUF) and `application-timeout`. Fix: no `--rcvbuf` (the kernel autotunes); the
//! download must finish within 2x the path's limit (bytes / rate) plus half a second of slow
//! start.

use std::time::Duration;

use serde_json::Value;

use super::judge::{self, Evidence};
use super::{Figure, Options, Scale, ScenarioResult};
use crate::truth::tap::Tap;
use crate::truth::tool::{json_of, Ctx};
use crate::truth::window::Path;
use crate::truth::{pause, TruthError};

const RTT_MS: u64 = 80;
const RATE_BPS: u64 = 40_000_000;
const RCVBUF: &str = "65536";

/// How the download is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setup {
    /// SO_RCVBUF=64k and the timeout.
    Planted,
    /// Autotuned, the same timeout.
    Fixed,
    /// Autotuned, no timeout.
    Healthy,
}

/// What one download measured.
pub(crate) struct Download {
    /// Its time, s (for a download that timed out: the time its rate would have taken).
    pub(crate) seconds: f64,
    /// Whether it timed out.
    pub(crate) timed_out: bool,
    /// The path's limit for its bytes, s.
    pub(crate) limit_s: f64,
}

fn sizes(scale: Scale) -> (u64, &'static str) {
    match scale {
        Scale::Quick => (6_000_000, "3500ms"),
        Scale::Full => (15_000_000, "8s"),
    }
}

/// Runs the scenario.
pub(crate) fn run(
    ctx: &Ctx,
    opts: &Options,
    say: &dyn Fn(&str),
) -> Result<ScenarioResult, TruthError> {
    let mut ev = Evidence::default();
    say("download with SO_RCVBUF=64k and a client timeout");
    let before = measure(ctx, opts, Setup::Planted, "before", &mut ev)?;
    let after = match opts.fix {
        true => {
            say("fix: autotuned receive buffer, download again");
            Some(measure(ctx, opts, Setup::Fixed, "after", &mut ev)?)
        }
        false => None,
    };
    let findings = ev.findings(ctx)?;
    let goal_s = 2.0 * before.limit_s + 0.5;
    let figure = Figure {
        name: "download time".into(),
        unit: "s".into(),
        before: Some(before.seconds),
        after: after.as_ref().map(|a| a.seconds),
        goal: format!(
            "complete within {goal_s:.1} s (2x the path's {:.1} s limit plus slow start)",
            before.limit_s
        ),
    };
    let check = match &after {
        None => Ok(()),
        Some(a) if !a.timed_out && a.seconds <= goal_s => Ok(()),
        Some(a) => Err(format!(
            "autotuned, the download {} {:.2} s",
            if a.timed_out {
                "timed out after"
            } else {
                "took"
            },
            a.seconds
        )),
    };
    let mut notes = vec![format!(
        "before: {} ({:.2} s at the rate it got)",
        if before.timed_out {
            "the client timed out"
        } else {
            "the download finished before its timeout"
        },
        before.seconds
    )];
    let noise = after.as_ref().and_then(noise);
    if !before.timed_out {
        notes.push("the planted timeout did not fire: application-timeout cannot be".into());
    }
    let mut r = judge::judge(
        "rcvbuf",
        super::planted_of("rcvbuf"),
        findings,
        Some((figure, check)),
        noise,
        ev,
        notes,
    );
    // The window finding must name the buffer that was pinned.
    judge::require_named(
        &mut r,
        "receive-window-limited",
        &["SO_RCVBUF=65536".into()],
    );
    Ok(r)
}

/// An autotuned download slower than 3x the path's limit: the emulator or the host lagged.
pub(crate) fn noise(d: &Download) -> Option<String> {
    (d.seconds > 3.0 * d.limit_s).then(|| {
        format!(
            "an autotuned download took {:.2} s against a path limit of {:.2} s",
            d.seconds, d.limit_s
        )
    })
}

/// Builds the path, captures the receiver, runs the download; the client's, the server's and
/// the capture's runs go to the store (phase `phase`).
pub(crate) fn measure(
    ctx: &Ctx,
    opts: &Options,
    setup: Setup,
    phase: &str,
    ev: &mut Evidence,
) -> Result<Download, TruthError> {
    let path = Path::emulated(RTT_MS, RATE_BPS)?;
    let (client_if, _) = path.ifaces();
    let (_, server_ip) = path.addrs();
    let listen = format!("{server_ip}:7400");
    let mut srv = ctx.server(
        path.server(),
        "transfer server",
        &[
            "--json", "transfer", "server", "--listen", &listen, "--count", "1",
        ],
    )?;
    let tap = Tap::start(
        ctx,
        path.client(),
        "client",
        &client_if,
        &format!("receiver-{phase}"),
        "at the receiver",
    )?;
    let (bytes, timeout) = sizes(opts.scale);
    let bytes_s = bytes.to_string();
    let mut args = vec!["--json", "transfer", "client", &listen, "--bytes", &bytes_s];
    if setup == Setup::Planted {
        args.extend(["--rcvbuf", RCVBUF]);
    }
    if setup != Setup::Healthy {
        args.extend(["--timeout", timeout]);
    }
    let mut cli = ctx.spawn(path.client(), "transfer client", &args)?;
    let client = json_of(
        &mut cli,
        "tailhunt transfer client",
        Duration::from_secs(120),
    )?;
    let server = json_of(
        &mut srv,
        "tailhunt transfer server",
        Duration::from_secs(15),
    )?;
    pause(Duration::from_millis(300))?;
    let tapped = tap.stop()?;
    ev.add(&client, "transfer client", phase);
    if let Some(c) = server["connections"].get(0) {
        ev.add(c, "transfer server", phase);
    }
    let (_, (_, pcap)) = tapped.analyse(ctx, "", &[])?;
    ev.add(&pcap, "pcap", phase);
    if !opts.keep {
        let _ = std::fs::remove_file(&tapped.file);
    }
    Ok(download(&client, bytes))
}

fn download(doc: &Value, bytes: u64) -> Download {
    let timed_out = doc["outcome"] == "timeout";
    let secs = doc["transfer_ns"].as_f64().unwrap_or(0.0) / 1e9;
    let rate = doc["throughput_bps"].as_f64().unwrap_or(0.0);
    let seconds = match timed_out {
        true if rate > 0.0 => bytes as f64 * 8.0 / rate,
        _ => secs,
    };
    Download {
        seconds,
        timed_out,
        limit_s: bytes as f64 * 8.0 / RATE_BPS as f64,
    }
}
