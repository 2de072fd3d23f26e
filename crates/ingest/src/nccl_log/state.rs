//! The reader's state machine: per process and per thread, it turns classified
//! segments into the canonical table — processes, devices, communicator
//! handles, topology — and emits [`CollOp`]s to a sink as soon as they are
//! complete.
//!
//! An operation waits in its thread's queue until the tuning line that names
//! its algorithm arrives (NCCL prints it after the enqueue lines of a group),
//! then leaves. Queues are bounded: p2p operations and single-rank
//! communicators never wait, and a queue longer than `MAX_PENDING` drains its
//! oldest entry, so memory does not grow with the file.
//!
//! This module owns the parser's state (per process, per thread), line
//! joining and segment dispatch, processes, topology collection and the end of
//! input. What an INFO or TRACE message is (topology, opCount, tuning, init
//! line, uninterpreted) is decided in `state_info`; operations (opCount
//! lines, the cut-line slot, the per-thread queue and tuning attachment) are
//! `state_ops`; devices, communicator handles and init/channel lines are
//! `state_comms`.

use super::init::{self, ChannelLine};
use super::ops::{self, OpLine};
use super::prefix::{split_first, split_line, KnownHosts, Level, Segment, Split};
use super::report::ReadReport;
use super::state_ops::SegInfo;
use super::topo::TopoParser;
use crate::bytes::{sample, ByteFinder};
use commlens_core::model::{DevIdx, ProcIdx, Process};
use commlens_core::tuning::TuningInfo;
use commlens_core::{CollOp, CommIdx, NcclVersion, OpTable};
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;

#[path = "state_info.rs"]
mod info;

pub(super) const SAMPLE_CHARS: usize = crate::bytes::EXCERPT_CHARS;
/// Ops, tuning lines etc. that matched nothing are ignored beyond this backlog.
const MAX_FRAGMENT: usize = 512;
/// Processes remembered by `process_lookup` besides the last one.
const RECENT_PROCS: usize = 4;

#[derive(Default)]
pub(super) struct ThreadState {
    pub(super) pending: VecDeque<CollOp>,
    /// Whether this thread ever printed a tuning line.
    pub(super) tuning_seen: bool,
    /// An opCount line cut by another writer, waiting for the API call line
    /// NCCL prints next on this thread, which holds the lost fields.
    pub(super) broken: Option<(OpLine, SegInfo)>,
    pub(super) topo: Option<TopoParser>,
    pub(super) in_topo: bool,
    /// Communicator whose init this thread is running (channel lines belong to it).
    pub(super) init_comm: Option<CommIdx>,
    /// Channel lines seen before the thread named its communicator.
    pub(super) init_backlog: Vec<ChannelLine>,
    /// Tuning lines of init (graphs, thresholds, table) seen before the thread
    /// named its communicator.
    pub(super) tuning_backlog: Option<Box<TuningInfo>>,
    /// Columns of the tuning-table block this thread is printing.
    pub(super) tuning_columns: Option<Box<super::state_comms::TableColumns>>,
    /// Whether this thread printed an init, channel or init-tuning line (the
    /// chunk join refuses to guess how they continue an earlier chunk's init).
    pub(super) init_touched: bool,
    /// What a chunk parse (see [`super::chunk_join`]) needs to replay this
    /// thread's start against the previous chunk's queue; unused otherwise.
    pub(super) spec: super::chunk_join::ThreadSpec,
}

#[derive(Default)]
pub(super) struct ProcState {
    /// Threads inside a topology dump, and threads holding a broken op line:
    /// when both are zero, most lines need no per-thread lookup at all.
    pub(super) threads_in_topo: u32,
    pub(super) threads_with_broken: u32,
    pub(super) comms: HashMap<u64, CommIdx>,
    pub(super) devices: HashMap<u32, DevIdx>,
    pub(super) threads: HashMap<u32, ThreadState>,
    /// Segments that named this (host, pid) and were not cut: the evidence
    /// for the host name when two spellings of one pid compete.
    pub(super) clean_segments: u64,
    /// On a chunk parse: per thread, the first segment that would settle a
    /// cut opCount line waiting from before the chunk, with the API call's
    /// arguments when it is a call line (see [`super::chunk_join`]).
    pub(super) settles: Vec<(u32, Option<ops::CallArgs>)>,
    /// On a chunk parse, the last two threads whose segments were found in
    /// (or added to) `settles`, each as tid + 1 (0: none): interleaved lines
    /// mostly repeat one of the last two threads of the process (a process
    /// driving two GPUs alternates them), and then the search of `settles`
    /// is skipped ([`ProcState::settled_recently`]).
    pub(super) last_settled: [u64; 2],
}

/// Streaming parser of one NCCL debug log into an [`OpTable`] (without ops)
/// plus a stream of operations.
pub struct LogParser {
    /// Shortcuts for common line shapes allowed (see `ReadOptions::fast_paths`).
    pub(super) fast: bool,
    pub table: OpTable,
    pub report: ReadReport,
    pub(super) hosts: KnownHosts,
    pub(super) proc_index: HashMap<(Box<[u8]>, u32), ProcIdx>,
    pub(super) procs: Vec<ProcState>,
    last_proc: Option<(usize, usize, u32, ProcIdx)>,
    /// The processes of the last few `process_lookup` answers: logs that
    /// interleave several processes switch between a handful, and a pid
    /// compare plus a short host compare is cheaper than hashing a boxed key.
    recent_procs: [Option<ProcIdx>; RECENT_PROCS],
    /// The slot of `recent_procs` filled next (round robin).
    recent_next: usize,
    /// Version printed without a prefix (`NCCL version 2.20.5+cuda12.4`).
    pub(super) bare_version: Option<NcclVersion>,
    segs: Vec<Segment>,
    /// The last two (process, handle) → communicator answers of `comm`.
    pub(super) recent_comms: [(Option<(u32, u64)>, CommIdx); 2],
    /// Finds the `(` of API call lines.
    find_paren: ByteFinder,
    /// Line tails of recent opCount lines (the fast path's memo).
    pub(super) op_memo: super::ops_fast::OpMemo,
    /// Line tails of recent API call lines (the fast path's memo).
    call_memo: super::ops_call::CallMemo,
    /// First words of recent uninterpreted messages (see `KindCounts::add_message`).
    kind_memo: super::report::KindMemo,
    pub(super) fragment: Vec<u8>,
    joined: Vec<u8>,
    pub(super) hosts_with_topology: Vec<String>,
    /// Set on a chunk parse: what its start assumed (see [`super::chunk_join`]).
    pub(super) spec: Option<Box<super::chunk_join::Speculation>>,
}

impl Default for LogParser {
    fn default() -> Self {
        Self::new()
    }
}

impl LogParser {
    pub fn new() -> Self {
        Self::with_fast_paths(true)
    }

    /// A parser with the shortcuts for common line shapes on or off (see
    /// [`super::ReadOptions::fast_paths`]).
    pub fn with_fast_paths(fast: bool) -> Self {
        LogParser {
            fast,
            table: OpTable::default(),
            report: ReadReport::default(),
            hosts: KnownHosts::with_fast_paths(fast),
            proc_index: HashMap::default(),
            procs: Vec::new(),
            last_proc: None,
            recent_procs: [None; RECENT_PROCS],
            recent_next: 0,
            bare_version: None,
            segs: Vec::with_capacity(4),
            recent_comms: [(None, CommIdx(0)); 2],
            find_paren: ByteFinder::new(b'('),
            op_memo: Default::default(),
            call_memo: Default::default(),
            kind_memo: Default::default(),
            fragment: Vec::new(),
            joined: Vec::new(),
            hosts_with_topology: Vec::new(),
            spec: None,
        }
    }

    /// Feeds one physical line (1-based number `line_no`).
    #[inline]
    pub fn feed_line(&mut self, line: &[u8], line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        self.feed_line_inline(line, line_no, sink)
    }

    /// [`LogParser::feed_line`] inlined into the caller: the AVX2 read loop
    /// (`read_lines_avx2`) compiles it for AVX2, so that the per-line
    /// `NCCL ` search inlines too instead of being a call.
    #[inline(always)]
    pub(super) fn feed_line_inline(&mut self, line: &[u8], line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        let head_end = match split_first(line, &mut self.hosts, &mut self.segs) {
            // Most lines: one segment from the line's start, handed over by
            // value (nothing before it to check).
            Split::One(seg) => {
                self.fragment.clear();
                return self.handle_segment(line, &seg, line_no, sink);
            }
            Split::Many(head_end) => head_end,
        };
        // Read before the rejoin below splits another line.
        let cut_prefix = self.hosts.cut_prefix;
        if head_end == 0 && self.segs.len() == 1 {
            // One segment from the line's start, nothing before it to
            // check. A copy of the segment leaves `segs` in place.
            self.fragment.clear();
            let seg = self.segs[0].clone();
            return self.handle_segment(line, &seg, line_no, sink);
        }
        let segs = std::mem::take(&mut self.segs);
        if head_end > 0 && !self.fragment.is_empty() {
            // A line that does not start with a prefix may be the tail of the
            // fragment a writer left at the end of the previous line.
            let mut joined = std::mem::take(&mut self.joined);
            joined.clear();
            joined.extend_from_slice(&self.fragment);
            joined.extend_from_slice(line);
            self.fragment.clear();
            let mut jsegs = Vec::new();
            if split_line(&joined, &mut self.hosts, &mut jsegs) == 0 && !jsegs.is_empty() {
                self.report.rejoined_lines += 1;
                self.handle_segments(&joined, &jsegs, line_no, sink);
                self.joined = joined;
                self.segs = segs;
                return;
            }
            self.joined = joined;
        }
        self.fragment.clear();
        if segs.is_empty() {
            // No segment: `split_first` scanned the whole line, and noted
            // whether it held a prefix (`has_cut_prefix`'s answer).
            if cut_prefix {
                self.report.lost_fragments += 1;
                return self.segs = segs;
            }
            self.non_nccl_line(line, line_no);
        } else {
            // Most lines start with their prefix: nothing before it to check.
            if head_end > 0 {
                let head = &line[..head_end];
                if looks_like_cut_prefix(head) && head.len() <= MAX_FRAGMENT {
                    self.fragment.extend_from_slice(head);
                } else if super::prefix::has_cut_prefix(head) {
                    self.report.lost_fragments += 1;
                }
            }
            self.handle_segments(line, &segs, line_no, sink);
        }
        self.segs = segs;
    }

    fn non_nccl_line(&mut self, line: &[u8], line_no: u64) {
        let t = crate::bytes::trim_ascii(line);
        if let Some(v) = init::parse_version(t) {
            self.bare_version.get_or_insert(v);
            self.note_version_set(None);
            self.report.version_lines += 1;
            return;
        }
        if t.is_empty() {
            return;
        }
        self.report.non_nccl_lines += 1;
        if self.report.non_nccl_samples.len() < 3 {
            self.report.non_nccl_samples.push((line_no, sample(t, SAMPLE_CHARS)));
        }
    }

    fn handle_segments(&mut self, line: &[u8], segs: &[Segment], line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        for seg in segs {
            self.handle_segment(line, seg, line_no, sink);
        }
    }

    #[inline(always)]
    fn handle_segment(&mut self, line: &[u8], seg: &Segment, line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        self.report.nccl_segments += 1;
        let proc = self.process(line, seg);
        let msg = &line[seg.msg.clone()];
        if seg.cut {
            self.report.broken_segments += 1;
        } else {
            self.procs[proc.ix()].clean_segments += 1;
        }
        let is_call = seg.level == Level::Call || (seg.level == Level::Trace && msg.starts_with(b"nccl"));
        if !is_call {
            self.resolve_broken(proc, seg.tid, None, sink);
        }
        match seg.level {
            Level::Call => self.call_line(proc, msg, seg, line_no, sink),
            Level::Warn => {
                self.report.warn_lines += 1;
                self.report.unknown.add("WARN", line_no, || sample(msg, SAMPLE_CHARS));
            }
            Level::Info | Level::Trace | Level::Abort => self.info_line(proc, msg, seg, line_no, sink),
        }
    }

    /// Finds or creates the process of a segment (cached for runs of lines).
    #[inline(always)]
    fn process(&mut self, line: &[u8], seg: &Segment) -> ProcIdx {
        let host = &line[seg.host.clone()];
        if let Some((_, _, pid, p)) = self.last_proc {
            if pid == seg.pid && short_eq(self.table.processes[p.ix()].host.as_bytes(), host) {
                return p;
            }
        }
        self.process_lookup(line, seg)
    }

    /// [`LogParser::process`] when the segment's process is not the last one.
    #[inline(never)]
    fn process_lookup(&mut self, line: &[u8], seg: &Segment) -> ProcIdx {
        let host = &line[seg.host.clone()];
        // The table's host is the exact bytes unless they are invalid UTF-8
        // (then spelled `\xNN`, never equal to raw bytes): an equal host and
        // pid is the entry `proc_index` holds for this key.
        let recent = self.recent_procs.iter().flatten().copied().find(|p| {
            let pr = &self.table.processes[p.ix()];
            pr.pid == seg.pid && short_eq(pr.host.as_bytes(), host)
        });
        if let Some(p) = recent {
            self.last_proc = Some((seg.host.start, seg.host.end, seg.pid, p));
            return p;
        }
        let key: (Box<[u8]>, u32) = (host.into(), seg.pid);
        let p = match self.proc_index.get(&key) {
            Some(&p) => p,
            None => {
                let p = ProcIdx(self.table.processes.len() as u32);
                self.table.processes.push(Process {
                    // Exact and distinct: invalid UTF-8 bytes become `\xNN`.
                    host: crate::bytes::host_string(host),
                    pid: seg.pid,
                    nccl_version: None,
                });
                self.procs.push(ProcState::default());
                if let Some(s) = self.spec.as_mut() {
                    s.procs.push(Default::default());
                }
                self.proc_index.insert(key, p);
                p
            }
        };
        self.recent_procs[self.recent_next] = Some(p);
        self.recent_next = (self.recent_next + 1) % RECENT_PROCS;
        self.last_proc = Some((seg.host.start, seg.host.end, seg.pid, p));
        p
    }

    fn call_line(&mut self, proc: ProcIdx, msg: &[u8], seg: &Segment, line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        if is_call_syntax(msg, &self.find_paren) {
            self.call_line_ok(proc, msg, seg, sink);
        } else {
            self.call_line_other(proc, msg, seg, line_no, sink);
        }
    }

    /// [`LogParser::call_line`] of a message known to be `ncclX(…)` (a TRACE
    /// line `info_line` tested: testing it again cost every such line).
    #[inline(always)]
    fn call_line_ok(&mut self, proc: ProcIdx, msg: &[u8], seg: &Segment, sink: &mut dyn FnMut(CollOp)) {
        self.report.call_lines += 1;
        // Mostly no cut line anywhere in the process, and on a chunk parse
        // the thread's first segment already noted (`ProcState::last_settled`):
        // the rest stays out of line (its registers cost every call line;
        // a call per call line of a chunk parse was 3 % of what chunking adds).
        let ps = &self.procs[proc.ix()];
        if ps.threads_with_broken > 0 || (self.spec.is_some() && !ps.settled_recently(seg.tid)) {
            self.call_completes(proc, msg, seg, sink);
        }
    }

    /// A call line where a cut opCount line may wait for it.
    #[inline(never)]
    fn call_completes(&mut self, proc: ProcIdx, msg: &[u8], seg: &Segment, sink: &mut dyn FnMut(CollOp)) {
        let ps = &mut self.procs[proc.ix()];
        let mut waiting = ps.threads_with_broken > 0 && ps.threads.get(&seg.tid).is_some_and(|t| t.broken.is_some());
        if self.spec.is_some() && !ps.settled_recently(seg.tid) {
            // A chunk parse: a line cut before the chunk may be waiting, unless
            // the thread's first segment was noted (then remembered as the last).
            if ps.settles.iter().any(|s| s.0 == seg.tid) {
                ps.note_settled(seg.tid);
            } else {
                waiting = true;
            }
        }
        if waiting {
            let args = match (seg.cut, self.fast) {
                (true, _) => None,
                (false, true) => super::ops_call::parse_call_args_memo(msg, &mut self.call_memo),
                (false, false) => ops::parse_call_args(msg),
            };
            self.resolve_broken(proc, seg.tid, args.as_ref(), sink);
        }
    }

    /// A CALL line that is no `ncclX(…)`.
    #[inline(never)]
    fn call_line_other(&mut self, proc: ProcIdx, msg: &[u8], seg: &Segment, line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        if seg.cut {
            self.resolve_broken(proc, seg.tid, None, sink);
            // counted as broken already
        } else {
            self.report.malformed.add("NCCL CALL", line_no, || sample(msg, SAMPLE_CHARS));
        }
    }

    pub(super) fn collect_topology(&mut self, proc: ProcIdx, tid: u32) {
        let Some(parser) = self.procs[proc.ix()].threads.get_mut(&tid).and_then(|t| t.topo.as_mut()) else {
            return;
        };
        let blocks = parser.take_blocks();
        let malformed = parser.malformed_lines();
        self.report.topology_malformed = self.report.topology_malformed.max(malformed);
        let host = self.table.processes[proc.ix()].host.clone();
        for mut t in blocks {
            self.report.topology_blocks += 1;
            // Thesis §4.2.1: the first block per host is the full system view.
            if !self.hosts_with_topology.contains(&host) {
                t.host = host.clone();
                self.hosts_with_topology.push(host.clone());
                self.table.topologies.push(t);
            }
        }
    }

    /// The table and the report, once [`LogParser::finish`]ed; the rest of
    /// the parser (per-process maps, thread queues, host memos) is freed on
    /// another thread of the pool. Freed here it was ~0.7 ms of the end of
    /// the read of the 400 MB bench log, time no other core could take.
    pub(super) fn into_table_report(mut self) -> (OpTable, ReadReport) {
        let table = std::mem::take(&mut self.table);
        let report = std::mem::take(&mut self.report);
        rayon::spawn(move || drop(self));
        (table, report)
    }

    /// Ends the input: drains queues, closes topology blocks.
    pub fn finish(&mut self, sink: &mut dyn FnMut(CollOp)) {
        for p in 0..self.procs.len() {
            let tids: Vec<u32> = self.procs[p].threads.keys().copied().collect();
            for tid in tids {
                self.resolve_broken(ProcIdx(p as u32), tid, None, sink);
                let thread = self.procs[p].threads.get_mut(&tid).expect("key exists");
                for op in thread.pending.drain(..) {
                    sink(op);
                }
                if let Some(parser) = thread.topo.as_mut() {
                    parser.finish();
                }
                self.collect_topology(ProcIdx(p as u32), tid);
            }
        }
        self.fold_debris_hosts();
        // Processes that never logged a version inherit a bare one.
        if let Some(v) = self.bare_version {
            for p in &mut self.table.processes {
                p.nccl_version.get_or_insert(v);
            }
        }
    }
}

impl LogParser {
    /// A process named `senx3005c0s31b0n0:309935` next to `x3005c0s31b0n0:309935`
    /// is the same process: one name swallowed debris of a cut line (glued in
    /// front), or lost its start (`ne:2984738` beside `stone:2984738`).
    /// Renaming it lets [`crate::merge::merge_tables`], which keys processes by
    /// (host, pid), fold the two together. Which spelling is the host is
    /// decided by evidence, never by length: the name with the most clean
    /// (uncut) segments among those that are suffixes of one another wins, so
    /// one garbled line cannot rename a host that many clean lines agree on.
    fn fold_debris_hosts(&mut self) {
        let procs = &mut self.table.processes;
        // Only spellings of one pid compete: group by pid first, so thousands
        // of processes cost a sort, not a comparison of every pair.
        let mut by_pid: Vec<(u32, usize)> = procs.iter().enumerate().map(|(i, p)| (p.pid, i)).collect();
        by_pid.sort_unstable();
        let related = |a: &str, b: &str| a.ends_with(b) || b.ends_with(a);
        for same in by_pid.chunk_by(|a, b| a.0 == b.0).filter(|g| g.len() > 1) {
            let names: Vec<String> = same.iter().map(|&(_, i)| procs[i].host.clone()).collect();
            let evidence: Vec<u64> = same.iter().map(|&(_, i)| self.procs[i].clean_segments).collect();
            for (k, &(_, i)) in same.iter().enumerate() {
                let best = (0..same.len())
                    .filter(|&m| related(&names[k], &names[m]))
                    // Most clean segments; on a tie the shorter name (debris is glued in front).
                    .max_by(|&a, &b| evidence[a].cmp(&evidence[b]).then(names[b].len().cmp(&names[a].len())));
                if let Some(m) = best.filter(|&m| m != k) {
                    procs[i].host = names[m].clone();
                }
            }
        }
    }
}

/// `a == b` for the short strings of a prefix (host names), without a call
/// into `memcmp`: two overlapping words (of 8 or 4 bytes) cover 4 to 16 bytes.
#[inline]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w8 = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let w4 = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().expect("4 bytes"));
    match n {
        8..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        4..=7 => w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4),
        _ => a == b,
    }
}

/// `ncclX(…)`: cheap shape check of an API call line.
#[inline(always)]
pub(super) fn is_call_syntax(msg: &[u8], find_paren: &ByteFinder) -> bool {
    // The `(` follows the API name, nearly always within the first 24 bytes.
    msg.starts_with(b"nccl")
        && msg.last() == Some(&b')')
        && (ops::byte_in_24(msg, b'(').is_some() || find_paren.find(msg).is_some())
}

/// `gdr114:8427` or `stone:2984736:29847`: the start of a prefix whose rest
/// another writer pushed to the next line.
fn looks_like_cut_prefix(head: &[u8]) -> bool {
    let Some(colon) = memchr::memchr(b':', head) else { return false };
    colon > 0
        && head[..colon].iter().all(|&b| crate::bytes::is_host_byte(b))
        && head[colon + 1..].iter().all(|&b| b.is_ascii_digit() || b == b':')
}
