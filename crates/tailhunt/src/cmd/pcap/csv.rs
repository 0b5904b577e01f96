//! `--flows-csv` and `--bins-csv`.

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Result;
use std::collections::BTreeMap;
use std::net::IpAddr;

use tailhunt_pcap::analysis::{Analyzer, CaptureReport};
use tailhunt_pcap::bins::{Bin, SparseBins};

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// One row per flow.
pub fn write_flows(path: &Path, r: &CaptureReport) -> Result<()> {
    let mut w = BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        w,
        "id,proto,client,server,first_ns,last_ns,packets_up,bytes_up,payload_up,packets_down,bytes_down,payload_down,\
         handshake_server_leg_ns,handshake_client_leg_ns,rtt_server_min_ns,rtt_server_mean_ns,rtt_client_min_ns,rtt_client_mean_ns,\
         retrans_client,retrans_server,rto,fast,spurious,unseen_bytes,zero_windows,main_sender,throughput_bps,rwnd_limited_share,\
         window_bound_bps,exchanges,nagle_stalls,close_by,close_how,close_at_ns,close_note"
    )?;
    for f in &r.flows {
        let (up, down) = (&f.client_to_server, &f.server_to_client);
        let proto = match f.name.proto {
            tailhunt_pcap::flowkey::Proto::Tcp => "tcp",
            tailhunt_pcap::flowkey::Proto::Udp => "udp",
        };
        let mut row = vec![
            f.id.to_string(),
            proto.into(),
            f.name.client.clone(),
            f.name.server.clone(),
            f.first_ns.to_string(),
            f.last_ns.to_string(),
            up.packets.to_string(),
            up.ip_bytes.to_string(),
            up.payload_bytes.to_string(),
            down.packets.to_string(),
            down.ip_bytes.to_string(),
            down.payload_bytes.to_string(),
        ];
        match &f.tcp {
            Some(t) => {
                let rc = &t.client.retransmissions;
                let rs = &t.server.retransmissions;
                let close = t.close.as_ref();
                row.extend([
                    opt(t.handshake.and_then(|h| h.server_leg_ns)),
                    opt(t.handshake.and_then(|h| h.client_leg_ns)),
                    opt(t.rtt_server_leg.map(|r| r.min_ns)),
                    opt(t.rtt_server_leg.map(|r| r.mean_ns)),
                    opt(t.rtt_client_leg.map(|r| r.min_ns)),
                    opt(t.rtt_client_leg.map(|r| r.mean_ns)),
                    rc.total().to_string(),
                    rs.total().to_string(),
                    (rc.rto + rs.rto).to_string(),
                    (rc.fast + rs.fast).to_string(),
                    (rc.spurious + rs.spurious).to_string(),
                    (t.client.unseen_bytes + t.server.unseen_bytes).to_string(),
                    (t.client.zero_windows + t.server.zero_windows).to_string(),
                    t.main_sender.clone(),
                    opt(t.throughput_bps.map(|v| v.round())),
                    format!("{:.4}", t.rwnd_limited_share),
                    opt(t.window_bound_bps.map(|v| v.round())),
                    t.exchanges.to_string(),
                    t.nagle_stalls.to_string(),
                    opt(close.map(|c| c.by.clone())),
                    opt(close.map(|c| c.how.clone())),
                    opt(close.map(|c| c.at_ns)),
                    quote(&close.map(|c| c.note.clone()).unwrap_or_default()),
                ]);
            }
            None => row.extend(std::iter::repeat_n(String::new(), 23)),
        }
        writeln!(w, "{}", row.join(","))?;
    }
    w.flush()?;
    Ok(())
}

/// One row per non-empty bin: of every channel (`to`/`from` a host), host pair (`pair`,
/// `A -> B`) and flow direction (`flow`, `ID A -> B`).
pub fn write_bins(path: &Path, r: &CaptureReport, an: &Analyzer) -> Result<()> {
    let mut w = BufWriter::new(std::fs::File::create(path)?);
    writeln!(w, "t_ns,scope,name,bytes,packets")?;
    let mut rows = |scope: &str, name: &str, bins: &[Bin]| -> Result<()> {
        for b in bins {
            writeln!(
                w,
                "{},{scope},{name},{},{}",
                b.index * r.bin_ns,
                b.bytes,
                b.packets
            )?;
        }
        Ok(())
    };
    for ch in &r.channels {
        let Ok(host) = ch.host.parse() else { continue };
        if let Some(bins) = an.channel_bins(ch.dir, host) {
            rows(ch.dir.name(), &ch.host, bins.bins())?;
        }
    }
    let mut pairs: BTreeMap<(IpAddr, IpAddr), SparseBins> = BTreeMap::new();
    for (_, src, dst, bins) in an.flow_bins() {
        let pair = pairs.entry((src.ip(), dst.ip())).or_default();
        for b in bins.bins() {
            pair.add_bin(b);
        }
    }
    for ((a, b), bins) in &pairs {
        rows("pair", &format!("{a} -> {b}"), bins.bins())?;
    }
    for (id, src, dst, bins) in an.flow_bins() {
        if !bins.bins().is_empty() {
            rows("flow", &format!("{id} {src} -> {dst}"), bins.bins())?;
        }
    }
    w.flush()?;
    Ok(())
}
