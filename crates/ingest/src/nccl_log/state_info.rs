//! INFO and TRACE messages of the reader's state machine ([`super`]): which
//! kind a message is — a topology dump's line, an opCount line, a tuning
//! line, an init line (communicator, version, channel, search graph,
//! thresholds, tuning table), an API call printed at TRACE level — decided
//! with as few tests as the common lines allow, and handed to the part of the
//! state machine that reads it; the rest are counted by kind. The rare kinds
//! (topology, tuning) are out of line: their registers cost every line.

use super::{is_call_syntax, LogParser, SAMPLE_CHARS};
use crate::bytes::sample;
use crate::nccl_log::init;
use crate::nccl_log::ops;
use crate::nccl_log::prefix::{Level, Segment};
use crate::nccl_log::report::{message_kind_in, KIND_MAX};
use crate::nccl_log::topo::{TopoLine, TopoParser};
use commlens_core::model::ProcIdx;
use commlens_core::CollOp;

impl LogParser {
    pub(super) fn info_line(&mut self, proc: ProcIdx, msg: &[u8], seg: &Segment, line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        // Topology dumps span many lines of one thread.
        // `CPU/` also starts a block whose header another writer destroyed.
        // The first byte first: most messages start with neither.
        let starts_topo = match msg.first() {
            Some(b'=') => msg.starts_with(b"=== System"),
            Some(b'C') => msg.starts_with(b"CPU/"),
            _ => false,
        };
        if (starts_topo || self.procs[proc.ix()].threads_in_topo > 0) && self.topo_line(proc, msg, seg.tid, starts_topo) {
            return;
        }
        // The first colon, where an operation's name ends: searched once for
        // the opCount test and the tuning line's (same as `ops::is_op_line`).
        let colon = ops::colon_in_24(msg);
        if let Some(colon) = colon {
            if msg[colon + 1..].starts_with(b" opCount ") {
                return self.op_line(proc, msg, colon, seg, line_no, sink);
            }
        }
        if seg.cut {
            // Partial init lines still carry useful fields.
            if let Some(c) = init::parse_comm_line(msg) {
                self.report.init_lines += 1;
                self.comm_line(proc, seg.tid, &c);
            }
            return;
        }
        if let Some(colon) = colon.filter(|&c| crate::nccl_log::ops_tuning::looks_like_tuning_at(msg, c)) {
            return self.tuning_msg(proc, msg, colon, seg.tid, line_no, sink);
        }
        // The first byte picks the one kind of init line a message may be
        // (most messages here are none: one test instead of six prefixes).
        match msg.first() {
            Some(b'c' | b'n') if msg.starts_with(b"comm 0x") || msg.starts_with(b"ncclComm") => {
                if let Some(c) = init::parse_comm_line(msg) {
                    self.report.init_lines += 1;
                    self.comm_line(proc, seg.tid, &c);
                    return;
                }
            }
            Some(b'N') if msg.starts_with(b"NCCL version ") => {
                if let Some(v) = init::parse_version(msg) {
                    self.report.version_lines += 1;
                    self.table.processes[proc.ix()].nccl_version.get_or_insert(v);
                    self.note_version_set(Some(proc));
                    return;
                }
            }
            Some(b'C' | b'T' | b'R') if msg.starts_with(b"Channel ") || msg.starts_with(b"Tree") || msg.starts_with(b"Ring ") => {
                if let Some(ch) = init::parse_channel_line(msg) {
                    self.report.channel_lines += 1;
                    self.channel_line(proc, seg.tid, ch);
                    return;
                }
            }
            _ => {}
        }
        if seg.level == Level::Trace && is_call_syntax(msg, &self.find_paren) {
            return self.call_line_ok(proc, msg, seg, sink);
        }
        // Search graphs, threadThresholds, the tuning table: a byte test first.
        if let Some(parsed) = init::parse_tuning_init_line(msg) {
            match parsed {
                Ok(t) => self.tuning_init_line(proc, seg.tid, t, msg, line_no),
                Err(kind) => self.report.malformed.add(kind, line_no, || sample(msg, SAMPLE_CHARS)),
            }
            return;
        }
        if self.fast {
            self.report.unknown.add_message(msg, &mut self.kind_memo, line_no, || sample(msg, SAMPLE_CHARS));
        } else {
            let mut kind = [0; KIND_MAX];
            self.report.unknown.add(message_kind_in(msg, &mut kind), line_no, || sample(msg, SAMPLE_CHARS));
        }
    }

    /// A tuning line (`AllReduce: 1048576 Bytes -> Algo …`). Out of line:
    /// one line in ten is, and its registers cost every line.
    #[inline(never)]
    fn tuning_msg(&mut self, proc: ProcIdx, msg: &[u8], colon: usize, tid: u32, line_no: u64, sink: &mut dyn FnMut(CollOp)) {
        let fast = if self.fast { crate::nccl_log::ops_fast::parse_tuning_canonical_at(msg, colon) } else { None };
        match fast.or_else(|| crate::nccl_log::ops_tuning::parse_tuning_at(msg, colon)) {
            Some(t) => self.tuning_line(proc, tid, &t, sink),
            None => self.report.malformed.add("tuning", line_no, || sample(msg, SAMPLE_CHARS)),
        }
    }

    /// A line of a thread inside a topology dump, or one that starts one:
    /// fed to the thread's topology parser. Whether it was topology. Out of
    /// line: few lines are, and its registers cost every line.
    #[inline(never)]
    fn topo_line(&mut self, proc: ProcIdx, msg: &[u8], tid: u32, starts_topo: bool) -> bool {
        let ps = &mut self.procs[proc.ix()];
        let thread = ps.threads.entry(tid).or_default();
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
                self.collect_topology(proc, tid);
            }
            if result != TopoLine::NotTopology {
                self.report.topology_lines += 1;
                return true;
            }
        }
        false
    }
}
