//! Operations in the reader's state machine: `opCount` lines become
//! [`CollOp`]s (device and communicator filled in, datatype and reduction
//! decoded for the process's NCCL version); a line cut by another writer waits
//! in its thread's slot for the API call line that completes it; collectives
//! wait in their thread's bounded queue until the tuning line that names their
//! algorithm arrives. See [`super::state`]. The per-operation code reads
//! the parsed fields through [`OpFields`], compiled once for the general
//! parser's [`OpLine`] and once for the canonical parse's [`CanonOp`], whose
//! fields need no `Option`.

use super::ops::{self, OpLine};
use super::ops_fast::CountTail;
use super::prefix::Segment;
use super::state::{LogParser, SAMPLE_CHARS};
use crate::bytes::sample;
use commlens_core::model::{DevIdx, ProcIdx};
use commlens_core::{CollOp, CommIdx, DataType, NcclVersion, OpKind, RedOp};

pub(super) const MAX_PENDING: usize = 1024;
/// A thread that queued this many operations without ever printing a tuning
/// line (TUNING not enabled, or a version that does not print it) stops
/// queueing, so logs without tuning lines keep no backlog at all.
pub(super) const MAX_UNTUNED: usize = 64;
/// The untuned cap of a chunk parse (not the first chunk's), which does not
/// know whether the thread tuned before the chunk: large enough that a
/// thread that did and tunes again here rarely overflows before its first
/// tuning line (at 64, 2 of the bench log's 48 chunks did, and were read
/// again), small enough that threads that never tune do not each hold
/// `MAX_PENDING` operations (see `emit_parsed`).
pub(super) const SPEC_UNTUNED: usize = 256;

/// The parts of a segment an operation keeps.
#[derive(Clone, Copy)]
pub(super) struct SegInfo {
    tid: u32,
    dev: Option<u32>,
    ts_ns: Option<i64>,
    cut: bool,
    pub(super) line_no: u64,
}

impl SegInfo {
    fn of(seg: &Segment, line_no: u64) -> SegInfo {
        SegInfo { tid: seg.tid, dev: seg.dev, ts_ns: seg.ts_ns, cut: seg.cut, line_no }
    }
}

impl LogParser {
    pub(super) fn op_line(
        &mut self,
        proc: ProcIdx,
        msg: &[u8],
        colon: usize,
        seg: &Segment,
        line_no: u64,
        sink: &mut dyn FnMut(CollOp),
    ) {
        let info = SegInfo::of(seg, line_no);
        if seg.cut {
            // Keep what survived; the call line that follows may complete it.
            let fields = if self.fast {
                super::ops_fast::parse_op_fields_fast(msg, colon, true)
            } else {
                ops::parse_op_fields(msg, colon, true)
            };
            match fields {
                Ok((fields, _)) => {
                    self.resolve_broken(proc, seg.tid, None, sink);
                    let ps = &mut self.procs[proc.ix()];
                    ps.threads.entry(seg.tid).or_default().broken = Some((fields, info));
                    ps.threads_with_broken += 1;
                }
                Err(_) => self.report.broken_unrecovered += 1,
            }
            return;
        }
        if self.fast {
            // The caller found ` opCount ` after the colon (see `info_line`).
            if let Some(op) = super::ops_fast::parse_op_canonical_after(msg, colon, &mut self.op_memo) {
                return self.emit_parsed(proc, &op, info, sink);
            }
        }
        match ops::parse_op_line_general(msg, colon, false) {
            Ok(op) => self.emit_parsed(proc, &op, info, sink),
            Err(e) => {
                let what = match e {
                    ops::OpLineError::UnknownOp => "opCount line: unknown operation",
                    ops::OpLineError::Field(f) => match f {
                        "comm" => "opCount line: bad or missing comm",
                        "count" => "opCount line: bad or missing count",
                        "datatype" => "opCount line: bad or missing datatype",
                        "opCount" => "opCount line: bad opCount",
                        _ => "opCount line: bad or missing stream",
                    },
                };
                self.report.malformed.add(what, line_no, || sample(msg, SAMPLE_CHARS));
            }
        }
    }

    /// Settles a thread's broken opCount line: completed by `call` when it
    /// matches, kept as it is when it has the required fields, lost otherwise.
    #[inline]
    pub(super) fn resolve_broken(&mut self, proc: ProcIdx, tid: u32, call: Option<&ops::CallArgs>, sink: &mut dyn FnMut(CollOp)) {
        // Almost always nothing to do: checked here, where it inlines (on a
        // chunk parse, nothing either when this thread's first segment was
        // already noted, see `ProcState::last_settled`).
        let ps = &self.procs[proc.ix()];
        if ps.threads_with_broken > 0 || (self.spec.is_some() && !ps.settled_recently(tid)) {
            self.resolve_broken_slot(proc, tid, call, sink);
        }
    }

    fn resolve_broken_slot(&mut self, proc: ProcIdx, tid: u32, call: Option<&ops::CallArgs>, sink: &mut dyn FnMut(CollOp)) {
        let ps = &mut self.procs[proc.ix()];
        if self.spec.is_some() {
            if !ps.settles.iter().any(|s| s.0 == tid) {
                // What would settle a line cut before the chunk (the join does).
                ps.settles.push((tid, call.cloned()));
            }
            ps.note_settled(tid);
        }
        // A chunk parse comes here for every segment; mostly no thread of
        // the process holds a broken line, and then there is none to look up
        // (a tenth of what chunking added to stats' instructions on the bench log).
        if ps.threads_with_broken == 0 {
            return;
        }
        let Some(thread) = ps.threads.get_mut(&tid) else { return };
        let Some((mut fields, info)) = thread.broken.take() else { return };
        ps.threads_with_broken -= 1;
        if let Some(call) = call {
            fields.fill_from_call(call);
        }
        if fields.missing_required().is_none() {
            self.emit_parsed(proc, &fields, info, sink);
        } else {
            self.report.broken_unrecovered += 1;
        }
    }

    pub(super) fn emit_parsed<L: OpFields>(&mut self, proc: ProcIdx, parsed: &L, info: SegInfo, sink: &mut dyn FnMut(CollOp)) {
        let kind = parsed.kind();
        let at = self.place_op(proc, parsed, kind, info);
        self.report.ops += 1;
        if info.cut {
            self.report.recovered_ops += 1;
        }
        // The operation is built where it goes (the sink's argument, the
        // queue's slot), not first in a local that is then copied there.
        let nranks = self.table.comms[at.comm.ix()].nranks.unwrap_or(0);
        if kind.is_p2p() || nranks == 1 {
            return sink(build_op(proc, parsed, kind, info, at));
        }
        let thread = self.procs[proc.ix()].threads.entry(info.tid).or_default();
        // A chunk parse does not know whether the thread printed tuning
        // lines before the chunk. It keeps a queue of `SPEC_UNTUNED` all the
        // same until the thread tunes here: threads that never tune would
        // otherwise each hold MAX_PENDING operations, and on the 400 MB bench
        // log those queues cost 520k more last-level cache write misses than
        // the sequential read (cachegrind), a large part of why 2 cores did
        // not halve the time. An eviction the true cap would not have made is
        // refused by the join (`chunk_check`), and the chunk read again.
        let cap = match (&mut self.spec, thread.tuning_seen) {
            (_, true) => MAX_PENDING,
            (Some(s), false) => {
                if thread.pending.capacity() == 0 {
                    // A chunk parse's new queue: its whole cap at once (or
                    // a buffer a join emptied), not grown from nothing.
                    s.give_queue(&mut thread.pending);
                }
                SPEC_UNTUNED
            }
            (None, false) => MAX_UNTUNED,
        };
        while thread.pending.len() >= cap {
            match thread.pending.pop_front() {
                Some(old) => {
                    thread.spec.evicted |= !thread.spec.synced;
                    sink(old)
                }
                None => break,
            }
        }
        thread.pending.push_back(build_op(proc, parsed, kind, info, at));
        if !thread.spec.synced {
            thread.spec.max_len = thread.spec.max_len.max(thread.pending.len());
        }
    }

    /// The table's side of a new operation: its communicator handle (device
    /// and size settled on first use), its position among the handle's
    /// operations, and the process's NCCL version.
    fn place_op<L: OpFields>(&mut self, proc: ProcIdx, l: &L, kind: OpKind, seg: SegInfo) -> OpPlace {
        let comm_ptr = l.comm();
        let c = self.comm(proc, comm_ptr);
        if self.table.comms[c.ix()].device.is_none() {
            // No init line for this handle: the bracket is the thread's device.
            let d = self.device(proc, seg.dev);
            self.table.comms[c.ix()].device = Some(d);
            self.note_bracket(c, seg.dev.unwrap_or(u32::MAX));
        }
        let member = &mut self.table.comms[c.ix()];
        if member.nranks.is_none() {
            member.nranks = l.nranks();
        }
        if let Some(s) = self.spec.as_mut() {
            // What this chunk assumed of the handle and process (checked by the join).
            s.note_op(proc, c, kind, member.nranks, l.datatype().unwrap_or(-1), l.redop());
        }
        let comm_seq = member.n_ops;
        member.note_op(kind);
        let dev = member.device.expect("set above");
        let version = self.table.processes[proc.ix()].nccl_version.or(self.bare_version);
        OpPlace { comm: c, comm_seq, dev, version }
    }

    /// Attaches a tuning line to the queued operations of its thread with the
    /// same kind and size; older queued operations leave without one.
    pub(super) fn tuning_line(&mut self, proc: ProcIdx, tid: u32, t: &ops::TuningLine, sink: &mut dyn FnMut(CollOp)) {
        self.report.tuning_lines += 1;
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        thread.tuning_seen = true;
        let first_of_chunk = self.spec.is_some() && !thread.spec.synced;
        let mut last_match = None;
        for (i, op) in thread.pending.iter_mut().enumerate() {
            if op.algo.is_none() && op.kind == t.kind && op.bytes == t.bytes {
                op.algo = t.algo;
                op.proto = t.proto;
                op.channels = t.channels;
                self.report.tuned_ops += 1;
                last_match = Some(i);
            }
        }
        if first_of_chunk {
            // Until a line matches here, the previous chunk's queue may hold its match.
            thread.spec.note_tuning(t, last_match.is_some());
        }
        match last_match {
            Some(i) => {
                for op in thread.pending.drain(..=i) {
                    sink(op);
                }
            }
            None => self.report.tuning_unmatched += 1,
        }
    }
}

/// What [`LogParser::place_op`] settled for an operation.
#[derive(Clone, Copy)]
struct OpPlace {
    comm: CommIdx,
    comm_seq: u64,
    dev: DevIdx,
    version: Option<NcclVersion>,
}

/// The operation of an opCount line placed at `at`; inlined into each use,
/// so that it is written straight into its destination.
#[inline(always)]
fn build_op<L: OpFields>(proc: ProcIdx, l: &L, kind: OpKind, seg: SegInfo, at: OpPlace) -> CollOp {
    let version = at.version;
    let dtype = DataType::from_nccl(l.datatype().unwrap_or(-1), version);
    let count = l.count().unwrap_or(0);
    let root = l.root().and_then(|r| u32::try_from(r).ok());
    let reduces = matches!(kind, OpKind::AllReduce | OpKind::Reduce | OpKind::ReduceScatter);
    CollOp {
        comm_seq: at.comm_seq,
        tid: seg.tid,
        seq: l.op_count().unwrap_or(0),
        redop: if reduces { l.redop().map(|r| RedOp::from_nccl(r, version)) } else { None },
        root: if kind.is_rooted() { root } else { None },
        peer: if kind.is_p2p() { root } else { None },
        sendbuff: l.sendbuff().unwrap_or(0),
        recvbuff: l.recvbuff().unwrap_or(0),
        stream: l.stream(),
        cpu_ts_ns: seg.ts_ns,
        line: seg.line_no,
        recovered: seg.cut,
        ..CollOp::new(proc, at.dev, at.comm, kind, count, dtype)
    }
}

/// What [`super::ops_fast::parse_op_canonical`] reads: every field of an [`OpLine`] but
/// `nranks` is there, so none needs an `Option` (an `OpLine` is 160 bytes
/// of tags and values, written here and read again for every operation).
#[derive(Clone, Copy, Debug)]
pub(super) struct CanonOp {
    pub(super) kind: OpKind,
    pub(super) op_count: u64,
    pub(super) sendbuff: u64,
    pub(super) recvbuff: u64,
    pub(super) tail: CountTail,
}

impl CanonOp {
    /// The same fields as an [`OpLine`] (what the general parser gives).
    pub(super) fn to_line(&self) -> OpLine {
        let t = &self.tail;
        OpLine {
            kind: Some(self.kind),
            op_count: Some(self.op_count),
            sendbuff: Some(self.sendbuff),
            recvbuff: Some(self.recvbuff),
            count: Some(t.count),
            datatype: Some(t.datatype),
            redop: Some(t.redop),
            root: Some(t.root),
            comm: Some(t.comm.comm),
            nranks: t.comm.nranks,
            stream: Some(t.comm.stream),
        }
    }
}

/// The fields of a parsed opCount line that make an operation: of an
/// [`OpLine`] (the general parser, a line cut and completed), or of the
/// canonical parse, whose fields need no `Option` (see [`CanonOp`]); the
/// per-operation code is compiled for each.
pub(super) trait OpFields {
    fn kind(&self) -> OpKind;
    fn comm(&self) -> u64;
    fn nranks(&self) -> Option<u32>;
    fn op_count(&self) -> Option<u64>;
    fn sendbuff(&self) -> Option<u64>;
    fn recvbuff(&self) -> Option<u64>;
    fn count(&self) -> Option<u64>;
    fn datatype(&self) -> Option<i64>;
    fn redop(&self) -> Option<i64>;
    fn root(&self) -> Option<i64>;
    fn stream(&self) -> Option<u64>;
}

impl OpFields for OpLine {
    fn kind(&self) -> OpKind {
        self.kind.expect("parse_op_line guarantees a kind")
    }
    fn comm(&self) -> u64 {
        self.comm.expect("parse_op_line guarantees comm")
    }
    fn nranks(&self) -> Option<u32> {
        self.nranks
    }
    fn op_count(&self) -> Option<u64> {
        self.op_count
    }
    fn sendbuff(&self) -> Option<u64> {
        self.sendbuff
    }
    fn recvbuff(&self) -> Option<u64> {
        self.recvbuff
    }
    fn count(&self) -> Option<u64> {
        self.count
    }
    fn datatype(&self) -> Option<i64> {
        self.datatype
    }
    fn redop(&self) -> Option<i64> {
        self.redop
    }
    fn root(&self) -> Option<i64> {
        self.root
    }
    fn stream(&self) -> Option<u64> {
        self.stream
    }
}

/// The values of [`CanonOp::to_line`], read in place.
impl OpFields for CanonOp {
    fn kind(&self) -> OpKind {
        self.kind
    }
    fn comm(&self) -> u64 {
        self.tail.comm.comm
    }
    fn nranks(&self) -> Option<u32> {
        self.tail.comm.nranks
    }
    fn op_count(&self) -> Option<u64> {
        Some(self.op_count)
    }
    fn sendbuff(&self) -> Option<u64> {
        Some(self.sendbuff)
    }
    fn recvbuff(&self) -> Option<u64> {
        Some(self.recvbuff)
    }
    fn count(&self) -> Option<u64> {
        Some(self.tail.count)
    }
    fn datatype(&self) -> Option<i64> {
        Some(self.tail.datatype)
    }
    fn redop(&self) -> Option<i64> {
        Some(self.tail.redop)
    }
    fn root(&self) -> Option<i64> {
        Some(self.tail.root)
    }
    fn stream(&self) -> Option<u64> {
        Some(self.tail.comm.stream)
    }
}
