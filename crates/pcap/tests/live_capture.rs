//! Live capture on loopback through libpcap: datagrams the test sends are seen, a stop handle
//! ends a quiet capture, and the errors for a missing interface, a bad filter and a missing
//! permission name the fix. Tests named `_root` need root and skip with a reason otherwise.

use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

use tailhunt_pcap::{decode, LiveCapture, LiveError, PacketSource, Transport};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Stops the capture after `after` even if the test's assertions never get there.
fn stop_later(cap: &mut LiveCapture, after: Duration) {
    let h = cap.stop_handle();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        h.stop();
    });
}

/// Captures on `lo` while sending 20 datagrams of growing size; asserts they are all seen, in
/// order, with their payloads and increasing timestamps.
fn datagrams_on_loopback_are_seen() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    let mut cap = LiveCapture::open("lo", 65535, Some(&format!("udp dst port {port}"))).unwrap();
    assert_eq!(cap.link(), tailhunt_pcap::LinkType::Ethernet);
    stop_later(&mut cap, Duration::from_secs(20));
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sent: Vec<String> = (0..20)
        .map(|i| format!("datagram {i} {}", "x".repeat(i * 50)))
        .collect();
    for m in &sent {
        tx.send_to(m.as_bytes(), ("127.0.0.1", port)).unwrap();
    }
    let mut seen = Vec::new();
    let mut last_ts = 0;
    while seen.len() < sent.len() {
        let Some(p) = cap.next_packet().unwrap() else {
            break;
        };
        assert!(
            p.ts_ns > 1_600_000_000_000_000_000 && p.ts_ns >= last_ts,
            "timestamp {}",
            p.ts_ns
        );
        last_ts = p.ts_ns;
        let d = decode(&p).unwrap();
        match d.transport {
            Transport::Udp(u) => {
                assert_eq!(u.dst_port, port);
                assert_eq!(u.payload_len as usize, u.payload.len());
                seen.push(String::from_utf8(u.payload.to_vec()).unwrap());
            }
            other => panic!("filter let through {other:?}"),
        }
    }
    let dropped = cap.dropped();
    assert_eq!(
        seen.len(),
        sent.len(),
        "seen {} of {}, {dropped} dropped by the kernel",
        seen.len(),
        sent.len()
    );
    assert_eq!(seen, sent);
}

#[test]
fn live_capture_on_loopback_sees_the_datagrams_sent_root() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !is_root() {
        eprintln!("skipped: capturing needs root");
        return;
    }
    datagrams_on_loopback_are_seen();
}

/// A network namespace, deleted on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The same capture inside a fresh network namespace, where nothing else uses `lo`: this test
/// binary runs itself there through `ip netns exec`.
#[test]
fn live_capture_inside_a_network_namespace_root() {
    if std::env::var(CHILD).as_deref() == Ok("netns") {
        datagrams_on_loopback_are_seen();
        println!("CHILD-OK");
        return;
    }
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !is_root() {
        eprintln!("skipped: network namespaces need root");
        return;
    }
    let ns = Netns(format!("th-h1-live-{}", std::process::id()));
    let ok = Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .unwrap();
    assert!(ok.success(), "ip netns add {}", ns.0);
    let ok = Command::new("ip")
        .args(["netns", "exec", &ns.0, "ip", "link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(ok.success());
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "live_capture_inside_a_network_namespace_root",
            "--nocapture",
        ])
        .env(CHILD, "netns")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("CHILD-OK"),
        "child in {}: {stdout}{}",
        ns.0,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn stop_handle_ends_a_quiet_capture_root() {
    if !is_root() {
        eprintln!("skipped: capturing needs root");
        return;
    }
    // A port nothing sends to.
    let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = quiet.local_addr().unwrap().port();
    let mut cap = LiveCapture::open("lo", 256, Some(&format!("udp port {port}"))).unwrap();
    stop_later(&mut cap, Duration::from_millis(300));
    assert!(cap.next_packet().unwrap().is_none());
    assert_eq!(cap.position(), 0);
}

#[test]
fn a_bad_filter_names_the_filter_and_the_syntax_root() {
    if !is_root() {
        eprintln!("skipped: capturing needs root");
        return;
    }
    match LiveCapture::open("lo", 256, Some("tcp prot 80")) {
        Err(e @ LiveError::BadFilter { .. }) => {
            assert!(e.to_string().contains("'tcp prot 80'"), "{e}");
            assert!(e.to_string().contains("tcpdump"), "{e}");
        }
        Err(e) => panic!("expected BadFilter, got {e}"),
        Ok(_) => panic!("expected BadFilter, got a capture"),
    }
}

#[test]
fn a_missing_interface_lists_the_ones_that_exist() {
    match LiveCapture::open("nosuch0", 256, None) {
        Err(e @ LiveError::NoSuchInterface { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("'nosuch0'") && msg.contains("lo"), "{msg}");
        }
        Err(e) => panic!("expected NoSuchInterface, got {e}"),
        Ok(_) => panic!("expected NoSuchInterface, got a capture"),
    }
}

const CHILD: &str = "TAILHUNT_LIVE_TEST_CHILD";

/// Runs this test binary again as `nobody` without capabilities; the child prints the error.
#[test]
fn without_cap_net_raw_the_error_names_the_capability_root() {
    if std::env::var_os(CHILD).is_some() {
        match LiveCapture::open("lo", 256, None) {
            Err(e) => println!("ERROR: {e}"),
            Ok(_) => println!("OPENED"),
        }
        return;
    }
    if !is_root() {
        eprintln!("skipped: dropping to an unprivileged user needs root");
        return;
    }
    // The binary may live where `nobody` cannot read it: copy it somewhere it can.
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("live_capture_test");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(&exe)
        .args([
            "--exact",
            "without_cap_net_raw_the_error_names_the_capability_root",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("setpriv runs (util-linux)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("ERROR:") || l.starts_with("OPENED"))
        .unwrap_or("");
    assert!(
        line.contains("CAP_NET_RAW") && line.contains("root"),
        "child said: {stdout}"
    );
}
