//! Read + decode throughput over one capture file.
//!
//! In: a capture path (any format `read::open` takes) and an optional repeat count. Out, on
//! stdout: packets, decoded count, MB/s (MB = 10^6) of file bytes and of capture bytes (the
//! decompressed stream) and packets/s per pass, measured on one core.
//!
//! `cargo run --release -p tailhunt-pcap --example readspeed -- big.pcap 3`

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use tailhunt_pcap::{decode, open_file, PacketSource, Transport};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().ok_or("usage: readspeed FILE [PASSES]")?);
    let passes: u32 = args.next().map(|p| p.parse()).transpose()?.unwrap_or(3);
    let file_bytes = std::fs::metadata(&path)?.len();
    for pass in 1..=passes {
        let start = Instant::now();
        let mut reader = open_file(&path)?;
        let (mut packets, mut decoded, mut ip_bytes, mut tcp_payload) = (0u64, 0u64, 0u64, 0u64);
        while let Some(pkt) = reader.next_packet()? {
            packets += 1;
            if let Ok(d) = decode(&pkt) {
                decoded += 1;
                ip_bytes += u64::from(d.ip_len);
                if let Transport::Tcp(t) = d.transport {
                    tcp_payload += u64::from(t.payload_len);
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        black_box((ip_bytes, tcp_payload));
        // For a compressed file the capture bytes (decompressed) are the fair measure.
        let capture_bytes = reader.stream_offset();
        println!(
            "pass {pass}: {packets} packets ({decoded} decoded), {file_bytes} file bytes, \
             {capture_bytes} capture bytes, {secs:.3} s: {:.0} MB/s of file, {:.0} MB/s of \
             capture, {:.2} M packets/s",
            file_bytes as f64 / secs / 1e6,
            capture_bytes as f64 / secs / 1e6,
            packets as f64 / secs / 1e6
        );
    }
    Ok(())
}
