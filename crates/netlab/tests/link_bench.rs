//! The benchmark behind bench/link.sh (ignored by `cargo test`; it takes about a minute and
//! asserts nothing about speed). Prints Markdown table rows on stdout.
//!
//! Phases, each on a fresh link so the emulator's lateness counters cover only that phase:
//! capacity (no delay, no rate limit), idle ping-pong at 80 ms RTT / 100 Mbit/s, a bulk TCP
//! transfer over that link, and the ping-pong while the bulk transfer runs.

use std::net::SocketAddr;
use std::time::Duration;

use tailhunt_netlab::link::measure::{cpu_steal_ns, tcp_bulk, udp_ping_pong, PingPong, UdpEcho};
use tailhunt_netlab::link::{EmulatedLink, LinkConfig, LinkStats};
use tailhunt_netlab::netns::Netns;

const A: &str = "198.18.11.1/30";
const B: &str = "198.18.11.2/30";

fn secs(name: &str, default: u64) -> Duration {
    let s = std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Duration::from_secs(s)
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn late(s: &LinkStats) -> String {
    let (f, r) = (&s.forward, &s.reverse);
    format!(
        "{}/{}/{} , {}/{}/{}",
        ms(f.lateness_p50_ns),
        ms(f.lateness_p99_ns),
        ms(f.lateness_max_ns),
        ms(r.lateness_p50_ns),
        ms(r.lateness_p99_ns),
        ms(r.lateness_max_ns)
    )
}

fn ping_row(phase: &str, pp: &PingPong, s: &LinkStats, stolen_ns: u64) {
    println!(
        "| {phase} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        pp.sent,
        pp.lost(),
        ms(pp.rtt_quantile_ns(0.0)),
        ms(pp.rtt_quantile_ns(0.5)),
        ms(pp.rtt_quantile_ns(0.99)),
        ms(pp.rtt_quantile_ns(0.999)),
        ms(pp.rtt_quantile_ns(1.0)),
        late(s),
        stolen_ns / 1_000_000
    );
}

fn steal() -> u64 {
    cpu_steal_ns().unwrap_or(0)
}

/// iputils `ping` at 1000/s through the same link: an independent check of the Rust probe.
fn icmp_ping(a: &Netns, to: &str, count: u64) -> PingPong {
    let out = a
        .command("ping")
        .args(["-i", "0.001", "-c", &count.to_string(), "-W", "2", to])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let rtt_ns = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.trim_end_matches(" ms").parse::<f64>().ok())
        .map(|ms| (ms * 1e6) as u64)
        .collect();
    PingPong {
        sent: count,
        rtt_ns,
        reordered: 0,
    }
}

#[test]
#[ignore = "benchmark: run by bench/link.sh"]
fn link_bench_root() {
    let (a, b) = match (Netns::new("bencha"), Netns::new("benchb")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let ping_for = secs("LINK_BENCH_PING_S", 10);
    let bulk_for = secs("LINK_BENCH_BULK_S", 15);
    let b_any = SocketAddr::from(([198, 18, 11, 2], 0));
    let wan = LinkConfig {
        rate_bps: Some(100_000_000),
        queue_bytes: 1_000_000,
        ..LinkConfig::delay_ms(40)
    };

    println!("### Capacity: no delay, no rate limit, one TCP flow for {bulk_for:?}\n");
    let free = LinkConfig::default();
    let link = EmulatedLink::start(&a, A, &b, B, free, free).unwrap();
    let bulk = tcp_bulk(a.name(), b.name(), b_any, bulk_for).unwrap();
    println!(
        "goodput {:.0} Mbit/s ({} bytes); emulator lateness p50/p99/max ms (a->b , b->a): {}\n",
        bulk.goodput_bps() / 1e6,
        bulk.bytes,
        late(&link.stats())
    );
    drop(link);

    println!("### 100 Mbit/s, 40 ms each way (80 ms RTT), 1 MB drop-tail queue\n");
    let link = EmulatedLink::start(&a, A, &b, B, wan, wan).unwrap();
    let bulk = tcp_bulk(a.name(), b.name(), b_any, bulk_for).unwrap();
    let s = link.stats();
    println!(
        "bulk TCP a->b for {bulk_for:?}: goodput {:.1} Mbit/s ({} bytes), {} packets dropped by the queue; emulator lateness p50/p99/max ms (a->b , b->a): {}\n",
        bulk.goodput_bps() / 1e6,
        bulk.bytes,
        s.forward.dropped_queue,
        late(&s)
    );
    drop(link);

    println!("UDP ping-pong a->b, 1000/s for {ping_for:?}, 64-byte payload; RTT in ms\n");
    println!("| phase | sent | lost | min | p50 | p99 | p99.9 | max | emulator lateness p50/p99/max ms (a->b , b->a) | CPU stolen by the host, ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let link = EmulatedLink::start(&a, A, &b, B, wan, wan).unwrap();
    let echo = UdpEcho::start(b.name(), b_any).unwrap();
    let st = steal();
    let pp = udp_ping_pong(a.name(), echo.addr(), 1000, ping_for, 64).unwrap();
    ping_row("idle, UDP (Rust probe)", &pp, &link.stats(), steal() - st);
    drop((echo, link));

    let link = EmulatedLink::start(&a, A, &b, B, wan, wan).unwrap();
    let st = steal();
    let pp = icmp_ping(&a, "198.18.11.2", ping_for.as_secs() * 1000);
    ping_row(
        "idle, ICMP (iputils ping -i 0.001)",
        &pp,
        &link.stats(),
        steal() - st,
    );
    drop(link);

    let link = EmulatedLink::start(&a, A, &b, B, wan, wan).unwrap();
    let echo = UdpEcho::start(b.name(), b_any).unwrap();
    let (an, bn) = (a.name().to_string(), b.name().to_string());
    let bulk_during = ping_for + Duration::from_secs(4);
    let bulk = std::thread::spawn(move || tcp_bulk(&an, &bn, b_any, bulk_during));
    // Let the transfer fill the queue first.
    std::thread::sleep(Duration::from_secs(2));
    let st = steal();
    let pp = udp_ping_pong(a.name(), echo.addr(), 1000, ping_for, 64).unwrap();
    let s = link.stats();
    let stolen = steal() - st;
    let bulk = bulk.join().unwrap().unwrap();
    ping_row("during bulk a->b, UDP (Rust probe)", &pp, &s, stolen);
    println!(
        "\nbulk during the ping-pong: goodput {:.1} Mbit/s, {} packets dropped by the queue",
        bulk.goodput_bps() / 1e6,
        s.forward.dropped_queue
    );
}
