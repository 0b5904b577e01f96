//! A pass on several threads gives what a pass on one gives: the same report, inputs, series
//! (samples in the same order) and kept bins, on a capture set built to reach every part
//! that depends on order: sweeps that retire connections near a burst, ports reused before
//! and after their connection retired, unanswered requests, UDP, frames that do not decode,
//! out-of-order timestamps, a file cut in the middle of the set and a missing one.

mod tcp_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use tailhunt_model::Series;
use tailhunt_pcap::analysis::{AnalysisConfig, Analyzer};
use tailhunt_pcap::bins::Bin;
use tailhunt_pcap::decode::flags::{ACK, FIN, PSH, SYN};
use tailhunt_pcap::read::ReadError;
use tailhunt_pcap::run::{analyse_threads, Outcome};
use tailhunt_pcap::{FileSet, LinkType, PacketSource, PcapWriter, SourceSet};

use tcp_support::{packet, C, MS, S, SP};

/// A second client, for a second `to` channel.
const C2: [u8; 4] = [198, 18, 0, 3];

/// An IPv4+UDP datagram of `len` payload bytes.
fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let total = 28 + len;
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..26].copy_from_slice(&((8 + len) as u16).to_be_bytes());
    p
}

/// One short connection of `client` from `port` at `t`: handshake, a 100 B request,
/// `segments` reply segments `gap` apart, FINs and the last ACK. None: the request goes
/// unanswered and the server's FIN is never acknowledged (the connection did not end
/// cleanly, so it is held a second after its close).
fn connection(
    out: &mut Vec<(i64, Vec<u8>)>,
    client: [u8; 4],
    t: i64,
    port: u16,
    segments: u32,
    gap: i64,
) {
    let (c, s) = (1000u32 + port as u32, 5000u32);
    let mut p = |at: i64, data: Vec<u8>| out.push((at, data));
    p(
        t,
        packet(client, S, port, SP, c, 0, SYN, 65535, Some(7), None, 0),
    );
    p(
        t + 20_000,
        packet(
            S,
            client,
            SP,
            port,
            s,
            c + 1,
            SYN | ACK,
            65535,
            Some(7),
            None,
            0,
        ),
    );
    p(
        t + 40_000,
        packet(client, S, port, SP, c + 1, s + 1, ACK, 512, None, None, 0),
    );
    p(
        t + 50_000,
        packet(
            client,
            S,
            port,
            SP,
            c + 1,
            s + 1,
            ACK | PSH,
            512,
            None,
            None,
            100,
        ),
    );
    let (mut at, mut seq) = (t + 100_000, s + 1);
    for _ in 0..segments {
        p(
            at,
            packet(
                S,
                client,
                SP,
                port,
                seq,
                c + 101,
                ACK,
                512,
                None,
                None,
                1448,
            ),
        );
        seq += 1448;
        at += gap;
    }
    p(
        at,
        packet(
            client,
            S,
            port,
            SP,
            c + 101,
            seq,
            ACK | FIN,
            512,
            None,
            None,
            0,
        ),
    );
    p(
        at + 20_000,
        packet(
            S,
            client,
            SP,
            port,
            seq,
            c + 102,
            ACK | FIN,
            512,
            None,
            None,
            0,
        ),
    );
    if segments == 0 {
        return;
    }
    p(
        at + 40_000,
        packet(
            client,
            S,
            port,
            SP,
            c + 102,
            seq + 1,
            ACK,
            512,
            None,
            None,
            0,
        ),
    );
}

/// About 290,000 frames over 6 s: a background connection with TCP timestamps, a burst of
/// twenty connections at 1 s, 24,000 short connections on 3,000 ports (reused every ~0.75 s,
/// before their connection retires, and again after), every tenth unanswered, UDP, frames
/// that do not decode and timestamps a little out of order.
fn frames() -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let bg = 19_999u16;
    out.push((
        0,
        packet(C, S, bg, SP, 1, 0, SYN, 65535, Some(7), Some((1, 0)), 0),
    ));
    let mut seq = 2u32;
    for k in 0..150_000i64 {
        let t = 20_000 + k * 40_000;
        let tsval = (t / MS) as u32 + 1;
        let p = packet(
            S,
            C,
            SP,
            bg,
            seq,
            2,
            ACK | PSH,
            512,
            None,
            Some((tsval, 1)),
            60,
        );
        out.push((t, p));
        seq += 60;
        if k % 50 == 0 {
            out.push((t + 5_000, udp(C2, S, 5353, 53, 40 + (k % 7) as usize)));
        }
        if k % 997 == 0 {
            out.push((t + 7_000, vec![0x45, 0, 0]));
        }
    }
    for b in 0..20 {
        connection(
            &mut out,
            C,
            1_000 * MS + b * 1_000,
            30_000 + b as u16,
            7,
            1_400_000,
        );
    }
    for i in 0..24_000i64 {
        let client = if i % 3 == 0 { C2 } else { C };
        let segments = if i % 10 == 0 { 0 } else { 1 + (i % 4) as u32 };
        let port = 40_000 + (i % 3_000) as u16;
        connection(
            &mut out,
            client,
            100 * MS + i * 250_000,
            port,
            segments,
            30_000,
        );
    }
    out.sort_by_key(|(t, _)| *t);
    // A few frames a little late, as per-CPU capture buffers deliver them.
    for i in (1000..out.len() - 1).step_by(5003) {
        out.swap(i, i + 1);
    }
    out
}

/// Writes `frames` into three files, cuts the second in the middle of a record, and names a
/// fourth that is not there.
fn capture_set(dir: &Path) -> Vec<PathBuf> {
    let all = frames();
    let parts = all.len() / 3;
    let mut files = Vec::new();
    for (n, chunk) in all.chunks(parts + 1).enumerate() {
        let path = dir.join(format!("part{n}.pcap"));
        let f = std::fs::File::create(&path).unwrap();
        let mut w = PcapWriter::new(std::io::BufWriter::new(f), LinkType::RawIp, 65535).unwrap();
        for (t, data) in chunk {
            w.write_packet(*t, data.len() as u32, data).unwrap();
        }
        w.finish().unwrap();
        files.push(path);
    }
    let cut = std::fs::read(&files[1]).unwrap();
    std::fs::write(&files[1], &cut[..cut.len() * 2 / 3 + 7]).unwrap();
    files.push(dir.join("missing.pcap"));
    files
}

/// Everything a pass leaves that a reader can see.
#[derive(Debug, PartialEq)]
struct Seen {
    report: String,
    inputs: String,
    stopped: bool,
    open_flows: usize,
    series: Vec<Series>,
    flow_bins: Vec<(usize, SocketAddr, SocketAddr, Vec<Bin>)>,
    points: Vec<(usize, String)>,
}

fn seen(outcome: Outcome, an: &Analyzer, series: Vec<Series>) -> Seen {
    let points = outcome
        .report
        .flows
        .iter()
        .filter_map(|f| {
            an.window_points(f.id)
                .map(|p| (f.id, format!("{:?}", p.to_vec())))
        })
        .collect();
    Seen {
        report: serde_json::to_string(&outcome.report).unwrap(),
        inputs: serde_json::to_string(&outcome.inputs).unwrap(),
        stopped: outcome.stopped.is_some(),
        open_flows: an.open_flows(),
        series,
        flow_bins: an
            .flow_bins()
            .map(|(i, a, b, bins)| (i, a, b, bins.bins().to_vec()))
            .collect(),
        points,
    }
}

fn run(sources: &mut (dyn SourceSet + Send), cfg: AnalysisConfig, threads: usize) -> Seen {
    run_stopping(sources, cfg, threads, &AtomicBool::new(false))
}

fn run_stopping(
    sources: &mut (dyn SourceSet + Send),
    cfg: AnalysisConfig,
    threads: usize,
    stop: &AtomicBool,
) -> Seen {
    let mut series: Vec<Series> = Vec::new();
    let (outcome, an) =
        analyse_threads(sources, cfg, threads, &mut series, stop, &mut |_| {}).unwrap();
    seen(outcome, &an, series)
}

fn configs() -> [AnalysisConfig; 3] {
    let link = AnalysisConfig {
        link_rate_bps: Some(100_000_000),
        ..AnalysisConfig::default()
    };
    [
        link,
        AnalysisConfig {
            keep_flow_bins: true,
            ..link
        },
        AnalysisConfig::default(),
    ]
}

#[test]
fn two_and_three_threads_give_what_one_gives() {
    let dir = tempfile::tempdir().unwrap();
    let files = capture_set(dir.path());
    for cfg in configs() {
        let one = run(&mut FileSet::new(files.clone()), cfg, 1);
        // The set reaches what it is built for.
        let report: serde_json::Value = serde_json::from_str(&one.report).unwrap();
        let flows = report["flows"].as_array().unwrap();
        assert!(flows.len() > 15_000, "{} flows", flows.len());
        assert!(report["skipped"].as_object().is_some_and(|s| !s.is_empty()));
        assert!(report["out_of_order"].as_u64().unwrap() > 0);
        let udp = flows.iter().filter(|f| f["tcp"].is_null()).count();
        assert!(udp > 0);
        let reused = flows
            .iter()
            .filter(|f| f["tcp"]["ports_reused"].as_bool() == Some(true))
            .count();
        // The unanswered ones are held a second after their close, so their ports come
        // round again while they are (43 of them with a sweep every 10 ms).
        assert!(reused > 20, "{reused} connections ended by port reuse");
        assert!(
            one.open_flows < flows.len() / 2,
            "{} flows held",
            one.open_flows
        );
        let inputs: serde_json::Value = serde_json::from_str(&one.inputs).unwrap();
        let statuses: Vec<&str> = inputs
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["status"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(statuses.len(), 4);
        assert_ne!(
            statuses[1], statuses[0],
            "the second file is cut: {statuses:?}"
        );
        if cfg.link_rate_bps.is_some() {
            assert!(!report["bursts"].as_array().unwrap().is_empty());
            // The bystanders' delays: the set reaches them too.
            let delays = one
                .series
                .iter()
                .find(|s| s.name == "queue_delay")
                .and_then(|s| s.samples())
                .map_or(0, <[_]>::len);
            assert!(delays > 50, "{delays} queue delays");
        }
        // The reader and one, two and four workers.
        for threads in [2, 3, 5] {
            let many = run(&mut FileSet::new(files.clone()), cfg, threads);
            assert!(
                one == many,
                "{threads} threads differ ({cfg:?}): {}",
                diff(&one, &many)
            );
        }
    }
}

/// The first difference, briefly (the whole of either is far too long to print).
fn diff(a: &Seen, b: &Seen) -> String {
    if a.report != b.report {
        let at = a
            .report
            .bytes()
            .zip(b.report.bytes())
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        let from = at.saturating_sub(200);
        return format!(
            "report at byte {at}:\n{}\n{}",
            &a.report[from..(at + 200).min(a.report.len())],
            &b.report[from..(at + 200).min(b.report.len())]
        );
    }
    if a.series.len() != b.series.len() {
        return format!("{} series against {}", a.series.len(), b.series.len());
    }
    for (x, y) in a.series.iter().zip(&b.series) {
        if x != y {
            return format!(
                "series {} {:?} / {} {:?}",
                x.name, x.labels, y.name, y.labels
            );
        }
    }
    if a.flow_bins != b.flow_bins {
        return "flow bins".into();
    }
    if a.points != b.points {
        return "window points".into();
    }
    format!("inputs {} / {}", a.inputs, b.inputs)
}

/// Files that ask for the pass to stop when the second is opened: the stop lands at the same
/// frame whatever the threads (the reader checks for it where one thread does).
struct StopAtSecond<'a> {
    files: FileSet,
    stop: &'a AtomicBool,
}

impl SourceSet for StopAtSecond<'_> {
    fn count(&self) -> usize {
        self.files.count()
    }

    fn name(&self, i: usize) -> String {
        self.files.name(i)
    }

    fn open(&mut self, i: usize) -> Result<&mut dyn PacketSource, ReadError> {
        if i == 1 {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.files.open(i)
    }
}

#[test]
fn a_stop_request_keeps_the_same_partial_result() {
    let dir = tempfile::tempdir().unwrap();
    let files = capture_set(dir.path());
    let cfg = configs()[0];
    let mut results = Vec::new();
    for threads in [1, 2] {
        let stop = AtomicBool::new(false);
        let mut set = StopAtSecond {
            files: FileSet::new(files.clone()),
            stop: &stop,
        };
        results.push(run_stopping(&mut set, cfg, threads, &stop));
    }
    assert!(results[0].stopped);
    assert!(
        results[0] == results[1],
        "{}",
        diff(&results[0], &results[1])
    );
}

/// A sink that stores samples until it has taken `room`, then refuses (a disk gone full).
struct FillsUp {
    taken: usize,
    room: usize,
}

impl tailhunt_model::SeriesSink for FillsUp {
    fn open_series(
        &mut self,
        _meta: &tailhunt_model::SeriesMeta,
    ) -> Result<usize, tailhunt_model::SinkError> {
        Ok(0)
    }

    fn push_samples(
        &mut self,
        _series: usize,
        samples: &[tailhunt_model::Sample],
    ) -> Result<(), tailhunt_model::SinkError> {
        self.taken += samples.len();
        if self.taken > self.room {
            return Err("no space left on the store's disk".into());
        }
        Ok(())
    }

    fn push_histogram(
        &mut self,
        _series: usize,
        _h: &tailhunt_model::IntervalHistogram,
    ) -> Result<(), tailhunt_model::SinkError> {
        Ok(())
    }
}

/// A sink that fails in the middle of the pass ends it there, with the sink's error, on any
/// number of threads: the threads stop, nothing hangs or panics.
#[test]
fn a_sink_that_fails_mid_pass_ends_it_with_its_error_on_any_threads() {
    let dir = tempfile::tempdir().unwrap();
    let files = capture_set(dir.path());
    let cfg = configs()[0];
    for threads in [1, 2, 3] {
        let mut sink = FillsUp {
            taken: 0,
            room: 2_000,
        };
        let stop = AtomicBool::new(false);
        let got = analyse_threads(
            &mut FileSet::new(files.clone()),
            cfg,
            threads,
            &mut sink,
            &stop,
            &mut |_| {},
        );
        match got {
            Err(tailhunt_pcap::run::RunError::Sink(e)) => {
                assert!(e.to_string().contains("no space left"), "{threads}: {e}")
            }
            Err(e) => panic!("{threads} threads: another error: {e}"),
            Ok(_) => panic!("{threads} threads: the pass ended well with a full sink"),
        }
        // It stopped at the first refusal, not at the end of the files.
        assert!(
            sink.taken > sink.room && sink.taken < sink.room + 4_096,
            "{threads} threads: {} samples offered",
            sink.taken
        );
    }
}
