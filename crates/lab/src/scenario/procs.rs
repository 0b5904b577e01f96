//! The moving parts of a scenario: the Python programs it runs inside namespaces and the
//! `tcpdump` that records them.
//!
//! In: a [`Netns`], a program and its arguments. Out: guards ([`Proc`], [`Capture`]) that kill
//! their process by PID when dropped, so a failing scenario leaves nothing running.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::ScenarioError;
use tailhunt_netlab::netns::Netns;

/// A process started inside a namespace; killed (SIGKILL, by PID) and reaped on drop.
pub(crate) struct Proc {
    what: String,
    child: Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    /// Starts `argv` inside `ns`; `what` names it in errors ("nagle server").
    pub(crate) fn spawn(ns: &Netns, what: &str, argv: &[&str]) -> Result<Proc, ScenarioError> {
        let mut c = ns.command(argv[0]);
        c.args(&argv[1..]);
        spawn_piped(c, what, argv[0])
    }

    /// Starts `argv` in the caller's own namespace (a tracer, a CPU workload).
    pub(crate) fn spawn_host(what: &str, argv: &[&str]) -> Result<Proc, ScenarioError> {
        let mut c = Command::new(argv[0]);
        c.args(&argv[1..]);
        spawn_piped(c, what, argv[0])
    }

    /// Sends SIGINT (by PID), as Ctrl-C would: tailhunt's commands then stop and report.
    pub(crate) fn interrupt(&self) {
        let pid = self.pid().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
    }

    /// Waits for a successful exit within `limit`, then returns everything it wrote on stdout.
    pub(crate) fn finish_stdout(&mut self, limit: Duration) -> Result<String, ScenarioError> {
        self.wait_success(limit)?;
        let mut text = String::new();
        // The reader thread ends at EOF, which follows the exit; it only has buffered lines left.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            text.push_str(&l);
            text.push('\n');
        }
        Ok(text)
    }

    /// Waits until the process says `needle` on stderr (servers announce themselves there).
    pub(crate) fn wait_stderr(
        &mut self,
        needle: &str,
        limit: Duration,
    ) -> Result<(), ScenarioError> {
        wait_stderr(self, needle, limit)
    }

    /// Starts the Python program `script` with `args` inside `ns`, at real-time priority
    /// (`chrt -f 10`) when `chrt` is there: the times the programs record are the ground
    /// truth, and on a busy 2-core machine a compiler beside them would otherwise delay them by
    /// tens of milliseconds. The programs sleep or block almost all the time, and the kernel's
    /// real-time throttling keeps a runaway one from taking a whole CPU.
    pub(crate) fn python(
        ns: &Netns,
        what: &str,
        script: &str,
        args: &[&str],
    ) -> Result<Proc, ScenarioError> {
        let py = super::python();
        let mut argv = Vec::with_capacity(args.len() + 5);
        if Path::new("/usr/bin/chrt").exists() {
            argv.extend_from_slice(&["/usr/bin/chrt", "-f", "10"]);
        }
        argv.extend_from_slice(&[py, "-u", script]);
        argv.extend_from_slice(args);
        Proc::spawn(ns, what, &argv)
    }

    /// Waits until the process prints a line starting with `prefix` on stdout.
    pub(crate) fn wait_line(&mut self, prefix: &str, limit: Duration) -> Result<(), ScenarioError> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return Ok(()),
                Ok(_) => {}
                Err(_) => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        return Err(self.failed(status));
                    }
                    return Err(self.timeout(&format!("print {prefix}"), limit));
                }
            }
        }
    }

    /// Waits for the process to exit successfully within `limit`.
    pub(crate) fn wait_success(&mut self, limit: Duration) -> Result<(), ScenarioError> {
        match wait_until(&mut self.child, limit) {
            Some(s) if s.success() => Ok(()),
            Some(s) => Err(self.failed(s)),
            None => Err(self.timeout("exit", limit)),
        }
    }

    /// The process id (of the program itself: `ip netns exec` execs it).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it wrote on stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn failed(&self, status: ExitStatus) -> ScenarioError {
        thread::sleep(Duration::from_millis(50)); // let the reader thread take the last words
        ScenarioError::Failed {
            what: self.what.clone(),
            status: status.to_string(),
            stderr: self.stderr(),
        }
    }

    fn timeout(&self, event: &str, limit: Duration) -> ScenarioError {
        ScenarioError::Timeout {
            what: self.what.clone(),
            event: event.to_string(),
            secs: limit.as_secs_f64(),
            stderr: self.stderr(),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        crate::state::forget_process(self.child.id());
    }
}

fn spawn_piped(mut c: Command, what: &str, program: &str) -> Result<Proc, ScenarioError> {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|source| ScenarioError::Spawn {
        program: program.to_string(),
        source,
    })?;
    crate::state::note_process(child.id(), what);
    let (tx, lines) = channel();
    if let Some(out) = child.stdout.take() {
        thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
    }
    let stderr = Arc::new(Mutex::new(String::new()));
    if let Some(mut err) = child.stderr.take() {
        let sink = Arc::clone(&stderr);
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
    }
    Ok(Proc {
        what: what.to_string(),
        child,
        lines,
        stderr,
    })
}

fn wait_until(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        // A stop request (Ctrl-C in `tailhunt-truth`) ends the wait at once, so the caller's
        // guards clean up now rather than when the program would have finished.
        if Instant::now() >= deadline || crate::truth::stopping() {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// A running `tcpdump -w`; stopped with SIGINT by [`Capture::stop`], killed on drop otherwise.
pub(crate) struct Capture {
    proc: Proc,
    pcap: PathBuf,
    iface: String,
    snaplen: u32,
}

impl Capture {
    /// Starts tcpdump on `iface` inside `ns` (nanosecond timestamps, `-U` so every packet is
    /// written as it comes) and waits until it listens.
    pub(crate) fn start(
        ns: &Netns,
        iface: &str,
        pcap: &Path,
        snaplen: u32,
    ) -> Result<Capture, ScenarioError> {
        let file = pcap.to_string_lossy().into_owned();
        let snap = snaplen.to_string();
        let argv = [
            "tcpdump",
            "-i",
            iface,
            "-w",
            &file,
            "--time-stamp-precision",
            "nano",
            "-s",
            &snap,
            "-U",
            // Without it packets wait in the kernel ring for up to a second, and the ones still
            // there when tcpdump is stopped are lost.
            "--immediate-mode",
            "-n",
            // Stay root: the output directory may not be writable by the tcpdump user.
            "-Z",
            "root",
        ];
        let mut c = ns.command("tcpdump");
        c.args(&argv[1..]);
        let mut proc = spawn_piped(c, "tcpdump", "tcpdump")?;
        wait_stderr(&mut proc, "listening on", Duration::from_secs(5))?;
        Ok(Capture {
            proc,
            pcap: pcap.to_path_buf(),
            iface: iface.to_string(),
            snaplen,
        })
    }

    /// Stops the capture with SIGINT (so tcpdump flushes and reports its counts) and returns
    /// the truth's `"capture"` object; `host` names the namespace it ran in.
    pub(crate) fn stop(mut self, host: &str) -> Result<Value, ScenarioError> {
        // Let the last packets (FIN, RST) reach the capture first.
        thread::sleep(Duration::from_millis(200));
        let pid = self.proc.pid().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        self.proc.wait_success(Duration::from_secs(5))?;
        thread::sleep(Duration::from_millis(50));
        let text = self.proc.stderr();
        let count = |what: &str| {
            text.lines()
                .find(|l| l.ends_with(what))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
        };
        Ok(json!({
            "pcap": self.pcap.file_name().map(|f| f.to_string_lossy().into_owned()),
            "iface": self.iface,
            "host": host,
            "snaplen": self.snaplen,
            "packets_captured": count("packets captured"),
            "packets_dropped_by_kernel": count("packets dropped by kernel"),
        }))
    }
}

fn wait_stderr(proc: &mut Proc, needle: &str, limit: Duration) -> Result<(), ScenarioError> {
    let deadline = Instant::now() + limit;
    while !proc.stderr().contains(needle) {
        if let Ok(Some(status)) = proc.child.try_wait() {
            return Err(proc.failed(status));
        }
        if Instant::now() >= deadline {
            return Err(proc.timeout(&format!("say '{needle}'"), limit));
        }
        thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Puts `tbf` with `params` (`["rate", "2mbit", ...]`) on `iface` inside `ns`.
pub(crate) fn add_tbf(ns: &Netns, iface: &str, params: &[&str]) -> Result<(), ScenarioError> {
    let mut argv = vec!["tc", "qdisc", "add", "dev", iface, "root", "tbf"];
    argv.extend_from_slice(params);
    ns.run(&argv)?;
    Ok(())
}

/// Packets the root qdisc of `iface` sent and dropped so far, and how often it had to hold
/// one back (`tc -s qdisc show`), as `{"sent_packets", "dropped_packets", "overlimits"}` (null
/// where tc's output could not be read).
pub(crate) fn qdisc_counts(ns: &Netns, iface: &str) -> Result<Value, ScenarioError> {
    let out = ns.run(&["tc", "-s", "qdisc", "show", "dev", iface])?;
    let (sent, dropped, over) = parse_qdisc_counts(&String::from_utf8_lossy(&out.stdout));
    Ok(json!({"sent_packets": sent, "dropped_packets": dropped, "overlimits": over}))
}

/// Reads ` Sent 4100 bytes 27 pkt (dropped 3, overlimits 0 requeues 0)`.
fn parse_qdisc_counts(text: &str) -> (Option<u64>, Option<u64>, Option<u64>) {
    let Some(line) = text.lines().map(str::trim).find(|l| l.starts_with("Sent ")) else {
        return (None, None, None);
    };
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    let after = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1))
            .and_then(|n| n.parse().ok())
    };
    let pkts = words
        .iter()
        .position(|w| *w == "pkt")
        .and_then(|i| i.checked_sub(1))
        .and_then(|i| words[i].parse().ok());
    (pkts, after("dropped"), after("overlimits"))
}

#[cfg(test)]
mod tests {
    use super::parse_qdisc_counts;

    #[test]
    fn qdisc_counts_come_from_the_sent_line() {
        let text = "qdisc tbf 8004: root refcnt 3 rate 1Mbit burst 16Kb lat 100ms \n \
                    Sent 4100 bytes 27 pkt (dropped 3, overlimits 5 requeues 0) \n \
                    backlog 0b 0p requeues 0\n";
        assert_eq!(parse_qdisc_counts(text), (Some(27), Some(3), Some(5)));
        assert_eq!(
            parse_qdisc_counts("qdisc noqueue 0: root"),
            (None, None, None)
        );
    }
}
