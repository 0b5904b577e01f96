//! Counts frames on a live interface until a time limit, printing one line per second.
//!
//! In: interface, optional BPF filter, seconds (default 5). Out, on stdout: frames and bytes
//! per second and the kernel's drop count. Needs root or CAP_NET_RAW.
//!
//! `cargo run -p tailhunt-pcap --example livecount -- lo 'tcp port 80' 5`

use std::time::{Duration, Instant};

use tailhunt_pcap::{LiveCapture, PacketSource};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let iface = args
        .next()
        .ok_or("usage: livecount IFACE [FILTER] [SECONDS]")?;
    let filter = args.next().filter(|f| !f.is_empty());
    let secs: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let mut cap = LiveCapture::open(&iface, 65535, filter.as_deref())?;
    let stop = cap.stop_handle();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(secs));
        stop.stop();
    });
    let start = Instant::now();
    let (mut frames, mut bytes, mut second) = (0u64, 0u64, 1u64);
    while let Some(p) = cap.next_packet()? {
        frames += 1;
        bytes += u64::from(p.wire_len);
        if start.elapsed() >= Duration::from_secs(second) {
            println!("{second:>4} s: {frames} frames, {bytes} bytes");
            second += 1;
        }
    }
    println!(
        "end: {frames} frames, {bytes} bytes, {} dropped by the kernel",
        cap.dropped()
    );
    Ok(())
}
