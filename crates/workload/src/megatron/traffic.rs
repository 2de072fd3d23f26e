//! The communication and compute of one rank's iterations: TP, SP, PP, DP and the optimizer.
//!
//! Owns the [`Builder`] that turns a pipeline schedule (`schedule`) into [`Task`]s, and the
//! traffic model (bf16 activations, fp32 main grads; `seq`, `mb`, `hidden` = `s`, `b`, `h`):
//! - TP (tp > 1), per microbatch: `Broadcast` of the batch from TP rank 0 (int64 tokens and
//!   position ids on the first stage, int64 labels and fp32 loss mask on the last, all four
//!   when pp = 1); embedding `AllReduce` (first stage); 2 `AllReduce` per layer forward and 2
//!   backward of `s·b·h` bf16; vocab-parallel cross entropy (3 fp32 `AllReduce` of `s·b`,
//!   max/sum/sum) and the output layer's input-grad `AllReduce` (last stage).
//! - Sequence parallelism: per sublayer forward `AllGather` (input) + `ReduceScatter`
//!   (output) of `s·b·h/tp` bf16; backward `AllGather` (output grad), `AllGather` (input again,
//!   for the weight gradient) and `ReduceScatter` (input grad): 6 AllGather and 4
//!   ReduceScatter per layer and microbatch. The embedding output is reduce-scattered, the
//!   output layer gathers its input, and the layer-norm gradients are all-reduced on TP once
//!   per iteration (`_allreduce_layernorm_grads`).
//! - PP (pp > 1): batched `Send`/`Recv` (`batch_isend_irecv`) to the adjacent stage
//!   ([`Peer::Next`]/[`Peer::Prev`], wrapping around under virtual stages) of `s·b·h/tp` bf16
//!   (thesis eq. 2.9).
//! - End of iteration (`finalize_model_grads`): DP gradient `AllReduce` per bucket (fp32), or
//!   with the distributed optimizer a fp32 `ReduceScatter` of the rank's shard; the same on the
//!   expert-DP group for expert weights; the layer-norm `AllReduce` (SP); the word-embedding
//!   gradient `AllReduce` on EMB (pp > 1); the grad-norm `AllReduce` of one fp32 on MP (or
//!   WORLD when there is no MP group but tp·pp > 1), which the CPU waits for (`sync`); the
//!   optimizer step (a [`ComputeKind::Optimizer`] step with its time); the distributed
//!   optimizer's bf16 `AllGather` of the updated shards; [`Work::IterationEnd`].
//! - Experts: see `moe`. The TP collectives of an MoE layer are kept as in a dense layer.
//!
//! With [`ProgramOptions::overlap_grad_reduce`] (opt-in; off for `commlens-synth`) the DP
//! bucket reductions move to `Stream::Comm(0)` and start during the last microbatch's backward
//! pass as soon as their bucket's gradients exist (Megatron's `--overlap-grad-reduce`); the
//! first task after the backward passes (`finish_grad_sync`) waits for all of them.
//!
//! Buffer tags (`CollCall::tag`) name the allocation a call uses, so a generator gives the
//! same buffer the same address: `0x1000 + 16·layer` forward, `0x2000 + 16·layer` backward,
//! `0x100` batch, `0x200` embedding, `0x300` loss, `0x400` output layer, `0x500` p2p, `0x600`
//! DP buckets, `0x640` expert buckets, `0x6a0`/`0x6e0` parameter gathers, `0x700` embedding
//! gradient, `0x780` layer norms, `0x800` grad norm, `0x900` MoE.

use super::params::{expert_grad_buckets, grad_buckets, layernorm_params, shard, stage_params};
use super::schedule::{stage_schedule, Action, P2pOp};
use super::{Config, ProgramOptions};
use crate::{CollCall, Compute, ComputeKind, GroupKind, GroupSel, P2pCall, Peer, Phase, Stream, Task, Work};
use commlens_core::{DataType, OpKind, RedOp};

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

/// The expert-parallel group of a rank: its index among the workload's groups (the routing
/// seed), the rank's position in it and its size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EpPos {
    pub group: usize,
    pub me: usize,
    pub n: usize,
}

/// Builds one rank's program.
pub(crate) struct Builder<'a> {
    pub cfg: &'a Config,
    pub stage: usize,
    pub ep: Option<EpPos>,
    /// Current iteration (MoE routing differs per iteration).
    pub iter: usize,
    pub phase: Phase,
    pub tasks: Vec<Task>,
    pub opts: ProgramOptions,
    /// Overlapped gradient reduction of the current iteration (last microbatch's backward).
    release: Option<Release>,
    /// Index of the latest compute task (what a gradient hook fires after).
    last_compute: u32,
    /// Tasks the next task pushed must wait for (the overlapped DP reductions).
    wait_for: Vec<u32>,
}

/// Buckets of an overlapped gradient reduction, released as backward steps finish.
struct Release {
    buckets: Vec<u64>,
    next: usize,
    /// Parameters whose gradients are complete.
    done: u64,
    /// Parameters of buckets `0..next`.
    emitted: u64,
    tasks: Vec<u32>,
}

impl<'a> Builder<'a> {
    pub fn new(cfg: &'a Config, stage: usize, ep: Option<EpPos>, opts: ProgramOptions) -> Self {
        Builder {
            cfg,
            stage,
            ep,
            iter: 0,
            phase: Phase::Forward,
            tasks: Vec::new(),
            opts,
            release: None,
            last_compute: 0,
            wait_for: Vec::new(),
        }
    }

    /// Whether DP buckets are reduced during the backward pass (dense, plain schedules).
    fn overlapping(&self) -> bool {
        let c = self.cfg;
        self.opts.overlap_grad_reduce && c.virtual_stages <= 1 && c.num_experts == 0 && c.dp > 1
    }

    /// Gradients of `params` more parameters are complete: reduce every bucket now full.
    fn release_grads(&mut self, params: u64) {
        let Some(mut r) = self.release.take() else { return };
        r.done += params;
        while r.next < r.buckets.len() && r.emitted + r.buckets[r.next] <= r.done {
            let b = r.buckets[r.next];
            let call = if self.cfg.distributed_optimizer {
                let s = shard(self.cfg.dp as u64, b);
                (OpKind::ReduceScatter, s)
            } else {
                (OpKind::AllReduce, b)
            };
            let cc = CollCall {
                group: GroupSel::of(GroupKind::Dp),
                kind: call.0,
                count: call.1,
                dtype: DataType::Float32,
                redop: Some(RedOp::Sum),
                root: 0,
                sync: false,
                tag: 0x600 + r.next as u64,
            };
            r.tasks.push(self.tasks.len() as u32);
            self.tasks.push(Task { stream: Stream::Comm(0), deps: vec![self.last_compute], phase: Phase::WeightGrad, work: Work::Coll(cc) });
            r.emitted += b;
            r.next += 1;
        }
        self.release = Some(r);
    }

    /// Whether a rank of this configuration belongs to a group of `kind` (groups of one rank
    /// do not exist; see `groups`).
    pub fn has(&self, kind: GroupKind) -> bool {
        let c = self.cfg;
        match kind {
            GroupKind::Tp => c.tp > 1,
            GroupKind::Pp => c.pp > 1,
            GroupKind::Embedding => c.pp > 1 && (self.stage == 0 || self.stage + 1 == c.pp),
            GroupKind::Dp => c.dp > 1,
            GroupKind::Mp => c.dp > 1 && c.tp * c.pp > 1,
            GroupKind::Ep => c.ep > 1,
            GroupKind::DpEp => c.ep > 1 && c.dp / c.ep > 1,
            GroupKind::World => true,
            GroupKind::Cp | GroupKind::Other => false,
            GroupKind::TensorX | GroupKind::TensorY | GroupKind::TensorZ | GroupKind::DpReplica => false,
        }
    }

    pub fn act(&self) -> u64 {
        (self.cfg.seq_len * self.cfg.micro_batch * self.cfg.hidden) as u64
    }

    pub fn tokens(&self) -> u64 {
        (self.cfg.seq_len * self.cfg.micro_batch) as u64
    }

    fn push(&mut self, work: Work) {
        let deps = std::mem::take(&mut self.wait_for);
        self.tasks.push(Task { stream: Stream::Compute, deps, phase: self.phase, work });
    }

    pub fn compute(&mut self, name: &str, kind: ComputeKind, flops: f64) {
        let c = Compute { name: name.to_string(), kind, flops, mem_bytes: 0.0, time_us: None };
        self.last_compute = self.tasks.len() as u32;
        self.push(Work::Compute(c));
    }

    /// A collective on the rank's group of `kind`, skipped when the rank has none.
    pub fn coll(&mut self, kind: GroupKind, op: OpKind, count: u64, dtype: DataType, redop: Option<RedOp>, tag: u64) {
        if self.has(kind) {
            let call = CollCall { group: GroupSel::of(kind), kind: op, count, dtype, redop, root: 0, sync: false, tag };
            self.push(Work::Coll(call));
        }
    }

    pub fn p2p(&mut self, kind: GroupKind, calls: Vec<P2pCall>) {
        if self.has(kind) && !calls.is_empty() {
            self.push(Work::P2p { group: GroupSel::of(kind), calls });
        }
    }

    fn layer_flops(&self) -> f64 {
        let c = self.cfg;
        let (b, s, h) = (c.micro_batch as f64, c.seq_len as f64, c.hidden as f64);
        (24.0 * b * s * h * h + 4.0 * b * s * s * h) / c.tp as f64
    }

    /// Forward FLOPs of one layer's attention and MLP sublayers on this rank. Default: a GPT
    /// layer (`24·b·s·h² + 4·b·s²·h` over TP, split one third / two thirds); with
    /// [`ProgramOptions::shape`] the projections and MLP matrices are scaled to the model's
    /// (grouped-query attention, gated or wider MLP) and the score/value products stay in
    /// attention.
    fn sublayer_flops(&self) -> (f64, f64) {
        let lf = self.layer_flops();
        match self.opts.shape {
            None => (lf / 3.0, lf * 2.0 / 3.0),
            Some(sh) => {
                let c = self.cfg;
                let (b, s, h, tp) = (c.micro_batch as f64, c.seq_len as f64, c.hidden as f64, c.tp as f64);
                let attn = (8.0 * b * s * h * h * sh.attn_proj_scale + 4.0 * b * s * s * h) / tp;
                let mlp = 16.0 * b * s * h * h * sh.mlp_scale / tp;
                (attn, mlp)
            }
        }
    }

    /// Model chunk `k` of this rank's stage (the whole stage without virtual stages).
    fn chunk(&self, k: usize) -> Chunk {
        let (pp, v, lpc) = (self.cfg.pp, self.cfg.virtual_stages.max(1), self.cfg.layers_per_chunk());
        Chunk {
            first: self.stage == 0 && k == 0,
            last: self.stage + 1 == pp && k + 1 == v,
            local0: k * lpc,
            global0: (k * pp + self.stage) * lpc,
            layers: lpc,
        }
    }

    /// One TP AllGather or ReduceScatter of the sequence-parallel activation shard.
    fn sp_coll(&mut self, op: OpKind, tag: u64) {
        let shard = self.act() / self.cfg.tp as u64;
        let redop = (op == OpKind::ReduceScatter).then_some(RedOp::Sum);
        self.coll(GroupKind::Tp, op, shard, DataType::Bfloat16, redop, tag);
    }

    fn forward(&mut self, mb: usize, ch: Chunk) {
        let c = self.cfg;
        let tok = self.tokens();
        let sp = c.sequence_parallel;
        self.phase = Phase::Forward;
        if ch.first || ch.last {
            // get_batch_on_this_tp_rank: TP rank 0 reads, the others receive.
            let mut items: Vec<(DataType, u64)> = Vec::new();
            if ch.first {
                items.push((DataType::Int64, 1));
            }
            if ch.last {
                items.push((DataType::Int64, 2));
                items.push((DataType::Float32, 3));
            }
            if ch.first {
                items.push((DataType::Int64, 4));
            }
            self.compute("get_batch", ComputeKind::Other, 2e9);
            for (dt, t) in items {
                self.coll(GroupKind::Tp, OpKind::Broadcast, tok, dt, None, 0x100 + t);
            }
        }
        let act = self.act();
        let odd = mb as u64 & 1;
        if ch.first {
            self.compute("embedding fwd", ComputeKind::Embedding, 2.0 * act as f64);
            if sp {
                self.sp_coll(OpKind::ReduceScatter, 0x200 + odd);
            } else {
                self.coll(GroupKind::Tp, OpKind::AllReduce, act, DataType::Bfloat16, Some(RedOp::Sum), 0x200 + odd);
            }
        }
        let (af, mf) = self.sublayer_flops();
        for k in 0..ch.layers {
            let tag = 0x1000 + (ch.local0 + k) as u64 * 16;
            let moe = c.is_moe_layer(ch.global0 + k).then_some(ch.global0 + k);
            self.sublayer(true, tag, mb, ("attention fwd", ComputeKind::Attention, af), None);
            self.sublayer(true, tag + 2, mb, ("mlp fwd", ComputeKind::Gemm, mf), moe);
        }
        if ch.last {
            let logits = 2.0 * act as f64 * c.vocab as f64 / c.tp as f64;
            if sp {
                // The output layer (column-parallel) gathers its sequence-sharded input.
                self.sp_coll(OpKind::AllGather, 0x304 + odd);
            }
            self.compute("output layer fwd", ComputeKind::Gemm, logits);
            self.coll(GroupKind::Tp, OpKind::AllReduce, tok, DataType::Float32, Some(RedOp::Max), 0x300);
            self.coll(GroupKind::Tp, OpKind::AllReduce, tok, DataType::Float32, Some(RedOp::Sum), 0x301);
            self.coll(GroupKind::Tp, OpKind::AllReduce, tok, DataType::Float32, Some(RedOp::Sum), 0x302);
            self.compute("loss", ComputeKind::Elementwise, 1e8);
        }
    }

    /// One sublayer (attention or MLP), forward or backward. Forward: its compute, then the TP
    /// AllReduce of its output, or with sequence parallelism the AllGather of its input before
    /// and the ReduceScatter of its output after. Backward: the TP AllReduce of the input
    /// gradient, or with SP AllGather of the output gradient, AllGather of the input (weight
    /// gradient) and ReduceScatter of the input gradient. An MoE MLP moves tokens around its
    /// compute (forward) or gradients back the way the tokens came (backward).
    fn sublayer(&mut self, fwd: bool, tag: u64, mb: usize, work: (&str, ComputeKind, f64), moe: Option<usize>) {
        let odd = mb as u64 & 1;
        let sp = self.cfg.sequence_parallel;
        if sp {
            self.sp_coll(OpKind::AllGather, tag + 4 + odd);
        }
        match (moe, fwd) {
            (Some(layer), true) => {
                self.moe_dispatch(layer, mb);
                self.compute(work.0, work.1, work.2);
                self.moe_combine(layer, mb);
            }
            (Some(layer), false) => {
                self.moe_combine_backward(layer, mb);
                self.compute(work.0, work.1, work.2);
                self.moe_dispatch_backward(layer, mb);
            }
            (None, _) => self.compute(work.0, work.1, work.2),
        }
        if sp {
            if !fwd {
                self.sp_coll(OpKind::AllGather, tag + 6 + odd);
            }
            self.sp_coll(OpKind::ReduceScatter, tag + odd);
        } else {
            let act = self.act();
            self.coll(GroupKind::Tp, OpKind::AllReduce, act, DataType::Bfloat16, Some(RedOp::Sum), tag + odd);
        }
    }

    fn backward(&mut self, mb: usize, ch: Chunk) {
        let c = self.cfg;
        let act = self.act();
        let odd = mb as u64 & 1;
        let sp = c.sequence_parallel;
        self.phase = Phase::InputGrad;
        if ch.last {
            self.compute("output layer bwd", ComputeKind::Gemm, 4.0 * act as f64 * c.vocab as f64 / c.tp as f64);
            if sp {
                self.sp_coll(OpKind::AllGather, 0x404 + odd);
                self.sp_coll(OpKind::ReduceScatter, 0x400 + odd);
            } else {
                self.coll(GroupKind::Tp, OpKind::AllReduce, act, DataType::Bfloat16, Some(RedOp::Sum), 0x400 + odd);
            }
        }
        let (af, mf) = self.sublayer_flops();
        let h = c.hidden as u64;
        let tp = c.tp as u64;
        if ch.last {
            // Final layer norm and (pp > 1) the output layer's copy of the embeddings.
            let tied = if c.pp > 1 { c.vocab as u64 / tp * h } else { 0 };
            self.release_grads(2 * h + tied);
        }
        for k in (0..ch.layers).rev() {
            let tag = 0x2000 + (ch.local0 + k) as u64 * 16;
            // The MLP's backward runs first.
            let moe = c.is_moe_layer(ch.global0 + k).then_some(ch.global0 + k);
            self.sublayer(false, tag, mb, ("mlp bwd", ComputeKind::Gemm, mf * 2.0), moe);
            self.release_grads(8 * h * h / tp + 4 * h / tp + h);
            self.sublayer(false, tag + 2, mb, ("attention bwd", ComputeKind::Attention, af * 2.0), None);
            self.release_grads(5 * h + 4 * h * h / tp + 3 * h / tp);
        }
        if ch.first {
            if sp {
                // Gradient of the embedding's ReduceScatter.
                self.sp_coll(OpKind::AllGather, 0x204 + odd);
            }
            self.compute("embedding bwd", ComputeKind::Embedding, 2.0 * act as f64);
            self.release_grads(c.vocab as u64 / tp * h + c.seq_len as u64 * h);
        }
    }

    /// A batched p2p call on the PP group.
    fn pipeline_p2p(&mut self, ops: &[P2pOp], mb: usize) {
        let count = self.act() / self.cfg.tp as u64;
        let calls = ops
            .iter()
            .map(|&(send, next)| P2pCall {
                send,
                peer: if next { Peer::Next } else { Peer::Prev },
                count,
                dtype: DataType::Bfloat16,
                tag: 0x500 + (send as u64) * 4 + (next as u64) * 2 + (mb as u64 & 1),
            })
            .collect();
        self.p2p(GroupKind::Pp, calls);
    }

    /// The forward and backward passes of one iteration, in schedule order.
    fn passes(&mut self) {
        let c = self.cfg;
        let last_mb = c.num_microbatches - 1;
        for a in stage_schedule(c.schedule, c.pp, self.stage, c.virtual_stages.max(1), c.num_microbatches) {
            match a {
                Action::Forward { chunk, mb } => self.forward(mb, self.chunk(chunk)),
                Action::Backward { chunk, mb } => {
                    if mb == last_mb && self.overlapping() {
                        let buckets = grad_buckets(c, self.stage);
                        self.release = Some(Release { buckets, next: 0, done: 0, emitted: 0, tasks: Vec::new() });
                    }
                    self.backward(mb, self.chunk(chunk));
                }
                Action::P2p { ops, mb } => self.pipeline_p2p(&ops, mb),
            }
        }
    }

    /// Gradient reduction of `buckets` on a DP-like group: one AllReduce per bucket, or with
    /// the distributed optimizer one ReduceScatter of the rank's shard.
    fn grad_sync(&mut self, kind: GroupKind, n: usize, buckets: &[u64], tag: u64) {
        for (i, &b) in buckets.iter().enumerate() {
            if self.cfg.distributed_optimizer {
                let s = shard(n as u64, b);
                self.coll(kind, OpKind::ReduceScatter, s, DataType::Float32, Some(RedOp::Sum), tag + i as u64);
            } else {
                self.coll(kind, OpKind::AllReduce, b, DataType::Float32, Some(RedOp::Sum), tag + i as u64);
            }
        }
    }

    /// Distributed optimizer: AllGather of the updated bf16 parameter shards after the step.
    fn param_gather(&mut self, kind: GroupKind, n: usize, buckets: &[u64], tag: u64) {
        if !self.cfg.distributed_optimizer {
            return;
        }
        for (i, &b) in buckets.iter().enumerate() {
            self.coll(kind, OpKind::AllGather, shard(n as u64, b), DataType::Bfloat16, None, tag + i as u64);
        }
    }

    /// Every iteration of the rank.
    pub fn iterations(&mut self) {
        let c = self.cfg;
        let stage = self.stage;
        let dense = grad_buckets(c, stage);
        let expert = expert_grad_buckets(c, stage);
        let edp = c.dp / c.ep.max(1);
        let norm = if self.has(GroupKind::Mp) {
            Some(GroupKind::Mp)
        } else if c.tp * c.pp > 1 {
            Some(GroupKind::World)
        } else {
            None
        };
        let params: u64 = stage_params(c, stage).iter().sum();
        for it in 0..c.iterations {
            self.iter = it;
            self.passes();
            self.phase = Phase::WeightGrad;
            if let Some(r) = self.release.take() {
                // Buckets not yet released (none when the parameter walk matches) go now;
                // what follows on the compute stream waits for every reduction.
                let rest = r.buckets[r.next..].iter().sum::<u64>();
                self.release = Some(r);
                self.release_grads(rest.max(1));
                let r = self.release.take().expect("set above");
                self.wait_for = r.tasks;
            } else {
                self.grad_sync(GroupKind::Dp, c.dp, &dense, 0x600);
            }
            self.grad_sync(GroupKind::DpEp, edp, &expert, 0x640);
            if c.sequence_parallel {
                let n = layernorm_params(c, stage);
                self.coll(GroupKind::Tp, OpKind::AllReduce, n, DataType::Float32, Some(RedOp::Sum), 0x780);
            }
            let emb = (c.vocab / c.tp * c.hidden) as u64;
            self.coll(GroupKind::Embedding, OpKind::AllReduce, emb, DataType::Float32, Some(RedOp::Sum), 0x700);
            self.phase = Phase::Optimizer;
            if let Some(kind) = norm {
                self.push(Work::Coll(CollCall::grad_norm(kind)));
            }
            // Adam over the stage's parameters: ~16 bytes per parameter at 1.5 TB/s, plus a
            // fixed 3 ms of launches and bookkeeping.
            self.push(Work::Compute(Compute {
                name: "optimizer step".to_string(),
                kind: ComputeKind::Optimizer,
                flops: 0.0,
                mem_bytes: params as f64 * 16.0,
                time_us: Some(3_000.0 + params as f64 * 16.0 / 1.5e6),
            }));
            self.param_gather(GroupKind::Dp, c.dp, &dense, 0x6a0);
            self.param_gather(GroupKind::DpEp, edp, &expert, 0x6e0);
            self.push(Work::IterationEnd { iter: it as u32 });
        }
    }
}
