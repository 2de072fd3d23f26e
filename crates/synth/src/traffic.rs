//! Every process's list of [`Step`]s: the shared Megatron program rendered for this generator,
//! inside the launcher's lifecycle.
//!
//! The training iterations are `commlens_workload::megatron`'s programs (TP, SP, PP schedules,
//! DP buckets, distributed optimizer, MoE dispatchers; see that module for the traffic model):
//! the same tasks the simulator executes and the volume model sums. This module maps them onto
//! the generator's communicators (a task's group role → the rank's communicator of that group,
//! whose index is the group's index), resolves pipeline peers (`Next`/`Prev` → comm rank),
//! turns datatypes and reduction ops into NCCL's integers and compute steps into microseconds
//! (the simulator's roofline, `crate::timing`), and wraps the iterations in what torchrun and
//! Megatron do around them: comm inits, the start-up barrier, start-time `AllReduce` (fp64,
//! op min) and barrier on WORLD with model and dataloader construction between them, the
//! shutdown barrier and comm destruction. It knows nothing about text or time beyond each
//! step's cost (see `sim` for both).

use crate::config::RunConfig;
use crate::layout::{GroupKind, Layout};
use crate::timing::Timing;
use commlens_core::{DataType, OpKind, RedOp};
use commlens_workload::megatron;
use commlens_workload::{ComputeKind, GroupSel, Peer, Program, Work, Workload};

/// NCCL datatype enum values used here.
pub(crate) const FLOAT32: u8 = 7;
pub(crate) const FLOAT64: u8 = 8;

/// Size in bytes of an `ncclDataType_t`.
pub(crate) fn dtype_size(dt: u8) -> u64 {
    match dt {
        0 | 1 => 1,
        2 | 3 | 7 => 4,
        4 | 5 | 8 => 8,
        6 | 9 => 2,
        _ => 1,
    }
}

/// `ncclDataType_t` of a datatype (NCCL 2.10+ numbering; bf16 = 9).
fn nccl_dtype(d: DataType) -> u8 {
    match d {
        DataType::Int8 => 0,
        DataType::Uint8 => 1,
        DataType::Int32 => 2,
        DataType::Uint32 => 3,
        DataType::Int64 => 4,
        DataType::Uint64 => 5,
        DataType::Float16 => 6,
        DataType::Float32 => 7,
        DataType::Float64 => 8,
        DataType::Bfloat16 => 9,
        DataType::Float8E4M3 => 10,
        DataType::Float8E5M2 => 11,
        DataType::Unknown(v) => v as u8,
    }
}

/// `ncclRedOp_t` of a reduction (0 = sum, also what PyTorch passes for non-reducing calls).
fn nccl_redop(r: Option<RedOp>) -> u8 {
    match r {
        None | Some(RedOp::Sum) => 0,
        Some(RedOp::Prod) => 1,
        Some(RedOp::Max) => 2,
        Some(RedOp::Min) => 3,
        Some(RedOp::Avg) => 4,
        Some(RedOp::User(v) | RedOp::Unknown(v)) => v as u8,
    }
}

/// Collective kinds used by the generator, with their log names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Coll {
    AllReduce,
    Broadcast,
    AllGather,
    ReduceScatter,
}

impl Coll {
    fn of(kind: OpKind) -> Coll {
        match kind {
            OpKind::AllReduce => Coll::AllReduce,
            OpKind::Broadcast => Coll::Broadcast,
            OpKind::AllGather => Coll::AllGather,
            OpKind::ReduceScatter => Coll::ReduceScatter,
            other => panic!("the Megatron program issues no {other:?} collective"),
        }
    }

    /// The collective as the collective model names it.
    pub fn op_kind(self) -> OpKind {
        match self {
            Coll::AllReduce => OpKind::AllReduce,
            Coll::Broadcast => OpKind::Broadcast,
            Coll::AllGather => OpKind::AllGather,
            Coll::ReduceScatter => OpKind::ReduceScatter,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Coll::AllReduce => "AllReduce",
            Coll::Broadcast => "Broadcast",
            Coll::AllGather => "AllGather",
            Coll::ReduceScatter => "ReduceScatter",
        }
    }

    /// Whether the output lands in the input buffer (PyTorch's in-place AllReduce/Broadcast);
    /// AllGather and ReduceScatter write a separate buffer.
    pub fn in_place(self) -> bool {
        matches!(self, Coll::AllReduce | Coll::Broadcast)
    }
}

/// One collective call.
#[derive(Clone, Debug)]
pub(crate) struct CollCall {
    pub comm: usize,
    pub kind: Coll,
    pub count: u64,
    pub dtype: u8,
    pub redop: u8,
    pub root: usize,
    /// The CPU waits for the result (`.item()`, barrier).
    pub sync: bool,
    /// Buffer identity (same tag = same caching-allocator block).
    pub tag: u64,
}

/// One Send or Recv of a batched group.
#[derive(Clone, Debug)]
pub(crate) struct P2pCall {
    pub send: bool,
    /// Peer comm rank.
    pub peer: usize,
    pub count: u64,
    pub dtype: u8,
    pub tag: u64,
}

/// One step of a process's program.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Init(usize),
    Coll(CollCall),
    /// A `batch_isend_irecv` group on a communicator; Megatron synchronises after it.
    P2p(usize, Vec<P2pCall>),
    /// GPU-paced compute, microseconds.
    Compute(f64),
    /// Optimizer step etc. at the end of an iteration, microseconds.
    IterEnd(f64),
    Destroy(usize),
}

/// The program of every rank, compute steps timed by `timing`.
pub(crate) fn build(cfg: &RunConfig, layout: &Layout, timing: &Timing) -> Vec<Vec<Step>> {
    let w = megatron::workload(&cfg.program_config()).expect("a validated RunConfig is a valid Megatron config");
    debug_assert!(w.groups.iter().zip(&layout.comms).all(|(g, c)| g.name == c.name && g.ranks.len() == c.members.len()));
    (0..cfg.world()).map(|r| build_rank(layout, &w, r, timing)).collect()
}

/// The comm of `rank` that serves role `sel` (the group's index is the comm's).
fn comm_of(w: &Workload, rank: usize, sel: GroupSel) -> usize {
    w.group_of(rank as u32, sel).unwrap_or_else(|| panic!("rank {rank} has no {:?} group", sel.kind)).0 as usize
}

/// Appends the steps of `program` (rank `rank`'s iterations).
fn render(steps: &mut Vec<Step>, w: &Workload, layout: &Layout, rank: usize, program: &Program, timing: &Timing) {
    for t in &program.tasks {
        match &t.work {
            Work::Compute(c) if c.kind == ComputeKind::Optimizer => steps.push(Step::IterEnd(timing.compute_us(c))),
            Work::Compute(c) => steps.push(Step::Compute(timing.compute_us(c))),
            Work::Coll(c) => steps.push(Step::Coll(CollCall {
                comm: comm_of(w, rank, c.group),
                kind: Coll::of(c.kind),
                count: c.count,
                dtype: nccl_dtype(c.dtype),
                redop: nccl_redop(c.redop),
                root: c.root as usize,
                sync: c.sync,
                tag: c.tag,
            })),
            Work::P2p { group, calls } => {
                let comm = comm_of(w, rank, *group);
                let n = layout.comms[comm].nranks();
                let me = layout.comms[comm].crank(rank);
                let calls = calls
                    .iter()
                    .map(|c| P2pCall {
                        send: c.send,
                        peer: match c.peer {
                            Peer::Next => (me + 1) % n,
                            Peer::Prev => (me + n - 1) % n,
                            Peer::Rank(p) => p as usize,
                        },
                        count: c.count,
                        dtype: nccl_dtype(c.dtype),
                        tag: c.tag,
                    })
                    .collect();
                steps.push(Step::P2p(comm, calls));
            }
            Work::IterationEnd { .. } => {}
        }
    }
}

fn build_rank(layout: &Layout, w: &Workload, rank: usize, timing: &Timing) -> Vec<Step> {
    let mut steps = Vec::new();
    for &c in &layout.proc_comms[rank] {
        steps.push(Step::Init(c));
    }
    let world = layout.comm_of(rank, GroupKind::World).unwrap_or(0);
    let barrier = |tag| CollCall {
        comm: world,
        kind: Coll::AllReduce,
        count: 1,
        dtype: FLOAT32,
        redop: 0,
        root: 0,
        sync: true,
        tag,
    };
    steps.push(Step::Coll(barrier(0x10)));
    steps.push(Step::Coll(CollCall { dtype: FLOAT64, redop: 3, tag: 0x11, ..barrier(0) }));
    steps.push(Step::Compute(250_000.0)); // model and optimizer construction
    steps.push(Step::Coll(barrier(0x12)));
    steps.push(Step::Compute(120_000.0)); // dataset and dataloader construction
    render(&mut steps, w, layout, rank, w.program_of(rank as u32), timing);
    steps.push(Step::Coll(barrier(0x13)));
    for &c in layout.proc_comms[rank].iter().rev() {
        steps.push(Step::Destroy(c));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn tp_allreduces_and_p2p_peers_resolve_on_the_comms() {
        let cfg = RunConfig::default();
        let layout = Layout::build(&cfg, &mut SplitMix64::new(1));
        let prog = build(&cfg, &layout, &Timing::new(&cfg, cfg.validate().unwrap()));
        let tp = layout.comm_of(1, GroupKind::Tp).unwrap();
        let bf16 = |s: &Step| matches!(s, Step::Coll(c) if c.comm == tp && c.dtype == 9);
        // first stage: 4 per layer per microbatch + embedding
        let per_iter = cfg.num_microbatches * (4 * cfg.layers_per_stage() + 1);
        assert_eq!(prog[0].iter().filter(|s| bf16(s)).count(), per_iter * cfg.iterations);
        let p2p = |r: usize, send: bool| -> usize {
            prog[r].iter().map(|s| if let Step::P2p(_, ops) = s { ops.iter().filter(|o| o.send == send).count() } else { 0 }).sum()
        };
        assert_eq!(p2p(0, true), p2p(2, false));
        assert_eq!(p2p(0, true), cfg.num_microbatches * cfg.iterations);
        assert!(prog[0].iter().all(|s| !matches!(s, Step::P2p(_, ops) if ops.iter().any(|o| o.peer != 1))));
    }
}
