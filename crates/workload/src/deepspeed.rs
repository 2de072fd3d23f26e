//! DeepSpeed ZeRO (stages 0–3) and PyTorch FSDP (full shard, shard-grad-op, hybrid shard)
//! front end: the per-rank program of a sharded data-parallel job from a `model.conf`
//! (`framework = deepspeed` with `zero_stage`, or `framework = fsdp` with `fsdp_sharding`).
//!
//! Owns [`workload`] and the communication model below. Every rank runs the same program
//! (data parallel only: `tp = pp = ep = 1`); the model is the file's shape
//! ([`ModelConfig::shape`]) with `φ` parameters: `L` layers of `P_l` (projections, MLPs of
//! every expert, norms) and a root of `P_r` (embedding, untied output head, final norm).
//! Parameters and gradients travel in bf16 (2 bytes, the ZeRO paper's fp16 `Ψ`); counts are
//! NCCL's (per-rank shard for AllGather/ReduceScatter), rounded up where `n` does not divide.
//!
//! **DeepSpeed** (defaults as DeepSpeed documents them: `reduce_bucket_size` and
//! `allgather_bucket_size` 5e8 elements, `stage3_prefetch_bucket_size` 5e7,
//! `stage3_param_persistence_threshold` 1e5, `overlap_comm` off for stages 0–2 and on for 3):
//! - stage 0: after the last microbatch's backward, a gradient `AllReduce` per reduce bucket;
//! - stage 1: gradients stay whole across gradient accumulation; during the last microbatch's
//!   backward, each reduce bucket (filled in the order gradients appear: output head, layers
//!   last to first, embedding) is reduce-scattered as it fills (DeepSpeed issues one `Reduce`
//!   per owner's slice; bytes as one `ReduceScatter`); after the optimizer step on the rank's
//!   `φ/n` shard, the updated bf16 parameters are all-gathered in chunks of
//!   `allgather_bucket_size / n` per rank. Per iteration `2φ·(n−1)/n` elements, as plain DP;
//! - stage 2: as stage 1 but gradients are partitioned, so every microbatch's backward
//!   reduce-scatters its buckets (`(m+1)·φ·(n−1)/n` for `m` microbatches);
//! - stage 3: parameters partitioned; per microbatch every layer is all-gathered before its
//!   forward and again before its backward, gradients reduce-scattered in reduce buckets as
//!   backward produces them: `3φ·(n−1)/n` (the ZeRO paper's 1.5× of DP). Tensors under the
//!   persistence threshold (layer norms for `h < 1e5`) stay whole and are not gathered; their
//!   gradients are reduced with the rest. Prefetch: a layer's gather may start once the layer
//!   `w` before it has finished, `w = 1 + max(1, ⌊prefetch_bucket / P_l⌋)` (the CPU runs one
//!   layer ahead, the prefetch bucket more). Not modelled: `stage3_max_live_parameters` and
//!   `stage3_max_reuse_distance` (every layer is gathered again for backward, as for layers
//!   more than 1e9 parameters apart), and the root is treated as FSDP's (below).
//!
//! **FSDP** (one FSDP unit per transformer layer, the usual auto-wrap policy, plus the root
//! unit; `backward_prefetch = BACKWARD_PRE`, `limit_all_gathers = True`, bf16 `MixedPrecision`
//! for parameters and reductions, no `no_sync`):
//! - `full` (`FULL_SHARD`): per microbatch, `AllGather` of each unit before forward and again
//!   before backward (at most two gathers in flight: a gather waits for the unit two before it
//!   to finish), `ReduceScatter` of each unit's gradient right after its backward on the
//!   post-backward stream; the root unit is gathered once and kept until its backward
//!   (FSDP does not reshard the root after forward): `(3·L·P_l + 2·P_r)·(n−1)/n`;
//! - `grad_op` (`SHARD_GRAD_OP`): units stay gathered from forward to backward:
//!   `2φ·(n−1)/n`;
//! - `hybrid` (`HYBRID_SHARD`): `full` within shard groups of `fsdp_shard_size` ranks (8, a
//!   node, by default), then each unit's gradient shard all-reduced across the replicas
//!   (`DP_REP` groups of ranks with the same position in their shard group).
//!
//! Streams: gathers on `Comm(0)`, gradient reductions on `Comm(1)` (when the framework
//! overlaps them), compute on `Compute`; a layer's compute waits for its gather, a reduction
//! for the backward that produced its gradients, the optimizer step for every reduction.
//! Each iteration ends with the gradient-norm `AllReduce` (one fp32, the CPU waits) and the
//! optimizer step over the rank's shard.

use crate::frontend::{group, single_program, LayerCost, TaskList};
use crate::megatron::{ConfigError, Framework, FsdpSharding, ModelConfig};
use crate::{ComputeKind, Group, GroupKind, Phase, Program, Stream, Workload};
use commlens_core::{DataType, OpKind};

/// bf16: parameters and gradients on the wire.
const WIRE: DataType = DataType::Bfloat16;

/// The sharded data-parallel job a model file describes, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardedDp {
    pub framework: Framework,
    /// ZeRO stage (FSDP: `full`/`hybrid` = 3, `grad_op` = 2).
    pub stage: u64,
    /// Data-parallel ranks.
    pub dp: usize,
    /// Ranks a parameter is sharded over (`dp`, or `fsdp_shard_size` under hybrid sharding).
    pub shard: usize,
    pub layers: usize,
    /// Parameters of one layer (`P_l`).
    pub layer_params: f64,
    /// Of them, what is gathered (ZeRO-3: without tensors under the persistence threshold).
    pub layer_gathered: f64,
    /// Root parameters: embedding, untied output head, final norm (`P_r`).
    pub root_params: f64,
    pub root_gathered: f64,
    pub cost: LayerCost,
    /// Experts per token (MoE models: only these MLPs compute).
    pub active_mlps: f64,
    pub hidden: f64,
    pub vocab: f64,
    pub seq_len: f64,
    pub micro_batch: f64,
    pub microbatches: usize,
    pub iterations: usize,
    pub reduce_bucket: f64,
    pub allgather_bucket: f64,
    /// Layers whose gathers may be in flight ahead of compute (`w` above).
    pub gather_window: usize,
    pub overlap: bool,
}

impl ShardedDp {
    pub fn from_conf(c: &ModelConfig) -> Result<ShardedDp, ConfigError> {
        c.validate()?;
        let spec = c.shape();
        let cost = LayerCost::of(&spec);
        let h = spec.hidden as f64;
        let layer_params = spec.layer_params();
        let root_params = spec.embedding_params() + 2.0 * h;
        let size = |name: &str, v: u64| usize::try_from(v).map_err(|_| ConfigError(format!("{name} = {v} is too large")));
        let dp = size("dp", c.dp)?;
        let (stage, shard) = match (c.framework, c.fsdp_sharding) {
            (Framework::DeepSpeed, _) => (c.zero_stage, dp),
            (Framework::Fsdp, FsdpSharding::Full) => (3, dp),
            (Framework::Fsdp, FsdpSharding::GradOp) => (2, dp),
            (Framework::Fsdp, FsdpSharding::Hybrid) => (3, size("fsdp_shard_size", c.fsdp_shard_size.unwrap_or(8))?),
            (other, _) => return Err(ConfigError(format!("framework = {}: not a DeepSpeed or FSDP file", other.key()))),
        };
        let deepspeed = c.framework == Framework::DeepSpeed;
        // DeepSpeed keeps tensors under the persistence threshold whole (the layer norms' four
        // vectors of h, the final norm's two).
        let persistent = deepspeed && stage == 3 && (spec.hidden as u64) < c.param_persistence_threshold;
        let layer_gathered = if persistent { layer_params - cost.norm_params } else { layer_params };
        let root_gathered = if persistent { root_params - 2.0 * h } else { root_params };
        let gather_window = if deepspeed {
            1 + ((c.prefetch_bucket_size as f64 / layer_gathered.max(1.0)).floor() as usize).max(1)
        } else {
            2
        };
        Ok(ShardedDp {
            framework: c.framework,
            stage,
            dp,
            shard,
            layers: size("layers", c.layers)?,
            layer_params,
            layer_gathered,
            root_params,
            root_gathered,
            cost,
            active_mlps: spec.top_k.max(1) as f64,
            hidden: h,
            vocab: spec.vocab as f64,
            seq_len: spec.seq_len as f64,
            micro_batch: c.micro_batch as f64,
            microbatches: size("num_microbatches", c.microbatches()?)?,
            iterations: size("iterations", c.iterations.max(1))?,
            reduce_bucket: c.reduce_bucket_size.max(1) as f64,
            allgather_bucket: c.allgather_bucket_size.max(1) as f64,
            gather_window,
            overlap: c.overlap_comm.unwrap_or(!deepspeed || stage == 3),
        })
    }

    /// Every parameter (`φ`).
    pub fn params(&self) -> f64 {
        self.layers as f64 * self.layer_params + self.root_params
    }

    fn hybrid(&self) -> bool {
        self.shard < self.dp
    }

    fn name(&self) -> String {
        match self.framework {
            Framework::Fsdp => {
                let s = match (self.stage, self.hybrid()) {
                    (2, _) => "shard_grad_op".to_string(),
                    (_, true) => format!("hybrid_shard{}", self.shard),
                    _ => "full_shard".to_string(),
                };
                format!("fsdp {s} dp{}", self.dp)
            }
            _ => format!("deepspeed zero{} dp{}", self.stage, self.dp),
        }
    }
}

/// Shard of `elements` on `n` ranks, rounded up (the frameworks pad flat buffers).
fn shard(elements: f64, n: usize) -> u64 {
    (elements / n.max(1) as f64).ceil() as u64
}

/// The workload of a DeepSpeed or FSDP model file (see the module notes).
pub fn workload(c: &ModelConfig) -> Result<Workload, ConfigError> {
    let j = ShardedDp::from_conf(c)?;
    let mut groups: Vec<Group> = Vec::new();
    if j.shard > 1 {
        for g in 0..j.dp / j.shard {
            groups.push(group(GroupKind::Dp, g, (g * j.shard..(g + 1) * j.shard).collect()));
        }
    }
    if j.hybrid() {
        for p in 0..j.shard {
            groups.push(group(GroupKind::DpReplica, p, (0..j.dp / j.shard).map(|g| g * j.shard + p).collect()));
        }
    }
    let program = if j.stage == 3 || j.framework == Framework::Fsdp { sharded_program(&j) } else { zero12_program(&j) };
    let mut notes = vec![format!(
        "{}: {:.3} B parameters, {} microbatches, gather window {}, communication {}",
        j.name(),
        j.params() / 1e9,
        j.microbatches,
        j.gather_window,
        if j.overlap { "overlapped (own streams)" } else { "in line" }
    )];
    if j.dp == 1 {
        notes.push("dp = 1: no data-parallel communication".into());
    }
    // Every rank runs the same program on groups of one shape: rank 0 speaks for all.
    Ok(single_program(j.name(), j.dp, j.iterations as u64, groups, program, vec![0; j.dp], notes))
}

/// Builds a rank's compute with hooks for the communication around it.
struct Build<'a> {
    j: &'a ShardedDp,
    t: TaskList,
}

impl Build<'_> {
    fn has(&self, kind: GroupKind) -> bool {
        match kind {
            GroupKind::Dp => self.j.shard > 1,
            GroupKind::DpReplica => self.j.hybrid(),
            _ => false,
        }
    }

    fn coll(&mut self, stream: Stream, deps: Vec<u32>, kind: GroupKind, op: OpKind, count: u64, tag: u64) -> Option<u32> {
        (self.has(kind) && count > 0).then(|| self.t.coll(stream, deps, kind, op, count, WIRE, tag))
    }

    fn tokens(&self) -> f64 {
        self.j.micro_batch * self.j.seq_len
    }

    fn embedding(&mut self, fwd: bool, deps: Vec<u32>) -> u32 {
        let f = 2.0 * self.tokens() * self.j.hidden;
        self.t.compute(deps, if fwd { "embedding fwd" } else { "embedding bwd" }, ComputeKind::Embedding, f, 0.0)
    }

    /// One layer forward (`bwd` false) or backward: attention and MLP; returns the last task.
    fn layer(&mut self, bwd: bool, deps: Vec<u32>) -> u32 {
        let (c, tok, x) = (self.j.cost, self.tokens(), if bwd { 2.0 } else { 1.0 });
        let attn = x * (tok * c.attn_flops_per_token + self.j.micro_batch * c.score_flops_per_seq);
        let mlp = x * tok * c.mlp_flops_per_token * self.j.active_mlps;
        if bwd {
            self.t.compute(deps, "mlp bwd", ComputeKind::Gemm, mlp, 0.0);
            self.t.compute(Vec::new(), "attention bwd", ComputeKind::Attention, attn, 0.0)
        } else {
            self.t.compute(deps, "attention fwd", ComputeKind::Attention, attn, 0.0);
            self.t.compute(Vec::new(), "mlp fwd", ComputeKind::Gemm, mlp, 0.0)
        }
    }

    fn head(&mut self, bwd: bool) -> u32 {
        let logits = 2.0 * self.tokens() * self.j.hidden * self.j.vocab;
        if bwd {
            self.t.compute(Vec::new(), "output layer bwd", ComputeKind::Gemm, 2.0 * logits, 0.0)
        } else {
            self.t.compute(Vec::new(), "output layer fwd", ComputeKind::Gemm, logits, 0.0);
            // Softmax cross entropy: a few passes over the fp32 logits.
            self.t.compute(Vec::new(), "loss", ComputeKind::Elementwise, 0.0, 12.0 * self.tokens() * self.j.vocab)
        }
    }

    fn end(&mut self, reductions: Vec<u32>, it: usize) {
        let j = self.j;
        self.t.phase = Phase::Optimizer;
        let norm_deps = reductions;
        if self.has(GroupKind::Dp) {
            self.t.grad_norm(norm_deps.clone(), GroupKind::Dp);
        }
        let held = if j.stage == 0 { j.params() } else { j.params() / j.shard as f64 };
        self.t.optimizer(norm_deps, held);
        if j.framework == Framework::DeepSpeed && (j.stage == 1 || j.stage == 2) {
            // all_gather_dp_groups: the updated shard in chunks of allgather_bucket / n.
            let total = shard(j.params(), j.shard);
            let chunk = shard(j.allgather_bucket, j.shard).max(1);
            let mut done = 0;
            let mut k = 0;
            while done < total {
                let n = chunk.min(total - done);
                self.coll(Stream::Compute, Vec::new(), GroupKind::Dp, OpKind::AllGather, n, 0x6a0 + k);
                done += n;
                k += 1;
            }
        }
        self.t.end_iteration(it as u32);
    }
}

/// Gradient buckets filling in the order gradients appear; a bucket is reduced when it
/// reaches the bucket size (DeepSpeed's ipg bucket), the rest at the end.
struct Buckets {
    size: f64,
    filled: f64,
    issued: u32,
}

impl Buckets {
    fn add(&mut self, params: f64) -> Option<f64> {
        self.filled += params;
        (self.filled >= self.size).then(|| std::mem::take(&mut self.filled))
    }

    fn rest(&mut self) -> Option<f64> {
        (self.filled > 0.0).then(|| std::mem::take(&mut self.filled))
    }
}

/// ZeRO stages 0, 1 and 2 (DeepSpeed).
fn zero12_program(j: &ShardedDp) -> Program {
    let mut b = Build { j, t: TaskList::new() };
    let stream = if j.overlap { Stream::Comm(1) } else { Stream::Compute };
    // The input embedding's gradient is complete only after the embedding's backward; the
    // rest of the root (final norm, an untied output head) after the output layer's.
    let embedding_grads = j.vocab * j.hidden;
    let head_grads = j.root_params - embedding_grads;
    for it in 0..j.iterations {
        let mut reductions = Vec::new();
        for mb in 0..j.microbatches {
            let last = mb + 1 == j.microbatches;
            b.t.phase = Phase::Forward;
            b.embedding(true, Vec::new());
            for _ in 0..j.layers {
                b.layer(false, Vec::new());
            }
            b.head(false);
            b.t.phase = Phase::InputGrad;
            let reduce_now = j.stage == 2 || (j.stage == 1 && last);
            let mut buckets = Buckets { size: j.reduce_bucket, filled: 0.0, issued: 0 };
            let mut ready = |b: &mut Build, after: u32, params: f64, flush: bool, reductions: &mut Vec<u32>| {
                if !reduce_now {
                    return;
                }
                let full = buckets.add(params);
                let rest = if flush { buckets.rest() } else { None };
                for elements in full.into_iter().chain(rest) {
                    b.t.phase = Phase::WeightGrad;
                    let tag = 0x600 + buckets.issued as u64;
                    buckets.issued += 1;
                    let op = OpKind::ReduceScatter;
                    if let Some(i) = b.coll(stream, vec![after], GroupKind::Dp, op, shard(elements, j.shard), tag) {
                        reductions.push(i);
                    }
                    b.t.phase = Phase::InputGrad;
                }
            };
            let h = b.head(true);
            ready(&mut b, h, head_grads, false, &mut reductions);
            for _ in 0..j.layers {
                let l = b.layer(true, Vec::new());
                ready(&mut b, l, j.layer_params, false, &mut reductions);
            }
            let e = b.embedding(false, Vec::new());
            ready(&mut b, e, embedding_grads, true, &mut reductions);
            if j.stage == 0 && last {
                // buffered_allreduce_fallback: whole gradients in reduce buckets, after backward.
                b.t.phase = Phase::WeightGrad;
                let mut left = j.params();
                let mut k = 0;
                while left > 0.0 {
                    let n = left.min(j.reduce_bucket);
                    if let Some(i) = b.coll(Stream::Compute, Vec::new(), GroupKind::Dp, OpKind::AllReduce, n.ceil() as u64, 0x600 + k) {
                        reductions.push(i);
                    }
                    left -= n;
                    k += 1;
                }
            }
        }
        b.end(reductions, it);
    }
    Program { tasks: b.t.tasks }
}

/// ZeRO-3 and FSDP (full, hybrid, shard-grad-op).
fn sharded_program(j: &ShardedDp) -> Program {
    let mut b = Build { j, t: TaskList::new() };
    let (gather, reduce) = if j.overlap { (Stream::Comm(0), Stream::Comm(1)) } else { (Stream::Compute, Stream::Compute) };
    let regather = j.stage == 3;
    let per_unit = j.framework == Framework::Fsdp;
    let w = j.gather_window.max(1);
    let gather_count = |p: f64| shard(p, j.shard);
    for it in 0..j.iterations {
        let mut reductions = Vec::new();
        for _mb in 0..j.microbatches {
            b.t.phase = Phase::Forward;
            let root = b.coll(gather, Vec::new(), GroupKind::Dp, OpKind::AllGather, gather_count(j.root_gathered), 0x6a0);
            b.embedding(true, root.into_iter().collect());
            let mut fwd_end: Vec<u32> = Vec::with_capacity(j.layers);
            for i in 0..j.layers {
                let after = if i >= w { vec![fwd_end[i - w]] } else { Vec::new() };
                let ag = b.coll(gather, after, GroupKind::Dp, OpKind::AllGather, gather_count(j.layer_gathered), 0x1000 + 16 * i as u64);
                fwd_end.push(b.layer(false, ag.into_iter().collect()));
            }
            b.head(false);
            b.t.phase = Phase::InputGrad;
            b.head(true);
            let mut bwd_end: Vec<Option<u32>> = vec![None; j.layers];
            let mut buckets = Buckets { size: j.reduce_bucket, filled: 0.0, issued: 0 };
            let mut reduce_grads = |b: &mut Build, after: u32, params: f64, flush: bool, tag: u64, reductions: &mut Vec<u32>| {
                let ready: Vec<f64> = if per_unit {
                    vec![params]
                } else {
                    let full = buckets.add(params);
                    full.into_iter().chain(if flush { buckets.rest() } else { None }).collect()
                };
                for elements in ready {
                    b.t.phase = Phase::WeightGrad;
                    let count = shard(elements, j.shard);
                    if let Some(i) = b.coll(reduce, vec![after], GroupKind::Dp, OpKind::ReduceScatter, count, tag) {
                        reductions.push(i);
                    }
                    if let Some(i) = b.coll(reduce, vec![after], GroupKind::DpReplica, OpKind::AllReduce, count, tag + 8) {
                        reductions.push(i);
                    }
                    b.t.phase = Phase::InputGrad;
                }
            };
            for i in (0..j.layers).rev() {
                let ag = if regather {
                    let after = bwd_end.get(i + w).copied().flatten().into_iter().collect();
                    b.coll(gather, after, GroupKind::Dp, OpKind::AllGather, gather_count(j.layer_gathered), 0x2000 + 16 * i as u64)
                } else {
                    None
                };
                let end = b.layer(true, ag.into_iter().collect());
                bwd_end[i] = Some(end);
                reduce_grads(&mut b, end, j.layer_params, false, 0x2008 + 16 * i as u64, &mut reductions);
            }
            let e = b.embedding(false, Vec::new());
            reduce_grads(&mut b, e, j.root_params, true, 0x700, &mut reductions);
        }
        b.end(reductions, it);
    }
    Program { tasks: b.t.tasks }
}
