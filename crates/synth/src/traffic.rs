//! Megatron-LM-like program of every process: which NCCL calls, in which order, with which sizes.
//!
//! Owns the translation of the run configuration into a per-rank list of [`Step`]s: comm
//! inits, start-up barriers, per-iteration pipeline schedule (1F1B or all-forward-all-backward)
//! with tensor-parallel and pipeline-parallel traffic, gradient synchronisation at the end of
//! each iteration, shutdown barrier and comm destruction. It knows nothing about text or time
//! beyond the compute cost of each step (see `sim` for both).
//!
//! Traffic model (bf16 activations, fp32 main grads; variants below):
//! - TP (tp > 1), per microbatch: `Broadcast` of the batch from TP rank 0 (int64 tokens and
//!   position ids on the first stage, int64 labels and fp32 loss mask on the last stage, all
//!   four when pp = 1); embedding `AllReduce` (first stage); 2 `AllReduce` per layer forward
//!   and 2 per layer backward, count `seq*mb*hidden`, bf16; vocab-parallel cross entropy
//!   (3 fp32 `AllReduce` of `seq*mb` elements, op max/sum/sum) and output-layer input-grad
//!   `AllReduce` (last stage).
//! - PP (pp > 1): batched `Send`/`Recv` (`batch_isend_irecv`, one ncclGroup per call) on the PP
//!   communicator, peer = adjacent stage, count `seq*mb*hidden/tp` bf16 (thesis eq. 2.9).
//! - End of iteration (buckets and their sync live in `params`): DP gradient `AllReduce` per
//!   bucket (dp > 1, fp32, buckets of max(40M, 1M*dp) elements), word-embedding gradient
//!   `AllReduce` on EMB (pp > 1), grad-norm `AllReduce` of one fp32 on MP (dp > 1) or WORLD.
//! - Start-up: barrier, start-time `AllReduce` (fp64, op min), barrier on WORLD; shutdown barrier.
//!
//! Variants (Megatron-LM code paths, thesis §5.3):
//! - Sequence parallelism: per sublayer forward `AllGather` (input) + `ReduceScatter` (output)
//!   of `seq*mb*hidden/tp` bf16 elements; backward `AllGather` (output grad), `AllGather`
//!   (input again, for the weight gradient) and `ReduceScatter` (input grad), so 6 AllGather
//!   and 4 ReduceScatter per layer and microbatch. The embedding output is reduce-scattered,
//!   the output layer gathers its input, and the layer-norm gradients are all-reduced on TP
//!   once per iteration (`_allreduce_layernorm_grads`).
//! - Distributed optimizer: per bucket (padded to a multiple of lcm(dp, 128)) a fp32
//!   `ReduceScatter` of `bucket/dp` elements before the step and a bf16 `AllGather` of the
//!   same count after it.
//! - Virtual stages: Megatron's interleaved 1F1B (see `interleaved`); p2p peers wrap around
//!   the pipeline (the last stage feeds model chunk `k+1` on the first stage).
//! - Experts: see `moe` for the dispatchers; expert weights get their gradients reduced on the
//!   expert-DP group, the router and attention weights on DP. The TP collectives of an MoE
//!   layer are kept as in a dense layer (they stand for the expert output reduction over TP).

use crate::config::{RunConfig, Schedule};
use crate::layout::{GroupKind, Layout};
pub(crate) use crate::params::{grad_buckets, stage_params};
use crate::params::{expert_grad_buckets, layernorm_params};

/// NCCL datatype enum values used here.
pub(crate) const INT64: u8 = 4;
pub(crate) const FLOAT32: u8 = 7;
pub(crate) const FLOAT64: u8 = 8;
pub(crate) const BFLOAT16: u8 = 9;

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

/// Collective kinds used by the generator, with their log names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Coll {
    AllReduce,
    Broadcast,
    AllGather,
    ReduceScatter,
}

impl Coll {
    pub fn name(self) -> &'static str {
        match self {
            Coll::AllReduce => "AllReduce",
            Coll::Broadcast => "Broadcast",
            Coll::AllGather => "AllGather",
            Coll::ReduceScatter => "ReduceScatter",
        }
    }

    /// Bytes each rank moves over the ring per byte of `count x sizeof(dtype)` on `n` ranks
    /// (AllGather and ReduceScatter log the per-rank count).
    pub fn wire_factor(self, n: f64) -> f64 {
        match self {
            Coll::AllReduce => 2.0 * (n - 1.0) / n,
            Coll::Broadcast => 1.0,
            Coll::AllGather | Coll::ReduceScatter => n - 1.0,
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

/// Effective GPU throughput used to turn FLOPs into time (flops per microsecond).
const FLOPS_PER_US: f64 = 120e6;

/// The layers one forward or backward pass of a rank runs: a whole stage, or one model chunk
/// of an interleaved pipeline.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chunk {
    /// Holds the embedding (first chunk of the model).
    pub first: bool,
    /// Holds the output layer and loss (last chunk of the model).
    pub last: bool,
    /// Index among the stage's layers of the chunk's first layer (buffer tags).
    pub local0: usize,
    /// Global index of the chunk's first layer (MoE layer pattern).
    pub global0: usize,
    pub layers: usize,
}

pub(crate) struct Ctx<'a> {
    pub cfg: &'a RunConfig,
    pub layout: &'a Layout,
    pub rank: usize,
    pub first: bool,
    pub last: bool,
    pub tp: Option<usize>,
    pub pp: Option<usize>,
    /// The EP communicator and this rank's position in it.
    pub ep: Option<(usize, usize)>,
    /// Current iteration (MoE routing differs per iteration).
    pub iter: usize,
    pub steps: Vec<Step>,
}

impl Ctx<'_> {
    pub fn act(&self) -> u64 {
        (self.cfg.seq_len * self.cfg.micro_batch * self.cfg.hidden) as u64
    }

    pub fn tokens(&self) -> u64 {
        (self.cfg.seq_len * self.cfg.micro_batch) as u64
    }

    pub fn compute(&mut self, flops: f64) {
        self.steps
            .push(Step::Compute((flops / FLOPS_PER_US).max(15.0)));
    }

    pub fn coll(
        &mut self,
        comm: Option<usize>,
        kind: Coll,
        count: u64,
        dtype: u8,
        redop: u8,
        tag: u64,
    ) {
        if let Some(comm) = comm {
            self.steps.push(Step::Coll(CollCall {
                comm,
                kind,
                count,
                dtype,
                redop,
                root: 0,
                sync: false,
                tag,
            }));
        }
    }

    fn layer_flops(&self) -> f64 {
        let c = self.cfg;
        let (b, s, h) = (c.micro_batch as f64, c.seq_len as f64, c.hidden as f64);
        (24.0 * b * s * h * h + 4.0 * b * s * s * h) / c.tp as f64
    }

    /// The whole stage as one chunk (no virtual stages).
    fn stage_chunk(&self) -> Chunk {
        let lps = self.cfg.layers_per_stage();
        Chunk { first: self.first, last: self.last, local0: 0, global0: self.rank_stage() * lps, layers: lps }
    }

    /// One TP AllGather or ReduceScatter of the sequence-parallel activation shard.
    fn sp_coll(&mut self, kind: Coll, tag: u64) {
        let shard = self.act() / self.cfg.tp as u64;
        self.coll(self.tp, kind, shard, BFLOAT16, 0, tag);
    }

    pub(crate) fn forward(&mut self, mb: usize, ch: Chunk) {
        let c = self.cfg;
        let tok = self.tokens();
        let sp = c.sequence_parallel;
        if ch.first || ch.last {
            // get_batch_on_this_tp_rank: TP rank 0 reads, the others receive.
            let mut items: Vec<(u8, u64)> = Vec::new();
            if ch.first {
                items.push((INT64, 1));
            }
            if ch.last {
                items.push((INT64, 2));
                items.push((FLOAT32, 3));
            }
            if ch.first {
                items.push((INT64, 4));
            }
            self.compute(2e9);
            for (dt, t) in items {
                self.coll(self.tp, Coll::Broadcast, tok, dt, 0, 0x100 + t);
            }
        }
        let act = self.act();
        let odd = mb as u64 & 1;
        if ch.first {
            self.compute(2.0 * act as f64);
            if sp {
                self.sp_coll(Coll::ReduceScatter, 0x200 + odd);
            } else {
                self.coll(self.tp, Coll::AllReduce, act, BFLOAT16, 0, 0x200 + odd);
            }
        }
        let lf = self.layer_flops();
        for k in 0..ch.layers {
            let tag = 0x1000 + (ch.local0 + k) as u64 * 16;
            let moe = c.is_moe_layer(ch.global0 + k).then_some(ch.global0 + k);
            self.sublayer_forward(tag, mb, lf / 3.0, None);
            self.sublayer_forward(tag + 2, mb, lf * 2.0 / 3.0, moe);
        }
        if ch.last {
            let logits = 2.0 * act as f64 * c.vocab as f64 / c.tp as f64;
            if sp {
                // The output layer (column-parallel) gathers its sequence-sharded input.
                self.sp_coll(Coll::AllGather, 0x304 + odd);
            }
            self.compute(logits);
            self.coll(self.tp, Coll::AllReduce, tok, FLOAT32, 2, 0x300);
            self.coll(self.tp, Coll::AllReduce, tok, FLOAT32, 0, 0x301);
            self.coll(self.tp, Coll::AllReduce, tok, FLOAT32, 0, 0x302);
            self.compute(1e8);
        }
    }

    /// Forward of one sublayer (attention or MLP): its compute, then the TP AllReduce of its
    /// output, or with sequence parallelism the AllGather of its input before and the
    /// ReduceScatter of its output after; an MoE MLP dispatches tokens around its compute.
    /// `tag` seeds the buffer addresses.
    fn sublayer_forward(&mut self, tag: u64, mb: usize, flops: f64, moe: Option<usize>) {
        let odd = mb as u64 & 1;
        let sp = self.cfg.sequence_parallel;
        if sp {
            self.sp_coll(Coll::AllGather, tag + 4 + odd);
        }
        match moe {
            Some(layer) => {
                self.moe_dispatch(layer, mb);
                self.compute(flops);
                self.moe_combine(layer, mb);
            }
            None => self.compute(flops),
        }
        if sp {
            self.sp_coll(Coll::ReduceScatter, tag + odd);
        } else {
            let act = self.act();
            self.coll(self.tp, Coll::AllReduce, act, BFLOAT16, 0, tag + odd);
        }
    }

    /// Backward of one sublayer: the TP AllReduce of the input gradient, or with sequence
    /// parallelism AllGather of the output gradient, AllGather of the input (weight gradient)
    /// and ReduceScatter of the input gradient; an MoE MLP sends the gradients back the way
    /// the tokens came.
    fn sublayer_backward(&mut self, tag: u64, mb: usize, flops: f64, moe: Option<usize>) {
        let odd = mb as u64 & 1;
        let sp = self.cfg.sequence_parallel;
        if sp {
            self.sp_coll(Coll::AllGather, tag + 4 + odd);
        }
        match moe {
            Some(layer) => {
                self.moe_combine_backward(layer, mb);
                self.compute(flops);
                self.moe_dispatch_backward(layer, mb);
            }
            None => self.compute(flops),
        }
        if sp {
            self.sp_coll(Coll::AllGather, tag + 6 + odd);
            self.sp_coll(Coll::ReduceScatter, tag + odd);
        } else {
            let act = self.act();
            self.coll(self.tp, Coll::AllReduce, act, BFLOAT16, 0, tag + odd);
        }
    }

    pub(crate) fn backward(&mut self, mb: usize, ch: Chunk) {
        let c = self.cfg;
        let act = self.act();
        let odd = mb as u64 & 1;
        let sp = c.sequence_parallel;
        if ch.last {
            self.compute(4.0 * act as f64 * c.vocab as f64 / c.tp as f64);
            if sp {
                self.sp_coll(Coll::AllGather, 0x404 + odd);
                self.sp_coll(Coll::ReduceScatter, 0x400 + odd);
            } else {
                self.coll(self.tp, Coll::AllReduce, act, BFLOAT16, 0, 0x400 + odd);
            }
        }
        let lf = self.layer_flops();
        for k in (0..ch.layers).rev() {
            let tag = 0x2000 + (ch.local0 + k) as u64 * 16;
            // The MLP's backward runs first.
            let moe = c.is_moe_layer(ch.global0 + k).then_some(ch.global0 + k);
            self.sublayer_backward(tag, mb, lf * 4.0 / 3.0, moe);
            self.sublayer_backward(tag + 2, mb, lf * 2.0 / 3.0, None);
        }
        if ch.first {
            if sp {
                // Gradient of the embedding's ReduceScatter.
                self.sp_coll(Coll::AllGather, 0x204 + odd);
            }
            self.compute(2.0 * act as f64);
        }
    }

    /// A batched p2p call: `(send, towards_next)` pairs, Megatron order (send/recv prev, then next).
    fn p2p(&mut self, ops: &[(bool, bool)], mb: usize) {
        let Some(pp) = self.pp else { return };
        let p = self.cfg.pp;
        let stage = self.rank_stage();
        let count = self.act() / self.cfg.tp as u64;
        let calls: Vec<P2pCall> = ops
            .iter()
            .filter(|&&(_, next)| if next { stage + 1 < p } else { stage > 0 })
            .map(|&(send, next)| P2pCall {
                send,
                peer: if next { stage + 1 } else { stage - 1 },
                count,
                dtype: BFLOAT16,
                tag: 0x500 + (send as u64) * 4 + (next as u64) * 2 + (mb as u64 & 1),
            })
            .collect();
        if !calls.is_empty() {
            self.steps.push(Step::P2p(pp, calls));
        }
    }

    pub fn rank_stage(&self) -> usize {
        self.rank / (self.cfg.tp * self.cfg.dp)
    }

    fn recv_forward(&mut self, mb: usize) {
        self.p2p(&[(false, false)], mb)
    }
    fn send_forward(&mut self, mb: usize) {
        self.p2p(&[(true, true)], mb)
    }
    fn recv_backward(&mut self, mb: usize) {
        self.p2p(&[(false, true)], mb)
    }
    fn send_backward(&mut self, mb: usize) {
        self.p2p(&[(true, false)], mb)
    }
    fn send_forward_recv_backward(&mut self, mb: usize) {
        self.p2p(&[(true, true), (false, true)], mb)
    }
    fn send_backward_recv_forward(&mut self, mb: usize) {
        self.p2p(&[(true, false), (false, false)], mb)
    }

    fn iteration(&mut self) {
        let m = self.cfg.num_microbatches;
        if self.cfg.virtual_stages > 1 {
            return self.interleaved_iteration();
        }
        let ch = self.stage_chunk();
        match self.cfg.schedule {
            Schedule::AllForwardAllBackward => {
                for i in 0..m {
                    self.recv_forward(i);
                    self.forward(i, ch);
                    self.send_forward(i);
                }
                for i in 0..m {
                    self.recv_backward(i);
                    self.backward(i, ch);
                    self.send_backward(i);
                }
            }
            Schedule::OneFOneB => {
                let stage = self.rank_stage();
                let warmup = (self.cfg.pp - stage - 1).min(m);
                let remaining = m - warmup;
                for i in 0..warmup {
                    self.recv_forward(i);
                    self.forward(i, ch);
                    self.send_forward(i);
                }
                if remaining > 0 {
                    self.recv_forward(warmup);
                }
                for i in 0..remaining {
                    self.forward(warmup + i, ch);
                    self.send_forward_recv_backward(warmup + i);
                    self.backward(i, ch);
                    if i + 1 == remaining {
                        self.send_backward(i);
                    } else {
                        self.send_backward_recv_forward(i + 1 + warmup);
                    }
                }
                for i in 0..warmup {
                    self.recv_backward(remaining + i);
                    self.backward(remaining + i, ch);
                    self.send_backward(remaining + i);
                }
            }
        }
    }
}

/// The program of every rank.
pub(crate) fn build(cfg: &RunConfig, layout: &Layout) -> Vec<Vec<Step>> {
    (0..cfg.world())
        .map(|r| build_rank(cfg, layout, r))
        .collect()
}

fn build_rank(cfg: &RunConfig, layout: &Layout, rank: usize) -> Vec<Step> {
    let stage = layout.procs[rank].pp_rank;
    let ep = layout.comm_of(rank, GroupKind::Ep).map(|c| (c, layout.comms[c].crank(rank)));
    let mut cx = Ctx {
        cfg,
        layout,
        rank,
        first: stage == 0,
        last: stage + 1 == cfg.pp,
        tp: layout.comm_of(rank, GroupKind::Tp),
        pp: layout.comm_of(rank, GroupKind::Pp),
        ep,
        iter: 0,
        steps: Vec::new(),
    };
    for &c in &layout.proc_comms[rank] {
        cx.steps.push(Step::Init(c));
    }
    let world = layout.comm_of(rank, GroupKind::World);
    let barrier = |tag| CollCall {
        comm: world.unwrap_or(0),
        kind: Coll::AllReduce,
        count: 1,
        dtype: FLOAT32,
        redop: 0,
        root: 0,
        sync: true,
        tag,
    };
    cx.steps.push(Step::Coll(barrier(0x10)));
    cx.steps.push(Step::Coll(CollCall {
        dtype: FLOAT64,
        redop: 3,
        tag: 0x11,
        ..barrier(0)
    }));
    cx.steps.push(Step::Compute(250_000.0)); // model and optimizer construction
    cx.steps.push(Step::Coll(barrier(0x12)));
    cx.steps.push(Step::Compute(120_000.0)); // dataset and dataloader construction
    let norm_comm = layout
        .comm_of(rank, GroupKind::Mp)
        .or(if cfg.tp * cfg.pp > 1 { world } else { None });
    let dp = layout.comm_of(rank, GroupKind::Dp);
    let edp = layout.comm_of(rank, GroupKind::ExpDp);
    let dense = grad_buckets(cfg, stage);
    let expert = expert_grad_buckets(cfg, stage);
    for it in 0..cfg.iterations {
        cx.iter = it;
        cx.iteration();
        // finalize_model_grads: DP grads, layer-norm grads (SP), embedding grads.
        cx.grad_sync(dp, &dense, 0x600);
        cx.grad_sync(edp, &expert, 0x640);
        if cfg.sequence_parallel {
            cx.coll(cx.tp, Coll::AllReduce, layernorm_params(cfg, stage), FLOAT32, 0, 0x780);
        }
        if let Some(emb) = layout.comm_of(rank, GroupKind::Emb) {
            let n = (cfg.vocab / cfg.tp * cfg.hidden) as u64;
            cx.coll(Some(emb), Coll::AllReduce, n, FLOAT32, 0, 0x700);
        }
        if let Some(c) = norm_comm {
            cx.steps.push(Step::Coll(CollCall {
                comm: c,
                tag: 0x800,
                ..barrier(0)
            }));
        }
        let params: u64 = stage_params(cfg, stage).iter().sum();
        cx.steps
            .push(Step::IterEnd(3_000.0 + params as f64 * 16.0 / 1.5e6));
        cx.param_gather(dp, &dense, 0x6a0);
        cx.param_gather(edp, &expert, 0x6e0);
    }
    cx.steps.push(Step::Coll(barrier(0x13)));
    for &c in layout.proc_comms[rank].iter().rev() {
        cx.steps.push(Step::Destroy(c));
    }
    cx.steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn count(steps: &[Step], f: impl Fn(&Step) -> bool) -> usize {
        steps.iter().filter(|s| f(s)).count()
    }

    #[test]
    fn tp_allreduces_follow_the_thesis_formula() {
        let cfg = RunConfig::default();
        let layout = Layout::build(&cfg, &mut SplitMix64::new(1));
        let prog = build(&cfg, &layout);
        let tp = layout.comm_of(1, GroupKind::Tp).unwrap();
        let bf16_ar = |s: &Step| matches!(s, Step::Coll(c) if c.comm == tp && c.dtype == BFLOAT16);
        // first stage: 4 per layer per microbatch + embedding
        let per_iter = cfg.num_microbatches * (4 * cfg.layers_per_stage() + 1);
        assert_eq!(count(&prog[0], bf16_ar), per_iter * cfg.iterations);
        // sends and recvs balance across the pipeline
        let p2p = |r: usize, send: bool| -> usize {
            prog[r]
                .iter()
                .map(|s| match s {
                    Step::P2p(_, ops) => ops.iter().filter(|o| o.send == send).count(),
                    _ => 0,
                })
                .sum()
        };
        assert_eq!(p2p(0, true), p2p(2, false));
        assert_eq!(p2p(2, true), p2p(0, false));
        assert_eq!(p2p(0, true), cfg.num_microbatches * cfg.iterations);
    }

    #[test]
    fn buckets_cover_all_params() {
        let cfg = RunConfig {
            dp: 2,
            hidden: 2048,
            ..RunConfig::default()
        };
        let total: u64 = stage_params(&cfg, 0).iter().sum();
        let b = grad_buckets(&cfg, 0);
        assert_eq!(b.iter().sum::<u64>(), total);
        assert!(b.len() >= 2);
    }
}
