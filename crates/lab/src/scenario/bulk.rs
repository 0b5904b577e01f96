//! Bulk download over a long round trip: with SO_RCVBUF=64k (root cause #4) or without
//! (the healthy twin, with a few healthy request/response exchanges first).
//!
//! In: the output directory and the client's SO_RCVBUF (None: autotuning). Out: the truth
//! (schema in the parent module's docs), after `py/bulk.py` downloaded [`BYTES`] through the
//! link emulator and tcpdump recorded the client's Ethernet interface (`-s 128`).
//!
//! ```text
//!  client 198.18.4.1 ──veth── 198.18.4.254 gw 198.18.6.1 ══emulated link══ 198.18.6.2 server
//! ```
//!
//! The client sits behind a veth so the capture is of an Ethernet interface, as on a real host.
//! A second capture on the server's TUN device (raw IP) shows the sender's side of the path.

use std::time::Duration;

use serde_json::{json, Value};

use super::procs::{Capture, Proc};
use super::{read_part, Out, ScenarioError};
use tailhunt_netlab::link::{EmulatedLink, LinkConfig};
use tailhunt_netlab::netns::{veth, Netns};

const CLIENT: &str = "198.18.4.1";
const GW_LAN: &str = "198.18.4.254";
const GW_WAN: &str = "198.18.6.1/30";
const SERVER: &str = "198.18.6.2";
const PORT: &str = "7400";
const RR_PORT: &str = "7401";
/// 4 MB: about 5 s at 64 kB per 80 ms round trip, well under a second with autotuning.
pub(crate) const BYTES: &str = "4000000";
/// Round trip of the emulated path: 40 ms each way.
pub(crate) const RTT_NS: u64 = 80_000_000;
const RATE_BPS: u64 = 100_000_000;
/// 2 MB of queue (160 ms at 100 Mbit/s), two path BDPs: slow start fills the pipe before it
/// overflows the queue.
const QUEUE_BYTES: u64 = 2_000_000;

pub(crate) fn run(out: &Out, rcvbuf: Option<u32>) -> Result<Value, ScenarioError> {
    let script = out.script("bulk.py", include_str!("../../py/bulk.py"))?;
    let client = Netns::new("bulk-cli")?;
    let gw = Netns::new("bulk-gw")?;
    let server = Netns::new("bulk-srv")?;
    let (c_end, _gw_end) = veth(
        &client,
        &format!("{CLIENT}/24"),
        &gw,
        &format!("{GW_LAN}/24"),
    )?;
    let cfg = LinkConfig {
        delay_ns: RTT_NS / 2,
        rate_bps: Some(RATE_BPS),
        queue_bytes: QUEUE_BYTES,
        ..LinkConfig::default()
    };
    let link = EmulatedLink::start(&gw, GW_WAN, &server, &format!("{SERVER}/30"), cfg, cfg)?;
    gw.run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    client.run(&["ip", "route", "add", "default", "via", GW_LAN])?;
    let (_, server_tun) = link.device_names();
    server.run(&["ip", "route", "add", "198.18.4.0/24", "dev", &server_tun])?;

    let pcap = out.file("pcap");
    let capture = Capture::start(&client, &c_end.iface, &pcap, 128)?;
    // The sender's view too: on the server's TUN device (raw IP, no link header).
    let server_pcap = out.file("server.pcap");
    let server_capture = Capture::start(&server, &server_tun, &server_pcap, 128)?;
    let mut truth = json!({});
    let mut flows = Vec::new();
    if rcvbuf.is_none() {
        let rr = healthy_exchanges(out, &client, &server, &script)?;
        flows.push(rr["flow"].clone());
        truth["rr_flow"] = rr["flow"].clone();
        truth["rr_requests"] = rr["requests"].clone();
    }
    let mut srv = Proc::python(&server, "bulk server", &script, &["server", SERVER, PORT])?;
    srv.wait_line("READY", Duration::from_secs(10))?;
    let part = out.part("client")?;
    let rcv = rcvbuf.unwrap_or(0).to_string();
    let mut cli = Proc::python(
        &client,
        "bulk client",
        &script,
        &["client", SERVER, PORT, BYTES, &rcv, &part],
    )?;
    cli.wait_success(Duration::from_secs(20))?;
    drop(srv);
    truth["capture"] = capture.stop("client")?;
    truth["extra_captures"] = json!([server_capture.stop("server")?]);
    let c = read_part(&part)?;
    for key in [
        "flow",
        "client_pid",
        "rcvbuf_requested",
        "rcvbuf_effective",
        "bytes",
        "bytes_received",
        "request_ns",
        "first_byte_ns",
        "last_byte_ns",
    ] {
        truth[key] = c[key].clone();
    }
    if let (Some(a), Some(b)) = (c["request_ns"].as_i64(), c["last_byte_ns"].as_i64()) {
        truth["transfer_ns"] = json!(b - a);
    }
    flows.push(c["flow"].clone());
    truth["flows"] = json!(flows);
    let stats = link.stats();
    truth["link"] = json!({
        "rtt_ns": RTT_NS,
        "rate_bps": RATE_BPS,
        "queue_bytes": QUEUE_BYTES,
        "emulator": "tailhunt_netlab::link (userspace, TUN), same config both ways",
        "stats_directions": {"forward": "gw -> server", "reverse": "server -> gw"},
        "stats": stats,
    });
    Ok(truth)
}

/// 20 request/response exchanges with TCP_NODELAY, one every 50 ms: the healthy traffic of
/// clean-bulk. Returns the rr client's truth.
fn healthy_exchanges(
    out: &Out,
    client: &Netns,
    server: &Netns,
    script: &str,
) -> Result<Value, ScenarioError> {
    let mut srv = Proc::python(server, "rr server", script, &["rr-server", SERVER, RR_PORT])?;
    srv.wait_line("READY", Duration::from_secs(10))?;
    let part = out.part("rr")?;
    let mut cli = Proc::python(
        client,
        "rr client",
        script,
        &["rr-client", SERVER, RR_PORT, "20", "50", &part],
    )?;
    cli.wait_success(Duration::from_secs(15))?;
    read_part(&part)
}
