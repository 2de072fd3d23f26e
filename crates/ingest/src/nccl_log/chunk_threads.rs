//! The chunk join's fold of threads ([`super::chunk_join`]): a chunk's
//! thread continues the true thread of the same process. What the chunk
//! recorded of its start is replayed against what the true thread holds: the
//! operation line cut just before the chunk (settled by the thread's first
//! segment here), the queue of operations waiting for their tuning line (met
//! by the chunk's first tuning lines), and an init begun before the chunk
//! (its held-back channel and tuning lines, its communicator). The queue
//! buffers the fold empties are kept for later chunks' threads
//! ([`super::chunk_join::keep_spare`]).

use super::chunk_join::{keep_spare, ChunkMaps};
use super::ops::{CallArgs, TuningLine};
use super::state::{LogParser, ThreadState};
use super::state_comms::{attach_channel_line, prepend_channel_lines, prepend_tuning, MAX_BACKLOG};
use super::state_ops::{MAX_PENDING, MAX_UNTUNED};
use commlens_core::model::ProcIdx;
use commlens_core::tuning::TuningInfo;
use commlens_core::CollOp;
use std::collections::VecDeque;

impl LogParser {
    /// Settles the operation lines of process `tp` cut just before the chunk,
    /// as the chunk's first segment of each thread does in the sequential
    /// reader (`settles`, from the chunk parse; checked by `settle_check`).
    pub(super) fn settle_waiting(
        &mut self,
        tp: ProcIdx,
        settles: Vec<(u32, Option<CallArgs>)>,
        sink: &mut dyn FnMut(CollOp),
    ) {
        if self.procs[tp.ix()].threads_with_broken == 0 {
            return;
        }
        for (tid, call) in settles {
            self.resolve_broken(tp, tid, call.as_ref(), sink);
        }
    }

    pub(super) fn absorb_thread(
        &mut self,
        tp: ProcIdx,
        tid: u32,
        mut lt: ThreadState,
        maps: &ChunkMaps,
        sink: &mut dyn FnMut(CollOp),
        spares: &mut Vec<VecDeque<CollOp>>,
    ) {
        let off = maps.line_offset;
        self.absorb_init(tp, tid, &mut lt, maps);
        let ps = &mut self.procs[tp.ix()];
        let tt = ps.threads.entry(tid).or_default();
        // The previous queue meets this chunk's first tuning lines.
        let mut queue = std::mem::take(&mut tt.pending);
        let (mut tuned, mut rematched) = (0u64, 0u64);
        for t in &lt.spec.pre_sync {
            let (n, last) = tune(&mut queue, t);
            tuned += n;
            if let Some(i) = last {
                rematched += 1;
                queue.drain(..=i).for_each(&mut *sink);
            }
        }
        if let Some(t) = &lt.spec.sync_line {
            tuned += tune(&mut queue, t).0;
            queue.drain(..).for_each(&mut *sink);
        }
        if queue.is_empty() {
            // Mostly so (the sync line released the previous queue): the
            // chunk's queue, remapped in place, becomes the thread's, with
            // no copy of its operations.
            lt.pending.iter_mut().for_each(|op| maps.remap(op));
            keep_spare(spares, std::mem::replace(&mut queue, std::mem::take(&mut lt.pending)));
        } else if lt.pending.capacity() - lt.pending.len() >= queue.len()
            && queue.capacity() - queue.len() < lt.pending.len()
        {
            // The previous queue goes in front of the chunk's, in the room
            // the chunk's buffer has: extending the previous one would
            // allocate (fresh pages: ~720 page faults on the 400 MB bench
            // log) and copy the chunk's operations.
            lt.pending.iter_mut().for_each(|op| maps.remap(op));
            while let Some(op) = queue.pop_back() {
                lt.pending.push_front(op);
            }
            keep_spare(spares, std::mem::replace(&mut queue, std::mem::take(&mut lt.pending)));
        } else {
            queue.extend(lt.pending.drain(..).map(|op| maps.op(op)));
            keep_spare(spares, std::mem::take(&mut lt.pending));
        }
        tt.tuning_seen |= lt.tuning_seen;
        let cap = if tt.tuning_seen {
            MAX_PENDING
        } else {
            MAX_UNTUNED
        };
        while queue.len() > cap {
            sink(queue.pop_front().expect("longer than cap"));
        }
        if !tt.tuning_seen && queue.capacity() > 2 * MAX_UNTUNED {
            // The chunk's buffer (its cap, `SPEC_UNTUNED`, pages touched)
            // goes to a later chunk's new thread; the few operations kept
            // move to one of the true cap. Kept here, it held its pages
            // until the end, and every chunk's new queues faulted in fresh
            // ones (~1,850 page faults more than the sequential read on the
            // 400 MB bench log, 2 workers).
            let mut small = VecDeque::with_capacity(MAX_UNTUNED);
            small.extend(queue.drain(..));
            keep_spare(spares, std::mem::replace(&mut queue, small));
        }
        tt.pending = queue;
        if let Some((fields, mut info)) = lt.broken.take() {
            info.line_no += off;
            tt.broken = Some((fields, info));
            ps.threads_with_broken += 1;
        }
        if lt.topo.is_some() {
            tt.topo = lt.topo.take();
            tt.in_topo = lt.in_topo;
            ps.threads_in_topo += lt.in_topo as u32;
        }
        self.report.tuned_ops += tuned;
        self.report.tuning_unmatched -= rematched;
    }

    /// The channel and init-tuning lines true threads held back go to the
    /// chunk's handle that each thread's first communicator line here names,
    /// ahead of what the chunk gave it (`init_refusal` checks the handle held
    /// nothing before that line).
    pub(super) fn give_held(&mut self, chunk: &mut LogParser, maps: &ChunkMaps) {
        for (lp, ps) in chunk.procs.iter().enumerate() {
            let tp = maps.proc[lp];
            for (tid, lt) in &ps.threads {
                let Some(first) = lt.spec.first_comm.as_ref().filter(|_| lt.init_touched) else {
                    continue;
                };
                let Some(tt) = self.procs[tp.ix()].threads.get_mut(tid) else {
                    continue;
                };
                if tt.init_comm.is_some() {
                    continue;
                }
                let m = &mut chunk.table.comms[first.comm.ix()];
                prepend_channel_lines(m, std::mem::take(&mut tt.init_backlog));
                if let Some(earlier) = tt.tuning_backlog.take() {
                    prepend_tuning(&mut m.tuning, earlier);
                }
            }
        }
    }

    /// The thread's init lines of the chunk after what the true thread holds
    /// (see `init_refusal` for what is refused instead). Until a thread names
    /// its communicator, its channel and init-tuning lines are held back, or
    /// go to the communicator whose init it is running; its first
    /// communicator line takes what was held, the true thread's first.
    fn absorb_init(&mut self, tp: ProcIdx, tid: u32, lt: &mut ThreadState, maps: &ChunkMaps) {
        if !lt.init_touched {
            return;
        }
        let off = maps.line_offset;
        let chunk_tuning = lt.tuning_backlog.take().map(|mut t| {
            t.graphs.iter_mut().for_each(|g| g.line += off);
            t
        });
        let chunk_held = std::mem::take(&mut lt.init_backlog);
        let tt = self.procs[tp.ix()].threads.entry(tid).or_default();
        tt.init_touched = true;
        if lt.spec.columns_set {
            tt.tuning_columns = lt.tuning_columns.take();
        }
        let held = std::mem::take(&mut tt.init_backlog);
        let held_tuning = tt.tuning_backlog.take();
        let comms = &mut self.table.comms;
        match &lt.spec.first_comm {
            // No communicator named here: the chunk's lines continue the true thread's.
            None => match tt.init_comm {
                Some(c) => {
                    let m = &mut comms[c.ix()];
                    for ch in chunk_held {
                        attach_channel_line(m, ch);
                    }
                    if let Some(later) = chunk_tuning {
                        append_tuning(&mut m.tuning, later);
                    }
                }
                None => {
                    let mut all = held;
                    all.extend(chunk_held);
                    all.truncate(MAX_BACKLOG);
                    tt.init_backlog = all;
                    tt.tuning_backlog = match (held_tuning, chunk_tuning) {
                        (Some(earlier), Some(later)) => {
                            let mut slot = Some(later);
                            prepend_tuning(&mut slot, earlier);
                            slot
                        }
                        (earlier, later) => earlier.or(later),
                    };
                }
            },
            // What the true thread held went to that handle (`give_held`).
            Some(_) => {
                debug_assert!(held.is_empty() && held_tuning.is_none());
                tt.init_comm = lt.init_comm.map(|c| maps.comm[c.ix()]);
                tt.init_backlog = chunk_held;
                tt.tuning_backlog = chunk_tuning;
            }
        }
    }
}

/// `later` after what `slot` holds (print order).
pub(super) fn append_tuning(slot: &mut Option<Box<TuningInfo>>, later: Box<TuningInfo>) {
    if let Some(earlier) = slot.replace(later) {
        prepend_tuning(slot, earlier);
    }
}

/// Attaches tuning line `t` to the queued operations it matches (as
/// `tuning_line` does); returns how many and the last one's index.
fn tune(queue: &mut VecDeque<CollOp>, t: &TuningLine) -> (u64, Option<usize>) {
    let (mut n, mut last) = (0, None);
    for (i, op) in queue.iter_mut().enumerate() {
        if op.algo.is_none() && op.kind == t.kind && op.bytes == t.bytes {
            op.algo = t.algo;
            op.proto = t.proto;
            op.channels = t.channels;
            n += 1;
            last = Some(i);
        }
    }
    (n, last)
}
