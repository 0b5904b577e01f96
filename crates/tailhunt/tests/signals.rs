//! Stopping long-running commands: SIGINT, SIGTERM and SIGHUP all keep what was measured, mark
//! the run `partial`, print the summary and exit with 128 + the signal's number; `kill -9`
//! loses at most the last second of a load run. Real binary, real servers, real captures and
//! real BPF; the root tests skip with a reason where root, namespaces or BTF are missing.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::Duration;

use common::capture::namespace;
use common::cgroups::bpf_ready;
use common::servers::tailhunt_serve;
use common::{check_schema, Env, BIN};
use serde_json::Value;

/// Kills a child by its PID when dropped (a test that fails half way leaves nothing behind).
struct Running(Option<Child>);

impl Running {
    fn signal(&self, sig: &str) {
        let pid = self.0.as_ref().expect("running").id().to_string();
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{sig} {pid} failed");
    }

    fn wait(mut self) -> Output {
        self.0
            .take()
            .expect("running")
            .wait_with_output()
            .expect("wait")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(mut c: Command) -> Running {
    Running(Some(
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tailhunt"),
    ))
}

/// The JSON document a stopped command printed, checked against its schema, after checking
/// the exit status is 128 + the signal and stderr names the signal and the partial run.
fn stopped_doc(out: &Output, status: i32, sig: &str, schema: &str) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(status), "stderr: {stderr}");
    assert!(
        stderr.contains(&format!("interrupted by {sig}")) && stderr.contains("partial run"),
        "{stderr}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}); stderr: {stderr}"));
    check_schema(schema, &doc);
    assert_eq!(doc["status"], "partial", "{doc:#}");
    doc
}

#[test]
fn sigterm_and_sighup_stop_a_load_run_keeping_its_samples() {
    let server = tailhunt_serve("tcp", &[]);
    for (sig, status) in [("TERM", 143), ("HUP", 129), ("INT", 130)] {
        let env = Env::new();
        let mut c = env.cmd();
        c.args(["load", &format!("tcp://{}", server.addr)])
            .args(["--rate", "200", "--duration", "30s", "--warmup", "0s"])
            .args(["--nodelay=true", "--json"]);
        let load = spawn(c);
        sleep(Duration::from_millis(2000));
        load.signal(sig);
        let out = load.wait();
        let name = if sig == "INT" {
            "SIGINT".to_string()
        } else {
            format!("SIG{sig}")
        };
        let doc = stopped_doc(&out, status, &name, "load");
        let step = &doc["steps"][0];
        assert_eq!(step["interrupted"], true, "{step:#}");
        let ok = step["ok"].as_u64().unwrap();
        assert!(ok > 150, "{sig}: {ok} ok in ~2 s at 200/s: {step:#}");
        // The rate is over the ~2 s that ran, not the 30 s planned, and a cut-short step is
        // no reason to advise more connections.
        let achieved = step["achieved_rate"].as_f64().unwrap();
        assert!(achieved > 150.0, "{sig}: achieved {achieved}/s: {step:#}");
        assert!(
            !step["warnings"].to_string().contains("--conns"),
            "{sig}: {step:#}"
        );
        let row = env.run_row(doc["run_id"].as_str().unwrap());
        assert_eq!(row["status"], "partial");
        assert!(row["samples"].as_u64().unwrap() >= ok, "{row:#}");
    }
}

/// Acceptance: `kill -9` after 3 s at 50 req/s keeps at least 2 s of samples (the store commits
/// at least every second, and the load engine hands samples over as they complete).
#[test]
fn kill_9_during_a_load_run_loses_at_most_about_a_second() {
    let server = tailhunt_serve("tcp", &[]);
    let env = Env::new();
    let mut c = env.cmd();
    c.args(["load", &format!("tcp://{}", server.addr)])
        .args(["--rate", "50", "--duration", "60s", "--warmup", "0s"])
        .args(["--nodelay=true"]);
    let load = spawn(c);
    sleep(Duration::from_secs(3));
    load.signal("KILL");
    let out = load.wait();
    assert_eq!(out.status.code(), None, "killed by a signal");
    let runs = env.json("runs", &["runs"]);
    let row = &runs["runs"][0];
    assert_eq!(row["status"], "partial", "{runs:#}");
    let kept = row["samples"].as_u64().unwrap();
    assert!(
        kept >= 100,
        "kept {kept} samples of ~150 (2 s at 50/s is 100)"
    );
    // And they read back.
    let id = row["id"].as_str().unwrap();
    let a = env.json("analyze", &["analyze", id]);
    assert!(
        a["series"][0]["analysis"]["summary"]["count"]
            .as_u64()
            .unwrap()
            >= 100,
        "{a:#}"
    );
}

/// Traffic inside `ns` for `secs` seconds: a tailhunt server and a load run at 100/s.
fn traffic(ns: &tailhunt_netlab::netns::Netns, env: &Env, port: u16, secs: u64) -> Running {
    let mut serve = ns.command(BIN);
    serve
        .args(["serve", "tcp", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--duration", &format!("{}s", secs + 2)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut server = serve.spawn().expect("serve");
    let mut line = String::new();
    BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("serving"), "{line}");
    std::thread::spawn(move || server.wait());
    let mut load = ns.command(BIN);
    load.arg("--db")
        .arg(env.path("traffic.db"))
        .args(["load", &format!("tcp://127.0.0.1:{port}")])
        .args(["--rate", "100", "--duration", &format!("{secs}s")]);
    spawn(load)
}

#[test]
fn root_sigterm_and_sighup_stop_a_live_capture_keeping_its_packets() {
    for (sig, status) in [("TERM", 143), ("HUP", 129)] {
        let env = Env::new();
        let Some(ns) = namespace("sig") else {
            return;
        };
        let mut c = ns.command(BIN);
        c.arg("--db")
            .arg(env.db())
            .args(["capture", "-i", "lo", "--duration", "60s", "--json"])
            .args(["--filter", "tcp port 7101"]);
        let mut cap = spawn(c);
        let mut err = BufReader::new(cap.0.as_mut().unwrap().stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.starts_with("capturing on lo"), "{line}");
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut rest);
            rest
        });
        let _traffic = traffic(&ns, &env, 7101, 20);
        sleep(Duration::from_secs(3));
        cap.signal(sig);
        let mut out = cap.wait();
        out.stderr = rest.join().unwrap().into_bytes();
        let doc = stopped_doc(&out, status, &format!("SIG{sig}"), "pcap");
        let packets = doc["report"]["packets"].as_u64().unwrap();
        assert!(
            packets >= 200,
            "{sig}: {packets} packets in ~2 s at 100 req/s"
        );
        let row = env.run_row(doc["run_id"].as_str().unwrap());
        assert_eq!(row["status"], "partial");
    }
}

#[test]
fn root_sigterm_and_sighup_stop_runq_keeping_its_intervals() {
    if !bpf_ready("root_sigterm_and_sighup_stop_runq_keeping_its_intervals") {
        return;
    }
    for (sig, status) in [("TERM", 143), ("HUP", 129)] {
        let env = Env::new();
        let mut c = env.cmd();
        c.args(["runq", "--duration", "60s", "--interval", "500ms", "--json"]);
        let runq = spawn(c);
        sleep(Duration::from_secs(3));
        runq.signal(sig);
        let out = runq.wait();
        let doc = stopped_doc(&out, status, &format!("SIG{sig}"), "runq");
        let intervals = doc["intervals"].as_array().unwrap().len();
        assert!(intervals >= 2, "{sig}: {intervals} intervals in ~2.5 s");
        let row = env.run_row(doc["run_id"].as_str().unwrap());
        assert_eq!(row["status"], "partial");
        assert!(row["series"].as_u64().unwrap() > 0, "{row:#}");
    }
}

/// A capture piped in slowly (as from a live tcpdump) is stopped by a signal while frames
/// still come, not only once 65,536 more have come or the writer closes the pipe: the pass
/// looks at its stop flag at least every 200 ms of frames.
#[test]
fn sigterm_stops_a_pcap_reading_a_slow_pipe_keeping_its_frames() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let env = Env::new();
    // 30,000 frames (about 4.3 MB), written 2 KiB every 5 ms: about 10 s in all.
    let capture = common::odd::ethernet_capture(30_000, 1_700_000_000_000_000_000);
    let mut cmd = env.cmd();
    cmd.args(["pcap", "-", "--json"]).stdin(Stdio::piped());
    let mut running = spawn(cmd);
    let mut stdin = running.0.as_mut().unwrap().stdin.take().unwrap();
    let cut_short = Arc::new(AtomicBool::new(false));
    let writer = {
        let cut_short = Arc::clone(&cut_short);
        std::thread::spawn(move || {
            for piece in capture.chunks(2048) {
                if stdin.write_all(piece).and_then(|_| stdin.flush()).is_err() {
                    // The reader went away before the capture ended.
                    cut_short.store(true, Ordering::SeqCst);
                    return;
                }
                sleep(Duration::from_millis(5));
            }
        })
    };
    sleep(Duration::from_millis(1500));
    running.signal("TERM");
    let out = running.wait();
    let doc = stopped_doc(&out, 143, "SIGTERM", "pcap");
    writer.join().unwrap();
    assert!(
        cut_short.load(Ordering::SeqCst),
        "the pass ran until the writer had written the whole capture"
    );
    let frames = doc["files"][0]["frames"].as_u64().unwrap();
    assert!((1..30_000).contains(&frames), "{frames} frames");
    assert_eq!(doc["files"][0]["name"], "stdin");
}

/// A writer that pauses (`tcpdump -w -` on a quiet interface holds its output until a buffer
/// fills) leaves the pass waiting in a read: a signal to tailhunt alone still stops it at
/// once, with every frame that came kept and the input marked stopped, not cut.
#[test]
fn sigterm_stops_a_pcap_waiting_on_a_pipe_that_went_quiet() {
    use std::io::Write;
    use std::time::Instant;
    let env = Env::new();
    let capture = common::odd::ethernet_capture(500, 1_700_000_000_000_000_000);
    let mut cmd = env.cmd();
    cmd.args(["pcap", "-", "--json"]).stdin(Stdio::piped());
    let mut running = spawn(cmd);
    let mut stdin = running.0.as_mut().unwrap().stdin.take().unwrap();
    stdin.write_all(&capture).unwrap();
    stdin.flush().unwrap();
    // The pipe stays open, with nothing more in it, for 20 s (or until the test ends).
    let quiet = std::thread::spawn(move || {
        sleep(Duration::from_secs(20));
        drop(stdin);
    });
    sleep(Duration::from_millis(1000));
    let signalled = Instant::now();
    running.signal("TERM");
    let out = running.wait();
    let took = signalled.elapsed();
    let doc = stopped_doc(&out, 143, "SIGTERM", "pcap");
    assert!(
        took < Duration::from_secs(10),
        "the pass waited {took:?} for the writer: the signal did not end the read"
    );
    assert_eq!(doc["files"][0]["name"], "stdin");
    assert_eq!(doc["files"][0]["status"], "stopped", "{doc:#}");
    assert_eq!(doc["files"][0]["frames"], 500, "{doc:#}");
    drop(quiet);
}
