//! How the mapped line source ([`crate::lines_mapped::MappedLines`]) maps
//! the windows it reads a file in: each window a mapping of its own
//! ([`map_window`], populated as it is mapped, unmapped when the reader
//! moves on), or windows inside one mapping of the whole file shared by the
//! parallel reader's chunks ([`SharedMap`]). Split out of `lines_mapped.rs`
//! (702 lines) so that both stay under ~600 lines.

use memmap2::{Mmap, MmapOptions};
use std::fs::File;
use std::io;
use std::path::Path;

/// Windows start at multiples of this (the smallest common page size; memmap2
/// maps from the page containing the offset where pages are larger).
pub(crate) const ALIGN: u64 = 4096;

/// Maps bytes `off..off + len` of `file` (`off` a multiple of [`ALIGN`]),
/// populated, after checking that the file is not shorter than `file_len`:
/// a file found shorter than at open would fault on the vanished pages, and
/// an error is better than SIGBUS where it can still be caught.
pub(crate) fn map_window(file: &File, file_len: u64, off: u64, len: usize) -> io::Result<Mmap> {
    let now = file.metadata()?.len();
    if now < file_len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("file shrank from {file_len} to {now} bytes while being read"),
        ));
    }
    // SAFETY: the mapping is read-only and only ever read, through slices
    // borrowed from its `MappedLines` that end before the next remap. Its
    // one hazard, another process truncating the file while it is mapped
    // (SIGBUS on access), is documented in the module doc and narrowed by
    // the size check above. Bytes changed in place by another process are
    // merely read as they are, like read() would.
    unsafe { MmapOptions::new().offset(off).len(len).populate().map(file) }
}

/// A whole file mapped once for the chunks of the parallel reader, each
/// reading its windows in it: populated with `MADV_POPULATE_READ` and
/// released with `MADV_DONTNEED` as the reading passes, both under the
/// process's mmap lock taken for reading. Mapping and unmapping a window
/// take it for writing, so on two threads each worker's `mmap` waited for
/// the other's populate (kernel lock contention, `perf` lock events: 1.6
/// to 4.1 ms a run on the 400 MB bench log, mostly `vm_mmap_pgoff` and
/// `__vm_munmap`), and every `munmap` flushed the other core's TLB.
/// Resident memory stays a window per reader, as with windows of their own.
#[derive(Clone)]
pub struct SharedMap {
    pub(crate) map: std::sync::Arc<Mmap>,
    pub(crate) len: u64,
}

impl SharedMap {
    /// Maps all of `path` (no page is read yet); `None` where mapping does
    /// not apply (not a regular file, empty, refused).
    pub fn open(path: &Path) -> io::Result<Option<SharedMap>> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() || meta.len() == 0 || crate::lines_mapped::disabled_by_env() {
            return Ok(None);
        }
        // SAFETY: as in `map_window`: read-only, only read through slices
        // that end before the window moves; truncation is checked before
        // each window (`window`) and documented in the module doc.
        let map = unsafe { MmapOptions::new().len(meta.len() as usize).map(&file) };
        Ok(map.ok().map(|m| SharedMap { map: std::sync::Arc::new(m), len: meta.len() }))
    }

    /// Makes bytes `off..off + len` a window: the file checked not to have
    /// shrunk, its pages populated (where the kernel can: else they fault in
    /// as they are read).
    pub(crate) fn window(&self, file: &File, off: u64, len: usize) -> io::Result<()> {
        let now = file.metadata()?.len();
        if now < self.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("file shrank from {} to {now} bytes while being read", self.len),
            ));
        }
        if off + len as u64 > self.len {
            return Err(io::Error::other("window past the mapped file"));
        }
        #[cfg(target_os = "linux")]
        let _ = self.map.advise_range(memmap2::Advice::PopulateRead, off as usize, len);
        Ok(())
    }

    /// Drops the page table entries of bytes `from..to` (whole pages
    /// inside); the file's pages stay in the page cache.
    pub(crate) fn release(&self, from: u64, to: u64) {
        let from = (from + ALIGN - 1) & !(ALIGN - 1);
        if to <= from {
            return;
        }
        // SAFETY: no slice of these bytes is held (lines are borrowed from
        // the reader until its next call, and this runs in that call or at
        // its drop); a later read of them faults the file's pages in again.
        let _ = unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from as usize, (to - from) as usize) };
    }
}
