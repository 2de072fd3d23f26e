//! Reader for `NCCL_DEBUG=INFO|TRACE` logs, NCCL 2.7 to 2.28.
//!
//! Streams a file line by line (bounded memory; a mapped file, where the
//! CPU has AVX2, in one loop compiled for it: `read_lines_avx2`), splits lines into
//! per-process segments (interleaved writers), classifies each message and
//! builds the table: processes, devices, communicator handles, topology, and
//! one [`CollOp`] per `opCount` line with the algorithm of its tuning line.
//!
//! Submodules: [`prefix`] (line prefix, interleaving), [`ops`] (operation,
//! tuning and call lines), [`init`] (communicator init, version, rings,
//! trees), [`topo`] (topology dump; its block state machine in `topo_block`,
//! path lines in `topo_paths`, byte-level grammar in `topo_lex`), [`state`]
//! (the state machine; operations, cut-line recovery and tuning queues in
//! `state_ops`, devices and communicators in `state_comms`), [`report`]
//! (counts of what was read and skipped), [`chunked`] (one large file on all
//! cores; chunks joined in file order by `chunk_order`, folded by
//! `chunk_join` after the checks of `chunk_check`, threads in `chunk_threads`).

mod chunk_check;
mod chunk_join;
mod chunk_order;
mod chunk_seeds;
mod chunk_threads;
mod chunk_trace;
pub mod chunked;
pub mod init;
pub mod ops;
mod ops_call;
mod ops_fast;
mod ops_tuning;
pub mod prefix;
mod prefix_cache;
pub mod report;
pub mod state;
mod state_comms;
mod state_ops;
pub mod topo;
mod topo_block;
mod topo_lex;
mod topo_paths;

pub use chunk_join::ChunkMaps;
pub use report::ReadReport;
pub use state::LogParser;

use crate::error::IngestError;
use crate::lines::{LineReader, LineSource};
use crate::lines_mapped::FileLines;
use commlens_core::{CollOp, OpTable};
use std::io::Read;
use std::path::Path;

/// Progress callback: receives byte deltas (see [`ReadOptions::progress`]).
pub type ProgressFn = std::sync::Arc<dyn Fn(u64) + Send + Sync>;

/// Options for reading one log.
#[derive(Clone)]
pub struct ReadOptions {
    /// Longer lines are cut into pieces (and counted).
    pub max_line: usize,
    /// Give up when this many lines carried no NCCL prefix at all.
    pub sniff_lines: u64,
    /// Called with the number of bytes read since its previous call, about
    /// every 4 MiB (the deltas of one file add up to its size).
    pub progress: Option<ProgressFn>,
    /// Shortcuts for the common line shapes (on by default). Off, every line
    /// takes the general path; tests read each log both ways and require the
    /// same table and report.
    #[doc(hidden)]
    pub fast_paths: bool,
    /// [`read_path`] reads plain files through memory-mapped windows (on by
    /// default; `COMMLENS_NO_MMAP=1` in the environment also turns it off).
    /// Off, it reads with `read()`; tests read each log both ways and require
    /// the same table and report.
    #[doc(hidden)]
    pub mmap: bool,
    /// Large plain files are read in chunks of this many bytes on all cores
    /// ([`chunked`]); `Some(0)` reads sequentially. `None`: the
    /// `COMMLENS_CHUNK_BYTES` environment variable, else [`chunked::DEFAULT_CHUNK`].
    #[doc(hidden)]
    pub chunk_bytes: Option<u64>,
    /// Keep samples of malformed and uninterpreted lines in each file's
    /// [`ReadReport`] (on by default). Commands that print no read summary
    /// turn it off: a 100,000-file job would otherwise hold ~10 KB of samples
    /// per file through its analyses. Counts are kept either way.
    pub samples: bool,
    /// Files that are nccl-tests output too: their tables are read in the
    /// same pass ([`crate::nccl_tests::BenchTables`]), not in a second one.
    pub bench_tables: Option<std::sync::Arc<crate::nccl_tests::BenchTables>>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_line: 1 << 20,
            sniff_lines: 200_000,
            progress: None,
            fast_paths: true,
            mmap: true,
            chunk_bytes: None,
            samples: true,
            bench_tables: None,
        }
    }
}

/// Reads a log from any byte source, streaming operations to `sink`.
/// Returns the table without operations (`per_rank` empty) and the report.
pub fn read_stream(
    path: &Path,
    src: impl Read,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(CollOp),
) -> Result<(OpTable, ReadReport), IngestError> {
    read_lines::<_, false>(path, &mut LineReader::new(src, opts.max_line), opts, sink)
}

/// The reading loop, over either line source (monomorphised, so the line
/// source's fast path inlines into it; inlined into its callers, so that
/// [`read_lines_avx2`] compiles all of it for AVX2). `INLINE_FEED`: the
/// parser's per-line entry inlined too (only worth its size there).
#[inline(always)]
fn read_lines<L: LineSource, const INLINE_FEED: bool>(
    path: &Path,
    reader: &mut L,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(CollOp),
) -> Result<(OpTable, ReadReport), IngestError> {
    let mut parser = LogParser::with_fast_paths(opts.fast_paths);
    let mut bench = opts.bench_tables.as_ref().and_then(|b| b.scan_for(path, opts.max_line));
    let mut first_line: Option<String> = None;
    let mut next_progress = 4u64 << 20;
    let mut reported = 0u64;
    let io_err = |e| IngestError::Io { path: path.to_path_buf(), source: e };
    if let Some(b) = bench.as_mut() {
        b.ahead(reader.next_offset(), || reader.ahead().1);
    }
    loop {
        let line_no = reader.line_no() + 1;
        let Some(line) = reader.next_line().map_err(io_err)? else { break };
        if line_no == 1 {
            if line.iter().take(4096).any(|&b| b == 0) {
                return Err(IngestError::Binary { path: path.to_path_buf() });
            }
            first_line = Some(crate::bytes::sample(line, 120));
        }
        if INLINE_FEED {
            parser.feed_line_inline(line, line_no, sink);
        } else {
            parser.feed_line(line, line_no, sink);
        }
        // One test of `bench` a line (the reader alone pays only that): this
        // line, then what the source holds from the next one on.
        if let Some(b) = bench.as_mut() {
            b.line(line, line_no);
            b.ahead(reader.next_offset(), || reader.ahead().1);
        }
        if line_no == opts.sniff_lines && parser.report.nccl_segments == 0 {
            return Err(IngestError::NotNcclLog { path: path.to_path_buf(), lines: line_no, first_line });
        }
        if let Some(p) = &opts.progress {
            let read = reader.bytes_read();
            if read >= next_progress {
                p(read - reported);
                reported = read;
                next_progress = read + (4 << 20);
            }
        }
    }
    parser.finish(sink);
    let (mut table, mut report) = parser.into_table_report();
    report.path = path.display().to_string();
    report.bytes = reader.bytes_read();
    report.lines = reader.line_no();
    report.overlong_lines = reader.overlong_lines();
    if let Some(c) = reader.cut() {
        // Named in the reader report (file, line, byte): the complete lines
        // before the break were read.
        let (line, lines) = (reader.line_no() + 1, reader.line_no());
        report.malformed.add("input cut short (compressed stream ends mid-way)", line, || {
            format!(
                "stopped after {lines} complete lines, {} decompressed bytes ({}); the incomplete last line ({} bytes) was dropped",
                c.bytes - c.dropped_bytes,
                c.error,
                c.dropped_bytes
            )
        });
    }
    if report.nccl_segments == 0 {
        return Err(IngestError::NotNcclLog { path: path.to_path_buf(), lines: report.lines, first_line });
    }
    if let Some(p) = &opts.progress {
        p(reader.bytes_read() - reported);
    }
    if let (Some(scan), Some(b)) = (bench, &opts.bench_tables) {
        b.put(path, scan);
    }
    table.sources.push(report.path.clone());
    Ok((table, report))
}

/// Reads a file (gzip-compressed or plain), streaming operations to `sink`.
/// Plain regular files are memory-mapped ([`FileLines`]) unless
/// [`ReadOptions::mmap`] is off or `COMMLENS_NO_MMAP` is set (to anything but
/// `0`); the rest, and files the system will not map, are read with `read()`.
/// Both give the same table and report.
pub fn read_path(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(CollOp),
) -> Result<(OpTable, ReadReport), IngestError> {
    let lines = FileLines::open(path, opts.max_line, opts.mmap)
        .map_err(|e| IngestError::Io { path: path.to_path_buf(), source: e })?;
    // One loop per source, so that no line pays for the choice of source.
    match lines {
        FileLines::Mapped(mut m) => {
            #[cfg(target_arch = "x86_64")]
            if let Some(mut fast) = m.avx2() {
                // SAFETY: `avx2` gives a source only where the CPU has AVX2.
                return unsafe { read_lines_avx2(path, &mut fast, opts, sink) };
            }
            read_lines::<_, false>(path, &mut m, opts, sink)
        }
        FileLines::Read(mut r) => read_lines::<_, false>(path, &mut r, opts, sink),
    }
}

/// [`read_lines`] compiled for AVX2, over the mapped source's AVX2 scan
/// (which inlines only into such code): the newlines of a 64-byte block in
/// two compares instead of four; the parser's per-line path inlined, with
/// its AVX2 search for `NCCL `.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn read_lines_avx2(
    path: &Path,
    reader: &mut crate::lines_mapped::Avx2Lines<'_>,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(CollOp),
) -> Result<(OpTable, ReadReport), IngestError> {
    read_lines::<_, true>(path, reader, opts, sink)
}


/// Reads a file into a complete table: operations stored per rank, in line order.
pub fn load_path(path: &Path, opts: &ReadOptions) -> Result<(OpTable, ReadReport), IngestError> {
    let mut ops: Vec<CollOp> = Vec::new();
    let (mut table, report) = read_path(path, opts, &mut |op| ops.push(op))?;
    table.per_rank = vec![commlens_core::RankOps::new(); table.devices.len()];
    for op in ops {
        table.per_rank[op.dev.ix()].push(op);
    }
    // Merging a single table folds processes that share (host, pid).
    let (mut table, _) = crate::merge::merge_tables(vec![table]);
    for r in &mut table.per_rank {
        r.sort_by_key(|op| op.line);
        r.shrink_to_fit();
    }
    Ok((table, report))
}
