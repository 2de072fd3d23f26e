//! What a chunk parse of the parallel reader records of the state its start
//! assumed ([`Speculation`], [`ThreadSpec`], [`CommSpec`], [`ProcSpec`]) and
//! the spare operation queues handed from chunk to chunk; the join that
//! checks and folds these is [`crate::nccl_log::chunk_join`]. Split out of
//! `chunk_join.rs` (599 lines) so that both stay under ~600 lines.

use crate::nccl_log::ops::TuningLine;
use crate::nccl_log::state::ProcState;
use commlens_core::model::ProcIdx;
use commlens_core::{CollOp, CommIdx, OpKind};
use std::collections::VecDeque;

/// At most this many spare queues wait for later chunks
/// ([`Speculation::spare_queues`]; a log's threads are mostly fewer).
pub(in crate::nccl_log) const MAX_SPARE_QUEUES: usize = 256;

/// Keeps `q` (emptied) for a later chunk's thread, where it has a buffer
/// and the spares are not full.
pub(in crate::nccl_log) fn keep_spare(spares: &mut Vec<VecDeque<CollOp>>, mut q: VecDeque<CollOp>) {
    if q.capacity() > 0 && spares.len() < MAX_SPARE_QUEUES {
        q.clear();
        spares.push(q);
    }
}

impl ProcState {
    /// On a chunk parse: `tid` is one of the last two threads found in (or
    /// added to) `settles` (`last_settled`).
    #[inline(always)]
    pub(in crate::nccl_log) fn settled_recently(&self, tid: u32) -> bool {
        let k = tid as u64 + 1;
        (self.last_settled[0] == k) | (self.last_settled[1] == k)
    }

    /// `tid` was found in (or added to) `settles`.
    pub(in crate::nccl_log) fn note_settled(&mut self, tid: u32) {
        let k = tid as u64 + 1;
        if self.last_settled[0] != k {
            self.last_settled = [k, self.last_settled[0]];
        }
    }
}

/// Per-thread record of a chunk parse (default, and unused, elsewhere).
#[derive(Default)]
pub(crate) struct ThreadSpec {
    /// A tuning line of this chunk matched one of the thread's queued ops.
    pub(in crate::nccl_log) synced: bool,
    /// That line (it also tunes what the previous chunk left queued).
    pub(in crate::nccl_log) sync_line: Option<TuningLine>,
    /// Tuning lines before it that matched nothing here.
    pub(in crate::nccl_log) pre_sync: Vec<TuningLine>,
    /// Longest queue before the sync line.
    pub(in crate::nccl_log) max_len: usize,
    /// The queue overflowed (evicted its oldest) before the sync line.
    pub(in crate::nccl_log) evicted: bool,
    /// The thread's first communicator (init) line here.
    pub(crate) first_comm: Option<FirstComm>,
    /// A tuning-table header (or an init's end) set the thread's columns here,
    /// and a table line read them before that (they came from before).
    pub(crate) columns_set: bool,
    pub(crate) columns_used_unset: bool,
}

/// A thread's first communicator line in a chunk: where the channel and
/// init-tuning lines the thread printed before it went.
pub(crate) struct FirstComm {
    /// The chunk's handle it named.
    pub(crate) comm: CommIdx,
    /// The handle held no channel or tuning data before that line.
    pub(crate) fresh: bool,
    /// The thread had printed no channel or tuning line before it here.
    pub(crate) pre_empty: bool,
    /// The channel lines it held before it here (at most `MAX_BACKLOG`:
    /// at the cap, lines may have been dropped).
    pub(crate) held: u32,
}

impl ThreadSpec {
    pub(in crate::nccl_log) fn note_tuning(&mut self, t: &TuningLine, matched: bool) {
        if matched {
            self.synced = true;
            self.sync_line = Some(t.clone());
        } else {
            self.pre_sync.push(t.clone());
        }
    }
}

/// Per-handle record of a chunk parse.
#[derive(Default)]
pub(crate) struct CommSpec {
    /// `[dev]` key of the first operation (the handle had no device then).
    pub(in crate::nccl_log) bracket: Option<u32>,
    /// Operations saw `nranks == 1` / another size.
    pub(in crate::nccl_log) saw_single: bool,
    pub(in crate::nccl_log) saw_multi: bool,
    /// Kinds in order, as runs of one kind (kind, how many), to continue
    /// `op_seq_hash` from the true state. Runs, not one entry an operation:
    /// a handle mostly repeats one kind, and a push an operation was most of
    /// what the join's hash cost (~7 M instructions a 100 MB log).
    pub(in crate::nccl_log) kinds: Vec<(OpKind, u32)>,
    /// An init, channel or init-tuning line wrote to it.
    pub(in crate::nccl_log) init_touched: bool,
    /// A communicator line here set its device / its size (they override
    /// what the handle had; operation lines only fill them in).
    pub(in crate::nccl_log) device_from_init: bool,
    /// The CUDA device of the last such line, and whether two of them named
    /// different devices.
    pub(in crate::nccl_log) init_dev: u32,
    pub(in crate::nccl_log) init_devs_differ: bool,
    pub(in crate::nccl_log) nranks_from_init: bool,
}

/// Per-process record: (datatype, reduction) codes decoded.
#[derive(Default)]
pub(crate) struct ProcSpec {
    /// Those that decode differently by version ([`decoded_by_version`]).
    pub(in crate::nccl_log) codes: Vec<(i64, Option<i64>)>,
    /// A version line of this process was read.
    pub(in crate::nccl_log) version_set: bool,
}

/// What a chunk parse assumed of the state before it.
#[derive(Default)]
pub(crate) struct Speculation {
    pub(in crate::nccl_log) comms: Vec<CommSpec>,
    pub(in crate::nccl_log) procs: Vec<ProcSpec>,
    /// A version line without a prefix was read (it applies to every process).
    pub(in crate::nccl_log) bare_version_set: bool,
    /// Emptied operation queues of earlier chunks' joins, for this chunk's
    /// new threads ([`Speculation::give_queue`]; their pages already
    /// touched). The join hands back those it empties and those left unused
    /// ([`LogParser::absorb`]).
    pub(in crate::nccl_log) spare_queues: Vec<VecDeque<CollOp>>,
}

impl Speculation {
    /// Called for every operation of a chunk parse, inlined into `place_op`
    /// (a call was ~58 instructions an operation, 1.5 % of `stats` on 2
    /// threads on the bench log).
    #[inline(always)]
    pub(in crate::nccl_log) fn note_op(
        &mut self,
        proc: ProcIdx,
        c: CommIdx,
        kind: OpKind,
        nranks: Option<u32>,
        dtype: i64,
        redop: Option<i64>,
    ) {
        let cs = &mut self.comms[c.ix()];
        let single = nranks == Some(1);
        cs.saw_single |= single;
        cs.saw_multi |= !single;
        match cs.kinds.last_mut() {
            Some((k, n)) if *k == kind && *n < u32::MAX => *n += 1,
            _ => cs.kinds.push((kind, 1)),
        }
        if decoded_by_version(dtype, redop) {
            self.note_codes(proc, dtype, redop);
        }
    }

    /// A queue for a thread new to the chunk: a spare one, else one of the
    /// chunk's cap. Grown from nothing, a queue was reallocated up to its
    /// cap, each time into fresh pages: with ~17 new queues a chunk (a
    /// thread's queue is new in every chunk it prints in, and the join keeps
    /// it while its operations wait), most of the page faults chunking added.
    /// Out of line, and given the place rather than returning the queue:
    /// otherwise `emit_parsed` grew by the old queue's drop and no longer
    /// inlined its `push_back` (+5 M instructions on the sequential read).
    #[cold]
    #[inline(never)]
    pub(in crate::nccl_log) fn give_queue(&mut self, q: &mut VecDeque<CollOp>) {
        *q = self.spare_queues.pop().unwrap_or_else(|| VecDeque::with_capacity(crate::nccl_log::state_ops::SPEC_UNTUNED));
    }

    #[inline(never)]
    fn note_codes(&mut self, proc: ProcIdx, dtype: i64, redop: Option<i64>) {
        let codes = &mut self.procs[proc.ix()].codes;
        if codes.last() != Some(&(dtype, redop)) && !codes.contains(&(dtype, redop)) {
            codes.push((dtype, redop));
        }
    }
}

/// Whether the datatype or reduction code decodes differently by NCCL
/// version ([`DataType::from_nccl`], [`RedOp::from_nccl`]): bfloat16 and the
/// two fp8 types, and `avg` and user reductions, are newer than some
/// versions. Only those codes are recorded for the join's check
/// ([`ProcSpec::codes`]); the others decode alike without a version.
///
/// [`DataType::from_nccl`]: commlens_core::DataType::from_nccl
/// [`RedOp::from_nccl`]: commlens_core::RedOp::from_nccl
#[inline(always)]
pub(in crate::nccl_log) fn decoded_by_version(dtype: i64, redop: Option<i64>) -> bool {
    // One unsigned compare for 9..=11, and no branch between the two tests
    // (this runs for every operation of a chunk parse).
    ((dtype as u64).wrapping_sub(9) < 3) | matches!(redop, Some(r) if r >= 4)
}
