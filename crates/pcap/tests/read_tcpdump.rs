//! Real captures: tcpdump records a small TCP exchange on loopback five ways (Ethernet-framed
//! `lo`, `any` as SLL2, `any -y LINUX_SLL`, `-s 128`, nanosecond precision); editcap and tshark
//! convert each to pcapng / µs pcap / ns pcap, and gzip and zstd compress them. Every form must
//! give the same packets, timestamps and byte totals as `tshark -T fields` says the original has.
//! dumpcap on `lo` and `any` at once writes a pcapng with two interfaces of different link
//! types. Needs root (live capture); skips with a reason otherwise.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tailhunt_pcap::{decode, open_file, PacketSource, Transport};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A tcpdump or dumpcap process, killed (by its PID) if the test ends before stopping it.
struct Capturer {
    child: Child,
    path: PathBuf,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Capturer {
    fn start(out: &Path, args: &[&str], port: u16) -> Capturer {
        // -B: a 32 MiB ring; the 2 MiB default holds ~30 64-KiB loopback frames.
        let mut cmd = Command::new("tcpdump");
        cmd.args(["-U", "--immediate-mode", "-B", "32768", "-Z", "root", "-w"])
            .arg(out)
            .args(args)
            .arg(format!("tcp port {port}"));
        Capturer::spawn(cmd, out, "listening on")
    }

    /// dumpcap on two interfaces at once: a pcapng with two interface descriptions.
    fn start_dumpcap(out: &Path, ifaces: &[&str], port: u16) -> Capturer {
        let mut cmd = Command::new("dumpcap");
        // A filter before the first -i applies to every interface.
        cmd.args(["-f", &format!("tcp port {port}"), "-B", "32"]);
        for i in ifaces {
            cmd.args(["-i", i]);
        }
        cmd.arg("-w").arg(out);
        Capturer::spawn(cmd, out, "File: ")
    }

    /// Starts `cmd` and waits for `ready` on its stderr (printed once the capture is open).
    fn spawn(mut cmd: Command, out: &Path, ready: &str) -> Capturer {
        let args = format!("{cmd:?}");
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{args}: {e} (apt-get install tcpdump tshark)"));
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let mut guard = Capturer {
            child,
            path: out.to_path_buf(),
            stderr: None,
        };
        loop {
            line.clear();
            let n = err.read_line(&mut line).unwrap();
            assert!(n > 0, "tcpdump {args:?} exited before listening");
            if line.contains(ready) {
                break;
            }
        }
        guard.stderr = Some(std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = err.read_to_string(&mut rest);
            rest
        }));
        guard
    }

    /// Waits (up to 10 s) until the file holds `payload` TCP payload bytes, then stops
    /// tcpdump; returns what it printed (its packet and drop counts).
    fn stop_after(mut self, payload: u64) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while payload_so_far(&self.path) < payload && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let pid = self.child.id().to_string();
        let ok = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(ok.success());
        self.child.wait().unwrap();
        self.stderr.take().unwrap().join().unwrap()
    }
}

impl Drop for Capturer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// TCP payload bytes in a file tcpdump is still writing (a cut last record is fine).
fn payload_so_far(path: &Path) -> u64 {
    let Ok(mut r) = open_file(path) else { return 0 };
    let mut total = 0;
    while let Ok(Some(p)) = r.next_packet() {
        if let Ok(Transport::Tcp(t)) = decode(&p).map(|d| d.transport) {
            total += u64::from(t.payload_len);
        }
    }
    total
}

const SIZES: [usize; 3] = [100, 5000, 70_000];

/// Client sends each message, server echoes it; returns the payload bytes that crossed.
fn exchange(listener: TcpListener) -> u64 {
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        for n in SIZES {
            let mut buf = vec![0; n];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        }
    });
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    for n in SIZES {
        c.write_all(&vec![b'q'; n]).unwrap();
        let mut back = vec![0; n];
        c.read_exact(&mut back).unwrap();
    }
    server.join().unwrap();
    drop(c);
    2 * SIZES.iter().sum::<usize>() as u64
}

/// (timestamp ns, wire length) of every frame, as tshark reads the file.
fn tshark_frames(path: &Path) -> Vec<(i64, u32)> {
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(path)
        .args(["-T", "fields", "-e", "frame.len", "-e", "frame.time_epoch"])
        .output()
        .expect("tshark runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (len, ts) = l.split_once('\t').unwrap();
            let (sec, frac) = ts.split_once('.').unwrap();
            let frac = format!("{frac:0<9}");
            (
                sec.parse::<i64>().unwrap() * 1_000_000_000 + frac[..9].parse::<i64>().unwrap(),
                len.parse().unwrap(),
            )
        })
        .collect()
}

struct Summary {
    frames: Vec<(i64, u32)>,
    max_caplen: usize,
    payload: u64,
    ip_bytes: u64,
}

fn read(path: &Path) -> Summary {
    let mut r = open_file(path).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Summary {
        frames: Vec::new(),
        max_caplen: 0,
        payload: 0,
        ip_bytes: 0,
    };
    while let Some(p) = r.next_packet().unwrap_or_else(|e| panic!("{e}")) {
        out.frames.push((p.ts_ns, p.wire_len));
        out.max_caplen = out.max_caplen.max(p.data.len());
        let d = decode(&p).unwrap_or_else(|s| {
            panic!(
                "{}: frame {} not decoded: {s:?}",
                path.display(),
                out.frames.len()
            )
        });
        out.ip_bytes += u64::from(d.ip_len);
        match d.transport {
            Transport::Tcp(t) => out.payload += u64::from(t.payload_len),
            other => panic!("not TCP: {other:?}"),
        }
    }
    out
}

fn run(cmd: &str, args: &[&std::ffi::OsStr]) {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The original and its converted/compressed forms; `true` when the form keeps only µs.
fn forms(orig: &Path, dir: &Path) -> Vec<(PathBuf, bool)> {
    let stem = orig.file_stem().unwrap().to_string_lossy().to_string();
    let mut v = vec![(orig.to_path_buf(), false)];
    for (fmt, us) in [("pcapng", false), ("pcap", true), ("nsecpcap", false)] {
        let out = dir.join(format!("{stem}.editcap.{fmt}"));
        run(
            "editcap",
            &[
                "-F".as_ref(),
                fmt.as_ref(),
                orig.as_os_str(),
                out.as_os_str(),
            ],
        );
        v.push((out, us));
    }
    let ng = dir.join(format!("{stem}.tshark.pcapng"));
    run(
        "tshark",
        &[
            "-r".as_ref(),
            orig.as_os_str(),
            "-w".as_ref(),
            ng.as_os_str(),
            "-F".as_ref(),
            "pcapng".as_ref(),
        ],
    );
    v.push((ng.clone(), false));
    let plain = std::fs::read(orig).unwrap();
    let gz = dir.join(format!("{stem}.pcap.gz"));
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&plain).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    v.push((gz, false));
    let zst = dir.join(format!("{stem}.pcapng.zst"));
    std::fs::write(
        &zst,
        zstd::encode_all(&std::fs::read(&ng).unwrap()[..], 3).unwrap(),
    )
    .unwrap();
    v.push((zst, false));
    v
}

#[test]
fn tcpdump_captures_agree_with_tshark_in_every_form_root() {
    if !is_root() {
        eprintln!("skipped: tcpdump needs root (run the tests as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let variants: [(&str, &[&str]); 5] = [
        ("lo", &["-i", "lo"]),
        ("any_sll2", &["-i", "any"]),
        ("any_sll1", &["-i", "any", "-y", "LINUX_SLL"]),
        ("lo_snap128", &["-i", "lo", "-s", "128"]),
        ("lo_nano", &["-i", "lo", "--time-stamp-precision", "nano"]),
    ];
    let dumps: Vec<Capturer> = variants
        .iter()
        .map(|(name, args)| Capturer::start(&dir.path().join(format!("{name}.pcap")), args, port))
        .collect();
    let sent = exchange(listener);
    let said: Vec<String> = dumps.into_iter().map(|d| d.stop_after(sent)).collect();
    for ((name, _), said) in variants.into_iter().zip(said) {
        let orig = dir.path().join(format!("{name}.pcap"));
        let want = tshark_frames(&orig);
        assert!(
            want.len() >= 10,
            "{name}: only {} frames captured",
            want.len()
        );
        let first = read(&orig);
        // On loopback, `any` sees each segment once too (as "host" packets).
        assert_eq!(
            first.payload, sent,
            "{name}: TCP payload bytes from the IP lengths; tcpdump: {said}"
        );
        if name == "lo_snap128" {
            assert!(first.max_caplen <= 128);
        }
        for (path, us) in forms(&orig, dir.path()) {
            let got = read(&path);
            let label = path.file_name().unwrap().to_string_lossy().to_string();
            assert_eq!(got.frames.len(), want.len(), "{label}: packet count");
            for (i, (g, w)) in got.frames.iter().zip(&want).enumerate() {
                assert_eq!(g.1, w.1, "{label}: frame {i} length");
                if us {
                    assert_eq!(g.0 / 1000, w.0 / 1000, "{label}: frame {i} time (µs)");
                } else {
                    assert_eq!(g.0, w.0, "{label}: frame {i} time");
                }
            }
            assert_eq!(
                (got.payload, got.ip_bytes),
                (first.payload, first.ip_bytes),
                "{label}: byte totals"
            );
        }
    }
}

#[test]
fn dumpcap_on_two_interfaces_writes_a_pcapng_we_read_like_tshark_root() {
    if !is_root() {
        eprintln!("skipped: dumpcap needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let path = dir.path().join("two.pcapng");
    let dump = Capturer::start_dumpcap(&path, &["lo", "any"], port);
    let sent = exchange(listener);
    // Each segment is seen on both interfaces.
    let said = dump.stop_after(2 * sent);
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args([
            "-T",
            "fields",
            "-e",
            "frame.interface_id",
            "-e",
            "frame.len",
            "-e",
            "frame.time_epoch",
        ])
        .output()
        .unwrap();
    let want: Vec<(u32, u32, String)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].to_string(),
            )
        })
        .collect();
    let mut r = open_file(&path).unwrap();
    let mut got = Vec::new();
    let mut payload = [0u64; 2];
    let mut links = [0u32; 2];
    while let Some(p) = r.next_packet().unwrap() {
        let ts = format!("{}.{:09}", p.ts_ns / 1_000_000_000, p.ts_ns % 1_000_000_000);
        got.push((p.iface, p.wire_len, ts));
        links[p.iface as usize] = p.link.number();
        if let Transport::Tcp(t) = decode(&p).unwrap().transport {
            payload[p.iface as usize] += u64::from(t.payload_len);
        }
    }
    assert_eq!(got, want, "dumpcap: {said}");
    assert_eq!(
        links[0],
        1,
        "lo is Ethernet-framed; {} frames, payload {payload:?}; dumpcap: {said}",
        got.len()
    );
    assert!(
        links[1] == 113 || links[1] == 276,
        "any is Linux cooked, got {}",
        links[1]
    );
    assert_eq!(payload, [sent, sent], "dumpcap: {said}");
}
