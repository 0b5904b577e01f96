//! Several captures read in order as one: rotated files (`tcpdump -C`, `-G`) continue each
//! other.
//!
//! In: the sources of a pass, as a [`SourceSet`] — a [`FileSet`] of paths, or sources already
//! open (a live capture). Out: one source at a time, for [`crate::run::analyse`], which reads
//! each to its end (or to where it breaks) and goes on with the next, recording per source what
//! happened.
//!
//! A [`FileSet`] opens a file only when its turn comes and closes it when the next one is
//! opened: a set of thousands of files holds one read buffer, not one per file.
//! [`FileSet::open_first`] opens files until one can be read, so a set in which nothing can
//! be read is refused before anything is stored.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::{open_file, open_reader, FileReader, PacketSource, ReadError, UntilStopped};

/// An ordered set of packet sources read as one capture.
pub trait SourceSet {
    /// How many sources there are.
    fn count(&self) -> usize;
    /// What to call source `i` (its path).
    fn name(&self, i: usize) -> String;
    /// Opens source `i` (called once per source, in order; the source opened before is no
    /// longer needed).
    fn open(&mut self, i: usize) -> Result<&mut dyn PacketSource, ReadError>;
}

/// Sources that are already open (a live capture): each is simply handed out.
impl SourceSet for Vec<Box<dyn PacketSource>> {
    fn count(&self) -> usize {
        self.len()
    }

    fn name(&self, i: usize) -> String {
        format!("source {}", i + 1)
    }

    fn open(&mut self, i: usize) -> Result<&mut dyn PacketSource, ReadError> {
        Ok(self[i].as_mut())
    }
}

/// Capture files, opened one at a time. The path `-` is standard input (a capture piped in:
/// `tcpdump -w - | ...`, `zcat ... | ...`), read once.
pub struct FileSet {
    paths: Vec<PathBuf>,
    /// Files opened ahead of their turn by [`FileSet::open_first`], with the outcome.
    early: Vec<Option<Result<FileReader, ReadError>>>,
    current: Option<FileReader>,
    /// A stop flag standard input gives way to (see [`FileSet::stopped_by`]).
    stop: Option<&'static AtomicBool>,
}

/// No file of a set can be read: each one's reason, in order.
#[derive(Debug)]
pub struct Unreadable(pub Vec<ReadError>);

impl std::error::Error for Unreadable {}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}: nothing to analyse"),
            all => {
                let why: Vec<String> = all.iter().map(ReadError::to_string).collect();
                write!(
                    f,
                    "none of the {} files can be read: {}",
                    all.len(),
                    why.join("; ")
                )
            }
        }
    }
}

impl FileSet {
    /// The files, in the order they are to be read.
    pub fn new(paths: Vec<PathBuf>) -> FileSet {
        let early = paths.iter().map(|_| None).collect();
        FileSet {
            paths,
            early,
            current: None,
            stop: None,
        }
    }

    /// Standard input (`-`) gives way to `stop`: a read waiting for a writer that pauses
    /// ends once the flag is up, and the pass stops there (see [`UntilStopped`]). Files need
    /// not: their reads end by themselves.
    pub fn stopped_by(mut self, stop: &'static AtomicBool) -> FileSet {
        self.stop = Some(stop);
        self
    }

    /// Opens files in order until one can be read (the ones before it are kept with their
    /// errors, for [`SourceSet::open`] to return when their turn comes). `Err` with every
    /// file's reason when none can.
    pub fn open_first(&mut self) -> Result<(), Unreadable> {
        for (path, slot) in self.paths.iter().zip(&mut self.early) {
            let opened = open_path(path, self.stop);
            let ok = opened.is_ok();
            *slot = Some(opened);
            if ok {
                return Ok(());
            }
        }
        let errors = self
            .early
            .iter_mut()
            .filter_map(|s| match s.take() {
                Some(Err(e)) => Some(e),
                _ => None,
            })
            .collect();
        Err(Unreadable(errors))
    }
}

impl SourceSet for FileSet {
    fn count(&self) -> usize {
        self.paths.len()
    }

    fn name(&self, i: usize) -> String {
        source_name(&self.paths[i])
    }

    fn open(&mut self, i: usize) -> Result<&mut dyn PacketSource, ReadError> {
        // Close the file before first: its buffer is not needed any more.
        self.current = None;
        let reader = match self.early[i].take() {
            Some(opened) => opened?,
            None => open_path(&self.paths[i], self.stop)?,
        };
        Ok(self.current.insert(reader))
    }
}

/// Whether `path` names standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How a source is named in reports and errors: `stdin` for `-`, else the path.
fn source_name(path: &Path) -> String {
    if is_stdin(path) {
        STDIN.to_string()
    } else {
        path.display().to_string()
    }
}

const STDIN: &str = "stdin";

fn open_path(path: &Path, stop: Option<&'static AtomicBool>) -> Result<FileReader, ReadError> {
    if !is_stdin(path) {
        return open_file(path);
    }
    match stop {
        Some(stop) => {
            let stdin = UntilStopped::new(stop).map_err(|source| ReadError::Io {
                path: STDIN.into(),
                source,
            })?;
            open_reader(STDIN, Box::new(stdin))
        }
        None => open_reader(STDIN, Box::new(std::io::stdin())),
    }
}
