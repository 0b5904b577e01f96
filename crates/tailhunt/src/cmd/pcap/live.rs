//! `tailhunt capture`: a live interface through the same analysis, optionally written out.

use std::fs::File;
use std::io::BufWriter;
use std::time::{Duration, Instant};
use tailhunt_model::RunKind;

use anyhow::{Context, Result};
use tailhunt_pcap::{LiveCapture, PacketSource, PcapWriter, RawPacket, ReadError};

use super::{config, ctrl_c, execute, Inputs};
use crate::cli::{CaptureArgs, Cli};
use crate::signals;

/// A live source that also writes every packet to a pcap file.
struct Tee {
    inner: LiveCapture,
    out: Option<PcapWriter<BufWriter<File>>>,
    path: String,
}

impl PacketSource for Tee {
    fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, ReadError> {
        let p = self.inner.next_packet()?;
        if let (Some(p), Some(w)) = (&p, &mut self.out) {
            w.write_packet(p.ts_ns, p.wire_len, p.data)
                .map_err(|source| ReadError::Io {
                    path: self.path.clone().into(),
                    source,
                })?;
        }
        Ok(p)
    }

    fn position(&self) -> u64 {
        0
    }
}

pub fn run(cli: &Cli, a: &CaptureArgs) -> Result<()> {
    let cfg = config(&a.analysis)?;
    let duration = a.duration;
    let mut live = LiveCapture::open(&a.interface, a.snaplen, a.filter.as_deref())?;
    // Like tcpdump: once this line is out, packets are being captured.
    eprintln!("capturing on {} (until --duration or Ctrl-C)", a.interface);
    let stop = live.stop_handle();
    let out = match &a.write {
        Some(p) => {
            let f = File::create(p).with_context(|| format!("cannot write '{}'", p.display()))?;
            Some(PcapWriter::new(BufWriter::new(f), live.link(), a.snaplen)?)
        }
        None => None,
    };
    let path = a
        .write
        .as_ref()
        .map_or(String::new(), |p| p.display().to_string());
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
    let tee = Tee {
        inner: live,
        out,
        path,
    };
    let mut sources: Vec<Box<dyn PacketSource>> = vec![Box::new(tee)];
    let what = Inputs {
        kind: RunKind::Capture,
        names: vec![format!("live:{}", a.interface)],
        matched: None,
    };
    let result = execute(cli, what, &mut sources, cfg, &a.analysis, &mut |_| {});
    // The analysis ended (duration, Ctrl-C or an error): make sure the watcher ends too.
    drop(sources);
    let _ = watcher.join();
    result
}
