//! `tailhunt sockets`: every TCP connection of a host or of namespaces, sampled over time.
//!
//! In: [`MonitorOptions`] (duration, interval, namespaces, `--pid`, `--port`, whether to run
//! the setsockopt audit) and a stop flag. Out: a [`Monitor`]: the [`SocketsReport`] — per
//! connection its owner, bytes moved, throughput, mean RTT and windows, the shares of busy
//! time limited by the receiver's window and by the send buffer, zero-window readings, flags,
//! and the peer's owner and SO_RCVBUF setting when the other end was sampled too — and every
//! connection's TCP_INFO readings for the store.
//!
//! Each namespace gets its own netlink socket (opened inside it with `setns`); the owner of a
//! socket is found by its inode in `/proc/*/fd`. The audit runs for the whole sampling, so it
//! sees options set by connections opened meanwhile.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tailhunt_model::evidence::put_evidence;
use tailhunt_model::{ClockOrigin, Labels, SeriesSink, SinkError};

use tailhunt_model::evidence::sock::{
    AuditResult, ConnectionCounts, ConnectionReport, Process, SocketsReport, SockoptEvent, TcpState,
};

use crate::audit::Audit;
use crate::diag::{Diag, DiagSocket};
use crate::error::SockError;
use crate::kernel::read_context;
use crate::netns::within;
use crate::owners::{process_of, Owners};
use crate::transfer::sampler::receiver_window_share;
use crate::transfer::Reading;

/// Shares of busy time at or above this flag a connection. The kernel's limited-time clocks
/// stop whenever pacing or TCP small queues end a write loop, so a connection held at its
/// window all along reads about 40% with BBR; 25% is already a lot.
pub const LIMITED_SHARE: f64 = 0.25;
/// Connections that sent less say little about windows.
pub const MIN_FLAG_BYTES: u64 = 256 * 1024;

/// What to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorOptions {
    /// How long.
    pub duration: Duration,
    /// How often.
    pub interval: Duration,
    /// Namespaces (`ip netns` names); empty: the caller's own.
    pub netns: Vec<String>,
    /// Only sockets of this process.
    pub pid: Option<u32>,
    /// Only connections with this port at either end.
    pub port: Option<u16>,
    /// Run the setsockopt audit (eBPF).
    pub audit: bool,
}

/// The report and each connection's readings (labels `netns`, `flow`).
#[derive(Debug, Clone)]
pub struct Monitor {
    /// The report.
    pub report: SocketsReport,
    /// Readings per connection that moved data.
    pub series: Vec<(Labels, Vec<Reading>)>,
}

impl Monitor {
    /// Records the sampling into a run: each connection's TCP_INFO series and the `sockets`
    /// document.
    pub fn record(&self, sink: &mut dyn SeriesSink) -> Result<(), SinkError> {
        for (labels, readings) in &self.series {
            crate::transfer::sampler::write_series(sink, labels, readings)?;
        }
        put_evidence(sink, &self.report)
    }
}

struct Tracked {
    ns: usize,
    last: DiagSocket,
    readings: Vec<Reading>,
}

/// Samples until `duration` passes or `stop` is set; `started` is called once sampling (and
/// the audit) is running.
pub fn run(
    opts: &MonitorOptions,
    stop: &AtomicBool,
    started: impl FnOnce(),
) -> Result<Monitor, SockError> {
    if let Some(pid) = opts.pid {
        process_of(pid).ok_or(SockError::UnknownPid(pid))?;
    }
    let names: Vec<Option<&str>> = if opts.netns.is_empty() {
        vec![None]
    } else {
        opts.netns.iter().map(|n| Some(n.as_str())).collect()
    };
    let mut diags = Vec::new();
    let mut kernel = None;
    for n in &names {
        let (d, k) = within(*n, || Ok((Diag::open()?, read_context())))?;
        diags.push(d);
        kernel.get_or_insert(k);
    }
    let audit = if opts.audit {
        Some(Audit::start(opts.pid)?)
    } else {
        None
    };
    let mut owners = Owners::scan(opts.pid);
    let mut tracked: BTreeMap<(usize, u64), Tracked> = BTreeMap::new();
    started();
    let begin = Instant::now();
    let mut rounds = 0u64;
    let mut last_scan = Instant::now();
    loop {
        sample_round(&diags, opts, &mut owners, &mut last_scan, &mut tracked)?;
        rounds += 1;
        let due = begin + opts.interval * rounds as u32;
        if stop.load(Ordering::SeqCst) || begin.elapsed() >= opts.duration {
            break;
        }
        while Instant::now() < due && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(
                due.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50)),
            );
        }
    }
    let audit = audit.map(Audit::stop).transpose()?;
    let ns_name = |i: usize| names[i].unwrap_or("host").to_string();
    let mut connections: Vec<ConnectionReport> = tracked
        .values()
        .map(|t| connection(t, ns_name(t.ns), &owners))
        .collect();
    link_peers(&mut connections, audit.as_ref());
    connections.sort_by_key(|c| std::cmp::Reverse(c.bytes_sent + c.bytes_received));
    let series = tracked
        .values()
        .filter(|t| moved(&t.readings) > 0)
        .map(|t| {
            let mut l = Labels::new();
            l.insert("netns".into(), ns_name(t.ns));
            l.insert(
                "flow".into(),
                format!("{} -> {}", t.last.local, t.last.peer),
            );
            (l, t.readings.clone())
        })
        .collect();
    let audit = audit.map(|mut a| {
        for e in a
            .events
            .iter_mut()
            .filter(|e| e.peer.is_none() && e.inode != 0)
        {
            e.peer = connections
                .iter()
                .find(|c| c.inode == e.inode)
                .map(|c| c.peer.clone());
        }
        a
    });
    Ok(Monitor {
        report: SocketsReport {
            namespaces: names
                .iter()
                .map(|n| n.unwrap_or("host").to_string())
                .collect(),
            interval_ns: opts.interval.as_nanos() as u64,
            duration_ns: begin.elapsed().as_nanos() as u64,
            rounds,
            pid: opts.pid,
            port: opts.port,
            kernel: kernel.unwrap_or_default(),
            counts: ConnectionCounts::of(&connections),
            connections,
            audit,
        },
        series,
    })
}

/// An established connection with data outstanding and a peer window of zero (a SYN in
/// flight has no window yet).
pub fn zero_window(t: &crate::tcp_info::TcpInfo) -> bool {
    t.state == crate::tcp_info::TCP_ESTABLISHED && t.snd_wnd == Some(0) && t.unacked > 0
}

/// One reading of every namespace's sockets into `tracked` (keyed by namespace and socket
/// cookie), rescanning owners (at most every 200 ms) when an unknown socket shows up.
fn sample_round(
    diags: &[Diag],
    opts: &MonitorOptions,
    owners: &mut Owners,
    last_scan: &mut Instant,
    tracked: &mut BTreeMap<(usize, u64), Tracked>,
) -> Result<(), SockError> {
    let t_ns = ClockOrigin::now().mono_ns;
    for (i, d) in diags.iter().enumerate() {
        for s in d.dump()? {
            if opts
                .port
                .is_some_and(|p| s.local.port() != p && s.peer.port() != p)
            {
                continue;
            }
            if s.inode != 0
                && owners.get(s.inode).is_none()
                && last_scan.elapsed() > Duration::from_millis(200)
            {
                owners.merge(Owners::scan(opts.pid));
                *last_scan = Instant::now();
            }
            if opts.pid.is_some() && owners.get(s.inode).is_none() {
                continue;
            }
            let t = tracked.entry((i, s.cookie)).or_insert_with(|| Tracked {
                ns: i,
                last: s.clone(),
                readings: Vec::new(),
            });
            if let Some(info) = s.info {
                t.readings.push(Reading { t_ns, info });
            }
            // TIME_WAIT sockets have no inode: keep the last full view, update the state.
            if s.inode != 0 {
                t.last = s;
            } else {
                t.last.state = s.state;
            }
        }
    }
    Ok(())
}

fn moved(r: &[Reading]) -> u64 {
    let get = |f: fn(&Reading) -> Option<u64>| match (r.first().and_then(f), r.last().and_then(f)) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };
    get(|x| x.info.bytes_acked) + get(|x| x.info.bytes_received)
}

fn connection(t: &Tracked, netns: String, owners: &Owners) -> ConnectionReport {
    let r = &t.readings;
    let delta = |f: fn(&Reading) -> Option<u64>| match (r.first().and_then(f), r.last().and_then(f))
    {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let bytes_sent = delta(|x| x.info.bytes_acked).unwrap_or(0);
    let bytes_received = delta(|x| x.info.bytes_received).unwrap_or(0);
    // Data moved from the reading before the first increase of bytes_acked to the first one at
    // its final value.
    // The direction that moved more: acknowledged bytes for a sender, received for a receiver.
    let acked = |x: &Reading| {
        if bytes_received > bytes_sent {
            x.info.bytes_received.unwrap_or(0)
        } else {
            x.info.bytes_acked.unwrap_or(0)
        }
    };
    let start = r.windows(2).position(|w| acked(&w[1]) > acked(&w[0]));
    let end = r
        .last()
        .and_then(|l| r.iter().position(|x| acked(x) == acked(l)));
    let active: &[Reading] = match (start, end) {
        (Some(s), Some(e)) if e > s => &r[s..=e],
        _ => &[],
    };
    let throughput_bps = match (active.first(), active.last()) {
        (Some(a), Some(b)) if b.t_ns > a.t_ns => {
            Some((acked(b) - acked(a)) as f64 * 8.0 / ((b.t_ns - a.t_ns) as f64 / 1e9))
        }
        _ => None,
    };
    let busy = delta(|x| x.info.busy_ns).filter(|b| *b > 0);
    let share = |f: fn(&Reading) -> Option<u64>| Some(delta(f)? as f64 / busy? as f64);
    let over = if active.is_empty() {
        r.as_slice()
    } else {
        active
    };
    let mean = |f: fn(&Reading) -> Option<f64>| {
        let v: Vec<f64> = over.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let rwnd_limited_share = share(|x| x.info.rwnd_limited_ns);
    let sndbuf_limited_share = share(|x| x.info.sndbuf_limited_ns);
    let zero_window_readings = r.iter().filter(|x| zero_window(&x.info)).count() as u64;
    let mut flags = Vec::new();
    if bytes_sent >= MIN_FLAG_BYTES && rwnd_limited_share.is_some_and(|s| s >= LIMITED_SHARE) {
        flags.push("receive-window-limited".to_string());
    }
    if bytes_sent >= MIN_FLAG_BYTES && sndbuf_limited_share.is_some_and(|s| s >= LIMITED_SHARE) {
        flags.push("sndbuf-limited".to_string());
    }
    let receiver_window_share = receiver_window_share(r);
    if bytes_received >= MIN_FLAG_BYTES
        && receiver_window_share.is_some_and(|s| s >= RECEIVER_SHARE)
    {
        flags.push("receive-window-limited".to_string());
    }
    if zero_window_readings > 0 {
        flags.push("zero-window".to_string());
    }
    let s = &t.last;
    ConnectionReport {
        netns,
        flow: format!("{} -> {}", s.local, s.peer),
        local: s.local.to_string(),
        peer: s.peer.to_string(),
        inode: s.inode,
        owner: owners.get(s.inode).cloned(),
        state: TcpState(s.state),
        readings: r.len() as u64,
        range_ns: r.first().zip(r.last()).map(|(a, b)| (a.t_ns, b.t_ns)),
        bytes_sent,
        bytes_received,
        throughput_bps,
        rtt_mean_ns: mean(|x| Some(x.info.rtt_ns as f64)).map(|v| v as u64),
        snd_wnd_mean_bytes: mean(|x| x.info.snd_wnd.map(f64::from)),
        rcv_wnd_mean_bytes: mean(|x| x.info.rcv_wnd.map(f64::from)),
        rcvbuf: s.rcvbuf,
        sndbuf: s.sndbuf,
        rwnd_limited_share,
        sndbuf_limited_share,
        receiver_window_share,
        rcv_rtt_mean_ns: mean(|x| (x.info.rcv_rtt_ns > 0).then_some(x.info.rcv_rtt_ns as f64))
            .map(|v| v as u64),
        zero_window_readings,
        flags,
        peer_sampled: false,
        peer_owner: None,
        peer_rcvbuf_set: None,
        options_set: Vec::new(),
    }
}

/// Half the receiving intervals at the window's rate flag a receiver.
pub const RECEIVER_SHARE: f64 = 0.5;

/// Joins each connection with its other end (same addresses, swapped) and with the audit.
fn link_peers(conns: &mut [ConnectionReport], audit: Option<&AuditResult>) {
    let events: &[SockoptEvent] = audit.map_or(&[], |a| &a.events);
    let on = |inode: u64| -> Vec<SockoptEvent> {
        events
            .iter()
            .filter(|e| inode != 0 && e.inode == inode)
            .cloned()
            .collect()
    };
    let snapshot: Vec<(String, String, u64, Option<Process>)> = conns
        .iter()
        .map(|c| (c.local.clone(), c.peer.clone(), c.inode, c.owner.clone()))
        .collect();
    for c in conns.iter_mut() {
        let peer = c.peer.clone();
        c.options_set = on(c.inode)
            .into_iter()
            .map(|mut e| {
                e.peer.get_or_insert_with(|| peer.clone());
                e
            })
            .collect();
        if let Some((_, _, inode, owner)) = snapshot
            .iter()
            .find(|(l, p, _, _)| *l == c.peer && *p == c.local)
        {
            c.peer_sampled = true;
            c.peer_owner = owner.clone();
            c.peer_rcvbuf_set = on(*inode)
                .into_iter()
                .rev()
                .find(|e| e.option == "SO_RCVBUF" || e.option == "SO_RCVBUFFORCE")
                .map(|mut e| {
                    e.peer.get_or_insert_with(|| c.local.clone());
                    e
                });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp_info::{TcpInfo, TCP_ESTABLISHED};

    /// Readings 100 ms apart of a receiver advertising 80 kB at an 80 ms RTT that gets
    /// `per_interval` bytes each interval.
    fn receiver(per_interval: u64) -> Vec<Reading> {
        (0..20)
            .map(|i| Reading {
                t_ns: i * 100_000_000,
                info: TcpInfo {
                    state: TCP_ESTABLISHED,
                    rtt_ns: 80_000_000,
                    rcv_rtt_ns: 80_000_000,
                    rcv_wnd: Some(80_000),
                    bytes_received: Some(i as u64 * per_interval),
                    bytes_acked: Some(1),
                    ..TcpInfo::default()
                },
            })
            .collect()
    }

    #[test]
    fn a_receiver_getting_its_window_per_rtt_is_flagged_and_a_slower_one_is_not() {
        // 80 kB per 80 ms is 100 kB per 100 ms.
        assert_eq!(receiver_window_share(&receiver(100_000)), Some(1.0));
        assert_eq!(receiver_window_share(&receiver(40_000)), Some(0.0));
        assert_eq!(receiver_window_share(&receiver(0)), None);
        let t = Tracked {
            ns: 0,
            last: DiagSocket {
                state: TCP_ESTABLISHED,
                local: "198.18.12.1:5000".parse().unwrap(),
                peer: "198.18.12.2:7400".parse().unwrap(),
                inode: 7,
                uid: 0,
                cookie: 1,
                info: None,
                rcvbuf: Some(131_072),
                sndbuf: None,
                rmem_alloc: None,
                cong: None,
            },
            readings: receiver(100_000),
        };
        let c = connection(&t, "host".into(), &Owners::default());
        assert_eq!(c.bytes_received, 1_900_000);
        assert_eq!(c.flags, vec!["receive-window-limited".to_string()]);
        assert!((c.throughput_bps.unwrap() - 8e6).abs() < 1.0);
    }

    #[test]
    fn a_syn_in_flight_is_not_a_zero_window() {
        let syn = TcpInfo {
            state: 2,
            unacked: 1,
            snd_wnd: Some(0),
            ..TcpInfo::default()
        };
        assert!(!zero_window(&syn));
        assert!(zero_window(&TcpInfo {
            state: TCP_ESTABLISHED,
            ..syn
        }));
    }
}
