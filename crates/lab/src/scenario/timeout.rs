//! Client timeout (root cause #4's ending): the client gives up on a slow download and closes.
//!
//! In: the output directory. Out: the truth (schema in the parent module's docs), after the
//! client of `py/timeout.py` timed out and closed, its server saw the reset, and tcpdump
//! recorded the client's interface.

use std::time::Duration;

use serde_json::{json, Value};

use super::procs::{add_tbf, qdisc_counts, Capture, Proc};
use super::{read_part, Out, ScenarioError};
use tailhunt_netlab::netns::{veth, Netns};

const CLIENT: &str = "198.18.5.1";
const SERVER: &str = "198.18.5.2";
const PORT: &str = "7500";
/// 8 MB: 32 s at 2 Mbit/s, far beyond the timeout.
const BYTES: &str = "8000000";
/// The client's application timeout.
pub(crate) const TIMEOUT_MS: u64 = 2000;
const RATE_BPS: u64 = 2_000_000;
// 5 s of queue at 2 Mbit/s is 1.25 MB: more than the server's window grows to before the
// timeout, so nothing is dropped (a lossy capture would blame the slowness on loss). After the
// close the queue keeps delivering the server's segments to the closed socket: resets.
const SHAPER: [&str; 6] = ["rate", "2mbit", "burst", "16kb", "latency", "5s"];

pub(crate) fn run(out: &Out) -> Result<Value, ScenarioError> {
    let script = out.script("timeout.py", include_str!("../../py/timeout.py"))?;
    let client = Netns::new("to-cli")?;
    let server = Netns::new("to-srv")?;
    let (c_end, s_end) = veth(
        &client,
        &format!("{CLIENT}/24"),
        &server,
        &format!("{SERVER}/24"),
    )?;
    add_tbf(&server, &s_end.iface, &SHAPER)?;
    let pcap = out.file("pcap");
    let capture = Capture::start(&client, &c_end.iface, &pcap, 0)?;
    let server_part = out.part("server")?;
    let mut srv = Proc::python(
        &server,
        "timeout server",
        &script,
        &["server", SERVER, PORT, BYTES, &server_part],
    )?;
    srv.wait_line("READY", Duration::from_secs(10))?;
    let client_part = out.part("client")?;
    let timeout = TIMEOUT_MS.to_string();
    let mut cli = Proc::python(
        &client,
        "timeout client",
        &script,
        &["client", SERVER, PORT, BYTES, &timeout, &client_part],
    )?;
    cli.wait_success(Duration::from_millis(TIMEOUT_MS + 10_000))?;
    // The server learns of the close when a reset comes back: within the queue's 400 ms.
    srv.wait_success(Duration::from_secs(5))?;
    let capture = capture.stop("client")?;
    let (c, s) = (read_part(&client_part)?, read_part(&server_part)?);
    let mut truth = c.clone();
    truth["capture"] = capture;
    truth["link"] = json!({
        "rate_bps": RATE_BPS,
        "shaper": format!("tbf {}", SHAPER.join(" ")),
        "shaper_counts": qdisc_counts(&server, &s_end.iface)?,
        "shaped_iface": s_end.iface,
        "direction": "server -> client",
    });
    truth["server"] = json!({
        "pid": s["server_pid"],
        "bytes_sent": s["bytes_sent"],
        "send_error": s["send_error"],
        "send_error_ns": s["send_error_ns"],
    });
    Ok(truth)
}
