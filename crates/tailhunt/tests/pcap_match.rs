//! `tailhunt pcap A --match B` end to end: a client and a server namespace joined by a router
//! namespace that masquerades (nftables) the client's address and ports, tcpdump on both
//! sides, real traffic from `tailhunt load` to `tailhunt serve tcp`. Needs root (CI has it)
//! and `nft` (Debian package nftables).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::capture::{namespace, pcap_json, Tcpdump};
use common::{Env, BIN};
use tailhunt_netlab::netns::{veth, Netns};

/// A process inside a namespace, killed (by its PID) on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn has_nft() -> bool {
    Command::new("nft").arg("--version").output().is_ok()
}

fn must(ns: &Netns, argv: &[&str]) {
    if let Err(e) = ns.run(argv) {
        panic!("{argv:?} in {}: {e}", ns.name());
    }
}

/// client 198.18.1.2 -- 198.18.1.1 router 198.18.2.1 -- 198.18.2.2 server; the router
/// masquerades everything leaving towards the server.
struct Topology {
    client: Netns,
    router: Netns,
    server: Netns,
    client_if: String,
    server_if: String,
}

fn topology() -> Option<Topology> {
    let client = namespace("mcli")?;
    let router = namespace("mrtr")?;
    let server = namespace("msrv")?;
    let (c, _) = veth(&client, "198.18.1.2/24", &router, "198.18.1.1/24").expect("veth client");
    let (_, s) = veth(&router, "198.18.2.1/24", &server, "198.18.2.2/24").expect("veth server");
    must(
        &client,
        &["ip", "route", "add", "default", "via", "198.18.1.1"],
    );
    must(&router, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    // `random`: the router picks new source ports too, so ports differ as well as addresses.
    must(&router, &["nft", "add", "table", "ip", "th_nat"]);
    let chain = "add chain ip th_nat post { type nat hook postrouting priority 100 ; }";
    must(&router, &["nft", chain]);
    let rule = "add rule ip th_nat post ip saddr 198.18.1.0/24 masquerade random";
    must(&router, &["nft", rule]);
    Some(Topology {
        client,
        router,
        server,
        client_if: c.iface,
        server_if: s.iface,
    })
}

/// Runs the server and `load ARGS` across the topology with tcpdump on both sides;
/// `during` runs on another thread while the load does. Returns (client capture, server capture).
fn traffic(
    t: &Topology,
    env: &Env,
    load: &[&str],
    during: impl FnOnce() + Send + 'static,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (a_file, b_file) = (env.path("client.pcap"), env.path("server.pcap"));
    let filter = ["tcp", "port", "7200"];
    let dump_a = Tcpdump::start(&t.client, &t.client_if, &a_file, 0, &filter);
    let dump_b = Tcpdump::start(&t.server, &t.server_if, &b_file, 0, &filter);
    {
        let server = t
            .server
            .command(BIN)
            .args(["serve", "tcp", "--listen", "198.18.2.2:7200"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tailhunt serve");
        let _server = Proc(server);
        std::thread::sleep(Duration::from_millis(300));
        let side = std::thread::spawn(during);
        let out = t
            .client
            .command(BIN)
            .arg("--db")
            .arg(env.path("load.db"))
            .args(["load", "tcp://198.18.2.2:7200", "--warmup", "0s"])
            .args(load)
            .output()
            .expect("run load");
        side.join().expect("side thread");
        eprintln!("load: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(200));
    dump_a.stop();
    dump_b.stop();
    (a_file, b_file)
}

#[test]
fn flows_are_paired_across_a_masquerading_router_root() {
    if !has_nft() {
        eprintln!("skipped: nft not installed (apt-get install nftables)");
        return;
    }
    let Some(t) = topology() else { return };
    let env = Env::new();
    let load = ["--rate", "200", "--duration", "1s", "--conns", "3"];
    let (a_file, b_file) = traffic(&t, &env, &load, || {});
    drop(t.router);

    let doc = pcap_json(&env, &a_file, &["--match", b_file.to_str().unwrap()]);
    let m = &doc["matching"];
    let flows = m["flows"].as_array().expect("flows");
    assert_eq!(flows.len(), 3, "three connections, three pairs: {m:#}");
    assert_eq!(m["unmatched_flows_a"], 0, "{m:#}");
    assert_eq!(m["unmatched_flows_b"], 0, "{m:#}");
    // One host, one clock: the estimate is the half-difference of the two directions' minima.
    let off = m["clock_offset_ns"].as_i64().expect("offset");
    assert!(off.abs() < 5_000_000, "offset {off} ns on one clock: {m:#}");
    for f in flows {
        assert_eq!(f["nat"], true, "{f:#}");
        let a_client = f["a"]["client"].as_str().unwrap();
        let b_client = f["b"]["client"].as_str().unwrap();
        assert!(a_client.starts_with("198.18.1.2:"), "{f:#}");
        assert!(b_client.starts_with("198.18.2.1:"), "masqueraded: {f:#}");
        assert_eq!(f["a"]["server"], "198.18.2.2:7200");
        // The client side is where client->server packets pass first.
        assert_eq!(f["a_to_b"]["sender"], a_client, "{f:#}");
        for hop in ["a_to_b", "b_to_a"] {
            let h = &f[hop];
            assert_eq!(h["lost"], 0, "{hop}: {f:#}");
            assert_eq!(h["appeared"], 0, "{hop}: {f:#}");
            assert!(h["matched"].as_u64().unwrap() > 10, "{hop}: {f:#}");
            assert_eq!(h["matched"], h["sent"], "{hop}: {f:#}");
            let d = &h["delay"];
            assert!(d["min_ns"].as_i64().unwrap() <= d["p50_ns"].as_i64().unwrap());
            assert!(d["p50_ns"].as_i64().unwrap() <= d["max_ns"].as_i64().unwrap());
        }
        // None of the closes seen comes from the router.
        let closes = f["closes"].as_array().unwrap();
        assert!(closes.iter().all(|c| c["from_middlebox"] == false), "{f:#}");
    }
    let packets = m["packets_a"].as_u64().unwrap();
    assert_eq!(m["matched_packets"].as_u64().unwrap(), packets, "{m:#}");

    let text = env.ok(&[
        "pcap",
        a_file.to_str().unwrap(),
        "--match",
        b_file.to_str().unwrap(),
    ]);
    assert!(text.contains("matched with the other capture"), "{text}");
}

#[test]
fn an_rst_from_the_router_is_told_from_the_servers_root() {
    if !has_nft() {
        eprintln!("skipped: nft not installed (apt-get install nftables)");
        return;
    }
    let Some(t) = topology() else { return };
    let env = Env::new();
    // Half-way through, the router starts answering the client's segments with RSTs that
    // claim to come from the server; the server never sees them.
    let router = t.router.name().to_string();
    let reject = move || {
        std::thread::sleep(Duration::from_millis(700));
        let nft = |args: &str| {
            let st = Command::new("ip")
                .args(["netns", "exec", &router, "nft"])
                .arg(args)
                .status()
                .expect("nft");
            assert!(st.success(), "nft {args}");
        };
        nft("add chain ip th_nat filt { type filter hook forward priority 0 ; }");
        nft("add rule ip th_nat filt tcp dport 7200 reject with tcp reset");
    };
    let load = ["--rate", "100", "--duration", "1500ms", "--conns", "1"];
    let (a_file, b_file) = traffic(&t, &env, &load, reject);
    drop(t.router);

    let doc = pcap_json(&env, &a_file, &["--match", b_file.to_str().unwrap()]);
    let m = &doc["matching"];
    let f = &m["flows"][0];
    let server = "198.18.2.2:7200";
    let rsts: Vec<&serde_json::Value> = f["closes"]
        .as_array()
        .expect("closes")
        .iter()
        .filter(|c| c["kind"] == "rst" && c["sender"] == server)
        .collect();
    assert!(!rsts.is_empty(), "the router's RST: {m:#}");
    for c in rsts {
        assert_eq!(c["from_middlebox"], true, "{c:#}");
        assert_eq!(c["first_seen"], "a", "{c:#}");
        assert!(c.get("seen_in_b_ns").is_none(), "{c:#}");
    }
    // The client's segments after the rule never reach the server.
    assert!(f["a_to_b"]["lost"].as_u64().unwrap() >= 1, "{f:#}");
    // The server-side packets of that flow before the rule still pair.
    assert!(f["b_to_a"]["matched"].as_u64().unwrap() > 10, "{f:#}");
}
