//! Sampling one socket's TCP_INFO every few milliseconds, and what the readings add up to.
//!
//! In: a shared TCP socket and an interval. Out: [`Reading`]s (monotonic ns, [`TcpInfo`]), a
//! [`TcpInfoSummary`] of them, and series written through a [`SeriesSink`]. The sampler runs on
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
    let moving: Vec<Reading> = active.iter().map(|r| **r).collect();
    TcpInfoSummary {
        readings: readings.len() as u64,
        rtt_mean_ns: mean(&|t| Some(t.rtt_ns as f64)).map(|v| v as u64),
        rtt_bytes_mean_ns: bytes_weighted(&moving, |t| t.bytes_acked, |t| Some(t.rtt_ns)),
        rcv_rtt_bytes_mean_ns: bytes_weighted(
            &moving,
            |t| t.bytes_received,
            |t| (t.rcv_rtt_ns > 0).then_some(t.rcv_rtt_ns),
        ),
        receiver_window_share: receiver_window_share(&moving),
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

/// `value` averaged over the bytes that moved while it held: each reading's value weighted
/// by what the counter `moved` grew since the reading before. For a round trip this is the
/// mean per window moved — a window-limited transfer moves one window per round trip, so its
/// rate is the window over this mean, however the round trip changed (a time mean weighs a
/// slow round more than the bytes it moved).
pub fn bytes_weighted(
    readings: &[Reading],
    moved: fn(&TcpInfo) -> Option<u64>,
    value: fn(&TcpInfo) -> Option<u64>,
) -> Option<u64> {
    let (mut sum, mut bytes) = (0f64, 0u64);
    for w in readings.windows(2) {
        let (Some(a), Some(b), Some(v)) = (moved(&w[0].info), moved(&w[1].info), value(&w[1].info))
        else {
            continue;
        };
        let n = b.saturating_sub(a);
        sum += n as f64 * v as f64;
        bytes += n;
    }
    (bytes > 0).then(|| (sum / bytes as f64).round() as u64)
}

/// Receiving at 75% of window/RTT or more counts as window-limited for the receiver's view.
const RECEIVER_RATE: f64 = 0.75;

/// The receiver's window-limited share: of the intervals between readings in which data
/// arrived, those that brought at least 75% of the advertised window (`tcpi_rcv_wnd`) per
/// round trip — the receiver's own estimate of it, `tcpi_rcv_rtt`; intervals before it has
/// one are left out (the receiver's smoothed RTT measures its own data, not the path its
/// sender's data waits through).
pub fn receiver_window_share(r: &[Reading]) -> Option<f64> {
    let (mut active, mut at_window) = (0u32, 0u32);
    for w in r.windows(2) {
        let (a, b) = (&w[0].info, &w[1].info);
        let (Some(got_b), Some(got_a)) = (b.bytes_received, a.bytes_received) else {
            continue;
        };
        let got = got_b.saturating_sub(got_a);
        let dt = (w[1].t_ns - w[0].t_ns) as f64 / 1e9;
        if got == 0 || dt <= 0.0 {
            continue;
        }
        let rtt = b.rcv_rtt_ns;
        let (Some(wnd), true) = (b.rcv_wnd, rtt > 0) else {
            continue;
        };
        active += 1;
        let bound = f64::from(wnd) / (rtt as f64 / 1e9);
        if got as f64 / dt >= RECEIVER_RATE * bound {
            at_window += 1;
        }
    }
    (active > 0).then(|| f64::from(at_window) / f64::from(active))
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

    /// A queue that fills: 1 MB moves at a 10 ms round trip, then 100 kB at 250 ms. The bytes
    /// decide the mean, not the readings (most of them are at 250 ms).
    #[test]
    fn round_trips_are_averaged_over_the_bytes_they_moved() {
        let at = |t_ns: i64, acked: u64, rtt_ms: u64| Reading {
            t_ns,
            info: TcpInfo {
                rtt_ns: rtt_ms * 1_000_000,
                rcv_rtt_ns: rtt_ms * 1_000_000,
                bytes_acked: Some(acked),
                bytes_received: Some(acked),
                ..TcpInfo::default()
            },
        };
        let mut r = vec![at(0, 0, 0), at(100, 1_000_000, 10)];
        for i in 0..9 {
            r.push(at(200 + i, 1_000_000 + 100_000 * u64::from(i == 8), 250));
        }
        let mean = bytes_weighted(&r, |t| t.bytes_acked, |t| Some(t.rtt_ns)).unwrap();
        assert_eq!(mean, 31_818_182);
        let s = summarise(&r, |_| true);
        assert_eq!(s.rtt_bytes_mean_ns, Some(mean));
        assert_eq!(s.rcv_rtt_bytes_mean_ns, Some(mean));
        assert!(
            s.rtt_mean_ns.unwrap() > 200_000_000,
            "the time mean is the slow rounds'"
        );
        assert_eq!(
            bytes_weighted(&r[..1], |t| t.bytes_acked, |t| Some(t.rtt_ns)),
            None
        );
    }
}
