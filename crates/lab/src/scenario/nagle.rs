//! Nagle + delayed ACK (root cause #2): a request written in two pieces without TCP_NODELAY.
//!
//! In: the output directory. Out: the truth (schema in the parent module's docs), after the
//! client and server of `py/nagle.py` exchanged [`COUNT`] requests and tcpdump recorded the
//! server's interface.

use std::time::Duration;

use serde_json::{json, Value};

use super::procs::{Capture, Proc};
use super::{median, read_part, Out, ScenarioError};
use tailhunt_netlab::netns::{veth, Netns};

const CLIENT: &str = "198.18.3.1";
const SERVER: &str = "198.18.3.2";
const PORT: &str = "7200";
const HEADER: &str = "20";
const BODY: &str = "80";
const REPLY: &str = "100";
/// One request every 50 ms (20 per second)...
const PERIOD_MS: &str = "50";
/// ... for 3 s.
pub(crate) const COUNT: &str = "60";

pub(crate) fn run(out: &Out) -> Result<Value, ScenarioError> {
    let script = out.script("nagle.py", include_str!("../../py/nagle.py"))?;
    let client = Netns::new("nagle-cli")?;
    let server = Netns::new("nagle-srv")?;
    let (_c_end, s_end) = veth(
        &client,
        &format!("{CLIENT}/24"),
        &server,
        &format!("{SERVER}/24"),
    )?;
    let pcap = out.file("pcap");
    let capture = Capture::start(&server, &s_end.iface, &pcap, 0)?;
    let server_part = out.part("server")?;
    let mut srv = Proc::python(
        &server,
        "nagle server",
        &script,
        &["server", SERVER, PORT, HEADER, BODY, REPLY, &server_part],
    )?;
    srv.wait_line("READY", Duration::from_secs(10))?;
    let client_part = out.part("client")?;
    let mut cli = Proc::python(
        &client,
        "nagle client",
        &script,
        &[
            "client",
            SERVER,
            PORT,
            HEADER,
            BODY,
            REPLY,
            PERIOD_MS,
            COUNT,
            &client_part,
        ],
    )?;
    cli.wait_success(Duration::from_secs(20))?;
    srv.wait_success(Duration::from_secs(5))?;
    let capture = capture.stop("server")?;
    Ok(truth(
        capture,
        read_part(&client_part)?,
        read_part(&server_part)?,
    ))
}

fn truth(capture: Value, client: Value, server: Value) -> Value {
    let empty = Vec::new();
    let seen = server["requests"].as_array().unwrap_or(&empty);
    let mut requests = client["requests"].as_array().cloned().unwrap_or_default();
    // One connection, one request at a time: the server's n-th request is the client's n-th.
    for (r, s) in requests.iter_mut().zip(seen) {
        r["server_header_recv_ns"] = s["header_recv_ns"].clone();
        r["server_body_recv_ns"] = s["body_recv_ns"].clone();
        if let (Some(body), Some(w1)) = (s["body_recv_ns"].as_i64(), r["write1_ns"].as_i64()) {
            r["body_stall_ns"] = json!(body - w1);
        }
    }
    let of = |key: &str| median(requests.iter().filter_map(|r| r[key].as_i64()).collect());
    json!({
        "capture": capture,
        "flow": client["flow"],
        "server": format!("{SERVER}:{PORT}"),
        "header_bytes": 20,
        "body_bytes": 80,
        "reply_bytes": 100,
        "client_nodelay": client["client_nodelay"],
        "server_nodelay": server["server_nodelay"],
        "client_pid": client["client_pid"],
        "server_pid": server["server_pid"],
        "median_latency_ns": of("latency_ns"),
        "median_body_stall_ns": of("body_stall_ns"),
        "requests": requests,
    })
}
