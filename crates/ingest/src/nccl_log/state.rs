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

use super::init::{self, ChannelLine, InitPhase};
use super::ops::{self, OpLine};
use super::prefix::{split_line, KnownHosts, Level, Segment};
use super::report::{message_kind_in, ReadReport, KIND_MAX};
use super::topo::{TopoLine, TopoParser};
use crate::bytes::sample;
use commlens_core::model::{CommMember, Device, DevIdx, ProcIdx, Process};
use commlens_core::{CollOp, CommIdx, DataType, NcclVersion, OpTable, RedOp};
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;

const MAX_PENDING: usize = 1024;
/// A thread that queued this many operations without ever printing a tuning
/// line (TUNING not enabled, or a version that does not print it) stops
/// queueing, so logs without tuning lines keep no backlog at all.
const MAX_UNTUNED: usize = 64;
const SAMPLE_CHARS: usize = 200;
/// Ops, tuning lines etc. that matched nothing are ignored beyond this backlog.
const MAX_FRAGMENT: usize = 512;

/// The parts of a segment an operation keeps.
#[derive(Clone, Copy)]
struct SegInfo {
    tid: u32,
    dev: Option<u32>,
    ts_ns: Option<i64>,
    cut: bool,
    line_no: u64,
}

impl SegInfo {
    fn of(seg: &Segment, line_no: u64) -> SegInfo {
        SegInfo { tid: seg.tid, dev: seg.dev, ts_ns: seg.ts_ns, cut: seg.cut, line_no }
    }
}

#[derive(Default)]
struct ThreadState {
    pending: VecDeque<CollOp>,
    /// Whether this thread ever printed a tuning line.
    tuning_seen: bool,
    /// An opCount line cut by another writer, waiting for the API call line
    /// NCCL prints next on this thread, which holds the lost fields.
    broken: Option<(OpLine, SegInfo)>,
    topo: Option<TopoParser>,
    in_topo: bool,
    /// Communicator whose init this thread is running (channel lines belong to it).
    init_comm: Option<CommIdx>,
    /// Channel lines seen before the thread named its communicator.
    init_backlog: Vec<ChannelLine>,
}

#[derive(Default)]
struct ProcState {
    /// Threads inside a topology dump, and threads holding a broken op line:
    /// when both are zero, most lines need no per-thread lookup at all.
    threads_in_topo: u32,
    threads_with_broken: u32,
    comms: HashMap<u64, CommIdx>,
    devices: HashMap<u32, DevIdx>,
    threads: HashMap<u32, ThreadState>,
}

/// Streaming parser of one NCCL debug log into an [`OpTable`] (without ops)
/// plus a stream of operations.
pub struct LogParser {
    /// Shortcuts for common line shapes allowed (see `ReadOptions::fast_paths`).
    fast: bool,
    pub table: OpTable,
    pub report: ReadReport,
    hosts: KnownHosts,
    proc_index: HashMap<(Box<[u8]>, u32), ProcIdx>,
    procs: Vec<ProcState>,
    last_proc: Option<(usize, usize, u32, ProcIdx)>,
    /// Version printed without a prefix (`NCCL version 2.20.5+cuda12.4`).
    bare_version: Option<NcclVersion>,
    segs: Vec<Segment>,
    fragment: Vec<u8>,
    joined: Vec<u8>,
    hosts_with_topology: Vec<String>,
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
            bare_version: None,
            segs: Vec::with_capacity(4),
            fragment: Vec::new(),
            joined: Vec::new(),
            hosts_with_topology: Vec::new(),
        }
    }

    /// Feeds one physical line (1-based number `line_no`).
    pub fn feed_line(&mut self, line: &[u8], line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        let mut segs = std::mem::take(&mut self.segs);
        let head_end = split_line(line, &mut self.hosts, &mut segs);
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
            if super::prefix::has_cut_prefix(line) {
                self.report.lost_fragments += 1;
                return self.segs = segs;
            }
            self.non_nccl_line(line, line_no);
        } else {
            let head = &line[..head_end];
            if looks_like_cut_prefix(head) && head.len() <= MAX_FRAGMENT {
                self.fragment.extend_from_slice(head);
            } else if !head.is_empty() && super::prefix::has_cut_prefix(head) {
                self.report.lost_fragments += 1;
            }
            self.handle_segments(line, &segs, line_no, sink);
        }
        self.segs = segs;
    }

    fn non_nccl_line(&mut self, line: &[u8], line_no: u64) {
        let t = crate::bytes::trim_ascii(line);
        if let Some(v) = init::parse_version(t) {
            self.bare_version.get_or_insert(v);
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
            self.report.nccl_segments += 1;
            let proc = self.process(line, seg);
            let msg = &line[seg.msg.clone()];
            if seg.cut {
                self.report.broken_segments += 1;
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
    }

    /// Finds or creates the process of a segment (cached for runs of lines).
    fn process(&mut self, line: &[u8], seg: &Segment) -> ProcIdx {
        let host = &line[seg.host.clone()];
        if let Some((_, _, pid, p)) = self.last_proc {
            if pid == seg.pid && self.table.processes[p.ix()].host.as_bytes() == host {
                return p;
            }
        }
        let key: (Box<[u8]>, u32) = (host.into(), seg.pid);
        let p = match self.proc_index.get(&key) {
            Some(&p) => p,
            None => {
                let p = ProcIdx(self.table.processes.len() as u32);
                self.table.processes.push(Process {
                    host: String::from_utf8_lossy(host).into_owned(),
                    pid: seg.pid,
                    nccl_version: None,
                });
                self.procs.push(ProcState::default());
                self.proc_index.insert(key, p);
                p
            }
        };
        self.last_proc = Some((seg.host.start, seg.host.end, seg.pid, p));
        p
    }

    fn call_line(&mut self, proc: ProcIdx, msg: &[u8], seg: &Segment, line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        if is_call_syntax(msg) {
            self.report.call_lines += 1;
            let ps = &self.procs[proc.ix()];
            let waiting = ps.threads_with_broken > 0 && ps.threads.get(&seg.tid).is_some_and(|t| t.broken.is_some());
            if waiting {
                let args = if seg.cut { None } else { ops::parse_call_args(msg) };
                self.resolve_broken(proc, seg.tid, args.as_ref(), sink);
            }
        } else if seg.cut {
            self.resolve_broken(proc, seg.tid, None, sink);
            // counted as broken already
        } else {
            self.report.malformed.add("NCCL CALL", line_no, || sample(msg, SAMPLE_CHARS));
        }
    }

    fn info_line(&mut self, proc: ProcIdx, msg: &[u8], seg: &Segment, line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        // Topology dumps span many lines of one thread.
        // `CPU/` also starts a block whose header another writer destroyed.
        let starts_topo = msg.starts_with(b"=== System") || msg.starts_with(b"CPU/");
        let ps = &mut self.procs[proc.ix()];
        if starts_topo || ps.threads_in_topo > 0 {
            let thread = ps.threads.entry(seg.tid).or_default();
            if starts_topo || thread.in_topo {
                let was = thread.in_topo;
                let parser = thread.topo.get_or_insert_with(TopoParser::new);
                let result = parser.feed(msg);
                // BlockDone: the line that closed the old block opened a new one.
                thread.in_topo = result != TopoLine::NotTopology;
                match (was, thread.in_topo) {
                    (false, true) => ps.threads_in_topo += 1,
                    (true, false) => ps.threads_in_topo -= 1,
                    _ => {}
                }
                if result != TopoLine::Consumed {
                    self.collect_topology(proc, seg.tid);
                }
                if result != TopoLine::NotTopology {
                    self.report.topology_lines += 1;
                    return;
                }
            }
        }
        if let Some(colon) = ops::is_op_line(msg) {
            return self.op_line(proc, msg, colon, seg, line_no, sink);
        }
        if seg.cut {
            // Partial init lines still carry useful fields.
            if let Some(c) = init::parse_comm_line(msg) {
                self.report.init_lines += 1;
                self.comm_line(proc, seg.tid, &c);
            }
            return;
        }
        if ops::looks_like_tuning_line(msg) {
            match ops::parse_tuning_line(msg) {
                Some(t) => self.tuning_line(proc, seg.tid, &t, sink),
                None => self.report.malformed.add("tuning", line_no, || sample(msg, SAMPLE_CHARS)),
            }
            return;
        }
        if msg.starts_with(b"comm 0x") || msg.starts_with(b"ncclComm") {
            if let Some(c) = init::parse_comm_line(msg) {
                self.report.init_lines += 1;
                self.comm_line(proc, seg.tid, &c);
                return;
            }
        }
        if msg.starts_with(b"NCCL version ") {
            if let Some(v) = init::parse_version(msg) {
                self.report.version_lines += 1;
                self.table.processes[proc.ix()].nccl_version.get_or_insert(v);
                return;
            }
        }
        if msg.starts_with(b"Channel ") || msg.starts_with(b"Tree") || msg.starts_with(b"Ring ") {
            if let Some(ch) = init::parse_channel_line(msg) {
                self.report.channel_lines += 1;
                self.channel_line(proc, seg.tid, ch);
                return;
            }
        }
        if seg.level == Level::Trace && is_call_syntax(msg) {
            return self.call_line(proc, msg, seg, line_no, sink);
        }
        let mut kind = [0; KIND_MAX];
        self.report.unknown.add(message_kind_in(msg, &mut kind), line_no, || sample(msg, SAMPLE_CHARS));
    }

    fn collect_topology(&mut self, proc: ProcIdx, tid: u32) {
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

    fn device(&mut self, proc: ProcIdx, cuda_dev: Option<u32>) -> DevIdx {
        let key = cuda_dev.unwrap_or(u32::MAX);
        if let Some(&d) = self.procs[proc.ix()].devices.get(&key) {
            return d;
        }
        let d = DevIdx(self.table.devices.len() as u32);
        self.table.devices.push(Device {
            proc,
            cuda_dev,
            nvml_dev: None,
            bus_id: None,
            global_rank: None,
            local_rank: None,
        });
        self.procs[proc.ix()].devices.insert(key, d);
        d
    }

    fn comm(&mut self, proc: ProcIdx, ptr: u64) -> CommIdx {
        if let Some(&c) = self.procs[proc.ix()].comms.get(&ptr) {
            return c;
        }
        let c = CommIdx(self.table.comms.len() as u32);
        self.table.comms.push(CommMember::new(proc, ptr));
        self.procs[proc.ix()].comms.insert(ptr, c);
        c
    }

    fn comm_line(&mut self, proc: ProcIdx, tid: u32, l: &init::CommLine) {
        let c = self.comm(proc, l.comm);
        if let Some(dev) = l.cuda_dev {
            let d = self.device(proc, Some(dev));
            let device = &mut self.table.devices[d.ix()];
            device.nvml_dev = device.nvml_dev.or(l.nvml_dev);
            device.bus_id = device.bus_id.or(l.bus_id);
            self.table.comms[c.ix()].device = Some(d);
        }
        let m = &mut self.table.comms[c.ix()];
        m.rank = l.rank.or(m.rank);
        m.nranks = l.nranks.or(m.nranks);
        m.comm_id = l.comm_id.or(m.comm_id);
        m.n_nodes = l.n_nodes.or(m.n_nodes);
        m.local_ranks = l.local_ranks.or(m.local_ranks);
        m.local_rank = l.local_rank.or(m.local_rank);
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        if l.phase == Some(InitPhase::Complete) {
            self.table.comms[c.ix()].init_complete = true;
            let backlog = std::mem::take(&mut thread.init_backlog);
            thread.init_comm = None;
            for ch in backlog {
                attach_channel_line(&mut self.table.comms[c.ix()], ch);
            }
        } else {
            thread.init_comm = Some(c);
            let backlog = std::mem::take(&mut thread.init_backlog);
            for ch in backlog {
                attach_channel_line(&mut self.table.comms[c.ix()], ch);
            }
        }
    }

    fn channel_line(&mut self, proc: ProcIdx, tid: u32, ch: ChannelLine) {
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        match thread.init_comm {
            Some(c) => attach_channel_line(&mut self.table.comms[c.ix()], ch),
            None if thread.init_backlog.len() < 4096 => thread.init_backlog.push(ch),
            None => {}
        }
    }

    fn op_line(
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
            match ops::parse_op_fields(msg, colon, true) {
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
        let parsed = if self.fast {
            ops::parse_op_line(msg, colon, false)
        } else {
            ops::parse_op_line_general(msg, colon, false)
        };
        match parsed {
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
    fn resolve_broken(&mut self, proc: ProcIdx, tid: u32, call: Option<&ops::CallArgs>, sink: &mut dyn FnMut(CollOp)) {
        let ps = &mut self.procs[proc.ix()];
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

    fn emit_parsed(&mut self, proc: ProcIdx, parsed: &OpLine, info: SegInfo, sink: &mut dyn FnMut(CollOp)) {
        let op = self.make_op(proc, parsed, info);
        self.report.ops += 1;
        if op.recovered {
            self.report.recovered_ops += 1;
        }
        let nranks = self.table.comms[op.comm.ix()].nranks.unwrap_or(0);
        if op.kind.is_p2p() || nranks == 1 {
            return sink(op);
        }
        let thread = self.procs[proc.ix()].threads.entry(info.tid).or_default();
        let cap = if thread.tuning_seen { MAX_PENDING } else { MAX_UNTUNED };
        while thread.pending.len() >= cap {
            match thread.pending.pop_front() {
                Some(old) => sink(old),
                None => break,
            }
        }
        thread.pending.push_back(op);
    }

    fn make_op(&mut self, proc: ProcIdx, l: &OpLine, seg: SegInfo) -> CollOp {
        let kind = l.kind.expect("parse_op_line guarantees a kind");
        let comm_ptr = l.comm.expect("parse_op_line guarantees comm");
        let c = self.comm(proc, comm_ptr);
        if self.table.comms[c.ix()].device.is_none() {
            // No init line for this handle: the bracket is the thread's device.
            let d = self.device(proc, seg.dev);
            self.table.comms[c.ix()].device = Some(d);
        }
        let member = &mut self.table.comms[c.ix()];
        if member.nranks.is_none() {
            member.nranks = l.nranks;
        }
        let comm_seq = member.n_ops;
        member.note_op(kind);
        let dev = member.device.expect("set above");
        let version = self.table.processes[proc.ix()].nccl_version.or(self.bare_version);
        let dtype = DataType::from_nccl(l.datatype.unwrap_or(-1), version);
        let count = l.count.unwrap_or(0);
        let root = l.root.and_then(|r| u32::try_from(r).ok());
        let reduces = matches!(
            kind,
            commlens_core::OpKind::AllReduce | commlens_core::OpKind::Reduce | commlens_core::OpKind::ReduceScatter
        );
        CollOp {
            comm_seq,
            tid: seg.tid,
            seq: l.op_count.unwrap_or(0),
            redop: if reduces { l.redop.map(|r| RedOp::from_nccl(r, version)) } else { None },
            root: if kind.is_rooted() { root } else { None },
            peer: if kind.is_p2p() { root } else { None },
            sendbuff: l.sendbuff.unwrap_or(0),
            recvbuff: l.recvbuff.unwrap_or(0),
            stream: l.stream,
            cpu_ts_ns: seg.ts_ns,
            line: seg.line_no,
            recovered: seg.cut,
            ..CollOp::new(proc, dev, c, kind, count, dtype)
        }
    }

    /// Attaches a tuning line to the queued operations of its thread with the
    /// same kind and size; older queued operations leave without one.
    fn tuning_line(&mut self, proc: ProcIdx, tid: u32, t: &ops::TuningLine, sink: &mut dyn FnMut(CollOp)) {
        self.report.tuning_lines += 1;
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        thread.tuning_seen = true;
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
        match last_match {
            Some(i) => {
                for op in thread.pending.drain(..=i) {
                    sink(op);
                }
            }
            None => self.report.tuning_unmatched += 1,
        }
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
    /// is the same process: its name swallowed debris of a cut line before the
    /// clean name was known. Renaming it lets [`crate::merge::merge_tables`],
    /// which keys processes by (host, pid), fold the two together.
    fn fold_debris_hosts(&mut self) {
        let procs = &mut self.table.processes;
        for i in 0..procs.len() {
            let clean = (0..procs.len())
                .filter(|&j| {
                    j != i
                        && procs[j].pid == procs[i].pid
                        && procs[j].host.len() < procs[i].host.len()
                        && procs[i].host.ends_with(&procs[j].host)
                })
                .min_by_key(|&j| procs[j].host.len());
            if let Some(j) = clean {
                procs[i].host = procs[j].host.clone();
            }
        }
    }
}

fn attach_channel_line(m: &mut CommMember, ch: ChannelLine) {
    match ch {
        ChannelLine::RingOrder { channel, ranks } => {
            let c = channel as usize;
            if c < 1024 {
                if m.rings.len() <= c {
                    m.rings.resize(c + 1, Vec::new());
                }
                m.rings[c] = ranks;
            }
        }
        ChannelLine::Connection(conn) => {
            if m.connections.len() < 4096 {
                m.connections.push(conn)
            }
        }
        ChannelLine::Trees(t) => {
            for tc in t {
                if !m.trees.iter().any(|x| x.channel == tc.channel) && m.trees.len() < 1024 {
                    m.trees.push(tc);
                }
            }
        }
        ChannelLine::RingNeighbors => {}
    }
}

/// `ncclX(…)`: cheap shape check of an API call line.
#[inline]
fn is_call_syntax(msg: &[u8]) -> bool {
    msg.starts_with(b"nccl") && msg.last() == Some(&b')') && memchr::memchr(b'(', msg).is_some()
}

/// `gdr114:8427` or `stone:2984736:29847`: the start of a prefix whose rest
/// another writer pushed to the next line.
fn looks_like_cut_prefix(head: &[u8]) -> bool {
    let Some(colon) = memchr::memchr(b':', head) else { return false };
    colon > 0
        && head[..colon].iter().all(|&b| crate::bytes::is_host_byte(b))
        && head[colon + 1..].iter().all(|&b| b.is_ascii_digit() || b == b':')
}
