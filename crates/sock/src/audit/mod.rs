//! The socket-option audit: who sets SO_RCVBUF, SO_SNDBUF, TCP_NODELAY, TCP_QUICKACK,
//! SO_KEEPALIVE (and TCP_WINDOW_CLAMP, the FORCE variants), with what value, on which socket.
//!
//! In: an optional pid to watch (all processes by default). Out: [`SockoptEvent`]s from the
//! eBPF programs in `src/bpf/setsockopt.bpf.c`, on the `syscalls:sys_enter_setsockopt`
//! tracepoint, or — when tracefs is not mounted, so that tracepoint cannot be attached — a raw
//! tracepoint on `sys_enter` filtered by the syscall number (x86_64). Never kprobes.
//!
//! Life: [`Audit::start`] opens, configures, loads and attaches on its own thread and returns
//! once the programs are attached (or with the error); the thread polls the ring buffer;
//! [`Audit::stop`] detaches and returns the events. Needs root (or CAP_BPF + CAP_PERFMON) and
//! kernel BTF.

mod event;

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, OpenObject, RingBufferBuilder};
use std::os::fd::AsFd;

pub use event::{option_name, parse_event};
use tailhunt_model::evidence::sock::{AuditResult, SockoptEvent};

use crate::error::SockError;
use crate::sys::{SetsockoptSkel, SetsockoptSkelBuilder};

/// A running audit.
#[derive(Debug)]
pub struct Audit {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<AuditResult, SockError>>>,
}

impl Audit {
    /// Loads and attaches the programs; returns once they are attached.
    pub fn start(pid: Option<u32>) -> Result<Audit, SockError> {
        if let Some(why) = tailhunt_bpf::bpf_denied() {
            return Err(SockError::BpfNotPermitted(why));
        }
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return Err(SockError::NoBtf);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("sockopt-audit".into())
            .spawn(move || run(pid, &flag, ready_tx))
            .map_err(SockError::io("cannot start the audit thread"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Audit {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => match thread.join() {
                Ok(Err(e)) => Err(e),
                _ => Err(SockError::Config(
                    "the audit thread ended before attaching".into(),
                )),
            },
        }
    }

    /// Detaches and returns what was seen.
    pub fn stop(mut self) -> Result<AuditResult, SockError> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err(SockError::Config("the audit thread panicked".into())),
        }
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    pid: Option<u32>,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<(), SockError>>,
) -> Result<AuditResult, SockError> {
    let bpf = |what| move |source| SockError::Bpf { what, source };
    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let attached = load_and_attach(&mut obj, pid);
    let (skel, link, attach, fallback_reason) = match attached {
        Ok(v) => v,
        Err(e) => {
            // The caller gets the error itself; the thread's own result is not read.
            let _ = ready.send(Err(e));
            return Err(SockError::Config("not attached".into()));
        }
    };
    let events: Arc<Mutex<Vec<SockoptEvent>>> = Arc::default();
    let into = events.clone();
    let mut rb = RingBufferBuilder::new();
    rb.add(&skel.maps.events, move |data: &[u8]| {
        if let Some(e) = parse_event(data) {
            if let Ok(mut v) = into.lock() {
                v.push(e);
            }
        }
        0
    })
    .map_err(bpf("set up the ring buffer of"))?;
    let ring = rb.build().map_err(bpf("set up the ring buffer of"))?;
    let prog = if attach == "raw_tp" {
        &skel.progs.audit_setsockopt_raw
    } else {
        &skel.progs.audit_setsockopt
    };
    let prog_id = libbpf_rs::Program::id_from_fd(prog.as_fd()).ok();
    let stats = tailhunt_bpf::enable_run_time_stats().ok();
    let _ = ready.send(Ok(()));
    while !stop.load(Ordering::SeqCst) {
        let _ = ring.poll(Duration::from_millis(50));
    }
    drop(link);
    let cost = stats
        .as_ref()
        .and(prog_id)
        .map(|id| tailhunt_bpf::program_stats(&[id])[0]);
    drop(stats);
    let _ = ring.consume();
    let lost = skel
        .maps
        .lost
        .lookup(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .ok()
        .flatten()
        .and_then(|v| Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)))
        .unwrap_or(0);
    let events = events
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default();
    Ok(AuditResult {
        attach: attach.to_string(),
        fallback_reason,
        events,
        lost,
        program_runs: cost.map(|c| c.0),
        program_run_time_ns: cost.map(|c| c.1),
    })
}

type Attached<'o> = (SetsockoptSkel<'o>, Link, &'static str, Option<String>);

/// Opens, configures, loads and attaches: the tracepoint, else the raw_tp fallback.
fn load_and_attach(
    obj: &mut MaybeUninit<OpenObject>,
    pid: Option<u32>,
) -> Result<Attached<'_>, SockError> {
    let bpf = |what| move |source| SockError::Bpf { what, source };
    // libbpf would print its own warning when the tracepoint cannot be attached; the
    // fallback below handles that, and the reason is reported in the result.
    libbpf_rs::set_print(None);
    let mut open = SetsockoptSkelBuilder::default()
        .open(obj)
        .map_err(bpf("open"))?;
    let ro = open
        .maps
        .rodata_data
        .as_deref_mut()
        .ok_or_else(|| SockError::Config("the BPF object has no read-only data".into()))?;
    ro.targ_tgid = pid.unwrap_or(0);
    let raw_ok = cfg!(target_arch = "x86_64");
    open.progs.audit_setsockopt_raw.set_autoload(raw_ok);
    let skel = open.load().map_err(bpf("load"))?;
    let attached = skel.progs.audit_setsockopt.attach();
    let (link, attach, fallback_reason) = match attached {
        Ok(l) => (l, "tracepoint", None),
        Err(e) if raw_ok => {
            let l = skel
                .progs
                .audit_setsockopt_raw
                .attach()
                .map_err(bpf("attach"))?;
            let why = format!("syscalls:sys_enter_setsockopt: {e} (is tracefs mounted?)");
            (l, "raw_tp", Some(why))
        }
        Err(e) => return Err(bpf("attach")(e)),
    };
    Ok((skel, link, attach, fallback_reason))
}
