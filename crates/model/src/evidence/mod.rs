//! Evidence: what the sources measured beyond plain series, in the shapes the detectors and
//! the report read.
//!
//! The contract between the stages lives here. A source fills these types (a capture's bursts
//! and flows, a tracer's cgroup intervals, a transfer's TCP_INFO summary, a sweep's steps), the
//! store keeps each run's [`Document`]s versioned, and the detectors (`tailhunt-diagnose`) and
//! outputs (`tailhunt-report`) read them back — neither of those imports a source crate.
//!
//! | module | document | produced by |
//! |---|---|---|
//! | [`capture`] | [`capture::CaptureReport`] (`capture`) | `tailhunt pcap`, `tailhunt capture` |
//! | [`probe`] | [`probe::ProbeRecord`] (`probe`) | `tailhunt probe` |
//! | [`runq`] | [`runq::RunqRecord`] (`runq`) | `tailhunt runq` |
//! | [`sock`] | [`sock::TransferReport`] (`transfer`), [`sock::SocketsReport`] (`sockets`) | `tailhunt transfer`, `tailhunt sockets` |
//! | [`sweep`] | [`sweep::SweepRecord`] (`sweep`) | `tailhunt load` |
//! | `window` | (derived) `window::WindowEvidence` | from a capture's flows or TCP_INFO |
//! | [`timeline`] | (derived) [`timeline::Shift`], [`timeline::Oscillation`], [`timeline::PairedComparison`] | from a probe run's or a timestamped import's series |

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{SeriesSink, SinkError};

pub mod capture;
pub mod probe;
pub mod runq;
pub mod sock;
pub mod sweep;
pub mod timeline;

/// Stores `doc` as the run's [`Document::NAME`] document through any sink (the store's run
/// writer keeps it versioned in its `documents` table).
pub fn put_evidence<D: Document>(sink: &mut dyn SeriesSink, doc: &D) -> Result<(), SinkError> {
    // Written straight into the sink: a capture report of 100,000 flows is 240 MB of JSON.
    sink.put_document_from(D::NAME, D::VERSION, &mut |w| {
        serde_json::to_writer(std::io::BufWriter::new(w), doc).map_err(std::io::Error::other)
    })
}

/// Stores `items` of a [`Row`] list in `sink` (a batch of a list written as it is produced).
pub fn put_rows<R: Row>(sink: &mut dyn SeriesSink, items: &[R]) -> Result<(), SinkError> {
    put_rows_in(sink, items, &mut Vec::new())
}

/// [`put_rows`] with the batch's buffer kept by the caller, for a list stored in many
/// batches: a buffer made and freed per batch (600 kB for 256 flows of a capture) made glibc
/// raise its mmap threshold to that size, after which freed memory stayed resident (peak RSS
/// of a 100,000-connection capture's pass, see `bench/pcap.sh`).
pub fn put_rows_in<R: Row>(
    sink: &mut dyn SeriesSink,
    items: &[R],
    buf: &mut Vec<u8>,
) -> Result<(), SinkError> {
    let mut order: Vec<&R> = items.iter().collect();
    order.sort_by_key(|r| r.key());
    let (Some(first), Some(last)) = (order.first(), order.last()) else {
        return Ok(());
    };
    buf.clear();
    let mut chunk = RowChunk {
        first_key: first.key(),
        last_key: last.key(),
        rows: order.len(),
        encoding: RowEncoding::Postcard,
        data: std::mem::take(buf),
    };
    for r in &order {
        // postcard writes into the buffer it is given and hands it back.
        chunk.data = postcard::to_extend(*r, std::mem::take(&mut chunk.data))
            .map_err(|e| SinkError::from(format!("cannot encode a '{}' row: {e}", R::NAME)))?;
    }
    let stored = sink.put_rows(R::NAME, R::VERSION, &chunk);
    *buf = chunk.data;
    stored
}

/// How the items of a [`RowChunk`] are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowEncoding {
    /// One JSON document per item, each ending in a newline: how chunks were written before
    /// the compact encoding (still read).
    JsonLines,
    /// postcard: the items one after another, each its fields in declaration order with no
    /// names, integers as varints. What chunks are written in: a capture's flow is about
    /// 2.4 kB of JSON, mostly field names and zeros, and encoding and compressing that JSON
    /// was about a fifth of the CPU of `tailhunt pcap` on the 1 GB capture of `bench/pcap.sh`.
    /// Fields have no names here, so a [`Row`] whose shape changes (a field added, removed
    /// or moved) must change its [`Row::VERSION`].
    Postcard,
}

impl RowEncoding {
    /// Reads every item of a chunk of `version` in this encoding, in the order written.
    ///
    /// JSON lines of an older version are read as the current type reads them (fields added
    /// since carry `#[serde(default)]`); postcard has no names to go by, so only the current
    /// version is read.
    pub fn decode<R: Row>(self, version: u32, mut data: &[u8]) -> Result<Vec<R>, String> {
        let newer = || {
            format!(
                "it was written as version {version}; this tailhunt reads version {}: use the tailhunt that wrote it",
                R::VERSION
            )
        };
        match self {
            RowEncoding::JsonLines if version > R::VERSION => Err(newer()),
            RowEncoding::JsonLines => data
                .split(|&b| b == b'\n')
                .filter(|line| !line.is_empty())
                .map(|line| serde_json::from_slice::<R>(line).map_err(|e| e.to_string()))
                .collect(),
            RowEncoding::Postcard if version != R::VERSION => Err(newer()),
            RowEncoding::Postcard => {
                let mut items = Vec::new();
                while !data.is_empty() {
                    let (item, rest) = postcard::take_from_bytes::<R>(data).map_err(|e| {
                        format!("item {} of the chunk cannot be read: {e}", items.len())
                    })?;
                    items.push(item);
                    data = rest;
                }
                Ok(items)
            }
        }
    }
}

/// A batch of an evidence list's items as a sink stores it, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowChunk {
    /// The first item's key.
    pub first_key: i64,
    /// The last item's key.
    pub last_key: i64,
    /// Items in the batch.
    pub rows: usize,
    /// How `data` is encoded.
    pub encoding: RowEncoding,
    /// The items, in key order.
    pub data: Vec<u8>,
}

/// An item of an evidence list too long to hold in memory (a capture's flows): the store keeps
/// the items in chunks under the list's name, encoded as [`RowEncoding::Postcard`], and gives
/// them back in [`Row::key`] order.
///
/// Its serde shape must suit postcard: no `flatten`, no `skip_serializing_if`, no untagged
/// enums (these need field names). A type whose JSON uses them can serialize differently when
/// the serializer is not human-readable, as [`capture::FlowSummary`] does.
pub trait Row: Serialize + DeserializeOwned {
    /// The list's name in the store.
    const NAME: &'static str;
    /// The items' shape version (a reader refuses others).
    const VERSION: u32;
    /// The item's number in the list (unique in a run).
    fn key(&self) -> i64;
}

/// A document written with `version`, read as the current shape of `D` (refused when a newer
/// tailhunt wrote it): [`Document::upgrade`]'s default, and the first step of the upgrades
/// that change something.
pub fn read_as_current<D: Document>(version: u32, json: serde_json::Value) -> Result<D, String> {
    if version > D::VERSION {
        return Err(format!(
            "it was written as version {version} by a newer tailhunt (this one reads up to {}): upgrade tailhunt",
            D::VERSION
        ));
    }
    serde_json::from_value(json).map_err(|e| e.to_string())
}

/// A run's evidence document: stored once per run under [`Document::NAME`] (zstd-compressed
/// JSON) with its [`Document::VERSION`].
///
/// Versions: a document whose shape changes gets a new version; [`Document::upgrade`] reads
/// the older versions still found in stores, and [`Document::from_params`] reads runs written
/// before documents existed (their evidence sat in the run's parameters). That is the one
/// migration path: the store calls these, nothing else parses old shapes.
pub trait Document: Serialize + DeserializeOwned {
    /// Name in the store (`capture`, `runq`).
    const NAME: &'static str;
    /// Version of the shape written now.
    const VERSION: u32;

    /// Reads a document written with an older `version`. The default accepts only versions whose
    /// JSON the current type still reads as it is.
    fn upgrade(version: u32, json: serde_json::Value) -> Result<Self, String> {
        read_as_current(version, json)
    }

    /// Rebuilds the document of a run written before it had one, from the run's parameters;
    /// `None` when they hold nothing of it.
    fn from_params(params: &serde_json::Value) -> Option<Result<Self, String>> {
        let _ = params;
        None
    }
}
