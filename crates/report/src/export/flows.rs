//! `tailhunt pcap --flows-csv`: one row per flow of a capture, for spreadsheets and pandas.
//!
//! In: a capture run: its `flows` rows (every flow, read one at a time), or for a run whose
//! report holds every flow, the [`CaptureReport`]. Out: a header and one row per flow (TCP
//! columns empty for UDP flows), written with the `csv` crate so notes with commas and quotes
//! survive.

use std::io::Write;

use tailhunt_model::evidence::capture::{CaptureReport, FlowSummary};
use tailhunt_store::{Store, StoreError};

/// The columns, in order.
const HEADER: [&str; 36] = [
    "id",
    "proto",
    "client",
    "server",
    "first_ns",
    "last_ns",
    "packets_up",
    "bytes_up",
    "payload_up",
    "packets_down",
    "bytes_down",
    "payload_down",
    "handshake_server_leg_ns",
    "handshake_client_leg_ns",
    "rtt_server_min_ns",
    "rtt_server_mean_ns",
    "rtt_client_min_ns",
    "rtt_client_mean_ns",
    "retrans_client",
    "retrans_server",
    "rto",
    "fast",
    "spurious",
    "unseen_bytes",
    "zero_windows",
    "main_sender",
    "throughput_bps",
    "rwnd_limited_share",
    "window_bound_bps",
    "exchanges",
    "nagle_stalls",
    "close_by",
    "close_how",
    "close_at_ns",
    "close_abandoned",
    "close_note",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// Why the flows could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FlowsCsvError {
    /// Writing the CSV failed (a closed pipe too: the binary tells it by this source).
    #[error("writing the flows: {0}")]
    Io(#[from] std::io::Error),
    /// Reading the run's flows failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Writes every flow of run `run_id` as CSV: from its `flows` rows, or from `report` (its
/// report) when the run has none (its report holds every flow).
pub fn write_flows_csv<W: Write>(
    out: W,
    store: &Store,
    run_id: &str,
    report: &CaptureReport,
) -> Result<(), FlowsCsvError> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(HEADER)?;
    let stored = store.rows::<FlowSummary, FlowsCsvError>(run_id, |f| {
        write_flow(&mut w, &f).map_err(FlowsCsvError::from)
    })?;
    if stored == 0 {
        for f in &report.flows {
            write_flow(&mut w, f)?;
        }
    }
    w.flush()?;
    Ok(())
}

impl From<csv::Error> for FlowsCsvError {
    fn from(e: csv::Error) -> FlowsCsvError {
        FlowsCsvError::Io(super::csv_io(e))
    }
}

/// One flow's row.
fn write_flow<W: Write>(w: &mut csv::Writer<W>, f: &FlowSummary) -> Result<(), csv::Error> {
    {
        let (up, down) = (&f.client_to_server, &f.server_to_client);
        let mut row = vec![
            f.id.to_string(),
            f.name.proto.name().to_string(),
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
                let (rc, rs) = (&t.client.retransmissions, &t.server.retransmissions);
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
                    opt(close.map(|c| c.by)),
                    opt(close.map(|c| c.how)),
                    opt(close.map(|c| c.at_ns)),
                    opt(close.and_then(|c| c.abandoned()).map(|a| a.name())),
                    close.map(|c| c.note.clone()).unwrap_or_default(),
                ]);
            }
            None => row.resize(HEADER.len(), String::new()),
        }
        w.write_record(&row)
    }
}
