//! Prometheus remote write 1.0 to several endpoints, each behind its own on-disk queue.
//!
//! In: [`Batch`]es built from a [`Snapshot`](crate::exposition::Snapshot)
//! ([`Batch::from_snapshot`]) and the endpoints' [`EndpointConfig`]s. Out: snappy-compressed
//! protobuf `WriteRequest`s POSTed to each endpoint by a thread of its own, and an
//! [`EndpointStatus`] per endpoint (what was sent, queued, dropped, rejected, and a log of
//! notable events for the caller to show).
//!
//! A batch is queued once per endpoint in an endpoint-neutral form (histograms as tailhunt's
//! own encoding), and rendered when sent, so a change of histogram mode also applies to what
//! is already queued. Per batch, floats (counters, gauges, findings) and histograms go in two
//! separate requests, so a receiver refusing one kind still gets the other. Histograms are
//! sent as configured per endpoint ([`HistogramMode`]):
//!
//! - `classic`: `NAME_bucket{le}` cumulative series on the bucket set of
//!   [`crate::exposition::CLASSIC_BOUNDS_SECONDS`], plus `NAME_sum` and `NAME_count`;
//! - `vmrange`: VictoriaMetrics' `NAME_bucket{vmrange="LOW...HIGH"}` series, one per
//!   non-empty bucket of tailhunt's layout coarsened to [`VMRANGE_SUB_BITS`] sub-bucket bits
//!   (32 per power of two, 2.2% wide; the coarse edges are exact tailhunt edges), plus
//!   `_sum` and `_count`;
//! - `native`: Prometheus native histograms (schema [`crate::exposition::NATIVE_SCHEMA`]).
//!   VictoriaMetrics 1.79 answers 204 to them and drops them without a word, so no fall back
//!   can happen there: configure `vmrange` for it.
//!
//! Answers: 2xx is delivered; 5xx, 429, 401 and 403 (credentials: fixed by the operator, the
//! batches still wanted), timeouts and connection errors are retried with exponential backoff
//! (the batch stays queued); other 4xx are rejections: reported with the body's message,
//! counted, and not retried. A native-histogram request that fails with a message naming native
//! histograms (Prometheus without `--enable-feature=native-histograms` answers 500 for it)
//! switches that endpoint to `classic` for good, says so in its events, and resends as classic.
//!
//! An `https://` endpoint checks the receiver's certificate against its `ca_file` or the
//! system's roots (rustls with ring); a CA file that cannot be used stops [`RemoteWriter::start`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prost::Message as _;
use serde::{Deserialize, Serialize};

use crate::exposition::ScalarMetric;
use crate::proto::WriteRequest;
use crate::queue::{Queue, QueueError, QueueStats};

mod batch;
mod tls;
mod worker;
pub use batch::{render, vmrange_buckets, Batch, QueuedFloat, QueuedHistogram, VMRANGE_SUB_BITS};
use worker::Worker;

/// How an endpoint receives histograms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HistogramMode {
    /// Cumulative `le` buckets.
    Classic,
    /// VictoriaMetrics `vmrange` buckets.
    Vmrange,
    /// Prometheus native histograms.
    Native,
}

/// One remote-write endpoint.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// A short name for messages.
    pub name: String,
    /// The write URL, e.g. `http://127.0.0.1:9090/api/v1/write` or `https://...`.
    pub url: String,
    /// For an `https://` URL: the PEM file of the CA that signed the receiver's certificate
    /// (without it, the system's trusted roots).
    pub ca_file: Option<PathBuf>,
    /// How histograms are sent.
    pub mode: HistogramMode,
    /// Bearer token sent as `Authorization`, if the receiver wants one.
    pub bearer_token: Option<String>,
    /// Directory of this endpoint's queue (one directory per endpoint).
    pub queue_dir: PathBuf,
    /// Bound of the queue in bytes.
    pub queue_max_bytes: u64,
    /// Timeout of one request.
    pub timeout: Duration,
    /// First retry delay; doubled after each failure up to `backoff_max`.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
}

impl EndpointConfig {
    /// An endpoint with the defaults: 64 MiB queue, 10 s timeout, backoff 250 ms .. 30 s.
    pub fn new(name: &str, url: &str, mode: HistogramMode, queue_dir: PathBuf) -> EndpointConfig {
        EndpointConfig {
            name: name.to_string(),
            url: url.to_string(),
            ca_file: None,
            mode,
            bearer_token: None,
            queue_dir,
            queue_max_bytes: 64 << 20,
            timeout: Duration::from_secs(10),
            backoff_min: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
        }
    }
}

/// Remote-write failures at start-up or when queueing.
#[derive(Debug, thiserror::Error)]
pub enum RemoteWriteError {
    /// The endpoint's URL is not `http://HOST:PORT/PATH` or `https://...`.
    #[error("endpoint {name}: url {url:?} must start with http:// or https://")]
    BadUrl {
        /// Endpoint name.
        name: String,
        /// The URL.
        url: String,
    },
    /// The queue could not be opened or written.
    #[error("endpoint {name}: {source}")]
    Queue {
        /// Endpoint name.
        name: String,
        /// What failed.
        source: QueueError,
    },
    /// The TLS settings cannot be used (a CA file missing or without a certificate).
    #[error("endpoint {name}: {message}")]
    Tls {
        /// Endpoint name.
        name: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// Two endpoints share a queue directory.
    #[error("endpoints {0} and {1} use the same queue directory: give each its own")]
    SharedQueue(String, String),
    /// A stored batch could not be decoded.
    #[error("a queued batch is not readable: {0}")]
    Decode(String),
}

/// What a receiver did with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// Stored (2xx).
    Delivered,
    /// Worth retrying: a 5xx, a timeout or a connection error.
    Retry(String),
    /// Refused for good (4xx): the message.
    Rejected(String),
    /// Refused because it holds native histograms.
    NativeRejected(String),
}

/// Posts one request (snappy block format, protobuf) and classifies the answer.
pub fn send(
    agent: &ureq::Agent,
    url: &str,
    token: Option<&str>,
    request: &WriteRequest,
) -> SendOutcome {
    let body = match snap::raw::Encoder::new().compress_vec(&request.encode_to_vec()) {
        Ok(b) => b,
        Err(e) => return SendOutcome::Rejected(format!("snappy compression failed: {e}")),
    };
    let has_native = request.timeseries.iter().any(|t| !t.histograms.is_empty());
    let mut req = agent
        .post(url)
        .header("Content-Encoding", "snappy")
        .header("Content-Type", "application/x-protobuf")
        .header("User-Agent", "tailhunt-agent")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0");
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    let mut resp = match req.send(&body[..]) {
        Ok(r) => r,
        Err(e) => return SendOutcome::Retry(format!("cannot reach {url}: {e}")),
    };
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        return SendOutcome::Delivered;
    }
    let text = resp
        .body_mut()
        .with_config()
        .limit(4096)
        .lossy_utf8(true)
        .read_to_string()
        .unwrap_or_default();
    let msg = format!("{url} answered {status}: {}", text.trim());
    if has_native && text.to_ascii_lowercase().contains("native histogram") {
        return SendOutcome::NativeRejected(msg);
    }
    if status == 401 || status == 403 {
        // Credentials are configuration: once fixed, the queued batches are still wanted.
        SendOutcome::Retry(format!(
            "{msg} (the receiver refuses the credentials: check the endpoint's token_file; batches stay queued)"
        ))
    } else if status >= 500 || status == 429 {
        SendOutcome::Retry(msg)
    } else {
        SendOutcome::Rejected(msg)
    }
}

/// What an endpoint did so far.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointStatus {
    /// Endpoint name.
    pub name: String,
    /// Histogram mode now (it may have fallen back to classic).
    pub mode: HistogramMode,
    /// Requests delivered.
    pub delivered_requests: u64,
    /// Batches fully handled (delivered or rejected) and removed from the queue.
    pub acknowledged_batches: u64,
    /// Failed attempts that will be retried.
    pub retries: u64,
    /// Requests the receiver refused for good.
    pub rejected_requests: u64,
    /// The queue's counters (pending, dropped because full).
    pub queue: QueueStats,
    /// The last failure, cleared on the next delivery.
    pub last_error: Option<String>,
    /// True while the queue is at its bound: the last batch queued pushed out older ones.
    pub queue_full: bool,
    /// Notable events, oldest first (the last 100): fallbacks, rejections, queue full, outages.
    pub events: Vec<String>,
    /// Events since the start (also those no longer in `events`).
    pub events_total: u64,
}

impl EndpointStatus {
    fn event(&mut self, text: String) {
        if self.events.len() >= 100 {
            self.events.remove(0);
        }
        self.events.push(text);
        self.events_total += 1;
    }
}

/// The endpoints' state as metrics, so a scraper sees a full queue or a failing receiver:
/// counters (`tailhunt_remote_write_{delivered_requests,rejected_requests,retries,
/// dropped_batches}`) and gauges (`tailhunt_remote_write_{queue_bytes,queue_batches,
/// queue_max_bytes,queue_full,native,failing}`), each labelled `endpoint`.
pub fn status_metrics(status: &[EndpointStatus]) -> (Vec<ScalarMetric>, Vec<ScalarMetric>) {
    let metric = |name: &str, help: &str, s: &EndpointStatus, value: f64| ScalarMetric {
        name: format!("tailhunt_remote_write_{name}"),
        help: help.to_string(),
        labels: vec![("endpoint".to_string(), s.name.clone())],
        value,
    };
    let mut counters = Vec::new();
    let mut gauges = Vec::new();
    for s in status {
        counters.extend([
            metric(
                "delivered_requests",
                "Requests the receiver stored.",
                s,
                s.delivered_requests as f64,
            ),
            metric(
                "rejected_requests",
                "Requests the receiver refused for good.",
                s,
                s.rejected_requests as f64,
            ),
            metric(
                "retries",
                "Failed attempts that were retried.",
                s,
                s.retries as f64,
            ),
            metric(
                "dropped_batches",
                "Batches dropped because the queue was full.",
                s,
                s.queue.dropped_records as f64,
            ),
        ]);
        gauges.extend([
            metric(
                "queue_bytes",
                "Bytes waiting in the on-disk queue.",
                s,
                s.queue.pending_bytes as f64,
            ),
            metric(
                "queue_batches",
                "Batches waiting in the on-disk queue.",
                s,
                s.queue.pending_records as f64,
            ),
            metric(
                "queue_max_bytes",
                "Bound of the on-disk queue.",
                s,
                s.queue.max_bytes as f64,
            ),
            metric(
                "queue_full",
                "1 while the queue is at its bound and new batches drop the oldest.",
                s,
                f64::from(u8::from(s.queue_full)),
            ),
            metric(
                "native",
                "1 when histograms go as native histograms.",
                s,
                f64::from(u8::from(s.mode == HistogramMode::Native)),
            ),
            metric(
                "failing",
                "1 while the last attempt failed.",
                s,
                f64::from(u8::from(s.last_error.is_some())),
            ),
        ]);
    }
    (counters, gauges)
}

struct Endpoint {
    config: EndpointConfig,
    queue: Arc<Mutex<Queue>>,
    status: Arc<Mutex<EndpointStatus>>,
    thread: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The remote writer: one queue and one sending thread per endpoint. Stops when dropped
/// (whatever is queued stays on disk for the next start).
pub struct RemoteWriter {
    endpoints: Vec<Endpoint>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for RemoteWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteWriter")
            .field("endpoints", &self.endpoints.len())
            .finish()
    }
}

/// The HTTP client of one endpoint (TLS set up for an `https://` URL).
fn client(config: &EndpointConfig) -> Result<ureq::Agent, RemoteWriteError> {
    let mut builder = ureq::Agent::config_builder()
        .timeout_global(Some(config.timeout))
        .http_status_as_error(false);
    if config.url.starts_with("https://") {
        builder = builder.tls_config(tls::config(&config.name, config.ca_file.as_deref())?);
    } else if let Some(ca) = &config.ca_file {
        return Err(RemoteWriteError::Tls {
            name: config.name.clone(),
            message: format!(
                "ca_file = \"{}\" is given but the url is http://: write https:// or remove ca_file",
                ca.display()
            ),
        });
    }
    Ok(builder.build().into())
}

impl RemoteWriter {
    /// Opens every endpoint's queue (delivering what an earlier run left in it) and starts
    /// sending.
    pub fn start(configs: Vec<EndpointConfig>) -> Result<RemoteWriter, RemoteWriteError> {
        for (i, a) in configs.iter().enumerate() {
            if !a.url.starts_with("http://") && !a.url.starts_with("https://") {
                return Err(RemoteWriteError::BadUrl {
                    name: a.name.clone(),
                    url: a.url.clone(),
                });
            }
            if let Some(b) = configs[i + 1..].iter().find(|b| b.queue_dir == a.queue_dir) {
                return Err(RemoteWriteError::SharedQueue(
                    a.name.clone(),
                    b.name.clone(),
                ));
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut endpoints = Vec::new();
        for config in configs {
            let agent = client(&config)?;
            let queue =
                Queue::open(&config.queue_dir, config.queue_max_bytes).map_err(|source| {
                    RemoteWriteError::Queue {
                        name: config.name.clone(),
                        source,
                    }
                })?;
            let mut status = EndpointStatus {
                name: config.name.clone(),
                mode: config.mode,
                delivered_requests: 0,
                acknowledged_batches: 0,
                retries: 0,
                rejected_requests: 0,
                queue: queue.stats(),
                last_error: None,
                queue_full: false,
                events: Vec::new(),
                events_total: 0,
            };
            if queue.stats().lost_on_open_bytes > 0 {
                status.event(format!(
                    "{}: {} bytes of a torn record were cut from the queue on start",
                    config.name,
                    queue.stats().lost_on_open_bytes
                ));
            }
            let mut ep = Endpoint {
                config,
                queue: Arc::new(Mutex::new(queue)),
                status: Arc::new(Mutex::new(status)),
                thread: None,
            };
            let worker = Worker {
                agent,
                config: ep.config.clone(),
                queue: ep.queue.clone(),
                status: ep.status.clone(),
                stop: stop.clone(),
            };
            ep.thread = Some(
                std::thread::Builder::new()
                    .name(format!("remote-write-{}", ep.config.name))
                    .spawn(move || worker.run())
                    .map_err(|e| RemoteWriteError::Queue {
                        name: ep.config.name.clone(),
                        source: QueueError::Io {
                            path: ep.config.queue_dir.clone(),
                            op: "start sender thread",
                            source: e,
                        },
                    })?,
            );
            endpoints.push(ep);
        }
        Ok(RemoteWriter { endpoints, stop })
    }

    /// Queues a batch for every endpoint (synced to disk before this returns). An endpoint
    /// whose queue is full drops its oldest batches (counted in its status, with an event
    /// when it becomes full);
    /// an endpoint whose queue cannot be written is reported in the returned list while the
    /// others still get the batch.
    pub fn push(&self, batch: &Batch) -> Vec<RemoteWriteError> {
        let bytes = batch.encode_to_vec();
        let mut errors = Vec::new();
        for ep in &self.endpoints {
            let result = lock(&ep.queue).append(&bytes);
            let stats = lock(&ep.queue).stats();
            let mut status = lock(&ep.status);
            status.queue = stats;
            match result {
                // Said when the queue becomes full, not again for every batch while it stays so.
                Ok(o) if o.dropped_records > 0 => {
                    if !status.queue_full {
                        status.event(format!(
                            "{}: queue full ({} bytes): each new batch now drops the oldest ({} dropped so far; raise queue_max_bytes to hold a longer outage)",
                            ep.config.name, stats.max_bytes, stats.dropped_records
                        ));
                    }
                    status.queue_full = true;
                }
                Ok(_) => status.queue_full = false,
                // A batch bigger than the whole bound is dropped; said once, like a full queue.
                Err(QueueError::TooLarge { len, max }) => {
                    if !status.queue_full {
                        status.event(format!(
                            "{}: a batch of {len} bytes is larger than the whole queue (queue_max_bytes = {max}): it is dropped, and so is every batch that size (raise queue_max_bytes)",
                            ep.config.name
                        ));
                    }
                    status.queue_full = true;
                }
                Err(source) => errors.push(RemoteWriteError::Queue {
                    name: ep.config.name.clone(),
                    source,
                }),
            }
        }
        errors
    }

    /// Every endpoint's status.
    pub fn status(&self) -> Vec<EndpointStatus> {
        self.endpoints
            .iter()
            .map(|ep| {
                let mut s = lock(&ep.status).clone();
                s.queue = lock(&ep.queue).stats();
                s
            })
            .collect()
    }

    /// Waits until every queue is empty or `timeout` passed; true when empty.
    pub fn wait_drained(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if self.endpoints.iter().all(|ep| lock(&ep.queue).is_empty()) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RemoteWriter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for ep in &mut self.endpoints {
            if let Some(t) = ep.thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests;
