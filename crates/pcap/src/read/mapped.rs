//! A plain capture file read through a memory map: the records are decoded where the page
//! cache holds them, without the copy a `read` makes.
//!
//! In: an open regular file. Out: its bytes as one slice ([`Mapped::bytes`]), grown when the
//! file grows ([`Mapped::grow`]), and a check that a window of them can still be read
//! ([`Mapped::readable`]). All of this crate's unsafe code is in this file.
//!
//! Why: on the 1 GB mix (2026-12-01, this 2-CPU AMD EPYC host), a walk over every record
//! touching its first 80 bytes took 0.09-0.12 s reading 1 MiB at a time and 0.044-0.050 s over
//! a map with the next 8 KiB prefetched ahead of the walk (0.12 s without the prefetch: each
//! record's first touch then waits for memory). Cached as tcpdump wrote it (4 KiB pages) the
//! map took 0.097-0.100 s against 0.108-0.126 s. The copy was the larger part of a sharded
//! pass's reader thread.
//!
//! Three things a `read` does not have to care about:
//! - **A file cut while it is mapped** (a ring of `tcpdump -C -W` files reopens the oldest with
//!   `O_TRUNC`) makes a touch beyond its new end raise SIGBUS, which would end the process and
//!   what it measured. A handler, installed once and chained to the one before it (the
//!   standard library's stack guard), maps a page of zeros over the faulting page when the
//!   address is inside a registered map, marks the map, and returns. [`Mapped::readable`]
//!   touches every page of a window before the parsers read it and reports the mark; the
//!   reader then ends the file where it now ends, as a truncated one. A window touched just
//!   before the cut may still read as zeros past it: the cut is reported at the next record.
//! - **Memory**: pages of a map count in the process's resident set as they are touched. The
//!   map's pages more than [`LAG`] behind the reader are dropped from it as the reader goes
//!   (`MADV_DONTNEED`: they stay in the page cache; only the mapping goes), so the resident
//!   set does not grow with the file.
//! - **A file that grows** (tcpdump still writing): at the end of the map the file's size is
//!   read again and the map made anew over the longer file, as a `read` would find more bytes.
//!
//! The map is shared and read-only; a capture must not be rewritten in place while it is read
//! (its bytes would change under the parsers, as they would between two `read`s).

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

use memmap2::{Mmap, MmapOptions, UncheckedAdvice};

/// How far ahead of the reader the map's bytes are prefetched (measured: 4-32 KiB did as
/// well; 64 KiB worse).
const AHEAD: usize = 8 << 10;
/// Pages this far behind the reader leave the resident set (measured: 4 MiB kept 5.5 MiB
/// more resident than reading did, this 2 MiB about 3). A record may be longer (up to
/// [`super::MAX_BUFFER`]); its bytes are then mapped again from the page cache, which only
/// costs a fault.
const LAG: usize = 2 << 20;
/// Dropping pages in steps of a large folio keeps a 2 MiB mapping whole.
const RELEASE_STEP: usize = 2 << 20;

/// Maps registered with the SIGBUS guard at once; a file beyond that is read, not mapped.
const SLOTS: usize = 32;

/// A registered map: its address range while it lives (0..0 when free), and whether a
/// touch inside it faulted.
struct Slot {
    used: AtomicBool,
    start: AtomicUsize,
    end: AtomicUsize,
    hit: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    used: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    hit: AtomicBool::new(false),
};
static GUARDED: [Slot; SLOTS] = [FREE; SLOTS];
static PAGE: AtomicUsize = AtomicUsize::new(4096);
static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The SIGBUS action that was there before the guard's.
struct Previous(libc::sigaction);
// SAFETY: a plain C struct of function pointers and flags, written once before the guard's
// handler can run and only read after.
#[allow(unsafe_code)]
unsafe impl Sync for Previous {}
#[allow(unsafe_code)]
unsafe impl Send for Previous {}
static PREVIOUS: OnceLock<Previous> = OnceLock::new();

/// A plain file mapped whole.
pub struct Mapped {
    file: File,
    map: Mmap,
    slot: usize,
    /// Bytes prefetched up to here.
    prefetched: usize,
    /// Bytes before this have left the resident set.
    released: usize,
}

impl Mapped {
    /// Maps `file` when it is a regular file with bytes in it and the guard is in place;
    /// `None` otherwise (the caller then reads it).
    pub fn open(file: &File) -> Option<Mapped> {
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() == 0 || usize::try_from(meta.len()).is_err() {
            return None;
        }
        if !install() {
            return None;
        }
        let file = file.try_clone().ok()?;
        let map = map(&file)?;
        let slot = claim(&map)?;
        Some(Mapped {
            file,
            map,
            slot,
            prefetched: 0,
            released: 0,
        })
    }

    /// The file's bytes, as far as they were when it was last mapped.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Whether `start..end` can be read: a byte of every page of it is touched (a page the
    /// file no longer has faults at any byte of it), and such a fault marks the map (see the
    /// module docs). The window's first byte is the one the parsers read first; the others
    /// are page starts, which the prefetch brings in.
    #[inline]
    pub fn readable(&self, start: usize, end: usize) -> bool {
        let page = PAGE.load(Ordering::Relaxed);
        let bytes: &[u8] = &self.map;
        let mut at = start;
        while at < end {
            // SAFETY: `at` is inside the map (`end <= len`); a volatile read so the touch is
            // made even though its value is not used.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::read_volatile(bytes.as_ptr().add(at));
            }
            at = (at | (page - 1)) + 1;
        }
        !GUARDED[self.slot].hit.load(Ordering::Relaxed)
    }

    /// The file's size now, after [`Mapped::readable`] said no: `Err` when the file is as
    /// long as before (the page could not be read: an I/O error, not a cut).
    pub fn cut_at(&self, offset: usize) -> io::Result<usize> {
        let len = self.file.metadata()?.len();
        if len as u128 > offset as u128 {
            return Err(io::Error::other(format!(
                "the page at byte {offset} could not be read from the file (an I/O error while it was mapped)"
            )));
        }
        Ok(len as usize)
    }

    /// Maps the file again when it has grown since it was mapped; whether it had.
    pub fn grow(&mut self) -> io::Result<bool> {
        let len = self.file.metadata()?.len();
        if len <= self.map.len() as u64 || usize::try_from(len).is_err() {
            return Ok(false);
        }
        let Some(map) = map(&self.file) else {
            return Ok(false);
        };
        let slot = &GUARDED[self.slot];
        // The old range stays registered until the new one is: this thread is the only one
        // touching either.
        slot.start.store(map.as_ptr() as usize, Ordering::Release);
        slot.end
            .store(map.as_ptr() as usize + map.len(), Ordering::Release);
        self.map = map;
        Ok(true)
    }

    /// The reader is at `pos`: prefetches ahead of it and lets go of pages well behind it.
    #[inline]
    pub fn advance(&mut self, pos: usize) {
        if pos + AHEAD > self.prefetched {
            self.prefetch(pos);
        }
        if pos > self.released + LAG + RELEASE_STEP {
            self.release(pos);
        }
    }

    fn prefetch(&mut self, pos: usize) {
        let len = self.map.len();
        let from = self.prefetched.max(pos);
        // Up to the distance and no more: a burst of prefetches fills the core's miss
        // buffers and stalls it (measured: 64 at a time put a third of the reader's time on
        // the prefetch loop).
        let to = (pos + AHEAD).min(len);
        let base = self.map.as_ptr();
        let mut at = from;
        while at < to {
            prefetch(base.wrapping_add(at));
            at += 64;
        }
        self.prefetched = to.max(self.prefetched);
    }

    #[cold]
    fn release(&mut self, pos: usize) {
        let upto = (pos - LAG) & !(RELEASE_STEP - 1);
        if upto <= self.released {
            return;
        }
        // SAFETY: the map is shared and read-only: dropping its pages loses nothing, a later
        // touch maps the same bytes from the page cache again. Nothing borrows them (this
        // takes `&mut self`).
        #[allow(unsafe_code)]
        let _ = unsafe {
            self.map.unchecked_advise_range(
                UncheckedAdvice::DontNeed,
                self.released,
                upto - self.released,
            )
        };
        self.released = upto;
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        let slot = &GUARDED[self.slot];
        slot.start.store(0, Ordering::Release);
        slot.end.store(0, Ordering::Release);
        slot.hit.store(false, Ordering::Release);
        slot.used.store(false, Ordering::Release);
    }
}

fn map(file: &File) -> Option<Mmap> {
    // SAFETY: the map is read-only and shared. The bytes can change under it only when the
    // file is rewritten in place, which the module docs rule out; a cut file is the SIGBUS
    // guard's job.
    #[allow(unsafe_code)]
    // No MADV_SEQUENTIAL: it did not help a cached file, and the kernel's read-ahead already
    // follows a sequential walk.
    unsafe { MmapOptions::new().map(file) }.ok()
}

/// Registers `map` with the guard; `None` when every slot is taken.
fn claim(map: &Mmap) -> Option<usize> {
    let i = GUARDED.iter().position(|s| {
        s.used
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    let slot = &GUARDED[i];
    slot.hit.store(false, Ordering::Release);
    slot.start.store(map.as_ptr() as usize, Ordering::Release);
    slot.end
        .store(map.as_ptr() as usize + map.len(), Ordering::Release);
    Some(i)
}

#[inline]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint; it never faults, whatever the address.
        #[allow(unsafe_code, unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p.cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Installs the SIGBUS guard once; whether it is in place.
fn install() -> bool {
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no preconditions.
        #[allow(unsafe_code)]
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE.store(page as usize, Ordering::Relaxed);
        }
        // SAFETY: the action is fully initialised (zeroed, then the handler, an empty mask
        // and the flags); the previous action is stored before any map is registered, so
        // the handler never runs without it for an address of ours.
        #[allow(unsafe_code)]
        unsafe {
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &new, &mut old) == 0 {
                let _ = PREVIOUS.set(Previous(old));
                INSTALLED.store(true, Ordering::Release);
            }
        }
    });
    INSTALLED.load(Ordering::Acquire)
}

/// The guard: a fault inside a registered map gets a page of zeros and marks the map; any
/// other goes to the action that was there before (the standard library's stack guard, or
/// the default, which ends the process when the fault repeats).
#[allow(unsafe_code)]
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a handler installed with SA_SIGINFO.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for slot in &GUARDED {
        let (start, end) = (
            slot.start.load(Ordering::Acquire),
            slot.end.load(Ordering::Acquire),
        );
        if start != 0 && start <= addr && addr < end {
            let at = addr & !(page - 1);
            // SAFETY: replaces one page of our own read-only map (the range is registered
            // only while the map lives) with zeros; mmap is a plain system call.
            let p = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                slot.hit.store(true, Ordering::Release);
                return;
            }
        }
    }
    let Some(Previous(old)) = PREVIOUS.get() else {
        return;
    };
    let handler = old.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // SAFETY: puts back the action found at install; the fault then repeats under it.
        unsafe { libc::sigaction(libc::SIGBUS, old, std::ptr::null_mut()) };
    } else if old.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO: this is its signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a handler installed without SA_SIGINFO takes the signal number alone.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}
