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
//! Commands that only read open the store with [`Store::open_for_reading`]: a store the user
//! may not write (a file someone sent, a read-only mount) is opened read-only and reads as any
//! other; findings computed on it are not written ([`Store::findings_unsaved`] says so). A full
//! disk or a read-only file while writing is [`StoreError::DiskFull`] or
//! [`StoreError::ReadOnly`], never SQLite's own text; what was committed before it stays.
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
mod level1;
mod read;
pub mod values;
mod writer;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

pub use error::StoreError;
pub use read::SeriesInfo;
pub use writer::{user_commit_interval, Abandoned, RunWriter, USER_COMMIT_INTERVALS};

/// Schema version this build reads and writes.
pub const SCHEMA_VERSION: i64 = 6;

/// The SQL that creates the schema (also printed in the README).
pub const SCHEMA_SQL: &str = include_str!("schema.sql");

/// Default file name of the store.
pub const DEFAULT_PATH: &str = "tailhunt.db";

/// An open store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Opened read-only: nothing is written.
    read_only: bool,
    /// Findings were given to a read-only store and not written.
    findings_unsaved: bool,
    /// A tag every run begun through this handle carries in its params (`"tag"`), e.g. the
    /// lab scenario that recorded it.
    tag: Option<String>,
    /// Whether the file has `derived_series` (schema 6 on): an older store opened read-only
    /// has none, and none of its series is derived.
    derived: bool,
}

impl Store {
    /// Opens the store at `path`, creating it (and its schema) if needed.
    ///
    /// Two commands that start together (the lab's two probe runs, a capture beside a load)
    /// may both set up the same new file: switching to WAL and writing the schema take the
    /// write lock, and SQLite answers a lock it cannot wait for without a deadlock (a read lock
    /// upgrading) with BUSY at once instead of calling the busy handler. Such an open is tried
    /// again, with a fresh connection, for up to [`OPEN_WAIT`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let deadline = std::time::Instant::now() + OPEN_WAIT;
        loop {
            match Store::open_once(path) {
                Err(StoreError::Busy(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    fn open_once(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path).map_err(|e| open_error(path, e))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
            read_only: false,
            findings_unsaved: false,
            tag: None,
            derived: true,
        };
        store.configure()?;
        store.migrate().map_err(|e| match e {
            StoreError::Sqlite(e) => open_error(path, e),
            other => other,
        })?;
        Ok(store)
    }

    /// Opens an existing store; a missing file is [`StoreError::Missing`], not a new store.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        Store::open(path)
    }

    /// Opens an existing store for commands that read: as [`Store::open_existing`] when the
    /// user may write the file and its directory (so a store of an older schema is upgraded),
    /// else read-only ([`Store::open_read_only`]).
    pub fn open_for_reading(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        if may_write(path) {
            match Store::open(path) {
                Err(e) if e.is_read_only() => {}
                other => return other,
            }
        }
        Store::open_read_only(path)
    }

    /// Opens an existing store read-only, writing nothing: no journal-mode switch, no schema
    /// upgrade, no findings. A store in WAL mode whose `-shm` file cannot be created (a
    /// read-only directory, after its writer closed cleanly) is opened as immutable; not when
    /// its `-wal` file holds commits (a writer killed mid-run), which immutable reading would
    /// silently leave out.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        let first = Store::open_uri(path, "mode=ro");
        match first {
            Ok(store) => Ok(store),
            Err(e @ StoreError::NewerSchema { .. }) => Err(e),
            Err(e) => {
                let mut wal = path.as_os_str().to_owned();
                wal.push("-wal");
                if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
                    return Err(StoreError::Open {
                        path: path.to_path_buf(),
                        reason: format!(
                            "it is read-only here and its write-ahead log '{}' holds commits \
                             that cannot be read without a '-shm' file beside it: copy the \
                             store with its -wal file to a writable directory and point --db \
                             at the copy",
                            std::path::Path::new(&wal).display()
                        ),
                    });
                }
                Store::open_uri(path, "mode=ro&immutable=1").map_err(|_| e)
            }
        }
    }

    fn open_uri(path: &Path, query: &str) -> Result<Store, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let uri = format!("file:{}?{query}", uri_path(path));
        let conn = Connection::open_with_flags(uri, flags).map_err(|e| open_error(path, e))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
            read_only: true,
            findings_unsaved: false,
            tag: None,
            derived: false,
        };
        store
            .conn
            .busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| open_error(path, e))?;
        match store.schema_version().map_err(|e| match e {
            StoreError::Sqlite(e) => open_error(path, e),
            other => other,
        })? {
            Some(v) if v > SCHEMA_VERSION => Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found: v,
                known: SCHEMA_VERSION,
            }),
            // An older schema reads as it is: what later versions added (value blocks,
            // documents, their versions, derived series) is absent there and reads as absent.
            Some(v) => Ok(Store {
                derived: v >= 6,
                ..store
            }),
            None => Err(StoreError::Open {
                path: path.to_path_buf(),
                reason:
                    "the file is a SQLite database but not a tailhunt store (no schema version)"
                        .into(),
            }),
        }
    }

    /// Tags every run begun from now on through this handle: its params get `"tag": tag`
    /// (the lab scenario that recorded it), which `runs` shows. `None` removes the tag.
    pub fn set_tag(&mut self, tag: Option<String>) {
        self.tag = tag.filter(|t| !t.is_empty());
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Whether findings were given to this (read-only) store and not written.
    pub fn findings_unsaved(&self) -> bool {
        self.findings_unsaved
    }

    fn schema_version(&self) -> Result<Option<i64>, StoreError> {
        let found: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        Ok(found.and_then(|v| v.parse::<i64>().ok()))
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
        match self.schema_version()? {
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
            // Version 1 lacked `value_blocks`, version 2 `documents`, version 4
            // `document_rows`, version 5 `derived_series`; SCHEMA_SQL has just created them.
            // Version 3's documents lack `version` (theirs are version 1).
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

    /// Caps this connection's page cache at about `bytes` (SQLite's default is 2 MB per
    /// connection, at least 64 KiB here). A writer that runs for days fills its cache to the cap
    /// as the file grows, which shows as resident memory rising for the first minutes: a
    /// process that only appends and reads back its latest run (the agent) needs far less.
    pub fn limit_cache(&self, bytes: u64) -> Result<(), StoreError> {
        let kib = (bytes / 1024).max(64);
        self.conn
            .execute_batch(&format!("PRAGMA cache_size = -{kib};"))?;
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

    /// Bytes the store's pages hold now: the file's pages minus the free ones a delete left
    /// (SQLite reuses them, so the file itself does not shrink).
    pub fn used_bytes(&self) -> Result<u64, StoreError> {
        let pages: i64 = self.conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        let free: i64 = self
            .conn
            .query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        let size: i64 = self.conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        Ok(((pages - free).max(0) * size) as u64)
    }

    /// Moves the WAL into the main file and truncates it (for measuring the file's size).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

/// Whether this user may write `path` and create files beside it (SQLite's `-wal` and `-shm`).
fn may_write(path: &Path) -> bool {
    use rustix::fs::{access, Access};
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    access(path, Access::WRITE_OK).is_ok()
        && access(dir, Access::WRITE_OK | Access::EXEC_OK).is_ok()
}

/// `path` for a `file:` URI: bytes other than unreserved ones and `/` percent-encoded.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// How long [`Store::open`] keeps trying a store another command holds locked.
pub const OPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn open_error(path: &Path, e: rusqlite::Error) -> StoreError {
    let reason = match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            return StoreError::Busy(path.to_path_buf())
        }
        Some(rusqlite::ErrorCode::NotADatabase) => {
            "the file is not a SQLite database (point --db at a tailhunt store or a new file)"
                .to_string()
        }
        Some(rusqlite::ErrorCode::ReadOnly) => return StoreError::ReadOnly,
        Some(rusqlite::ErrorCode::DiskFull) => return StoreError::DiskFull,
        Some(rusqlite::ErrorCode::CannotOpen) => format!(
            "cannot open the file ({e}): check that it and its directory exist and are readable"
        ),
        _ => e.to_string(),
    };
    StoreError::Open {
        path: path.to_path_buf(),
        reason,
    }
}
