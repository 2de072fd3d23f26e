//! Line source over a regular file read through memory-mapped windows: the
//! fast path of the NCCL log reader for plain files.
//!
//! Owns [`MappedLines`]: it hands out exactly the lines that
//! [`crate::lines::LineReader`] hands out for the same bytes and `max_line`
//! (see the [`crate::lines`] module doc), with the same `line_no`,
//! `overlong_lines` and final `bytes_read`, but without copying the file
//! through a buffer: the file is mapped in windows of a fixed size
//! (16 MiB by default), each one dropped (unmapped) before the next is mapped,
//! so resident memory stays bounded by one window whatever the file size.
//! The parallel reader's chunks read their windows inside one mapping of the
//! whole file instead ([`MappedLines::open_shared`], [`SharedMap`] in
//! `lines_windows`), populated and released with `madvise`.
//! Newlines are found 64 bytes at a time as a bit mask (one SSE2 compare per
//! 16 bytes; per 32 bytes in [`Avx2Lines`], the same source scanned with
//! AVX2 where the CPU has it), each line then taking the mask's lowest bit, not with one
//! `memchr` call per line: lines of NCCL logs are short (~150 bytes), and the
//! per-call setup of `memchr` weighs. Measured on a 400 MB log in the page
//! cache, handing out every line over 16 MiB windows: 23 ms with the mask,
//! 29 ms with one AVX2 `memchr` per line; a ring of positions filled by an
//! AVX2 routine (runtime-detected) gained 1 ms more, not worth its unsafety.
//!
//! Mapping does not apply to everything: [`MappedLines::open`] returns
//! `Ok(None)` for what is not a regular file (pipes, devices), an empty file,
//! a gzip file (magic `1f 8b`) and when the system refuses the mapping; the
//! caller then reads with `read()` ([`crate::lines::open_maybe_gz`]).
//!
//! **Hazard.** A mapped file that is truncated while being read makes the
//! access to the vanished pages raise `SIGBUS`, which kills the process
//! instead of returning an error. The size is checked again before each
//! window is mapped (a file found shorter is an `UnexpectedEof` error), which
//! narrows but cannot close that race. Logs that another process may
//! truncate while they are read (rotation by copy-and-truncate, a job
//! restarting into the same file) are the case to avoid: `COMMLENS_NO_MMAP=1`
//! turns mapping off (checked by [`crate::nccl_log::read_path`]). A file that grows
//! while being read is read up to its size at open.

use crate::lines::{open_maybe_gz, strip_cr, LineReader, LineSource};
pub use crate::lines_windows::SharedMap;
use crate::lines_windows::{map_window, ALIGN};
use memmap2::Mmap;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::ptr::NonNull;

/// Window size when none is given. Lines alone over a 400 MB log: 4 MiB
/// windows 36 ms, 8 MiB 32 ms, 16 MiB 30 ms, 32 MiB 28 ms; each window is
/// resident while read, so larger ones trade memory for little.
pub const DEFAULT_WINDOW: usize = 16 << 20;

/// `COMMLENS_NO_MMAP` set to anything but empty or `0`: the escape hatch for
/// files that may be truncated while read (see the module doc).
pub fn disabled_by_env() -> bool {
    std::env::var_os("COMMLENS_NO_MMAP").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Lines of a regular file, read through memory-mapped windows.
pub struct MappedLines {
    file: File,
    /// File size at open; nothing past it is read.
    file_len: u64,
    /// Where reading stops: the file size, or the end of the byte range of
    /// [`MappedLines::open_range`] (a chunk of the parallel reader).
    limit: u64,
    /// The current window; `None` only between dropping one and mapping the
    /// next, so that two windows are never resident together (and always
    /// with `shared`). Not an empty
    /// anonymous map there, as it was: on two threads every `mmap`,
    /// `munmap` and `mprotect` takes the process's mmap lock for writing and
    /// may wait for the other thread's populate, and that placeholder was
    /// three more of them a window (105 of the 192 `mmap` calls of `stats` on
    /// 2 threads on the 400 MB bench log).
    map: Option<Mmap>,
    /// The whole file mapped once, shared by the parallel reader's chunks
    /// ([`MappedLines::open_shared`]): windows are populated and released
    /// with `madvise` inside it, not mapped and unmapped (see
    /// [`SharedMap`]). `None`: windows of their own.
    shared: Option<SharedMap>,
    /// The window's first byte (dangling when there is none), so that the
    /// bytes are read on every line without a test of `map`. Invariant: while
    /// `end > 0`, `base..base + end` lies in `map`.
    base: NonNull<u8>,
    /// File offset of the window's first byte.
    map_off: u64,
    /// Start of the unread part, relative to the window.
    pos: usize,
    /// Window length.
    end: usize,
    /// Bytes per window: at least `ALIGN + max_line`, so that a window mapped
    /// from the page containing `pos` holds `max_line + 1` bytes past it.
    window: usize,
    max_line: usize,
    /// Start (relative to the window) of the next 64-byte block to scan.
    next_block: usize,
    /// Newlines at or after `pos` in the block before `next_block`, one bit
    /// per byte. Invariant: no newline lies in `[pos, next_block - 64)`.
    mask: u64,
    line_no: u64,
    overlong_lines: u64,
    windows: u64,
}

impl MappedLines {
    /// Opens `path` for mapped reading with [`DEFAULT_WINDOW`]. `Ok(None)`
    /// when mapping does not apply (see the module doc); `Err` when the file
    /// cannot be opened at all.
    pub fn open(path: &Path, max_line: usize) -> io::Result<Option<MappedLines>> {
        MappedLines::open_with_window(path, max_line, DEFAULT_WINDOW)
    }

    /// [`MappedLines::open`] with windows of about `window` bytes (tests use
    /// a page or a few to cross many windows in small files).
    pub fn open_with_window(path: &Path, max_line: usize, window: usize) -> io::Result<Option<MappedLines>> {
        MappedLines::open_range(path, max_line, window, 0, u64::MAX)
    }

    /// The lines of bytes `start..end` of the file (clamped to its size), as
    /// if they were a file of their own: `start` must be a line start for the
    /// lines to be the file's. Line numbers count from 1 at `start`;
    /// `bytes_read` counts from the file's start. `Ok(None)` as for
    /// [`MappedLines::open`] (an empty range included).
    pub fn open_range(path: &Path, max_line: usize, window: usize, start: u64, end: u64) -> io::Result<Option<MappedLines>> {
        MappedLines::open_in(path, None, max_line, window, start, end)
    }

    /// [`MappedLines::open_range`] with its windows in `shared`, the whole
    /// file mapped once (see [`SharedMap`]).
    pub fn open_shared(path: &Path, shared: &SharedMap, max_line: usize, window: usize, start: u64, end: u64) -> io::Result<Option<MappedLines>> {
        MappedLines::open_in(path, Some(shared.clone()), max_line, window, start, end)
    }

    fn open_in(path: &Path, shared: Option<SharedMap>, max_line: usize, window: usize, start: u64, end: u64) -> io::Result<Option<MappedLines>> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() || meta.len() == 0 || start >= end.min(meta.len()) {
            return Ok(None);
        }
        // The same clamp as LineReader, so both cut at the same lengths.
        let max_line = max_line.max(64);
        let window = window.max(ALIGN as usize + max_line);
        let (file_len, limit) = match &shared {
            Some(m) => (m.len, end.min(m.len)),
            None => (meta.len(), end.min(meta.len())),
        };
        if start >= limit {
            return Ok(None);
        }
        let off = start & !(ALIGN - 1);
        let len = (window as u64).min(limit - off) as usize;
        let map = match &shared {
            // The file is mapped: what fails here (it shrank) is an error,
            // not a reason to read otherwise.
            Some(m) => m.window(&file, off, len).map(|_| None)?,
            None => match map_window(&file, file_len, off, len) {
                Ok(m) => Some(m),
                Err(_) => return Ok(None),
            },
        };
        let mut lines = MappedLines {
            file,
            file_len,
            limit,
            map: None,
            shared: None,
            base: NonNull::dangling(),
            map_off: off,
            pos: 0,
            end: 0,
            window,
            max_line,
            next_block: 0,
            mask: 0,
            line_no: 0,
            overlong_lines: 0,
            windows: 0,
        };
        lines.shared = shared;
        lines.install(map, off, len, start);
        if start == 0 && lines.data().starts_with(&[0x1f, 0x8b]) {
            return Ok(None);
        }
        Ok(Some(lines))
    }

    /// Windows mapped so far (tests check that they crossed some).
    #[doc(hidden)]
    pub fn windows(&self) -> u64 {
        self.windows
    }

    #[inline(always)]
    fn data(&self) -> &[u8] {
        // SAFETY: `base..base + end` lies in the window `map` holds (the
        // field's invariant), which lives as long as the borrow of `self`;
        // with `end == 0` a dangling, aligned pointer makes the empty slice.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.end) }
    }

    /// Returns the next line without its `\n` (and without a trailing `\r`).
    #[inline(always)]
    pub fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        self.next_line_in::<false>()
    }

    /// This source with the newline scan of AVX2 ([`Avx2Lines`]), where the
    /// CPU has it (detected at run time); `None` elsewhere, and where
    /// `COMMLENS_NO_AVX2` is set (to anything but `0`: the tests read every
    /// real log both ways through the binary, as a machine without AVX2 would).
    pub fn avx2(&mut self) -> Option<Avx2Lines<'_>> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2")
            && std::env::var_os("COMMLENS_NO_AVX2").is_none_or(|v| v == "0")
        {
            return Some(Avx2Lines(self));
        }
        None
    }

    /// [`MappedLines::next_line`], the blocks scanned with AVX2 when `AVX2`
    /// (only [`Avx2Lines`] asks for that, and only exists where the CPU has
    /// AVX2).
    #[inline(always)]
    fn next_line_in<const AVX2: bool>(&mut self) -> io::Result<Option<&[u8]>> {
        // The common case, inlined into the caller's loop: a whole line of
        // normal length is in the window.
        if let Some(nl) = self.next_newline::<AVX2>() {
            if nl - self.pos <= self.max_line {
                return Ok(Some(self.take_line(nl)));
            }
        }
        self.next_line_slow()
    }

    /// [`MappedLines::next_line`] when the window holds no whole line of
    /// normal length: cuts an overlong line, maps the next window, or ends.
    #[inline(never)]
    fn next_line_slow(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            let avail = self.end - self.pos;
            // The SSE2 scan whichever scan the caller uses: both leave the
            // same mask.
            match self.next_newline::<false>() {
                Some(nl) if nl - self.pos <= self.max_line => return Ok(Some(self.take_line(nl))),
                Some(_) => return Ok(Some(self.cut_overlong())),
                None if avail > self.max_line => return Ok(Some(self.cut_overlong())),
                None if self.map_off + self.end as u64 == self.limit => {
                    if avail == 0 {
                        return Ok(None);
                    }
                    let start = self.pos;
                    self.pos = self.end;
                    self.line_no += 1;
                    return Ok(Some(strip_cr(&self.data()[start..self.end])));
                }
                // Fewer than max_line + 1 bytes left in this window and no
                // newline among them: the next window starts at this line.
                None => self.remap()?,
            }
        }
    }

    /// The line from `pos` to the newline at `nl`, which is the lowest bit of
    /// `mask`.
    #[inline(always)]
    fn take_line(&mut self, nl: usize) -> &[u8] {
        let start = self.pos;
        self.pos = nl + 1;
        self.mask &= self.mask - 1;
        self.line_no += 1;
        strip_cr(&self.data()[start..nl])
    }

    /// A piece of `max_line` bytes. No newline lies inside it, so the scan
    /// state stays valid.
    fn cut_overlong(&mut self) -> &[u8] {
        let start = self.pos;
        self.pos += self.max_line;
        self.line_no += 1;
        self.overlong_lines += 1;
        &self.data()[start..start + self.max_line]
    }

    /// The first newline at or after `pos` in the window (relative to it).
    /// `AVX2` only where the CPU has it (see [`MappedLines::next_line_in`]).
    #[inline(always)]
    fn next_newline<const AVX2: bool>(&mut self) -> Option<usize> {
        if self.mask == 0 {
            // The blocks without a newline (most of a line's), in locals:
            // the fields are written back once, not on every block.
            let (data, end) = (self.data(), self.end);
            let mut next = self.next_block;
            #[cfg(target_arch = "x86_64")]
            if AVX2 && next + 64 <= end {
                // SAFETY: `AVX2` is true only in `Avx2Lines`, made where the CPU has AVX2.
                let (at, m) = unsafe { whole_blocks_avx2(&data[..end], next) };
                if m != 0 {
                    (self.mask, self.next_block) = (m, at);
                    return Some(at - 64 + m.trailing_zeros() as usize);
                }
                next = at;
            }
            let mask = loop {
                if next >= end {
                    self.next_block = next;
                    return None;
                }
                let m = block_mask::<AVX2>(&data[next..end]);
                next += 64;
                if m != 0 {
                    break m;
                }
            };
            (self.mask, self.next_block) = (mask, next);
        }
        Some(self.next_block - 64 + self.mask.trailing_zeros() as usize)
    }

    /// Drops the window, then maps the one starting at the page that contains
    /// the current position; after an error the source is empty at that
    /// position, and reading again retries.
    #[cold]
    fn remap(&mut self) -> io::Result<()> {
        let abs = self.map_off + self.pos as u64;
        let off = abs & !(ALIGN - 1);
        let len = (self.window as u64).min(self.limit - off) as usize;
        // The window size guarantees progress; a window that does not reach
        // past the previous one would loop forever, so it is an error.
        if off + len as u64 <= self.map_off + self.end as u64 {
            return Err(io::Error::other("mapped window did not advance"));
        }
        // Unmapped and empty until the new window is in place, so that a
        // failed mapping leaves a consistent (retryable) state.
        let (old_off, old_end) = (self.map_off, self.map_off + self.end as u64);
        (self.map, self.base) = (None, NonNull::dangling());
        (self.map_off, self.pos, self.end, self.next_block, self.mask) = (abs, 0, 0, 0, 0);
        let map = match &self.shared {
            Some(m) => {
                // The old window's pages before the new one go.
                m.release(old_off, off.min(old_end));
                m.window(&self.file, off, len)?;
                None
            }
            None => Some(map_window(&self.file, self.file_len, off, len)?),
        };
        self.install(map, off, len, abs);
        Ok(())
    }

    /// Makes `map`, mapped from file offset `off`, the window, reading on at
    /// file offset `at`.
    fn install(&mut self, map: Option<Mmap>, off: u64, len: usize, at: u64) {
        self.windows += 1;
        self.map_off = off;
        let ptr = match (&map, &self.shared) {
            (Some(m), _) => m.as_ptr(),
            // SAFETY: `off + len` is within the shared map (`window` checked it).
            (None, Some(s)) => unsafe { s.map.as_ptr().add(off as usize) },
            (None, None) => unreachable!("a window is mapped or shared"),
        };
        self.base = NonNull::new(ptr.cast_mut()).unwrap_or(NonNull::dangling());
        self.end = len;
        self.map = map;
        self.pos = (at - off) as usize;
        // Restart the scan at the block holding pos, without the newlines
        // before pos.
        self.next_block = self.pos & !63;
        self.mask = block_mask::<false>(&self.data()[self.next_block..self.end]) & (!0u64 << (self.pos & 63));
        self.next_block += 64;
    }
}

impl Drop for MappedLines {
    fn drop(&mut self) {
        if let Some(m) = &self.shared {
            m.release(self.map_off, self.map_off + self.end as u64);
        }
    }
}

impl LineSource for MappedLines {
    #[inline(always)]
    fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        MappedLines::next_line(self)
    }
    fn line_no(&self) -> u64 {
        self.line_no
    }
    /// Bytes consumed so far (the file size at the end), so progress reports
    /// follow the lines handed out rather than the windows mapped.
    fn bytes_read(&self) -> u64 {
        self.map_off + self.pos as u64
    }
    fn overlong_lines(&self) -> u64 {
        self.overlong_lines
    }
    #[inline(always)]
    fn ahead(&self) -> (u64, &[u8]) {
        (self.map_off + self.pos as u64, &self.data()[self.pos..self.end])
    }
    #[inline(always)]
    fn next_offset(&self) -> u64 {
        self.map_off + self.pos as u64
    }
}

/// A [`MappedLines`] whose newline scan compares 32 bytes at a time (AVX2),
/// half the instructions of the SSE2 scan per 64-byte block: made by
/// [`MappedLines::avx2`] only where the CPU has AVX2. The lines, numbers and
/// counts are those of the source itself (tests read every file both ways).
/// The scan inlines only into code compiled for AVX2: the NCCL log reader
/// runs its whole loop in such a function ([`crate::nccl_log::read_path`]).
pub struct Avx2Lines<'a>(&'a mut MappedLines);

impl LineSource for Avx2Lines<'_> {
    #[inline(always)]
    fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        self.0.next_line_in::<true>()
    }
    fn line_no(&self) -> u64 {
        self.0.line_no
    }
    fn bytes_read(&self) -> u64 {
        LineSource::bytes_read(&*self.0)
    }
    fn overlong_lines(&self) -> u64 {
        self.0.overlong_lines
    }
    #[inline(always)]
    fn ahead(&self) -> (u64, &[u8]) {
        LineSource::ahead(&*self.0)
    }
    #[inline(always)]
    fn next_offset(&self) -> u64 {
        LineSource::next_offset(&*self.0)
    }
}

/// The lines of a file, from whichever source applies: mapped windows for a
/// plain file (unless `allow_mmap` is false or [`disabled_by_env`]), else
/// `read()` with gzip detection. The one place that choice is made, for every
/// reader of line-oriented files.
pub enum FileLines {
    Mapped(MappedLines),
    Read(LineReader<Box<dyn Read + Send>>),
}

impl FileLines {
    pub fn open(path: &Path, max_line: usize, allow_mmap: bool) -> io::Result<FileLines> {
        if allow_mmap && !disabled_by_env() {
            if let Some(m) = MappedLines::open(path, max_line)? {
                return Ok(FileLines::Mapped(m));
            }
        }
        Ok(FileLines::Read(LineReader::new(open_maybe_gz(path)?, max_line)))
    }
}

impl LineSource for FileLines {
    #[inline(always)]
    fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        match self {
            FileLines::Mapped(m) => m.next_line(),
            FileLines::Read(r) => r.next_line(),
        }
    }
    fn line_no(&self) -> u64 {
        match self {
            FileLines::Mapped(m) => LineSource::line_no(m),
            FileLines::Read(r) => r.line_no,
        }
    }
    fn bytes_read(&self) -> u64 {
        match self {
            FileLines::Mapped(m) => LineSource::bytes_read(m),
            FileLines::Read(r) => r.bytes_read,
        }
    }
    fn overlong_lines(&self) -> u64 {
        match self {
            FileLines::Mapped(m) => LineSource::overlong_lines(m),
            FileLines::Read(r) => r.overlong_lines,
        }
    }
    fn cut(&self) -> Option<&crate::lines::StreamCut> {
        match self {
            FileLines::Mapped(_) => None,
            FileLines::Read(r) => r.cut.as_ref(),
        }
    }
    #[inline(always)]
    fn ahead(&self) -> (u64, &[u8]) {
        match self {
            FileLines::Mapped(m) => LineSource::ahead(m),
            FileLines::Read(r) => LineSource::ahead(r),
        }
    }
    #[inline(always)]
    fn next_offset(&self) -> u64 {
        match self {
            FileLines::Mapped(m) => LineSource::next_offset(m),
            FileLines::Read(r) => LineSource::next_offset(r),
        }
    }
}

/// Bit i set when `s[i] == b'\n'`, for the first 64 bytes of `s` (fewer when
/// `s` is shorter: the window's last block). `AVX2` only where the CPU has it.
#[inline(always)]
fn block_mask<const AVX2: bool>(s: &[u8]) -> u64 {
    match s.first_chunk::<64>() {
        // SAFETY: `AVX2` is true only in `Avx2Lines`, made where the CPU has AVX2.
        #[cfg(target_arch = "x86_64")]
        Some(block) if AVX2 => unsafe { newlines64_avx2(block) },
        Some(block) => newlines64(block),
        None => newlines_scalar(s),
    }
}

/// How far ahead of the newline scan [`whole_blocks_avx2`] asks for the
/// bytes (one prefetch a 64-byte block). The parse runs at ~1 GB/s a core,
/// far below what memory delivers, but without this the first pass over a
/// block of the page cache waited for it: the nccl-tests mark search
/// (`MarkHorizon`, which runs ahead of the lines, now at most
/// 16 KiB, below this distance) took 9-11 % of the samples of `stats` on
/// the 400 MB bench log (`perf record -e cpu-clock`) for ~3.6 % of its
/// instructions, stalled on its loads, and 4.4 % with this. `stats` on that
/// log, 21 alternated runs: 1 thread min 407 -> 373 ms, 2 threads 222 ->
/// 209 ms (32 KiB; 8 and 128 KiB did as well, 0 did not).
#[cfg(target_arch = "x86_64")]
const PREFETCH_AHEAD: usize = 32 << 10;

/// From the block at `next` on (`next + 64 <= data.len()`), the first whole
/// block with a newline: (its end, its newlines); else (the start of the
/// shorter last block, 0). A loop of its own, out of line: inlined into the
/// reader's loop it carried four more counters a block.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn whole_blocks_avx2(data: &[u8], mut next: usize) -> (usize, u64) {
    use std::arch::x86_64::{__m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8};
    let nl = _mm256_set1_epi8(b'\n' as i8);
    // Most blocks hold no newline: the two halves' compares are OR-ed and
    // tested with one movemask, the 64-bit mask built only for the block
    // that has one (fewer instructions a block than two movemasks, a shift
    // and an OR each time).
    while next + 64 <= data.len() {
        // A prefetch is a hint that never faults: the address may lie past
        // the mapping (`wrapping_add`: never dereferenced).
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(data.as_ptr().wrapping_add(next + PREFETCH_AHEAD).cast());
        // SAFETY: bytes next..next + 64 are inside `data` (loop condition);
        // the CPU has AVX2 (this function's contract).
        let (lo, hi) = unsafe {
            let p = data.as_ptr().add(next).cast::<__m256i>();
            (_mm256_cmpeq_epi8(_mm256_loadu_si256(p), nl), _mm256_cmpeq_epi8(_mm256_loadu_si256(p.add(1)), nl))
        };
        next += 64;
        if _mm256_movemask_epi8(_mm256_or_si256(lo, hi)) != 0 {
            let lo = _mm256_movemask_epi8(lo) as u32 as u64;
            let hi = _mm256_movemask_epi8(hi) as u32 as u64;
            return (next, lo | hi << 32);
        }
    }
    (next, 0)
}

/// The reference of the vector scans: bit i set when `s[i] == b'\n'`, for
/// the first 64 bytes of `s`.
#[inline]
fn newlines_scalar(s: &[u8]) -> u64 {
    s.iter().take(64).enumerate().fold(0, |m, (i, &b)| m | ((b == b'\n') as u64) << i)
}

/// [`newlines64`] in two 32-byte compares.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn newlines64_avx2(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{__m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8};
    let p = block.as_ptr().cast::<__m256i>();
    let nl = _mm256_set1_epi8(b'\n' as i8);
    // SAFETY: the unaligned loads read bytes 0..32 and 32..64 of the block.
    let (lo, hi) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
    let lo = _mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, nl)) as u32 as u64;
    let hi = _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, nl)) as u32 as u64;
    lo | hi << 32
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn newlines64(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    let p = block.as_ptr().cast::<__m128i>();
    // SAFETY: SSE2 is part of the x86_64 baseline (always enabled), and the
    // unaligned loads read bytes 16k..16k+16 of the 64-byte block, k < 4.
    unsafe {
        let nl = _mm_set1_epi8(b'\n' as i8);
        let mut m = 0u64;
        for k in 0..4 {
            let v = _mm_loadu_si128(p.add(k));
            m |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl)) as u32 as u64) << (16 * k);
        }
        m
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn newlines64(block: &[u8; 64]) -> u64 {
    newlines_scalar(block)
}

#[cfg(test)]
#[path = "lines_mapped_tests.rs"]
mod tests;
