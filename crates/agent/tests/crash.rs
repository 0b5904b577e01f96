//! `kill -9` of a process that is queueing batches for an unreachable receiver loses nothing
//! it had queued: a new process on the same queue delivers every batch to a real
//! VictoriaMetrics once it is up.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use tailhunt_agent::remote_write::{Batch, EndpointConfig, HistogramMode, RemoteWriter};

const QUEUE_ENV: &str = "TAILHUNT_AGENT_CRASH_QUEUE";
const URL_ENV: &str = "TAILHUNT_AGENT_CRASH_URL";

fn batch(n: u64) -> Batch {
    counter_batch("th_crash_batches", n)
}

fn endpoint(url: String, queue: std::path::PathBuf) -> EndpointConfig {
    let mut c = EndpointConfig::new("vm", &url, HistogramMode::Vmrange, queue);
    c.backoff_min = Duration::from_millis(100);
    c.backoff_max = Duration::from_millis(500);
    c
}

/// The child: queues batch after batch and records, after each push returned (the batch is
/// on disk), how many it queued. Run by the parent test only.
#[test]
#[ignore = "run by killing_the_queueing_process_loses_nothing_it_queued"]
fn crash_child_queues_until_killed() {
    let (Ok(queue), Ok(url)) = (std::env::var(QUEUE_ENV), std::env::var(URL_ENV)) else {
        return;
    };
    let queue = std::path::PathBuf::from(queue);
    let progress = queue.with_extension("progress");
    let writer = RemoteWriter::start(vec![endpoint(url, queue)]).unwrap();
    for n in 1.. {
        assert!(writer.push(&batch(n)).is_empty());
        std::fs::write(&progress, n.to_string()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn killing_the_queueing_process_loses_nothing_it_queued() {
    if binary("victoria-metrics").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/api/v1/write");
    let queue = dir.path().join("queue");
    let progress = queue.with_extension("progress");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "crash_child_queues_until_killed"])
        .env(QUEUE_ENV, &queue)
        .env(URL_ENV, &url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let read = || {
        std::fs::read_to_string(&progress)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let until = Instant::now() + Duration::from_secs(15);
    while read() < 50 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let queued = read();
    assert!(queued >= 50, "the child queued only {queued} batches");

    let vm = victoria(&dir.path().join("vm"), port).unwrap();
    let writer = RemoteWriter::start(vec![endpoint(url, queue)]).unwrap();
    assert!(
        writer.wait_drained(Duration::from_secs(15)),
        "{:?}",
        writer.status()
    );
    let q = "count_over_time(th_crash_batches_total[10m])";
    let until = Instant::now() + Duration::from_secs(10);
    let mut count = query(&vm.url, q);
    while count.first().is_none_or(|&c| c < queued as f64) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(250));
        count = query(&vm.url, q);
    }
    let max = query_until_eq(
        &vm.url,
        "max_over_time(th_crash_batches_total[10m])",
        &count,
        10,
    );
    // Every batch the child had queued arrived (one more may have been synced just before the
    // kill), with no gap: values 1..=count each once.
    assert_eq!(count.len(), 1);
    assert!(
        count[0] >= queued as f64,
        "{} of {queued} batches arrived",
        count[0]
    );
    assert_eq!(max, count, "a gap in the delivered batches");
    eprintln!(
        "queued before kill -9: {queued}; delivered after restart: {}",
        count[0]
    );
}
