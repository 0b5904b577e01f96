//! Store errors.

use std::path::PathBuf;

use thiserror::Error;

/// What went wrong in the store.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The file could not be opened or is not a tailhunt store.
    #[error("cannot open store '{path}': {reason}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Another command held the store's write lock for longer than the open waits.
    #[error("cannot open store '{0}': another tailhunt command kept it locked for 10 s (wait for it, or give this one its own --db)")]
    Busy(PathBuf),
    /// A read-only command was pointed at a file that does not exist.
    #[error("no store at '{0}' (nothing recorded yet: run `tailhunt import FILE`, or pass --db / set TAILHUNT_DB to the right file)")]
    Missing(PathBuf),
    /// Written by a newer tailhunt.
    #[error("store '{path}' has schema version {found}; this tailhunt understands up to {known} (upgrade tailhunt)")]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Version in the file.
        found: i64,
        /// Version this build writes.
        known: i64,
    },
    /// `RUN` matched nothing.
    #[error("no run matches '{0}' (see `tailhunt runs`)")]
    NoSuchRun(String),
    /// `RUN` prefix matched several runs.
    #[error("run id prefix '{prefix}' is ambiguous: it matches {}; type more characters", .matches.join(", "))]
    AmbiguousRun {
        /// What was typed.
        prefix: String,
        /// Runs it matched.
        matches: Vec<String>,
    },
    /// `latest` in an empty store.
    #[error("the store has no runs yet (record one with `tailhunt import FILE`)")]
    NoRuns,
    /// Stored data that does not decode.
    #[error("corrupt data in series {series}: {reason}")]
    Corrupt {
        /// Series id.
        series: i64,
        /// What failed.
        reason: String,
    },
    /// A block could not be compressed (zstd failed, out of memory): it is not stored, and
    /// the samples it held stay unwritten rather than stored in a form that does not read back.
    #[error("cannot compress a block of series {series}: {reason}")]
    Compress {
        /// Series id.
        series: i64,
        /// What failed.
        reason: String,
    },
    /// A run's evidence document that does not read back.
    #[error("run {run}'s stored '{name}' evidence does not read back: {reason}")]
    Document {
        /// The run.
        run: String,
        /// The document's name (`capture`, `runq`).
        name: String,
        /// What failed.
        reason: String,
    },
    /// The file system holding the store has no space left: what was committed before stays.
    #[error(
        "the disk holding the store is full (free space, or point --db at a file on another disk)"
    )]
    DiskFull,
    /// The store cannot be written: a read-only file, directory or mount, or a store opened for
    /// reading.
    #[error("the store cannot be written (a read-only file, directory or mount): point --db at a writable file")]
    ReadOnly,
    /// Any other SQLite error.
    #[error("sqlite: {0}")]
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for StoreError {
    /// SQLite's own words for a full disk or a read-only file ("database or disk is full:
    /// Error code 13") become errors that say what to do.
    fn from(e: rusqlite::Error) -> StoreError {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => StoreError::DiskFull,
            Some(rusqlite::ErrorCode::ReadOnly) => StoreError::ReadOnly,
            _ => StoreError::Sqlite(e),
        }
    }
}

impl StoreError {
    /// Whether the error says the store cannot be written (so reading it read-only may work).
    pub fn is_read_only(&self) -> bool {
        matches!(self, StoreError::ReadOnly)
    }
}
