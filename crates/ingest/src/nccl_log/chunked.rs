//! One large log on all cores: the file is cut into chunks at line starts,
//! the chunks are parsed in parallel (rayon), each from an empty state but
//! for the host spellings seen just before it ([`super::chunk_seeds`]), and joined in
//! file order ([`super::chunk_order`], [`super::chunk_join`]) into exactly
//! what the sequential reader gives: the same table, report, operations and
//! line numbers.
//!
//! Each chunk folds its operations into its own state (`make`/`per_op`, with
//! the chunk's indices; [`ChunkedRead::parts`] says how they map into the
//! file's table), so `stats` never holds the operations. A chunk the join
//! cannot fold exactly (its start depends on the lines before it in a way the
//! join does not replay, [`super::chunk_check`]) is read again by the join's
//! own parser, line by line, and its state dropped: slower, never different.
//! [`ChunkedRead::replayed`] counts them, [`ChunkedRead::note`] says why.
//!
//! A file that is nccl-tests output too (`ReadOptions::bench_tables`): each
//! chunk keeps the few lines the table scan may use
//! ([`crate::nccl_tests::KeptLines`], filtered on the chunk's core), and the
//! join feeds them to the file's scan in file order; it then hands the
//! emptied buffers back for later chunks to fill ([`Job::spare_bench`]).
//!
//! Memory stays bounded: chunks are read through mapped windows, inside one
//! mapping of the whole file ([`MappedLines::open_shared`]: on 2 workers,
//! 25 interleaved runs on the 400 MB bench log, CPU median -3 %, wall
//! best 211.3 -> 208.5 ms against a window mapping of its own each) or
//! their own ([`MappedLines::open_range`]), workers stay a few chunks ahead of the
//! join, and what a chunk keeps until its join is its parser's state
//! (processes, handles, queues) and the folded state. The operation queue
//! buffers the join empties go to later chunks' new threads
//! ([`Job::spare_queues`]), so those do not fault in fresh pages.
//!
//! Chunks are large ([`DEFAULT_CHUNK`]: each costs a parser state built
//! from nothing, its seeds and its join) and shrink near the file's end
//! ([`plan`], down to [`TAIL_CHUNK`]), so that when one worker
//! runs out of chunks the others have little left. `COMMLENS_CHUNK_TRACE=1`
//! prints where the workers' time went ([`super::chunk_trace`]); on the
//! 400 MB bench log with 2 workers they were busy 98-99 % of the read, the
//! lookahead never made one wait, and the tail was at most one chunk.
//!
//! Fewer chunks would not be cheaper: CPU on that log, 2 workers, 21 runs,
//! min/median 314.8/346.7 ms in 16, 315.8/340.4 in 4 equal, 315.6/338.2 in
//! 6; chunking costs per operation (speculation, the join), not per chunk.

use super::chunk_join::ChunkMaps;
use super::chunk_order::{ChunkSlot, Joiner};
use super::chunk_seeds::seed_hosts;
use super::chunk_trace;
use super::{LogParser, ReadOptions, ReadReport};
use crate::error::IngestError;
use crate::nccl_tests::KeptLines;
use crate::lines::LineSource;
use crate::lines_mapped::{disabled_by_env, MappedLines, SharedMap, DEFAULT_WINDOW};
use commlens_core::{CollOp, OpTable};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Chunk size when neither [`ReadOptions::chunk_bytes`] nor
/// `COMMLENS_CHUNK_BYTES` says otherwise, for files of three chunks a worker
/// or more (smaller files get a chunk of their length over three times the
/// workers, at least [`MIN_DEFAULT_CHUNK`]). Each chunk costs its seeds, a
/// parser state built from nothing (hash tables, hosts, queues, cold in the
/// cache) and its join: ~0.8 ms of CPU a chunk (`stats` on the 400 MB bench
/// log, 1 thread: +17 ms chunked in 22 chunks against sequential). On 2
/// workers (`rus.py`, 30 interleaved runs, minimum wall time, with the
/// earlier tail of half a worker's share) 32 MiB gave 22 chunks and
/// 204.5 ms, 48 MiB 20 and 202.1 ms, this 19 and 199.5 ms, 96 MiB
/// 201.4 ms; with [`step`]'s tail, 14 chunks (16 since `TAIL_CHUNK` is 1 MiB).
pub const DEFAULT_CHUNK: u64 = 64 << 20;

/// The smallest default chunk: files under two of them are read
/// sequentially.
const MIN_DEFAULT_CHUNK: u64 = 8 << 20;

/// The smallest chunk [`step`] cuts near the file's end (a quarter of the
/// chunk size where that is smaller): the most one worker may still have to
/// parse once the others are out of chunks. The chunk trace's tail (one
/// worker idle) on the 400 MB bench log, 2 workers, 10 runs each: 2 MiB
/// 1.9-4.1 ms (median 2.5), 16 chunks instead of 14 at this 0.4-2.7 ms
/// (median 0.9), 512 KiB 0.2-1.5 ms (0.6) with 18.
const TAIL_CHUNK: u64 = 1 << 20;

/// How far past a nominal chunk boundary a newline is looked for; a boundary
/// inside a longer line is dropped (its chunk grows).
const BOUNDARY_SEARCH: u64 = 4 << 20;

/// The chunk size to use: [`ReadOptions::chunk_bytes`], else
/// `COMMLENS_CHUNK_BYTES` (bytes; `0` reads every file sequentially), else
/// [`DEFAULT_CHUNK`].
pub fn chunk_size(opts: &ReadOptions) -> u64 {
    if let Some(n) = opts.chunk_bytes {
        return n;
    }
    match std::env::var("COMMLENS_CHUNK_BYTES") {
        Ok(v) => v.trim().parse().unwrap_or(DEFAULT_CHUNK),
        Err(_) => DEFAULT_CHUNK,
    }
}

/// The byte ranges a file is read in, each starting at a line start, or
/// `None` when it is read sequentially: not a plain mapped file (gzip, pipe,
/// mapping off), chunking off, or smaller than two chunks.
pub fn plan(path: &Path, opts: &ReadOptions) -> Option<Vec<(u64, u64)>> {
    use std::os::unix::fs::FileExt;
    let size = chunk_size(opts);
    if size == 0 || !opts.mmap || disabled_by_env() {
        return None;
    }
    // On one thread chunking only adds the join's work (measured: 0.74 s
    // chunked against 0.56 s sequential on the 400 MB bench log), so the
    // default reads sequentially there; a size set explicitly still chunks
    // (the identity tests force it on one thread).
    let size_set = opts.chunk_bytes.is_some() || std::env::var_os("COMMLENS_CHUNK_BYTES").is_some();
    if !size_set && rayon::current_num_threads() < 2 {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    let len = meta.len();
    // Three chunks a worker at least: on the device host's 16 cores the
    // 400 MB bench log took (medians of 15) 0.116 s in 12.5 MiB chunks (two
    // a worker), 0.075 s in 8 MiB ones (8.3 MiB now); 2 workers get 64 MiB.
    let workers = rayon::current_num_threads().max(1) as u64;
    let size = if size_set {
        size
    } else {
        DEFAULT_CHUNK.min((len / (3 * workers)).max(MIN_DEFAULT_CHUNK))
    };
    if !meta.is_file() || len < 2 * size {
        return None;
    }
    let mut magic = [0u8; 2];
    if file.read_exact_at(&mut magic, 0).is_err() || magic == [0x1f, 0x8b] {
        return None;
    }
    let mut starts = vec![0u64];
    let mut buf = vec![0u8; (64 << 10).min(size as usize).max(4096)];
    // The first chunk is parsed without speculation (`parse_chunk`), so it
    // may be larger: up to two steps, but at most half a worker's share (a
    // log's first lines, init and topology, are the slowest to parse).
    let first = step(size, len, workers);
    let mut nominal = (2 * first).min(len / (2 * workers)).max(first);
    // A last chunk under half the tail chunk costs a whole chunk's fixed
    // work for a few lines (a 0.05 MiB one ended the 400 MB bench log in
    // 64 MiB chunks): its bytes go to the chunk before it.
    let merge_below = tail_chunk(size) / 2;
    while nominal < len && len - nominal >= merge_below {
        // The line start at or after the nominal boundary.
        let mut at = nominal.max(*starts.last().expect("non-empty") + 1) - 1;
        let found = loop {
            if at >= len || at >= nominal + BOUNDARY_SEARCH {
                break None;
            }
            let n = file.read_at(&mut buf, at).ok()?;
            if n == 0 {
                break None;
            }
            match memchr::memchr(b'\n', &buf[..n]) {
                Some(i) => break Some(at + i as u64 + 1),
                None => at += n as u64,
            }
        };
        if let Some(s) = found.filter(|&s| s < len) {
            starts.push(s);
        }
        let last = *starts.last().expect("non-empty");
        nominal = nominal.max(last) + step(size, len - last, workers);
    }
    if starts.len() < 2 {
        return None;
    }
    let ends = starts.iter().skip(1).copied().chain(std::iter::once(len));
    Some(starts.iter().copied().zip(ends).collect())
}

/// The length of the next chunk when `rest` bytes are left: `size`, but
/// near the file's end two thirds of what each worker has left (at least
/// [`tail_chunk`]), so that the chunks a worker may still be parsing when
/// the others run out of work are small. With equal chunks that tail was up
/// to a whole chunk on one core (`COMMLENS_CHUNK_TRACE=1` on the 400 MB
/// bench log, 48 chunks of 8 MiB, 2 workers: 2 to 16 ms of ~850 ms); each
/// chunk more costs its seeds, its fresh parser state and its join (~0.8 ms
/// of CPU). On 2 workers, 64 MiB chunks, a half of what each worker has
/// left gave 18 chunks (`rus.py`, 30 interleaved runs: min 201.6 ms,
/// median 210.1), two thirds 14 (201.2, 208.4), all of it 11 (199.2,
/// 207.9) with the least margin for a worker slowed near the end; the
/// chunk trace's tail stayed under 2 ms in all three.
fn step(size: u64, rest: u64, workers: u64) -> u64 {
    (rest * 2 / (3 * workers)).clamp(tail_chunk(size), size.max(1))
}

/// The smallest step for chunks of `size`: [`TAIL_CHUNK`], or a quarter of
/// `size` where that is smaller.
fn tail_chunk(size: u64) -> u64 {
    (size / 4).min(TAIL_CHUNK).max(1)
}

/// What [`read_chunked`] gives.
pub struct ChunkedRead<S> {
    /// The file's table (operations in `per_rank` when kept) and report.
    pub table: OpTable,
    pub report: ReadReport,
    /// The folded states, each with the map of its indices into `table`
    /// (`None`: they are the table's already).
    pub parts: Vec<(S, Option<ChunkMaps>)>,
    /// Chunks read, and those the join read again itself.
    pub chunks: usize,
    pub replayed: usize,
    /// Why chunks were read again, with how many each.
    pub reasons: Vec<(&'static str, usize)>,
}

/// A file's table and report, and its folded states each with the map of
/// its indices (see [`ChunkedRead::parts`]): a large plain file in chunks on
/// all cores ([`plan`], [`read_chunked`]), with a note when the join read
/// chunks again; any other file sequentially, one state.
#[allow(clippy::type_complexity)]
pub fn read_file_parts<S, M, F>(
    path: &Path,
    opts: &ReadOptions,
    keep_ops: bool,
    make: &M,
    per_op: &F,
) -> (
    Result<(OpTable, ReadReport), IngestError>,
    Vec<(S, Option<ChunkMaps>)>,
    Option<String>,
)
where
    S: Send,
    M: Fn() -> S + Sync,
    F: Fn(&mut S, &CollOp) + Sync,
{
    if let Some(ranges) = plan(path, opts) {
        return match read_chunked(path, opts, &ranges, keep_ops, make, per_op) {
            Ok(c) => {
                let note = c.note(path);
                (Ok((c.table, c.report)), c.parts, note)
            }
            Err(e) => (Err(e), vec![(make(), None)], None),
        };
    }
    // Operations go straight to their device's list (one copy of the table
    // in memory, not a flat list plus the per-device one).
    let mut per_dev: Vec<Vec<CollOp>> = Vec::new();
    let mut state = make();
    let res = super::read_path(path, opts, &mut |op| {
        per_op(&mut state, &op);
        if keep_ops {
            let d = op.dev.ix();
            if per_dev.len() <= d {
                per_dev.resize_with(d + 1, Vec::new);
            }
            per_dev[d].push(op);
        }
    });
    let res = res.map(|(mut t, r)| {
        per_dev.resize_with(t.devices.len().max(per_dev.len()), Vec::new);
        t.per_rank = per_dev.into_iter().map(commlens_core::RankOps::from).collect();
        (t, r)
    });
    (res, vec![(state, None)], None)
}

impl<S> ChunkedRead<S> {
    /// A line for `Loaded::notes` when the join read chunks again (the
    /// result is the same; the read was slower), saying why.
    pub fn note(&self, path: &Path) -> Option<String> {
        if self.replayed == 0 {
            return None;
        }
        let why: Vec<String> = self
            .reasons
            .iter()
            .map(|(r, n)| format!("{r} ×{n}"))
            .collect();
        Some(format!(
            "note: {}: read in {} chunks in parallel; {} of them read again in file order by the join ({}): same result, less parallel",
            path.display(),
            self.chunks,
            self.replayed,
            why.join("; ")
        ))
    }
}

/// One chunk parsed on its own.
pub(super) struct Parsed<S> {
    pub(super) parser: LogParser,
    pub(super) state: S,
    pub(super) ops: Vec<CollOp>,
    pub(super) lines: u64,
    pub(super) overlong: u64,
    /// First line (of the chunk) that held an NCCL segment.
    pub(super) first_nccl: Option<u64>,
    pub(super) first_line: Option<String>,
    /// Its lines the nccl-tests scan may use (when the file is scanned).
    pub(super) bench: KeptLines,
}

/// What the chunk readers share: the file, its chunks, and the fold.
pub(super) struct Job<'a, M, F> {
    pub(super) path: &'a Path,
    pub(super) opts: &'a ReadOptions,
    pub(super) ranges: &'a [(u64, u64)],
    pub(super) keep_ops: bool,
    pub(super) make: &'a M,
    pub(super) per_op: &'a F,
    /// The file's nccl-tests tables are read too (chunks keep their lines for the join).
    pub(super) bench: bool,
    /// Kept lines of chunks already joined, emptied, for the next chunks to
    /// fill (their buffers' pages already touched).
    pub(super) spare_bench: Mutex<Vec<KeptLines>>,
    /// Operation queues the join emptied, for later chunks' new threads
    /// (see [`super::chunk_join::Speculation::spare_queues`]).
    pub(super) spare_queues: Mutex<Vec<VecDeque<CollOp>>>,
    /// The file mapped once, the chunks' windows in it (`None`: each
    /// chunk maps its own).
    pub(super) shared: Option<SharedMap>,
}

/// Reads `path` in the chunks of [`plan`], in parallel; see the module doc.
/// With `keep_ops` every operation is also stored in the table (per device,
/// in line order).
///
/// Each worker (one per thread of the pool) takes the next chunk, parses it,
/// leaves it in its slot and joins whatever is ready in file order, unless
/// another worker is joining: a chunk the join reads again does not stop the
/// others parsing. Workers stay at most `LOOKAHEAD` chunks per worker ahead
/// of the join, so memory does not grow with the file.
pub fn read_chunked<S, M, F>(
    path: &Path,
    opts: &ReadOptions,
    ranges: &[(u64, u64)],
    keep_ops: bool,
    make: &M,
    per_op: &F,
) -> Result<ChunkedRead<S>, IngestError>
where
    S: Send,
    M: Fn() -> S + Sync,
    F: Fn(&mut S, &CollOp) + Sync,
{
    let scan = opts.bench_tables.as_ref().and_then(|b| b.scan_for(path, opts.max_line));
    let job = Job {
        path,
        opts,
        ranges,
        keep_ops,
        make,
        per_op,
        bench: scan.is_some(),
        spare_bench: Mutex::new(Vec::new()),
        spare_queues: Mutex::new(Vec::new()),
        shared: SharedMap::open(path).ok().flatten(),
    };
    let n = ranges.len();
    let slots: Vec<ChunkSlot<S>> =
        (0..n).map(|_| Mutex::new(None)).collect();
    let ready: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    let (taken, joined, stop) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicBool::new(false),
    );
    let join = Mutex::new(Joiner::new(make(), scan));
    let workers = rayon::current_num_threads().clamp(1, n);
    let lookahead = LOOKAHEAD * workers;
    let trace = chunk_trace::enabled().then(chunk_trace::Trace::new);
    // Joins the chunks ready in order, unless another worker is at it. The
    // fences make sure a chunk left ready while another worker joined is seen
    // by one of the two.
    let combine = |tw: &mut Option<chunk_trace::Worker>| loop {
        fence(Ordering::SeqCst);
        let k = joined.load(Ordering::SeqCst);
        if k >= n || !ready[k].load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut j) = join.try_lock() else { return };
        let t = tw.as_ref().map(|_| (Instant::now(), chunk_trace::thread_cpu()));
        let got = j.join_ready(&job, &slots, &joined, &stop);
        let from = joined.load(Ordering::SeqCst) - got;
        drop(j);
        if let (Some(w), Some((t, c)), Some(tr)) = (tw.as_mut(), t, trace.as_ref()) {
            w.join += t.elapsed();
            w.joined += got;
            tr.joined(from, from + got, chunk_trace::thread_cpu().saturating_sub(c));
        }
    };
    rayon::scope(|s| {
        for _ in 0..workers {
            s.spawn(|_| {
                let mut tw = trace.as_ref().map(|t| t.worker());
                loop {
                    let i = taken.fetch_add(1, Ordering::SeqCst);
                    if i >= n || stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let t = tw.as_ref().map(|w| (Instant::now(), w.join));
                    while i >= joined.load(Ordering::SeqCst) + lookahead && !stop.load(Ordering::SeqCst)
                    {
                        combine(&mut tw);
                        if i >= joined.load(Ordering::SeqCst) + lookahead {
                            std::thread::sleep(std::time::Duration::from_micros(200));
                        }
                    }
                    let t = match (tw.as_mut(), t) {
                        (Some(w), Some((t, join0))) => {
                            w.wait += t.elapsed().saturating_sub(w.join - join0);
                            Some((Instant::now(), chunk_trace::thread_cpu()))
                        }
                        _ => None,
                    };
                    let parsed = parse_chunk(&job, i);
                    if let (Some(w), Some((t, c)), Some(tr)) = (tw.as_mut(), t, trace.as_ref()) {
                        tr.parsed(i, chunk_trace::thread_cpu().saturating_sub(c));
                        w.parse += t.elapsed();
                        w.chunks += 1;
                        w.bytes += ranges[i].1 - ranges[i].0;
                    }
                    if parsed.is_err() {
                        stop.store(true, Ordering::SeqCst);
                    }
                    *slots[i].lock().expect("slot") = Some(parsed);
                    ready[i].store(true, Ordering::SeqCst);
                    combine(&mut tw);
                }
                if let (Some(t), Some(w)) = (trace.as_ref(), tw) {
                    t.finished(w);
                }
            });
        }
    });
    // What a race left unjoined (none, usually).
    let after = Instant::now();
    let mut j = join.into_inner().expect("join");
    j.join_ready(&job, &slots, &joined, &stop);
    let read = j.finish(&job);
    if let Some(t) = trace {
        t.print(ranges, after.elapsed());
    }
    read
}

/// Chunks a worker may parse ahead of the join, per worker.
const LOOKAHEAD: usize = 4;

/// Parses chunk `i` from an empty state (line numbers from 1), but for the
/// host spellings of [`seed_hosts`]; the first as the sequential reader.
fn parse_chunk<S, M, F>(job: &Job<M, F>, i: usize) -> Result<Parsed<S>, IngestError>
where
    M: Fn() -> S,
    F: Fn(&mut S, &CollOp),
{
    let (path, opts, (start, end)) = (job.path, job.opts, job.ranges[i]);
    let first = i == 0;
    let io_err = |e| IngestError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    // The first chunk starts where the file does: its parse is the
    // sequential reader's, with nothing to record for the join (13.3 M
    // fewer instructions of 3,033 M, `stats` on the 400 MB bench log).
    let mut parser = if first {
        LogParser::with_fast_paths(opts.fast_paths)
    } else {
        let seeds = seed_hosts(path, opts, start).map_err(io_err)?;
        let mut parser = LogParser::speculative(opts.fast_paths, &seeds);
        // Up to half the spares: the other workers' chunks want some too.
        let mut pool = job.spare_queues.lock().expect("spare queues");
        let take = pool.len().div_ceil(2);
        let from = pool.len() - take;
        parser.spec_spares(pool.drain(from..));
        parser
    };
    let mut state = (job.make)();
    let mut ops = Vec::new();
    let mut bench = match job.bench {
        true => job.spare_bench.lock().expect("spare").pop().unwrap_or_default(),
        false => KeptLines::default(),
    };
    let (mut first_nccl, mut first_line) = (None, None);
    let mut sink = |op: CollOp| {
        (job.per_op)(&mut state, &op);
        if job.keep_ops {
            ops.push(op);
        }
    };
    let mut src = match &job.shared {
        Some(m) => MappedLines::open_shared(path, m, opts.max_line, DEFAULT_WINDOW, start, end),
        None => MappedLines::open_range(path, opts.max_line, DEFAULT_WINDOW, start, end),
    }
    .map_err(io_err)?;
    let (mut lines, mut overlong) = (0, 0);
    if let Some(src) = src.as_mut() {
        let kept = job.bench.then_some(&mut bench);
        #[cfg(target_arch = "x86_64")]
        let found = match src.avx2() {
            // SAFETY: `avx2` gives a source only where the CPU has AVX2.
            Some(mut fast) => unsafe { chunk_lines_avx2(&mut fast, &mut parser, kept, first, path, &mut sink) },
            None => chunk_lines::<_, false>(src, &mut parser, kept, first, path, &mut sink),
        };
        #[cfg(not(target_arch = "x86_64"))]
        let found = chunk_lines::<_, false>(src, &mut parser, kept, first, path, &mut sink);
        (first_line, first_nccl) = found?;
        lines = LineSource::line_no(src);
        overlong = LineSource::overlong_lines(src);
    }
    if let Some(p) = &opts.progress {
        p(end - start);
    }
    Ok(Parsed {
        parser,
        state,
        ops,
        lines,
        overlong,
        first_nccl,
        first_line,
        bench,
    })
}

/// A chunk's reading loop, over either newline scan of the mapped source
/// (inlined into its callers, so that [`chunk_lines_avx2`] compiles it, with
/// the parser's per-line path, for AVX2, as `read_lines_avx2` does for the
/// sequential reader). Returns the chunk's first line (first chunk only)
/// and the number of its first line with an NCCL segment.
#[inline(always)]
fn chunk_lines<L: LineSource, const INLINE_FEED: bool>(
    src: &mut L,
    parser: &mut LogParser,
    mut bench: Option<&mut KeptLines>,
    first: bool,
    path: &Path,
    sink: &mut dyn FnMut(CollOp),
) -> Result<(Option<String>, Option<u64>), IngestError> {
    let io_err = |e| IngestError::Io { path: path.to_path_buf(), source: e };
    let mut first_line = None;
    let mut no = 0;
    // Up to the first line with an NCCL segment (a few lines, mostly), with
    // the per-line checks that need; the parser's path called, not inlined.
    let first_nccl = loop {
        if let Some(b) = bench.as_mut() {
            b.ahead(src.next_offset(), || src.ahead().1);
        }
        let Some(line) = src.next_line().map_err(io_err)? else { return Ok((first_line, None)) };
        no += 1;
        if first && no == 1 {
            if line.iter().take(4096).any(|&b| b == 0) {
                return Err(IngestError::Binary { path: path.to_path_buf() });
            }
            first_line = Some(crate::bytes::sample(line, 120));
        }
        if let Some(b) = bench.as_mut() {
            b.line(line, no);
        }
        parser.feed_line(line, no, sink);
        if parser.report.nccl_segments > 0 {
            break Some(no);
        }
    };
    // The rest, without those checks (they were ~7 M instructions on the
    // 100 MB bench log, a line each).
    loop {
        if let Some(b) = bench.as_mut() {
            b.ahead(src.next_offset(), || src.ahead().1);
        }
        let Some(line) = src.next_line().map_err(io_err)? else { break };
        no += 1;
        if let Some(b) = bench.as_mut() {
            b.line(line, no);
        }
        if INLINE_FEED {
            parser.feed_line_inline(line, no, sink);
        } else {
            parser.feed_line(line, no, sink);
        }
    }
    Ok((first_line, first_nccl))
}

/// [`chunk_lines`] compiled for AVX2 over the mapped source's AVX2 scan.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn chunk_lines_avx2(
    src: &mut crate::lines_mapped::Avx2Lines<'_>,
    parser: &mut LogParser,
    bench: Option<&mut KeptLines>,
    first: bool,
    path: &Path,
    sink: &mut dyn FnMut(CollOp),
) -> Result<(Option<String>, Option<u64>), IngestError> {
    chunk_lines::<_, true>(src, parser, bench, first, path, sink)
}

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
