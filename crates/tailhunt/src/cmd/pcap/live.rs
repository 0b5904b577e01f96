//! `tailhunt capture`: a live interface through the same analysis, optionally written out.

use std::time::{Duration, Instant};
use tailhunt_model::RunKind;

use anyhow::{Context, Result};
use tailhunt_pcap::{LiveCapture, PacketSource, Tee};

use super::{config, ctrl_c, execute, Inputs};
use crate::cli::{CaptureArgs, Cli};
use crate::signals;

pub fn run(cli: &Cli, a: &CaptureArgs) -> Result<()> {
    let cfg = config(&a.analysis)?;
    let duration = a.duration;
    let mut live = LiveCapture::open(&a.interface, a.snaplen, a.filter.as_deref())?;
    // Like tcpdump: once this line is out, packets are being captured.
    tell!("capturing on {} (until --duration or Ctrl-C)", a.interface);
    let stop = live.stop_handle();
    signals::install();
    let start = Instant::now();
    let watcher = std::thread::spawn(move || loop {
        let done = duration.is_some_and(|d| start.elapsed() >= d);
        if done || ctrl_c() {
            stop.stop();
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    });
    let source: Box<dyn PacketSource> = match &a.write {
        Some(p) => {
            let link = live.link();
            Box::new(
                Tee::create(live, p, link, a.snaplen)
                    .with_context(|| format!("cannot write '{}'", p.display()))?,
            )
        }
        None => Box::new(live),
    };
    let mut sources: Vec<Box<dyn PacketSource>> = vec![source];
    let what = Inputs {
        kind: RunKind::Capture,
        names: vec![format!("live:{}", a.interface)],
        matched: None,
        // A live capture is analysed on one thread (`--threads` is for files).
        threads: 1,
    };
    let result = execute(cli, what, &mut sources, cfg, &a.analysis, &mut |_| {});
    // The analysis ended (duration, Ctrl-C or an error): make sure the watcher ends too.
    drop(sources);
    let _ = watcher.join();
    result
}
