//! The evidence gathered while the sweep runs: a packet capture on the interface of the route
//! to the target and TCP_INFO of the connections to it, each in its own thread with its own
//! store connection, each stored as a run of its usual kind (`capture`, `sockets`) tagged with
//! the hunt.
//!
//! In: the target, the store's path, the hunt's tags and the stop flag of the whole hunt.
//! [`Watchers::start`] opens what it can before the sweep starts (a capture that cannot open
//! says why at once); [`Watchers::finish`] stops them after the sweep and returns, per source,
//! the run it stored or why there is none.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};
use tailhunt_model::evidence::put_evidence;
use tailhunt_model::{ClockOrigin, RunKind};
use tailhunt_pcap::analysis::AnalysisConfig;
use tailhunt_pcap::live::StopHandle;
use tailhunt_pcap::record::stored_copy;
use tailhunt_pcap::run::analyse;
use tailhunt_pcap::{LiveCapture, PacketSource};
use tailhunt_sock::monitor::{self, MonitorOptions};
use tailhunt_store::Store;

use crate::buffer::Buffer;
use crate::{Collected, Source};

/// A source running in its own thread; it gives the run it stored, or why not.
type Running = JoinHandle<Result<Collected, String>>;

/// The sources running beside the sweep.
pub struct Watchers {
    capture: Option<(StopHandle, Running)>,
    sockets: Option<(Arc<AtomicBool>, Running)>,
    /// Sources that could not start, with why.
    pub missing: Vec<(Source, String)>,
}

/// What the watchers need to know.
pub struct WatchSetup<'a> {
    /// The store file.
    pub store: &'a Path,
    /// The target's address and transport.
    pub addr: std::net::SocketAddr,
    /// `udp` for UDP targets, else `tcp`.
    pub transport: &'static str,
    /// The interface of the route to the target (None: why not known).
    pub interface: Result<String, String>,
    /// Whether the hunt runs as root.
    pub root: bool,
    /// Tags every run carries (`hunt`, `target`).
    pub tags: Value,
    /// The stop flag of the whole hunt (a signal): the sources stop at it too.
    pub stop: Arc<AtomicBool>,
}

impl Watchers {
    /// Starts the capture (root) and the socket sampler.
    pub fn start(w: &WatchSetup<'_>) -> Watchers {
        let mut out = Watchers {
            capture: None,
            sockets: None,
            missing: Vec::new(),
        };
        match start_capture(w) {
            Ok(c) => out.capture = Some(c),
            Err(why) => out.missing.push((Source::Capture, why)),
        }
        if w.transport == "udp" {
            let why = "the target is UDP: there are no TCP connections to sample".to_string();
            out.missing.push((Source::Sockets, why));
        } else {
            out.sockets = Some(start_sockets(w));
        }
        out
    }

    /// Stops every source and waits for its run; returns what each collected, or why not.
    pub fn finish(self) -> Vec<(Source, Result<Collected, String>)> {
        let mut out: Vec<_> = self
            .missing
            .into_iter()
            .map(|(s, why)| (s, Err(why)))
            .collect();
        if let Some((flag, h)) = self.sockets {
            flag.store(true, Ordering::Relaxed);
            out.push((Source::Sockets, joined(h)));
        }
        if let Some((stop, h)) = self.capture {
            stop.stop();
            out.push((Source::Capture, joined(h)));
        }
        out
    }
}

fn joined(h: Running) -> Result<Collected, String> {
    h.join()
        .unwrap_or_else(|_| Err("its thread failed (a bug: please report it)".into()))
}

fn start_capture(w: &WatchSetup<'_>) -> Result<(StopHandle, Running), String> {
    if !w.root {
        return Err("not root: capturing packets needs root (or CAP_NET_RAW)".into());
    }
    let iface = w.interface.clone()?;
    let filter = format!(
        "{} and host {} and port {}",
        w.transport,
        w.addr.ip(),
        w.addr.port()
    );
    let mut live = LiveCapture::open(&iface, 256, Some(&filter))
        .map_err(|e| format!("cannot capture on {iface}: {e}"))?;
    let stop = live.stop_handle();
    let (path, tags, halt) = (w.store.to_path_buf(), w.tags.clone(), Arc::clone(&w.stop));
    let h = std::thread::spawn(move || capture_run(&path, &iface, live, tags, &halt));
    Ok((stop, h))
}

/// Analyses the live capture until it is stopped, then stores it as a `capture` run.
fn capture_run(
    path: &Path,
    iface: &str,
    live: LiveCapture,
    tags: Value,
    stop: &AtomicBool,
) -> Result<Collected, String> {
    let cfg = AnalysisConfig::default();
    let mut params = json!({
        "inputs": [format!("live:{iface}")],
        "bin_ns": cfg.bin_ns,
        "link_rate_bps": cfg.link_rate_bps,
        "requests": null,
    });
    merge(&mut params, &tags, "capture");
    let mut buffer = Buffer::default();
    let mut sources: Vec<Box<dyn PacketSource>> = vec![Box::new(live)];
    let (outcome, _) = analyse(&mut sources, cfg, &mut buffer, stop, &mut |_| {})
        .map_err(|e| format!("analysing the capture: {e}"))?;
    drop(sources);
    put_evidence(&mut buffer, &stored_copy(&outcome.report)).map_err(|e| e.to_string())?;
    let origin = ClockOrigin::wall(outcome.report.first_ns);
    let mut store = Store::open(path).map_err(|e| e.to_string())?;
    let mut writer = store
        .begin_run(RunKind::Capture, params, origin)
        .map_err(|e| e.to_string())?;
    buffer.replay(&mut writer).map_err(|e| e.to_string())?;
    let packets = outcome.report.packets;
    let partial = outcome.stopped.is_some();
    let id = if partial {
        writer.finish_partial(json!({}))
    } else {
        writer.finish(json!({}))
    }
    .map_err(|e| e.to_string())?;
    Ok(Collected {
        run_id: id,
        partial,
        note: format!("{packets} packets on {iface}"),
    })
}

fn start_sockets(w: &WatchSetup<'_>) -> (Arc<AtomicBool>, Running) {
    let flag = Arc::new(AtomicBool::new(false));
    let opts = MonitorOptions {
        // Until the sweep ends (the flag); the duration only bounds a hunt that forgot to stop.
        duration: Duration::from_secs(24 * 3600),
        interval: Duration::from_millis(100),
        netns: Vec::new(),
        pid: None,
        port: Some(w.addr.port()),
        // The setsockopt audit is eBPF: root only.
        audit: w.root,
    };
    let (path, tags, mine) = (w.store.to_path_buf(), w.tags.clone(), Arc::clone(&flag));
    let halt = Arc::clone(&w.stop);
    let h = std::thread::spawn(move || sockets_run(&path, &opts, tags, &mine, &halt));
    (flag, h)
}

/// Samples the connections to the target's port into a `sockets` run.
fn sockets_run(
    path: &Path,
    opts: &MonitorOptions,
    tags: Value,
    mine: &Arc<AtomicBool>,
    halt: &Arc<AtomicBool>,
) -> Result<Collected, String> {
    // The monitor polls one flag: raise it when either the hunt or a signal says stop.
    let (both, relay) = either(mine, halt);
    let origin = ClockOrigin::now();
    let m = monitor::run(opts, &both, || {});
    mine.store(true, Ordering::Relaxed);
    let _ = relay.join();
    let m = m.map_err(|e| format!("sampling TCP_INFO: {e}"))?;
    let mut store = Store::open(path).map_err(|e| e.to_string())?;
    let mut params = json!({ "namespaces": m.report.namespaces });
    merge(&mut params, &tags, "sockets");
    let mut run = store
        .begin_run(RunKind::Sockets, params, origin)
        .map_err(|e| e.to_string())?;
    m.record(&mut run).map_err(|e| e.to_string())?;
    let conns = m.series.len();
    let id = run.finish(json!({})).map_err(|e| e.to_string())?;
    Ok(Collected {
        run_id: id,
        partial: false,
        note: format!("{conns} connection(s) to the target's port that moved data"),
    })
}

/// One flag that rises when `mine` or `halt` does, for a source that polls a single flag;
/// the relay thread ends once it has raised it (raise `mine` after the source returns).
pub fn either(mine: &Arc<AtomicBool>, halt: &Arc<AtomicBool>) -> (Arc<AtomicBool>, JoinHandle<()>) {
    let both = Arc::new(AtomicBool::new(false));
    let (b, mine, halt) = (Arc::clone(&both), Arc::clone(mine), Arc::clone(halt));
    let relay = std::thread::spawn(move || {
        while !mine.load(Ordering::Relaxed) && !halt.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        b.store(true, Ordering::Relaxed);
    });
    (both, relay)
}

/// Adds the hunt's tags and this run's role to a run's parameters.
pub fn merge(params: &mut Value, tags: &Value, role: &str) {
    if let (Some(p), Some(t)) = (params.as_object_mut(), tags.as_object()) {
        for (k, v) in t {
            p.insert(k.clone(), v.clone());
        }
        p.insert("hunt_role".into(), json!(role));
    }
}
