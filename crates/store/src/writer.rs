//! Writing a run.
//!
//! In: a run's series and their samples, histograms and points, as a source produces them
//! ([`SeriesSink`]). Out: rows in the store, committed by size *and* by time. Samples and points
//! are packed into blocks of 8192; a block is written when it fills, and the block still
//! filling (the *open* block) is written as it stands, and committed, once the commit interval
//! (default one second, [`RunWriter::set_commit_interval`]) has passed since the last commit:
//! on each push, and whenever the source calls [`RunWriter::commit_if_due`] while it waits.
//! The open block keeps its row: each time it is written again it replaces that row, so a slow
//! source does not leave a trail of tiny blocks. A writer killed with `kill -9` therefore loses
//! at most the samples handed to it in the last interval (plus any its source still held).

use std::time::{Duration, Instant};

use rusqlite::params;
use tailhunt_model::evidence::RowChunk;
use tailhunt_model::{
    ClockOrigin, IntervalHistogram, Point, RunKind, Sample, SamplePart, SeriesKind, SeriesMeta,
    SeriesSink, SinkError,
};

use crate::block::{self, BLOCK_SAMPLES, CODEC_PLANES_ZSTD};
use crate::level1::Level1;
use crate::values::{self, BLOCK_POINTS};
use crate::{Store, StoreError};

/// Blocks written between commits at high rates, so commits stay rare enough for >1 M
/// samples/s; the commit interval bounds the loss at low rates.
const BLOCKS_PER_COMMIT: usize = 8;

/// Default longest time between commits while samples are arriving.
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_secs(1);

/// The commit intervals a user may choose (`--commit-interval` of `load` and `probe`): more
/// often than every 10 ms the commits themselves become the work, and past 10 s a killed run
/// loses more than a user would guess from "commits as it goes".
pub const USER_COMMIT_INTERVALS: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(10)..=Duration::from_secs(10);

/// `interval` if a user may choose it (see [`USER_COMMIT_INTERVALS`]); else why not, in words
/// that name the range.
pub fn user_commit_interval(interval: Duration) -> Result<Duration, String> {
    if USER_COMMIT_INTERVALS.contains(&interval) {
        return Ok(interval);
    }
    Err(format!(
        "give {}ms to {}s, not {} (how much a killed run may lose)",
        USER_COMMIT_INTERVALS.start().as_millis(),
        USER_COMMIT_INTERVALS.end().as_secs(),
        tailhunt_model::format_duration_ns(interval.as_nanos() as f64)
    ))
}

struct OpenSeries {
    id: i64,
    kind: SeriesKind,
    /// Worked out from another series when read (`derived_series`): what is pushed to it
    /// is not stored.
    derived: bool,
    /// The open block's samples (or points, for a values series).
    buf: Vec<Sample>,
    points: Vec<Point>,
    /// The open block's `seq`.
    seq: i64,
    /// How many of the open block's samples or points its stored row already holds (and the
    /// series' `count` already includes).
    stored: usize,
}

/// Streams one run into the store. Dropping it without [`RunWriter::finish`] keeps what was
/// written, marked `partial`.
pub struct RunWriter<'a> {
    store: &'a mut Store,
    id: String,
    series: Vec<OpenSeries>,
    blocks_since_commit: usize,
    in_transaction: bool,
    finished: bool,
    /// Longest time between commits (`None`: only by size).
    commit_interval: Option<Duration>,
    /// The next chunk number of each evidence list written ([`RunWriter::put_rows`]).
    row_chunks: std::collections::HashMap<String, i64>,
    /// The compressor of [`RunWriter::put_rows`], one for the run's batches.
    rows_zstd: Level1,
    last_commit: Instant,
}

/// How [`RunWriter::abandon`] left a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Abandoned {
    /// What was stored before the source failed stays, as a `partial` run.
    Kept {
        /// The run.
        id: String,
        /// Its values, over all its series (a derived series counts its parent's).
        samples: u64,
    },
    /// Nothing was stored: the run is gone.
    Removed {
        /// The run it was.
        id: String,
    },
}

impl Store {
    /// Starts a run of `kind` with its parameters and clock origin; it is visible (as `partial`)
    /// immediately.
    pub fn begin_run(
        &mut self,
        kind: RunKind,
        mut params: serde_json::Value,
        origin: ClockOrigin,
    ) -> Result<RunWriter<'_>, StoreError> {
        if let (Some(tag), Some(o)) = (&self.tag, params.as_object_mut()) {
            o.insert("tag".into(), serde_json::Value::String(tag.clone()));
        }
        let created = ClockOrigin::now().wall_ns;
        let id = loop {
            let candidate = format!("{:010x}", rand::random::<u64>() >> 24);
            let taken: bool = self.conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM runs WHERE id = ?1)",
                [&candidate],
                |r| r.get(0),
            )?;
            if !taken {
                break candidate;
            }
        };
        self.conn.execute(
            "INSERT INTO runs (id, kind, status, created_wall_ns, origin_wall_ns, origin_mono_ns, params)
             VALUES (?1, ?2, 'partial', ?3, ?4, ?5, ?6)",
            params![id, kind.name(), created, origin.wall_ns, origin.mono_ns, params.to_string()],
        )?;
        Ok(RunWriter {
            store: self,
            id,
            series: Vec::new(),
            blocks_since_commit: 0,
            in_transaction: false,
            finished: false,
            commit_interval: Some(DEFAULT_COMMIT_INTERVAL),
            last_commit: Instant::now(),
            row_chunks: std::collections::HashMap::new(),
            rows_zstd: Level1::new(),
        })
    }
}

impl RunWriter<'_> {
    /// The run's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        if !self.in_transaction {
            self.store.conn.execute_batch("BEGIN")?;
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Sets the longest time between commits while data arrives (`None`: commit only every
    /// few full blocks, the fastest ingest, for bulk imports that can be re-run).
    pub fn set_commit_interval(&mut self, interval: Option<Duration>) {
        self.commit_interval = interval;
    }

    /// Writes the open blocks and commits when the commit interval has passed since the last
    /// commit. Sources call it while they wait, so samples already handed over do not sit in
    /// memory for want of a new push.
    pub fn commit_if_due(&mut self) -> Result<(), StoreError> {
        match self.commit_interval {
            Some(i) if self.last_commit.elapsed() >= i => self.flush(),
            _ => Ok(()),
        }
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if self.in_transaction {
            self.store.conn.execute_batch("COMMIT")?;
            self.in_transaction = false;
            self.blocks_since_commit = 0;
        }
        self.last_commit = Instant::now();
        Ok(())
    }

    /// Writes series `index`'s open values block (see [`RunWriter::write_block`]).
    fn write_values_block(&mut self, index: usize) -> Result<(), StoreError> {
        let s = &mut self.series[index];
        if s.points.len() == s.stored {
            return Ok(());
        }
        let data = values::encode(&s.points).map_err(|e| StoreError::Compress {
            series: s.id,
            reason: e.to_string(),
        })?;
        let lo = s.points.iter().map(|p| p.value).min().unwrap_or(0);
        let hi = s.points.iter().map(|p| p.value).max().unwrap_or(0);
        let (first, last) = (s.points[0].t_ns, s.points[s.points.len() - 1].t_ns);
        let (id, seq, n) = (s.id, s.seq, s.points.len() as i64);
        let added = (s.points.len() - s.stored) as i64;
        if s.points.len() == BLOCK_POINTS {
            (s.seq, s.stored) = (s.seq + 1, 0);
            s.points.clear();
        } else {
            s.stored = s.points.len();
        }
        self.begin()?;
        let conn = &self.store.conn;
        conn.prepare_cached(
            "INSERT OR REPLACE INTO value_blocks (series_id, seq, n, first_t_ns, last_t_ns, min_value, max_value, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![id, seq, n, first, last, lo, hi, data])?;
        self.block_written(id, added)
    }

    fn block_written(&mut self, series_id: i64, added: i64) -> Result<(), StoreError> {
        self.store
            .conn
            .prepare_cached("UPDATE series SET count = count + ?2 WHERE id = ?1")?
            .execute(params![series_id, added])?;
        self.blocks_since_commit += 1;
        if self.blocks_since_commit >= BLOCKS_PER_COMMIT {
            self.commit()?;
        }
        Ok(())
    }

    /// Writes series `index`'s open block: when full, as its final row (the next samples open
    /// a new block); otherwise as it stands, replacing the row an earlier write of the same
    /// block left. Does nothing when the row already holds every buffered sample.
    fn write_block(&mut self, index: usize) -> Result<(), StoreError> {
        let s = &mut self.series[index];
        if s.buf.len() == s.stored {
            return Ok(());
        }
        let data = block::encode(&s.buf).map_err(|e| StoreError::Compress {
            series: s.id,
            reason: e.to_string(),
        })?;
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for x in &s.buf {
            let l = x.latency_ns();
            lo = lo.min(l);
            hi = hi.max(l);
        }
        let (first, last) = (s.buf[0].intended_ns, s.buf[s.buf.len() - 1].intended_ns);
        let (id, seq, n) = (s.id, s.seq, s.buf.len() as i64);
        let added = (s.buf.len() - s.stored) as i64;
        if s.buf.len() == BLOCK_SAMPLES {
            (s.seq, s.stored) = (s.seq + 1, 0);
            s.buf.clear();
        } else {
            s.stored = s.buf.len();
        }
        self.begin()?;
        let conn = &self.store.conn;
        conn.prepare_cached(
            "INSERT OR REPLACE INTO sample_blocks
             (series_id, seq, n, first_intended_ns, last_intended_ns, min_latency_ns, max_latency_ns, codec, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![id, seq, n, first, last, lo, hi, CODEC_PLANES_ZSTD, data])?;
        self.block_written(id, added)
    }

    /// Replaces the run's clock origin (an import learns it from the data's first timestamp).
    pub fn set_origin(&mut self, origin: ClockOrigin) -> Result<(), StoreError> {
        self.store.conn.execute(
            "UPDATE runs SET origin_wall_ns = ?2, origin_mono_ns = ?3 WHERE id = ?1",
            params![self.id, origin.wall_ns, origin.mono_ns],
        )?;
        Ok(())
    }

    /// Stores a large JSON document of the run (a capture's evidence) under `name` and its shape's
    /// `version`, zstd-compressed in the `documents` table, replacing one of the same name.
    /// Keeps the run's params small: a document in params costs a JSON escape, a parse and a
    /// rewrite of all of it when the run finishes. Sources store typed documents through
    /// `tailhunt_model::evidence::put_evidence`.
    pub fn put_document(&mut self, name: &str, version: u32, json: &str) -> Result<(), StoreError> {
        self.put_document_from(name, version, &mut |w| {
            std::io::Write::write_all(w, json.as_bytes())
        })
    }

    /// Like [`RunWriter::put_document`], with the JSON written by `write` into the compressor
    /// as it comes (only the compressed bytes are held).
    pub fn put_document_from(
        &mut self,
        name: &str,
        version: u32,
        write: &mut dyn FnMut(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<(), StoreError> {
        let corrupt = |e: std::io::Error| StoreError::Corrupt {
            series: 0,
            reason: format!("compressing document '{name}': {e}"),
        };
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).map_err(corrupt)?;
        write(&mut enc).map_err(corrupt)?;
        let data = enc.finish().map_err(corrupt)?;
        self.store.conn.execute(
            "INSERT OR REPLACE INTO documents (run_id, name, codec, data, version) VALUES (?1, ?2, 'zstd', ?3, ?4)",
            params![self.id, name, data, version],
        )?;
        Ok(())
    }

    /// Stores a batch of one of the run's evidence lists (`name`, the items' shape at
    /// `version`, in key order) as one chunk of `document_rows`, zstd-compressed; its `codec`
    /// names the items' encoding too (`row_codec`).
    /// A list too long to hold (a capture's flows) is written in batches as it is produced
    /// and read back in key order by
    /// [`Store::rows`](crate::Store::rows). Compressing a batch at once, not item by item,
    /// matters: one zstd frame per 2.5 KB flow cost the analysis of a 100,000-connection
    /// capture 80% more CPU. Level 1: on a 1 GB capture's flows it was both faster and 4%
    /// smaller than level 3.
    pub fn put_rows(
        &mut self,
        name: &str,
        version: u32,
        rows: &RowChunk,
    ) -> Result<(), StoreError> {
        if rows.rows == 0 {
            return Ok(());
        }
        let corrupt = |e: std::io::Error| StoreError::Corrupt {
            series: 0,
            reason: format!("compressing '{name}' rows: {e}"),
        };
        self.begin()?;
        let data = self.rows_zstd.compress(&rows.data).map_err(corrupt)?;
        let codec = crate::documents::row_codec(rows.encoding);
        let (first, last) = (rows.first_key, rows.last_key);
        let seq = self.row_chunks.entry(name.to_string()).or_insert(0);
        let this = *seq;
        *seq += 1;
        self.store
            .conn
            .prepare_cached(
                "INSERT OR REPLACE INTO document_rows
                 (run_id, name, seq, first_key, last_key, n, version, codec, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                self.id,
                name,
                this,
                first,
                last,
                rows.rows as i64,
                version,
                codec,
                data
            ])?;
        // A chunk counts as one block towards the next commit.
        self.blocks_since_commit += 1;
        if self.blocks_since_commit >= BLOCKS_PER_COMMIT {
            self.commit()?;
        }
        Ok(())
    }

    /// Writes everything buffered and commits; the run stays `partial`.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        for i in 0..self.series.len() {
            match self.series[i].kind {
                SeriesKind::Samples => self.write_block(i)?,
                SeriesKind::Values => self.write_values_block(i)?,
                SeriesKind::Histograms => {}
            }
        }
        self.commit()
    }

    /// Writes series `index`'s open block and frees its buffer (up to 256 kB a sample
    /// series, held otherwise until the run finishes: a capture's storing and diagnosing come
    /// after its pass, and 100,000 connections' four sample series held 1 MB then). The
    /// block is final: later points start the next one.
    fn close_block(&mut self, index: usize) -> Result<(), StoreError> {
        match self.series[index].kind {
            SeriesKind::Samples => self.write_block(index)?,
            SeriesKind::Values => self.write_values_block(index)?,
            SeriesKind::Histograms => return Ok(()),
        }
        let s = &mut self.series[index];
        if s.stored > 0 {
            (s.seq, s.stored) = (s.seq + 1, 0);
        }
        s.buf = Vec::new();
        s.points = Vec::new();
        Ok(())
    }

    /// Flushes, merges `extra_params` (a JSON object) into the run's parameters and marks the run
    /// `complete`. Returns the run id.
    pub fn finish(mut self, extra_params: serde_json::Value) -> Result<String, StoreError> {
        self.close(extra_params, true)
    }

    /// Like [`RunWriter::finish`], but the run stays `partial`: its input stopped early (a
    /// truncated capture, Ctrl-C) and what was measured is kept and marked.
    pub fn finish_partial(mut self, extra_params: serde_json::Value) -> Result<String, StoreError> {
        self.close(extra_params, false)
    }

    /// [`RunWriter::finish_partial`] when `partial`, else [`RunWriter::finish`]; returns the
    /// run id and the status it ended with.
    pub fn finish_as(
        mut self,
        partial: bool,
        extra_params: serde_json::Value,
    ) -> Result<(String, tailhunt_model::RunStatus), StoreError> {
        let status = match partial {
            true => tailhunt_model::RunStatus::Partial,
            false => tailhunt_model::RunStatus::Complete,
        };
        Ok((self.close(extra_params, !partial)?, status))
    }

    /// Ends a run whose source failed before it finished (a bad line, a lost server, a signal
    /// before anything was measured): what was stored stays, as a `partial` run, and a run
    /// that stored no value at all is removed, since an empty run would only say that
    /// something was tried. Says which, so the caller's message can name the kept run.
    ///
    /// Ending is best effort, as when a writer is dropped: the error that stopped the source
    /// may be the store's own (a full disk), and what cannot be written now is lost either
    /// way. What was committed is what is kept.
    pub fn abandon(mut self, extra_params: serde_json::Value) -> Result<Abandoned, StoreError> {
        if self.close(extra_params, false).is_err() {
            self.finished = true;
            if self.in_transaction {
                // A failed write can leave SQLite's transaction open or already rolled back;
                // either way nothing more of it will be committed.
                let _ = self.store.conn.execute_batch("ROLLBACK");
                self.in_transaction = false;
            }
        }
        let id = self.id.clone();
        let samples = self.store.run(&id)?.samples;
        if samples > 0 {
            return Ok(Abandoned::Kept { id, samples });
        }
        self.store.delete_run(&id)?;
        Ok(Abandoned::Removed { id })
    }

    /// Flushes, merges `extra_params` into the parameters, marks the run `complete` when
    /// `complete` (else it stays `partial`) and marks the writer finished.
    fn close(
        &mut self,
        extra_params: serde_json::Value,
        complete: bool,
    ) -> Result<String, StoreError> {
        self.flush()?;
        let conn = &self.store.conn;
        if let serde_json::Value::Object(extra) = extra_params {
            let current: String =
                conn.query_row("SELECT params FROM runs WHERE id = ?1", [&self.id], |r| {
                    r.get(0)
                })?;
            let mut params: serde_json::Value =
                serde_json::from_str(&current).unwrap_or_else(|_| serde_json::json!({}));
            if let Some(map) = params.as_object_mut() {
                map.extend(extra);
            }
            conn.execute(
                "UPDATE runs SET params = ?2 WHERE id = ?1",
                params![self.id, params.to_string()],
            )?;
        }
        if complete {
            conn.execute(
                "UPDATE runs SET status = 'complete' WHERE id = ?1",
                [&self.id],
            )?;
        }
        self.finished = true;
        Ok(self.id.clone())
    }
}

impl Drop for RunWriter<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Best effort: keep what was measured; the run stays marked partial.
            let _ = self.flush();
        }
    }
}

impl RunWriter<'_> {
    fn insert_series(&mut self, meta: &SeriesMeta, derived: bool) -> Result<usize, SinkError> {
        let kind = meta.kind.name();
        let timing = serde_json::to_value(meta.timing)?;
        self.store.conn.execute(
            "INSERT INTO series (run_id, name, labels, unit, timing, kind) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                self.id,
                meta.name,
                serde_json::to_string(&meta.labels)?,
                meta.unit.name(),
                timing.as_str().unwrap_or("timed"),
                kind
            ],
        )?;
        self.series.push(OpenSeries {
            id: self.store.conn.last_insert_rowid(),
            kind: meta.kind,
            derived,
            buf: Vec::new(),
            points: Vec::new(),
            seq: 0,
            stored: 0,
        });
        Ok(self.series.len() - 1)
    }
}

impl SeriesSink for RunWriter<'_> {
    fn open_series(&mut self, meta: &SeriesMeta) -> Result<usize, SinkError> {
        self.insert_series(meta, false)
    }

    /// Keeps the derivation, not the samples: a derived series costs a row, and reading it
    /// decodes its parent's blocks (a load run's two parts took half of its store).
    fn open_derived(
        &mut self,
        meta: &SeriesMeta,
        parent: usize,
        part: SamplePart,
    ) -> Result<usize, SinkError> {
        let parent_id = match self.series.get(parent) {
            Some(p) if p.kind == SeriesKind::Samples && !p.derived && meta.kind == SeriesKind::Samples => p.id,
            _ => {
                return Err(format!(
                    "series '{}' cannot be derived from handle {parent}: both must be sample series, the parent stored",
                    meta.name
                )
                .into())
            }
        };
        let h = self.insert_series(meta, true)?;
        self.store.conn.execute(
            "INSERT INTO derived_series (series_id, parent_id, part) VALUES (?1, ?2, ?3)",
            params![self.series[h].id, parent_id, part.name()],
        )?;
        Ok(h)
    }

    fn push_samples(&mut self, series: usize, samples: &[Sample]) -> Result<(), SinkError> {
        match self.series.get(series) {
            // Its samples are its parent's parts (`open_derived`).
            Some(s) if s.derived => return Ok(()),
            Some(s) if s.kind == SeriesKind::Samples => {}
            _ => return Err(format!("series handle {series} is not a sample series").into()),
        }
        let mut rest = samples;
        while !rest.is_empty() {
            let s = &mut self.series[series];
            let take = (BLOCK_SAMPLES - s.buf.len()).min(rest.len());
            s.buf.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if s.buf.len() == BLOCK_SAMPLES {
                self.write_block(series)?;
            }
        }
        Ok(self.commit_if_due()?)
    }

    fn push_histogram(&mut self, series: usize, h: &IntervalHistogram) -> Result<(), SinkError> {
        let s = match self.series.get_mut(series) {
            Some(s) if s.kind == SeriesKind::Histograms => s,
            _ => return Err(format!("series handle {series} is not a histogram series").into()),
        };
        let (id, seq) = (s.id, s.seq);
        s.seq += 1;
        self.begin()?;
        let conn = &self.store.conn;
        conn.prepare_cached(
            "INSERT INTO histograms (series_id, seq, start_ns, end_ns, count, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            id,
            seq,
            h.start_ns,
            h.end_ns,
            h.histogram.count() as i64,
            h.histogram.encode()
        ])?;
        self.block_written(id, h.histogram.count() as i64)?;
        Ok(self.commit_if_due()?)
    }

    fn push_values(&mut self, series: usize, points: &[Point]) -> Result<(), SinkError> {
        match self.series.get(series) {
            Some(s) if s.kind == SeriesKind::Values => {}
            _ => return Err(format!("series handle {series} is not a values series").into()),
        }
        let mut rest = points;
        while !rest.is_empty() {
            let s = &mut self.series[series];
            let take = (BLOCK_POINTS - s.points.len()).min(rest.len());
            s.points.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if s.points.len() == BLOCK_POINTS {
                self.write_values_block(series)?;
            }
        }
        Ok(self.commit_if_due()?)
    }

    fn put_document(&mut self, name: &str, version: u32, json: &str) -> Result<(), SinkError> {
        Ok(RunWriter::put_document(self, name, version, json)?)
    }

    fn put_document_from(
        &mut self,
        name: &str,
        version: u32,
        write: &mut dyn FnMut(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<(), SinkError> {
        Ok(RunWriter::put_document_from(self, name, version, write)?)
    }

    fn put_rows(&mut self, name: &str, version: u32, rows: &RowChunk) -> Result<(), SinkError> {
        Ok(RunWriter::put_rows(self, name, version, rows)?)
    }

    fn close_series(&mut self, series: usize) -> Result<(), SinkError> {
        if series >= self.series.len() {
            return Err(format!("series handle {series} was never opened").into());
        }
        Ok(self.close_block(series)?)
    }

    fn commit_if_due(&mut self) -> Result<(), SinkError> {
        Ok(RunWriter::commit_if_due(self)?)
    }

    fn commit_now(&mut self) -> Result<(), SinkError> {
        Ok(RunWriter::flush(self)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_interval_outside_the_users_range_is_refused_naming_the_range() {
        for ok in [Duration::from_millis(10), Duration::from_secs(10)] {
            assert_eq!(user_commit_interval(ok), Ok(ok));
        }
        let e = user_commit_interval(Duration::from_millis(5)).unwrap_err();
        assert!(e.starts_with("give 10ms to 10s, not 5.00ms"), "{e}");
        assert!(user_commit_interval(Duration::from_secs(11)).is_err());
    }
}
