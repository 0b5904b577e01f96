//! Running the real `tailhunt` binary: its traffic commands inside the cases' namespaces, and
//! its analysis of what they left behind.
//!
//! In: the binary's path and a case directory. Out: [`Proc`] guards for the commands that run
//! alongside each other, and the JSON documents the analysis commands print.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::TruthError;
use crate::scenario::procs::Proc;
use tailhunt_netlab::netns::Netns;

/// Where the programs are.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The `tailhunt` binary under test.
    pub tailhunt: PathBuf,
    /// The binary that runs [`super::work`] (`tailhunt-truth work ...`), for the CPU cases.
    pub worker: Option<PathBuf>,
}

impl Tools {
    /// Finds the binaries: `tailhunt` from `explicit`, else `$TAILHUNT_BIN`, else beside the
    /// running executable, else `target/release/tailhunt`; the worker is the running
    /// executable when it is `tailhunt-truth`, else `$TAILHUNT_TRUTH_BIN`, else beside it.
    pub fn locate(explicit: Option<PathBuf>) -> Result<Tools, TruthError> {
        let me = std::env::current_exe().ok();
        let beside = |name: &str| {
            me.as_ref()
                .and_then(|m| m.parent())
                .map(|d| d.join(name))
                .filter(|p| p.exists())
        };
        let tailhunt = explicit
            .or_else(|| std::env::var_os("TAILHUNT_BIN").map(PathBuf::from))
            .or_else(|| beside("tailhunt"))
            .unwrap_or_else(|| PathBuf::from("target/release/tailhunt"));
        if !tailhunt.is_file() {
            return Err(TruthError::NoBinary(tailhunt));
        }
        let tailhunt = tailhunt.canonicalize().unwrap_or(tailhunt);
        let is_truth = |p: &PathBuf| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("tailhunt-truth"))
        };
        let worker = me
            .clone()
            .filter(is_truth)
            .or_else(|| std::env::var_os("TAILHUNT_TRUTH_BIN").map(PathBuf::from))
            .or_else(|| beside("tailhunt-truth"));
        Ok(Tools { tailhunt, worker })
    }

    pub(crate) fn for_case(&self, dir: &Path) -> Ctx {
        Ctx {
            tools: self.clone(),
            dir: dir.to_path_buf(),
            db: dir.join("tailhunt.db"),
            tag: None,
        }
    }

    /// A context whose commands record into `db`, each run tagged `tag` (a lab scenario's).
    pub(crate) fn for_lab(&self, dir: &Path, db: &Path, tag: &str) -> Ctx {
        Ctx {
            tools: self.clone(),
            dir: dir.to_path_buf(),
            db: db.to_path_buf(),
            tag: Some(tag.to_string()),
        }
    }
}

/// One case's directory, store and programs.
pub(crate) struct Ctx {
    pub(crate) tools: Tools,
    pub(crate) dir: PathBuf,
    /// The store the commands record into.
    pub(crate) db: PathBuf,
    /// The tag their runs carry (`--tag`).
    pub(crate) tag: Option<String>,
}

impl Ctx {
    /// A file in the case's directory.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The `tailhunt-truth` binary, for the cases' own programs.
    pub(crate) fn worker(&self) -> Result<String, TruthError> {
        self.tools
            .worker
            .as_ref()
            .map(|w| w.to_string_lossy().into_owned())
            .ok_or_else(|| {
                TruthError::Work(
                    "this case needs the tailhunt-truth binary for its own programs: run it through tailhunt-truth (or set TAILHUNT_TRUTH_BIN)".into(),
                )
            })
    }

    /// `tailhunt --db DB [--tag TAG] ARGS`.
    pub(crate) fn argv(&self, args: &[&str]) -> Vec<String> {
        let mut v = vec![
            self.tools.tailhunt.to_string_lossy().into_owned(),
            "--db".into(),
            self.db.to_string_lossy().into_owned(),
        ];
        if let Some(tag) = &self.tag {
            v.extend(["--tag".into(), tag.clone()]);
        }
        v.extend(args.iter().map(|a| a.to_string()));
        v
    }

    /// Starts `tailhunt ARGS` inside `ns`.
    pub(crate) fn spawn(&self, ns: &Netns, what: &str, args: &[&str]) -> Result<Proc, TruthError> {
        let argv = self.argv(args);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        Ok(Proc::spawn(ns, what, &argv)?)
    }

    /// Starts a tailhunt server inside `ns` and waits until it listens.
    pub(crate) fn server(&self, ns: &Netns, what: &str, args: &[&str]) -> Result<Proc, TruthError> {
        let mut p = self.spawn(ns, what, args)?;
        let needle = if args.contains(&"transfer") {
            "listening on"
        } else {
            "serving"
        };
        p.wait_stderr(needle, Duration::from_secs(10))?;
        Ok(p)
    }

    /// Runs `tailhunt --json ARGS` on the host (analysis) and returns its document. A non-zero
    /// exit with a document on stdout (a partial capture) still counts.
    pub(crate) fn analyse(&self, args: &[&str]) -> Result<Value, TruthError> {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let argv = self.argv(&full);
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|e| TruthError::Output {
                what: format!("tailhunt {}", args.join(" ")),
                detail: e.to_string(),
                stderr: String::new(),
            })?;
        parse(
            &format!("tailhunt {}", args.join(" ")),
            &String::from_utf8_lossy(&out.stdout),
            &String::from_utf8_lossy(&out.stderr),
        )
    }
}

impl Ctx {
    /// A run's answered samples as `(start_ns, end_ns)` on its own clock, from `tailhunt
    /// export RUN --format jsonl` (the client's record as it stored it, no analysis).
    pub(crate) fn samples(&self, run: &str) -> Result<Vec<(i64, i64)>, TruthError> {
        let argv = self.argv(&["export", run, "--format", "jsonl"]);
        let what = format!("tailhunt export {run}");
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|e| TruthError::Output {
                what: what.clone(),
                detail: e.to_string(),
                stderr: String::new(),
            })?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut v = Vec::new();
        for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
            let x: Value = serde_json::from_str(line).map_err(|e| TruthError::Output {
                what: what.clone(),
                detail: format!("line '{line}': {e}"),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })?;
            if let (Some(s), Some(e), Some("ok")) = (
                x["start_ns"].as_i64(),
                x["end_ns"].as_i64(),
                x["outcome"].as_str(),
            ) {
                v.push((s, e));
            }
        }
        Ok(v)
    }
}

/// A `tailhunt load` run and how busy the client process was.
pub(crate) struct LoadRun {
    /// Its document (`run_id`, `steps` with their warnings, `findings`).
    pub(crate) doc: Value,
    /// Its CPU time over its lifetime, as a share of one CPU.
    pub(crate) cpu_share: f64,
}

/// A plain `tailhunt load` run: `URL --rate R --duration D --warmup 0s --conns C
/// --nodelay=true --timeout T`, measured from its first request, with TCP_NODELAY.
pub(crate) struct Schedule<'a> {
    pub(crate) url: &'a str,
    pub(crate) rate: u32,
    pub(crate) duration_s: u64,
    pub(crate) conns: u32,
    pub(crate) timeout_s: u64,
}

impl Schedule<'_> {
    fn args(&self) -> Vec<String> {
        let (rate, dur) = (self.rate.to_string(), format!("{}s", self.duration_s));
        let (conns, timeout) = (self.conns.to_string(), format!("{}s", self.timeout_s));
        [
            self.url,
            "--rate",
            &rate,
            "--duration",
            &dur,
            "--warmup",
            "0s",
            "--conns",
            &conns,
            "--nodelay=true",
            "--timeout",
            &timeout,
        ]
        .map(String::from)
        .to_vec()
    }
}

/// A `tailhunt load` still running.
pub(crate) struct RunningLoad {
    proc: Proc,
    watch: CpuWatch,
    what: String,
}

impl RunningLoad {
    /// Waits for it to end.
    pub(crate) fn finish(mut self, limit: Duration) -> Result<LoadRun, TruthError> {
        let doc = json_of(&mut self.proc, &self.what, limit);
        let (cpu, wall) = self.watch.finish();
        Ok(LoadRun {
            doc: doc?,
            cpu_share: cpu as f64 / wall.max(1) as f64,
        })
    }
}

impl Ctx {
    /// Starts `tailhunt --json load ARGS` inside `ns`, watching its CPU time.
    pub(crate) fn start_load(
        &self,
        ns: &Netns,
        what: &str,
        args: &[&str],
    ) -> Result<RunningLoad, TruthError> {
        let mut full = vec!["--json", "load"];
        full.extend_from_slice(args);
        let proc = self.spawn(ns, what, &full)?;
        let watch = CpuWatch::start(proc.pid());
        Ok(RunningLoad {
            proc,
            watch,
            what: what.to_string(),
        })
    }

    /// Starts a plain load run inside `ns`.
    pub(crate) fn start_schedule(
        &self,
        ns: &Netns,
        what: &str,
        s: &Schedule<'_>,
    ) -> Result<RunningLoad, TruthError> {
        let args = s.args();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.start_load(ns, what, &args)
    }

    /// Runs `tailhunt --json load ARGS` inside `ns` to the end.
    pub(crate) fn load(
        &self,
        ns: &Netns,
        what: &str,
        args: &[&str],
        limit: Duration,
    ) -> Result<LoadRun, TruthError> {
        self.start_load(ns, what, args)?.finish(limit)
    }
}

/// The JSON document a program printed.
pub(crate) fn parse(what: &str, stdout: &str, stderr: &str) -> Result<Value, TruthError> {
    serde_json::from_str(stdout).map_err(|e| TruthError::Output {
        what: what.to_string(),
        detail: e.to_string(),
        stderr: stderr.chars().take(2000).collect(),
    })
}

/// A program's own record without its findings (those are tailhunt's analysis, not truth).
pub(crate) fn strip_findings(doc: &Value) -> Value {
    let mut r = doc.clone();
    if let Some(o) = r.as_object_mut() {
        o.remove("findings");
    }
    r
}

/// Waits for `p` to exit successfully and parses what it printed.
pub(crate) fn json_of(p: &mut Proc, what: &str, limit: Duration) -> Result<Value, TruthError> {
    let out = p.finish_stdout(limit)?;
    parse(what, &out, &p.stderr())
}

/// Watches a process's CPU time (`/proc/PID/stat`, user + system) every 50 ms while it runs:
/// whether a load client was really busy is the truth its "client saturated" warnings are
/// checked against.
pub(crate) struct CpuWatch {
    stop: Arc<AtomicBool>,
    cpu_ns: Arc<AtomicU64>,
    began: Instant,
    thread: Option<JoinHandle<()>>,
}

impl CpuWatch {
    pub(crate) fn start(pid: u32) -> CpuWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let cpu_ns = Arc::new(AtomicU64::new(0));
        let (s, c) = (stop.clone(), cpu_ns.clone());
        let tick_ns = 1_000_000_000 / rustix::param::clock_ticks_per_second().max(1);
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match process_cpu_ticks(pid) {
                    Some(t) => c.store(t * tick_ns, Ordering::Relaxed),
                    None => break,
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        CpuWatch {
            stop,
            cpu_ns,
            began: Instant::now(),
            thread: Some(thread),
        }
    }

    /// (CPU time seen, wall time watched), ns.
    pub(crate) fn finish(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        (
            self.cpu_ns.load(Ordering::Relaxed),
            self.began.elapsed().as_nanos() as u64,
        )
    }
}

impl Drop for CpuWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// utime + stime of a process, in clock ticks (fields 14 and 15 of `/proc/PID/stat`, counted
/// after the command name, which may hold spaces).
fn process_cpu_ticks(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_of_this_process_is_read() {
        let me = std::process::id();
        let t0 = process_cpu_ticks(me).unwrap();
        let end = Instant::now() + Duration::from_millis(120);
        let mut x = 0u64;
        while Instant::now() < end {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
        assert!(process_cpu_ticks(me).unwrap() > t0);
    }
}
