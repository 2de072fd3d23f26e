//! The chunk join's check ([`super::chunk_join`]): whether a chunk parsed
//! from an empty state gives, folded into the state the lines before it left,
//! exactly what parsing its lines after them would. Each reason to refuse is
//! a place where the chunk's start assumed something the fold does not
//! replay; a refused chunk is re-read line by line (always exact), so every
//! case handled here instead is speed, never a different result.

use super::state::{LogParser, ThreadState};
use super::state_comms::MAX_BACKLOG;
use super::state_ops::{MAX_PENDING, MAX_UNTUNED};
use commlens_core::model::ProcIdx;
use commlens_core::{CommIdx, DataType, RedOp};

impl LogParser {
    /// Why `chunk` cannot be folded into this parser exactly, or `None`.
    /// `keys` are its processes' (host, pid).
    pub(super) fn refusal(
        &self,
        chunk: &LogParser,
        keys: &[(Box<[u8]>, u32)],
    ) -> Option<&'static str> {
        let Some(spec) = chunk.spec.as_deref() else {
            return Some("not a chunk parse");
        };
        if !self.fragment.is_empty() {
            return Some("a cut prefix ends the previous chunk");
        }
        // Host spellings: the chunk's answers (new host, or debris of a
        // known one) must be the ones the true state gives.
        if !self.hosts.agrees_with(&chunk.hosts) {
            return Some("host names with debris of cut lines");
        }
        if self.report.malformed.kinds.len() + chunk.report.malformed.kinds.len()
            > super::report::MAX_KINDS
            || self.report.unknown.kinds.len() + chunk.report.unknown.kinds.len()
                > super::report::MAX_KINDS
        {
            return Some("too many kinds of unread lines");
        }
        let true_proc: Vec<Option<ProcIdx>> = keys
            .iter()
            .map(|k| self.proc_index.get(k).copied())
            .collect();
        for (lp, tp) in true_proc.iter().enumerate() {
            let version = match tp {
                Some(tp) => {
                    if self.procs[tp.ix()].threads_in_topo > 0 {
                        return Some("a topology dump spans the boundary");
                    }
                    self.table.processes[tp.ix()]
                        .nccl_version
                        .or(self.bare_version)
                }
                None => self.bare_version,
            };
            if spec.bare_version_set || spec.procs[lp].version_set {
                if version.is_some() {
                    return Some("a version line after the process's version was known");
                }
            } else if version.is_some() {
                let same = spec.procs[lp].codes.iter().all(|&(dt, red)| {
                    DataType::from_nccl(dt, None) == DataType::from_nccl(dt, version)
                        && red.is_none_or(|r| {
                            RedOp::from_nccl(r, None) == RedOp::from_nccl(r, version)
                        })
                });
                if !same {
                    return Some("datatypes decoded without the process's version");
                }
            }
            let Some(tp) = tp else { continue };
            let queued_by_settle = match self.settle_check(*tp, &chunk.procs[lp].settles) {
                Ok(tids) => tids,
                Err(why) => return Some(why),
            };
            let tps = &self.procs[tp.ix()];
            // Handles that take a true thread's held lines (one thread each).
            let mut taking: Vec<CommIdx> = Vec::new();
            for (tid, lt) in &chunk.procs[lp].threads {
                let Some(tt) = tps.threads.get(tid) else {
                    continue;
                };
                // The chunk also wrote init lines to the handle the true thread is initializing.
                let also_here = tt.init_comm.is_some_and(|c| {
                    let ptr = self.table.comms[c.ix()].ptr;
                    chunk.procs[lp]
                        .comms
                        .get(&ptr)
                        .is_some_and(|lc| spec.comms[lc.ix()].init_touched)
                });
                // The thread's first communicator line here names the handle
                // the true thread is initializing.
                let names_true_init = match (&lt.spec.first_comm, tt.init_comm) {
                    (Some(f), Some(c)) => chunk.table.comms[f.comm.ix()].ptr == self.table.comms[c.ix()].ptr,
                    _ => false,
                };
                if let Some(why) = init_refusal(lt, tt, also_here, names_true_init) {
                    return Some(why);
                }
                if let (Some(f), true) = (
                    &lt.spec.first_comm,
                    lt.init_touched && tt.init_comm.is_none(),
                ) {
                    if !tt.init_backlog.is_empty() || tt.tuning_backlog.is_some() {
                        if taking.contains(&f.comm) {
                            return Some("a communicator init spans the boundary");
                        }
                        taking.push(f.comm);
                    }
                }
                if lt.topo.is_some() && tt.topo.is_some() {
                    return Some("a thread prints topology in both chunks");
                }
                let cap = if tt.tuning_seen {
                    MAX_PENDING
                } else {
                    MAX_UNTUNED
                };
                // The queue as the chunk's first line of the thread finds it.
                let queued = match queued_by_settle.contains(tid) {
                    true => tt.pending.len().min(cap - 1) + 1,
                    false => tt.pending.len(),
                };
                // Queues only pass operations on until a tuning line: a chunk
                // that tunes nothing leaves the true cap to the fold. Else the
                // queue must not overflow before the chunk's first match.
                let tuned_here = lt.spec.synced || !lt.spec.pre_sync.is_empty();
                if tuned_here && (lt.spec.evicted || queued + lt.spec.max_len >= cap) {
                    return Some("a queue overflows across the boundary");
                }
                // The chunk, not knowing the thread had tuned before, evicted
                // at the untuned cap what the true queue would still hold.
                if lt.spec.evicted && tt.tuning_seen {
                    return Some("a queue of a tuning thread overflows in the chunk");
                }
            }
        }
        // Handles the true state already holds.
        for (lc, m) in chunk.table.comms.iter().enumerate() {
            let Some(tp) = true_proc[m.proc.ix()] else {
                continue;
            };
            let Some(&tc) = self.procs[tp.ix()].comms.get(&m.ptr) else {
                continue;
            };
            let cs = &spec.comms[lc];
            let t = &self.table.comms[tc.ix()];
            if let (Some(b), Some(d)) = (cs.bracket, t.device) {
                // The chunk gave the handle the device of its operations'
                // `[dev]` (one thread driving several GPUs prints its current
                // device, not the handle's); the fold moves them to the true
                // one (`ChunkMaps::comm_dev`) when nothing here depended on
                // it: the bracket's device is one the true process has (else
                // the chunk made a device that reading in order would not
                // make, or would make later), and init lines here (a
                // `Destroy` line, say) named the true device alone, if any.
                let true_dev = self.table.devices[d.ix()].cuda_dev.unwrap_or(u32::MAX);
                let init_agrees = !cs.device_from_init || (cs.init_dev == true_dev && !cs.init_devs_differ);
                if true_dev != b && !(init_agrees && self.procs[tp.ix()].devices.contains_key(&b)) {
                    return Some("an operation's [dev] differs from its communicator's device");
                }
            }
            if let Some(n) = t.nranks {
                if (n == 1 && cs.saw_multi) || (n != 1 && cs.saw_single) {
                    return Some("a communicator's size is known from an earlier chunk");
                }
            }
        }
        None
    }

    /// Whether the operation lines cut before the chunk that the chunk's
    /// first segment of their thread settles ([`LogParser::settle_waiting`])
    /// can be settled by the fold: their handle known, with its device and
    /// size (so the operation changes neither). Returns the threads whose
    /// queue the settled operation joins.
    fn settle_check(
        &self,
        tp: ProcIdx,
        settles: &[(u32, Option<super::ops::CallArgs>)],
    ) -> Result<Vec<u32>, &'static str> {
        let ps = &self.procs[tp.ix()];
        let mut queued = Vec::new();
        if ps.threads_with_broken == 0 {
            return Ok(queued);
        }
        for (tid, call) in settles {
            let Some((fields, _)) = ps.threads.get(tid).and_then(|t| t.broken.as_ref()) else {
                continue;
            };
            let mut fields = fields.clone();
            if let Some(call) = call {
                fields.fill_from_call(call);
            }
            if fields.missing_required().is_some() {
                continue; // counted as unrecovered, nothing else
            }
            let (Some(kind), Some(ptr)) = (fields.kind, fields.comm) else {
                return Err("a cut opCount line waits across the boundary");
            };
            let Some(&c) = ps.comms.get(&ptr) else {
                return Err("a cut opCount line of a new handle waits across the boundary");
            };
            let m = &self.table.comms[c.ix()];
            if m.device.is_none() || (m.nranks.is_none() && fields.nranks.is_some()) {
                return Err("a cut opCount line waits across the boundary");
            }
            if !(kind.is_p2p() || m.nranks == Some(1)) {
                queued.push(*tid);
            }
        }
        Ok(queued)
    }
}

/// Why a thread's init lines in the chunk (`lt`) cannot follow what the true
/// thread (`tt`) holds of an init begun before it ([`LogParser::absorb_init`]
/// replays the rest).
/// `also_here`: the chunk wrote init lines to the handle the true thread is
/// initializing. Lines the fold attaches to a handle must not need to
/// interleave with lines the chunk attached to it. `names_true_init`: the
/// thread's first communicator line here names that handle.
fn init_refusal(lt: &ThreadState, tt: &ThreadState, also_here: bool, names_true_init: bool) -> Option<&'static str> {
    if !lt.init_touched {
        return None;
    }
    if lt.spec.columns_used_unset && tt.tuning_columns.is_some() {
        return Some("a tuning table spans the boundary");
    }
    let held = !tt.init_backlog.is_empty() || tt.tuning_backlog.is_some();
    let spans = match &lt.spec.first_comm {
        // The chunk's lines go to the true thread's handle, or are held.
        // (Where the chunk held lines up to the cap, it may have dropped
        // some that the true thread attaches.)
        None => tt.init_comm.is_some() && (also_here || lt.init_backlog.len() >= MAX_BACKLOG),
        Some(first) => {
            // An init begun before the chunk (its START line there, its
            // channel lines on both sides, its COMPLETE line here: every
            // boundary inside an init block). The lines before the first
            // communicator line here went to that handle in file order; the
            // chunk held them and gave them to the handle the line names,
            // the same one, which held nothing else yet, so the fold's
            // append (`append_channels`, `append_tuning`) puts them where
            // the sequential read does, unless the hold dropped some at its
            // cap. (The bench log's only refusal on 2 workers, a 1 MiB chunk
            // read again at the very end of the read.)
            let continues = names_true_init && first.fresh && (first.held as usize) < MAX_BACKLOG;
            // Held lines of both sides are kept to one cap in file order.
            let overflows = held && tt.init_backlog.len() + first.held as usize > MAX_BACKLOG;
            (tt.init_comm.is_some() && !first.pre_empty && !continues) || (held && !first.fresh) || overflows
        }
    };
    spans.then_some("a communicator init spans the boundary")
}
