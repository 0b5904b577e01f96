//! tailhunt's store: one SQLite file holding runs, series, raw samples and findings.
//!
//! # Brief overview
//!
//! [`Store::open`] creates or opens the file (default `./tailhunt.db`) in WAL mode, so a writer
//! killed with `kill -9` leaves a consistent database. [`Store::begin_run`] returns a
//! [`RunWriter`], which implements [`SeriesSink`](tailhunt_model::SeriesSink): sources stream
//! into it, it packs samples into compressed blocks of 8192 ([`block`]) and commits every few
//! blocks. A run is `partial` until [`RunWriter::finish`] marks it `complete`; a run whose writer
//! died keeps everything committed and stays marked `partial`.
//!
//! Readers resolve a user's `RUN` argument (`latest`, a full id or a unique prefix) with
//! [`Store::resolve_run`] and load series back with [`Store::load_series`]. The schema
//! (`schema.sql`) is plain SQL, documented in the README for `sqlite3`, Python and DuckDB users.
//!
//! ```
//! use tailhunt_model::{ClockOrigin, Outcome, Sample, SeriesMeta, SeriesSink};
//! use tailhunt_store::Store;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let mut store = Store::open(&dir.path().join("t.db")).unwrap();
//! let mut run = store.begin_run(tailhunt_model::RunKind::Import, serde_json::json!({}), ClockOrigin::now()).unwrap();
//! let s = run.open_series(&SeriesMeta::latency("latency")).unwrap();
//! run.push_samples(s, &[Sample::from_latency(0, 450_000, Outcome::Ok)]).unwrap();
//! let id = run.finish(serde_json::json!({})).unwrap();
//! assert_eq!(store.resolve_run("latest").unwrap(), id);
//! ```
#![deny(missing_docs)]

pub mod block;
mod documents;
mod error;
mod read;
pub mod values;
mod writer;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension};

pub use error::StoreError;
pub use read::SeriesInfo;
pub use writer::RunWriter;

/// Schema version this build reads and writes.
pub const SCHEMA_VERSION: i64 = 4;

/// The SQL that creates the schema (also printed in the README).
pub const SCHEMA_SQL: &str = include_str!("schema.sql");

/// Default file name of the store.
pub const DEFAULT_PATH: &str = "tailhunt.db";

/// An open store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens the store at `path`, creating it (and its schema) if needed.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path).map_err(|e| open_error(path, e))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    /// Opens an existing store; a missing file is [`StoreError::Missing`], not a new store.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        Store::open(path)
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn configure(&self) -> Result<(), StoreError> {
        self.conn
            .busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| open_error(&self.path, e))?;
        // WAL: readers never block the writer and a killed writer cannot corrupt the file.
        // synchronous=NORMAL: a power cut may lose the last commits, never consistency.
        self.conn
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = NORMAL;
                 PRAGMA foreign_keys = ON;",
            )
            .map_err(|e| open_error(&self.path, e))
    }

    fn migrate(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch(SCHEMA_SQL)
            .map_err(|e| open_error(&self.path, e))?;
        let found: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        match found.and_then(|v| v.parse::<i64>().ok()) {
            None => {
                self.conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?1)",
                    [SCHEMA_VERSION.to_string()],
                )?;
            }
            Some(v) if v > SCHEMA_VERSION => {
                return Err(StoreError::NewerSchema {
                    path: self.path.clone(),
                    found: v,
                    known: SCHEMA_VERSION,
                })
            }
            // Version 1 lacked `value_blocks`, version 2 `documents`; SCHEMA_SQL has just
            // created them. Version 3's documents lack `version` (theirs are version 1).
            Some(v) if v < SCHEMA_VERSION => {
                if v == 3 {
                    self.conn.execute_batch(
                        "ALTER TABLE documents ADD COLUMN version INTEGER NOT NULL DEFAULT 1",
                    )?;
                }
                self.conn.execute(
                    "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
                    [SCHEMA_VERSION.to_string()],
                )?;
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// Runs `PRAGMA integrity_check`; `Ok(())` when the file is sound.
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        let result: String = self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        if result == "ok" {
            Ok(())
        } else {
            Err(StoreError::Corrupt {
                series: -1,
                reason: result,
            })
        }
    }

    /// Moves the WAL into the main file and truncates it (for measuring the file's size).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

fn open_error(path: &Path, e: rusqlite::Error) -> StoreError {
    let reason = match &e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
            "the file is not a SQLite database (point --db at a tailhunt store or a new file)"
                .to_string()
        }
        _ => e.to_string(),
    };
    StoreError::Open {
        path: path.to_path_buf(),
        reason,
    }
}
