//! What the DeepSpeed/FSDP, AxoNN and TED front ends share.
//!
//! Owns `TaskList` (a program under construction: tasks on named streams with explicit
//! dependencies), [`LayerCost`] (parameters and forward FLOPs of one transformer layer of a
//! [`ModelSpec`], unsplit), `single_program` (a [`Workload`] whose ranks all run one program)
//! and the per-rank volume accounting the tests compare with closed forms
//! ([`ring_send_bytes`], [`rank_volumes`]).
//!
//! Compute follows the Megatron front end's conventions, so the simulator's roofline (and a
//! measured kernel table, by name) prices both alike: `attention fwd`/`bwd`
//! ([`ComputeKind::Attention`]: the projections plus `4·b·s²·h` score and value products),
//! `mlp fwd`/`bwd` ([`ComputeKind::Gemm`]), `embedding fwd`/`bwd`, `output layer fwd`/`bwd`,
//! `loss`, and an `optimizer step` priced by the bytes Adam streams (16 per parameter held).
//! Backward is twice the forward FLOPs.

use crate::megatron::groups::membership;
use crate::models::ModelSpec;
use crate::{CollCall, Compute, ComputeKind, Group, GroupKind, GroupSel, Origin, Phase, Program, Stream, Task, Work, Workload};
use commlens_core::{DataType, OpKind, RedOp};
use std::collections::BTreeMap;

/// A program under construction.
#[derive(Debug)]
pub(crate) struct TaskList {
    pub tasks: Vec<Task>,
    pub phase: Phase,
}

impl TaskList {
    pub fn new() -> TaskList {
        TaskList { tasks: Vec::new(), phase: Phase::Forward }
    }

    /// Appends a task; returns its index. Dependencies on later tasks cannot be expressed.
    pub fn push(&mut self, stream: Stream, deps: Vec<u32>, work: Work) -> u32 {
        let i = self.tasks.len() as u32;
        let mut deps: Vec<u32> = deps.into_iter().filter(|&d| d < i).collect();
        deps.sort_unstable();
        deps.dedup();
        self.tasks.push(Task { stream, deps, phase: self.phase, work });
        i
    }

    /// A compute step on the compute stream.
    pub fn compute(&mut self, deps: Vec<u32>, name: &str, kind: ComputeKind, flops: f64, mem_bytes: f64) -> u32 {
        let c = Compute { name: name.to_string(), kind, flops, mem_bytes, time_us: None };
        self.push(Stream::Compute, deps, Work::Compute(c))
    }

    /// A collective on the rank's group of `group` (sum for reductions).
    #[allow(clippy::too_many_arguments)]
    pub fn coll(&mut self, stream: Stream, deps: Vec<u32>, group: GroupKind, op: OpKind, count: u64, dtype: DataType, tag: u64) -> u32 {
        let redop = matches!(op, OpKind::AllReduce | OpKind::ReduceScatter | OpKind::Reduce).then_some(RedOp::Sum);
        let call = CollCall { group: GroupSel::of(group), kind: op, count, dtype, redop, root: 0, sync: false, tag };
        self.push(stream, deps, Work::Coll(call))
    }

    /// The gradient-norm AllReduce of one fp32 the CPU waits for (gradient clipping).
    pub fn grad_norm(&mut self, deps: Vec<u32>, group: GroupKind) -> u32 {
        self.push(Stream::Compute, deps, Work::Coll(CollCall::grad_norm(group)))
    }

    /// Adam over `params` parameters held by the rank: 16 bytes streamed per parameter
    /// (fp32 master weight, two moments, gradient), memory-bound.
    pub fn optimizer(&mut self, deps: Vec<u32>, params: f64) -> u32 {
        self.compute(deps, "optimizer step", ComputeKind::Optimizer, 0.0, 16.0 * params)
    }

    pub fn end_iteration(&mut self, iter: u32) {
        self.push(Stream::Compute, Vec::new(), Work::IterationEnd { iter });
    }
}

/// One transformer layer of a model, unsplit (divide by the ranks sharing it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerCost {
    /// QKV and output projections: `2h² + 2h·kv`.
    pub attn_params: f64,
    /// One MLP (one expert): `mats · h · ffn`.
    pub mlp_params: f64,
    /// Layer norms (two, weight and bias): `4h`; DeepSpeed's persistence threshold keeps such
    /// small tensors whole.
    pub norm_params: f64,
    /// Forward FLOPs per token of the projections (`2 · attn_params`).
    pub attn_flops_per_token: f64,
    /// Forward FLOPs per sequence of the score and value products: `4·s²·h`.
    pub score_flops_per_seq: f64,
    /// Forward FLOPs per token of one MLP: `2 · mlp_params`.
    pub mlp_flops_per_token: f64,
}

impl LayerCost {
    pub fn of(m: &ModelSpec) -> LayerCost {
        let h = m.hidden as f64;
        let (attn, mlp) = (m.attention_params(), m.mlp_params());
        LayerCost {
            attn_params: attn,
            mlp_params: mlp,
            norm_params: 4.0 * h,
            attn_flops_per_token: 2.0 * attn,
            score_flops_per_seq: 4.0 * (m.seq_len as f64).powi(2) * h,
            mlp_flops_per_token: 2.0 * mlp,
        }
    }

    /// A dense layer's parameters (one MLP).
    pub fn dense_params(&self) -> f64 {
        self.attn_params + self.mlp_params + self.norm_params
    }
}

/// A workload whose ranks all run `program`, with the given groups (groups of one rank must
/// already be left out) and representatives (empty: every rank simulated).
pub(crate) fn single_program(name: String, world: usize, iterations: u64, groups: Vec<Group>, program: Program, representative: Vec<u32>, notes: Vec<String>) -> Workload {
    let membership = membership(world, &groups);
    let w = Workload {
        name,
        origin: Origin::ModelConf,
        world: world as u32,
        gpus_per_node: None,
        iterations: iterations as u32,
        groups,
        programs: vec![program],
        rank_program: vec![0; world],
        membership,
        representative,
        notes,
    };
    debug_assert_eq!(w.validate(), Ok(()));
    w
}

/// A group of `kind` named `LABEL{index}` (`TP_X3`), skipped by the caller when it has one
/// rank.
pub(crate) fn group(kind: GroupKind, index: usize, ranks: Vec<usize>) -> Group {
    Group { kind, tag: 0, name: format!("{}{}", kind.label(), index), ranks: ranks.into_iter().map(|r| r as u32).collect() }
}

/// Bytes one rank sends for a collective of `count` elements (NCCL's count: per-rank send
/// count for AllGather, per-rank receive count for ReduceScatter, the buffer for AllReduce and
/// AllToAll) of `elem_bytes` each on `n` ranks, under the ring algorithms the closed forms
/// assume: AllReduce `2(n−1)/n · count`, AllGather and ReduceScatter `(n−1) · count`,
/// AllToAll `(n−1)/n · count` (what leaves the rank), Broadcast/Reduce `count`.
pub fn ring_send_bytes(op: OpKind, count: u64, elem_bytes: u64, n: u64) -> f64 {
    let (c, n) = ((count * elem_bytes) as f64, n as f64);
    if n <= 1.0 {
        return 0.0;
    }
    match op {
        OpKind::AllReduce => 2.0 * (n - 1.0) / n * c,
        OpKind::AllGather | OpKind::ReduceScatter => (n - 1.0) * c,
        OpKind::AllToAll => (n - 1.0) / n * c,
        _ => c,
    }
}

/// Calls, elements (NCCL counts) and ring send bytes of one kind of collective on one group
/// kind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Volume {
    pub calls: u64,
    pub elements: u64,
    pub send_bytes: f64,
}

/// Per iteration, what rank `rank` communicates, by (group kind, operation): collectives of
/// its program resolved to its groups, divided by the workload's iterations. Calls on a group
/// the rank lacks are an error (a program naming a role its rank does not have).
pub fn rank_volumes(w: &Workload, rank: u32) -> Result<BTreeMap<(GroupKind, OpKind), Volume>, String> {
    let mut out: BTreeMap<(GroupKind, OpKind), Volume> = BTreeMap::new();
    let its = w.iterations.max(1) as f64;
    for t in &w.program_of(rank).tasks {
        if let Work::Coll(c) = &t.work {
            let g = w.group_of(rank, c.group).ok_or_else(|| format!("rank {rank} has no {} group", c.group.kind.label()))?;
            let n = w.group(g).ranks.len() as u64;
            let e = c.dtype.size_bytes().unwrap_or(0);
            let v = out.entry((c.group.kind, c.kind)).or_default();
            v.calls += 1;
            v.elements += c.count;
            v.send_bytes += ring_send_bytes(c.kind, c.count, e, n);
        }
    }
    for v in out.values_mut() {
        v.calls = (v.calls as f64 / its).round() as u64;
        v.elements = (v.elements as f64 / its).round() as u64;
        v.send_bytes /= its;
    }
    Ok(out)
}

/// What members of a group must agree on for each call: operation, count, element size.
pub type CallSignature = (OpKind, u64, Option<u64>);

/// The issue order of one collective of every group: for each group, the sequence of (kind,
/// count, dtype) each member calls. Members that disagree would hang NCCL; the tests check
/// that every member's sequence is the same.
pub fn group_call_sequences(w: &Workload) -> Vec<Vec<Vec<CallSignature>>> {
    w.groups
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            g.ranks
                .iter()
                .map(|&r| {
                    w.program_of(r)
                        .tasks
                        .iter()
                        .filter_map(|t| match &t.work {
                            Work::Coll(c) if w.group_of(r, c.group).is_some_and(|x| x.0 as usize == gi) => {
                                Some((c.kind, c.count, c.dtype.size_bytes()))
                            }
                            _ => None,
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}
