//! Sampling one socket's TCP_INFO every few milliseconds, and what the readings add up to.
//!
//! In: a shared TCP socket and an interval. Out: [`Reading`]s (monotonic ns, [`TcpInfo`]), a
//! [`TcpSummary`] of them, and series written through a [`SeriesSink`]. The sampler runs on
//! its own thread and holds its own reference to the socket, so the descriptor stays valid
//! until the thread has stopped.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tailhunt_model::evidence::sock::TcpInfoSummary;
use tailhunt_model::{
    ClockOrigin, Labels, Point, SeriesKind, SeriesMeta, SeriesSink, SinkError, Timing, Unit,
};

use crate::sys::tcp_info;
use crate::tcp_info::TcpInfo;

/// One TCP_INFO reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// Monotonic ns.
    pub t_ns: i64,
    /// What the kernel said.
    pub info: TcpInfo,
}

/// A running sampler; [`Sampler::stop`] returns what it read.
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Reading>>>,
}

impl Sampler {
    /// Starts reading `sock`'s TCP_INFO every `interval`.
    pub fn start(sock: Arc<TcpStream>, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tcp-info".into())
            .spawn(move || {
                let mut out = Vec::new();
                loop {
                    let done = flag.load(Ordering::SeqCst);
                    if let Ok(info) = tcp_info(&*sock) {
                        out.push(Reading {
                            t_ns: ClockOrigin::now().mono_ns,
                            info,
                        });
                    }
                    if done {
                        return out;
                    }
                    std::thread::sleep(interval);
                }
            })
            .ok();
        Sampler { stop, thread }
    }

    /// Stops the thread (after one last reading) and returns the readings.
    pub fn stop(mut self) -> Vec<Reading> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Summarises readings; `moving` picks the ones taken while data moved (for means).
pub fn summarise(readings: &[Reading], moving: impl Fn(&Reading) -> bool) -> TcpInfoSummary {
    let Some(last) = readings.last() else {
        return TcpInfoSummary::default();
    };
    let active: Vec<&Reading> = readings.iter().filter(|r| moving(r)).collect();
    let active = if active.is_empty() {
        readings.iter().collect()
    } else {
        active
    };
    let mean = |f: &dyn Fn(&TcpInfo) -> Option<f64>| {
        let v: Vec<f64> = active.iter().filter_map(|r| f(&r.info)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let i = &last.info;
    let share = |limited: Option<u64>| match (limited, i.busy_ns) {
        (Some(l), Some(b)) if b > 0 => Some(l as f64 / b as f64),
        _ => None,
    };
    TcpInfoSummary {
        readings: readings.len() as u64,
        rtt_mean_ns: mean(&|t| Some(t.rtt_ns as f64)).map(|v| v as u64),
        min_rtt_ns: i.min_rtt_ns,
        rcv_wnd_mean_bytes: mean(&|t| t.rcv_wnd.map(f64::from)),
        rcv_wnd_max_bytes: readings.iter().filter_map(|r| r.info.rcv_wnd).max(),
        snd_wnd_mean_bytes: mean(&|t| t.snd_wnd.map(f64::from)),
        rcv_space_max_bytes: readings.iter().map(|r| r.info.rcv_space).max().unwrap_or(0),
        snd_cwnd_max: readings.iter().map(|r| r.info.snd_cwnd).max().unwrap_or(0),
        in_flight_mean_bytes: mean(&|t| Some(t.bytes_in_flight() as f64)).unwrap_or(0.0),
        delivery_rate_max: readings.iter().filter_map(|r| r.info.delivery_rate).max(),
        busy_ns: i.busy_ns,
        rwnd_limited_ns: i.rwnd_limited_ns,
        sndbuf_limited_ns: i.sndbuf_limited_ns,
        rwnd_limited_share: share(i.rwnd_limited_ns),
        sndbuf_limited_share: share(i.sndbuf_limited_ns),
        total_retrans: i.total_retrans,
        zero_window_readings: readings
            .iter()
            .filter(|r| crate::monitor::zero_window(&r.info))
            .count() as u64,
    }
}

/// The series written per socket: name, unit, and how to read the value.
type Field = (&'static str, Unit, fn(&TcpInfo) -> Option<i64>);

/// The TCP_INFO fields stored as series (`tcp_<field>`), in tailhunt's units.
pub const FIELDS: [Field; 13] = [
    ("tcp_rtt", Unit::Nanoseconds, |t| Some(t.rtt_ns as i64)),
    ("tcp_rcv_wnd", Unit::Bytes, |t| t.rcv_wnd.map(i64::from)),
    ("tcp_snd_wnd", Unit::Bytes, |t| t.snd_wnd.map(i64::from)),
    ("tcp_rcv_space", Unit::Bytes, |t| {
        Some(i64::from(t.rcv_space))
    }),
    ("tcp_snd_cwnd", Unit::Count, |t| Some(i64::from(t.snd_cwnd))),
    ("tcp_bytes_in_flight", Unit::Bytes, |t| {
        Some(t.bytes_in_flight() as i64)
    }),
    // Bytes per second: the store has no rate unit; the name carries it.
    ("tcp_delivery_rate_bytes_per_s", Unit::Count, |t| {
        t.delivery_rate.map(|v| v as i64)
    }),
    ("tcp_bytes_received", Unit::Bytes, |t| {
        t.bytes_received.map(|v| v as i64)
    }),
    ("tcp_bytes_acked", Unit::Bytes, |t| {
        t.bytes_acked.map(|v| v as i64)
    }),
    ("tcp_busy_time", Unit::Nanoseconds, |t| {
        t.busy_ns.map(|v| v as i64)
    }),
    ("tcp_rwnd_limited", Unit::Nanoseconds, |t| {
        t.rwnd_limited_ns.map(|v| v as i64)
    }),
    ("tcp_sndbuf_limited", Unit::Nanoseconds, |t| {
        t.sndbuf_limited_ns.map(|v| v as i64)
    }),
    ("tcp_total_retrans", Unit::Count, |t| {
        Some(i64::from(t.total_retrans))
    }),
];

/// Writes one values series per field of [`FIELDS`], labelled with `labels`.
pub fn write_series(
    sink: &mut dyn SeriesSink,
    labels: &Labels,
    readings: &[Reading],
) -> Result<(), SinkError> {
    for (name, unit, get) in FIELDS {
        let points: Vec<Point> = readings
            .iter()
            .filter_map(|r| {
                Some(Point {
                    t_ns: r.t_ns,
                    value: get(&r.info)?,
                })
            })
            .collect();
        if points.is_empty() {
            continue;
        }
        let h = sink.open_series(&SeriesMeta {
            name: name.to_string(),
            labels: labels.clone(),
            unit,
            timing: Timing::Timed,
            kind: SeriesKind::Values,
        })?;
        sink.push_values(h, &points)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(t_ns: i64, rwnd: u64, busy: u64, rcv_wnd: u32) -> Reading {
        Reading {
            t_ns,
            info: TcpInfo {
                rtt_ns: 80_000_000,
                busy_ns: Some(busy),
                rwnd_limited_ns: Some(rwnd),
                sndbuf_limited_ns: Some(0),
                rcv_wnd: Some(rcv_wnd),
                snd_wnd: Some(rcv_wnd),
                ..TcpInfo::default()
            },
        }
    }

    #[test]
    fn shares_come_from_the_last_reading_and_means_from_moving_ones() {
        let r = [
            reading(0, 0, 0, 1000),
            reading(1, 60, 100, 3000),
            reading(2, 80, 100, 5000),
        ];
        let s = summarise(&r, |r| r.t_ns > 0);
        assert_eq!(s.rwnd_limited_share, Some(0.8));
        assert_eq!(s.rcv_wnd_mean_bytes, Some(4000.0));
        assert_eq!(s.rcv_wnd_max_bytes, Some(5000));
        let mut sink: Vec<tailhunt_model::Series> = Vec::new();
        write_series(&mut sink, &Labels::new(), &r).unwrap();
        let rtt = sink.iter().find(|s| s.name == "tcp_rtt").unwrap();
        assert_eq!(rtt.points().unwrap().len(), 3);
    }
}
