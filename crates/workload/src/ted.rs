//! DeepSpeed-TED front end (Singh 2025, ch. 7): MoE training as tensor × expert × data
//! parallelism, from a `model.conf` with `framework = ted`, `tp`, `ep`, `dp`, `experts`,
//! `top_k`, `moe_layers` and `drop_duplicate_tokens`.
//!
//! Owns [`TedJob`], [`workload`] and the communication model:
//! - groups (Megatron's layout with `pp = 1`, see `megatron::groups`): TP of `tp` consecutive
//!   ranks; non-expert data parallelism DP over the `dp` replicas; EP groups of `ep` replicas
//!   inside DP; expert data parallelism `DP_EP` over the `dp/ep` replicas holding the same
//!   experts (`G_data^exp = G_data^nonexp / G_expert`, eq. 7.7). `G_tensor·G_data^nonexp = G`.
//! - every `layers/moe_layers`-th layer (from the first) is an MoE layer (TED: every other).
//!   Dense layers are Megatron's: TP `AllReduce` of `s·b·h` after attention and MLP forward and
//!   after their input gradients backward.
//! - MoE layer forward: attention, TP `AllReduce`, router, dispatch `AllToAll` on EP, the
//!   experts' MLP split over TP, TP `AllReduce` of the expert output, combine `AllToAll` on EP;
//!   backward the same in reverse (the expert input gradient's TP `AllReduce` in place of the
//!   output's). Each `AllToAll` buffer holds every token's `k` routed copies: `s·b·k·h`
//!   elements, so `k·h·β` bytes per token and direction. Routing is balanced (every rank
//!   receives `s·b·k` tokens; no capacity drops), so all ranks run one program.
//! - duplicate token dropping (DTD, on by default): the TP ranks of a layer hold the same
//!   tokens, so before each `AllToAll` every TP rank keeps only its `1/G_tensor` slice
//!   (no communication: the slice is already local) and after it a TP `AllGather` rebuilds the
//!   inputs. `AllToAll` messages shrink by `G_tensor`; each one costs a TP `AllGather` of the
//!   same `s·b·k·h/G_tensor` per rank. In backward dropping and gathering swap roles, which
//!   gives the same calls in reverse. Communication-aware checkpointing is not modelled (no
//!   activation recomputation at all).
//! - end of iteration, ZeRO-1 on both data groups (DeepSpeed's defaults: bf16, reduce bucket
//!   5e8 elements): `ReduceScatter` of the non-expert gradients over DP and of the expert
//!   gradients over DP_EP, the gradient-norm `AllReduce` (WORLD, one fp32), the optimizer step
//!   on the rank's shards, and the `AllGather` of the updated shards over each group.
//!
//! Parameters per rank: non-expert `(L·(attention projections) + dense MLPs + embeddings)/tp`
//! plus norms and routers (replicated); expert `moe_layers·(E/ep)·(MLP)/tp`.
//! Vocabulary-parallel embedding and output layer as Megatron's (embedding `AllReduce`
//! forward, output-layer input-gradient `AllReduce` backward, both `s·b·h`).

use crate::frontend::{single_program, LayerCost, TaskList};
use crate::megatron::groups::groups as megatron_groups;
use crate::megatron::{Config, ConfigError, Framework, ModelConfig};
use crate::models::ModelSpec;
use crate::{ComputeKind, GroupKind, Phase, Program, Stream, Workload};
use commlens_core::{DataType, OpKind};

const WIRE: DataType = DataType::Bfloat16;

/// The TED job a model file describes.
#[derive(Debug, Clone, PartialEq)]
pub struct TedJob {
    pub tp: usize,
    pub ep: usize,
    pub dp: usize,
    pub experts: usize,
    pub top_k: usize,
    /// Every `moe_every`-th layer is an MoE layer.
    pub moe_every: usize,
    pub spec: ModelSpec,
    pub micro_batch: usize,
    pub microbatches: usize,
    pub iterations: usize,
    pub drop_duplicates: bool,
    pub reduce_bucket: f64,
    pub allgather_bucket: f64,
}

impl TedJob {
    pub fn from_conf(c: &ModelConfig) -> Result<TedJob, ConfigError> {
        c.validate()?;
        if c.framework != Framework::Ted {
            return Err(ConfigError(format!("framework = {}: not a TED file", c.framework.key())));
        }
        let size = |name: &str, v: u64| usize::try_from(v).map_err(|_| ConfigError(format!("{name} = {v} is too large")));
        if c.layers % c.moe_layers != 0 {
            return Err(ConfigError(format!(
                "moe_layers = {}: must divide layers = {} (every n-th layer an MoE layer)",
                c.moe_layers, c.layers
            )));
        }
        if c.hidden % c.tp != 0 {
            return Err(ConfigError(format!("tp = {}: must divide hidden = {}", c.tp, c.hidden)));
        }
        let tokens = c.micro_batch * c.seq_len * c.top_k;
        if c.drop_duplicate_tokens && tokens % c.tp != 0 {
            return Err(ConfigError(format!(
                "drop_duplicate_tokens: tp = {} must divide the routed tokens micro_batch·seq_len·top_k = {tokens}",
                c.tp
            )));
        }
        let mut spec = c.shape();
        spec.experts = size("experts", c.experts.unwrap_or(c.ep))? as u32;
        Ok(TedJob {
            tp: size("tp", c.tp)?,
            ep: size("ep", c.ep)?,
            dp: size("dp", c.dp)?,
            experts: spec.experts as usize,
            top_k: size("top_k", c.top_k)?,
            moe_every: size("moe_layers", c.layers / c.moe_layers)?,
            spec,
            micro_batch: size("micro_batch", c.micro_batch)?,
            microbatches: size("num_microbatches", c.microbatches()?)?,
            iterations: size("iterations", c.iterations.max(1))?,
            drop_duplicates: c.drop_duplicate_tokens,
            reduce_bucket: c.reduce_bucket_size.max(1) as f64,
            allgather_bucket: c.allgather_bucket_size.max(1) as f64,
        })
    }

    pub fn world(&self) -> usize {
        self.tp * self.dp
    }

    pub fn is_moe(&self, layer: usize) -> bool {
        layer % self.moe_every == 0
    }

    pub fn moe_layers(&self) -> usize {
        (0..self.spec.layers as usize).filter(|&l| self.is_moe(l)).count()
    }

    /// Tokens of one microbatch (`s·b`).
    pub fn tokens(&self) -> f64 {
        (self.micro_batch * self.spec.seq_len as usize) as f64
    }

    /// Elements of one `AllToAll` buffer per rank: `s·b·k·h`, over `G_tensor` with DTD.
    pub fn all_to_all_count(&self) -> u64 {
        let full = self.tokens() as u64 * self.top_k as u64 * self.spec.hidden as u64;
        if self.drop_duplicates {
            full / self.tp as u64
        } else {
            full
        }
    }

    /// (non-expert, expert) parameters one rank holds.
    pub fn params_per_rank(&self) -> (f64, f64) {
        let c = LayerCost::of(&self.spec);
        let (l, moe) = (self.spec.layers as f64, self.moe_layers() as f64);
        let h = self.spec.hidden as f64;
        let tp = self.tp as f64;
        let split = l * c.attn_params + (l - moe) * c.mlp_params + self.spec.embedding_params();
        let replicated = l * c.norm_params + 2.0 * h + moe * h * self.experts as f64;
        let expert = moe * (self.experts / self.ep) as f64 * c.mlp_params / tp;
        (split / tp + replicated, expert)
    }

    fn config(&self) -> Config {
        Config { tp: self.tp, pp: 1, dp: self.dp, ep: self.ep, num_experts: self.experts, moe_topk: self.top_k, ..Config::default() }
    }

    fn name(&self) -> String {
        format!("ted tp{} ep{} dp{}{}", self.tp, self.ep, self.dp, if self.drop_duplicates { " dtd" } else { "" })
    }
}

/// The workload of a TED model file (see the module notes).
pub fn workload(c: &ModelConfig) -> Result<Workload, ConfigError> {
    let j = TedJob::from_conf(c)?;
    let groups: Vec<_> = megatron_groups(&j.config()).into_iter().filter(|g| g.kind != GroupKind::Mp).collect();
    let program = program(&j);
    // The first data replica of each tensor rank speaks for the others (balanced routing).
    let representative = (0..j.world() as u32).map(|r| r % j.tp as u32).collect();
    let (ne, ex) = j.params_per_rank();
    let notes = vec![format!(
        "{}: {} of {} layers MoE, {} experts, top-{}, per rank {:.3} B non-expert and {:.3} B expert parameters, all-to-all {} elements",
        j.name(),
        j.moe_layers(),
        j.spec.layers,
        j.experts,
        j.top_k,
        ne / 1e9,
        ex / 1e9,
        j.all_to_all_count()
    )];
    Ok(single_program(j.name(), j.world(), j.iterations as u64, groups, program, representative, notes))
}

struct Build<'a> {
    j: &'a TedJob,
    t: TaskList,
}

impl Build<'_> {
    fn has(&self, kind: GroupKind) -> bool {
        let j = self.j;
        match kind {
            GroupKind::Tp => j.tp > 1,
            GroupKind::Dp => j.dp > 1,
            GroupKind::Ep => j.ep > 1,
            GroupKind::DpEp => j.ep > 1 && j.dp / j.ep > 1,
            GroupKind::World => true,
            _ => false,
        }
    }

    fn coll(&mut self, kind: GroupKind, op: OpKind, count: u64, tag: u64) {
        // Expert-data reductions with ep = 1 are the DP group's.
        let kind = if kind == GroupKind::DpEp && self.j.ep == 1 { GroupKind::Dp } else { kind };
        if self.has(kind) && count > 0 {
            self.t.coll(Stream::Compute, Vec::new(), kind, op, count, WIRE, tag);
        }
    }

    fn compute(&mut self, name: &str, kind: ComputeKind, flops: f64) {
        self.t.compute(Vec::new(), name, kind, flops, 0.0);
    }

    /// Dispatch or combine: the `AllToAll` on EP, then with DTD the TP `AllGather` that
    /// rebuilds the dropped duplicates.
    fn exchange(&mut self, tag: u64) {
        let n = self.j.all_to_all_count();
        self.coll(GroupKind::Ep, OpKind::AllToAll, n, tag);
        if self.j.drop_duplicates {
            self.coll(GroupKind::Tp, OpKind::AllGather, n, tag + 1);
        }
    }

    /// ZeRO-1 over one data group: `ReduceScatter` of `params` gradients in reduce buckets
    /// (`AllGather` of the updated shards in allgather buckets when `gather`).
    fn zero1(&mut self, kind: GroupKind, params: f64, gather: bool, tag: u64) {
        let n = match kind {
            GroupKind::DpEp => self.j.dp / self.j.ep,
            _ => self.j.dp,
        } as f64;
        let (op, bucket) = if gather { (OpKind::AllGather, self.j.allgather_bucket) } else { (OpKind::ReduceScatter, self.j.reduce_bucket) };
        let mut left = params;
        let mut k = 0;
        while left > 0.0 {
            let b = left.min(bucket);
            self.coll(kind, op, (b / n).ceil() as u64, tag + k);
            left -= b;
            k += 1;
        }
    }
}

fn program(j: &TedJob) -> Program {
    let mut b = Build { j, t: TaskList::new() };
    let c = LayerCost::of(&j.spec);
    let (tok, tp) = (j.tokens(), j.tp as f64);
    let h = j.spec.hidden as f64;
    let act = (tok * h) as u64;
    let routed = (tok * j.top_k as f64 * h) as u64;
    let attn = (tok * c.attn_flops_per_token + j.micro_batch as f64 * c.score_flops_per_seq) / tp;
    let mlp = tok * c.mlp_flops_per_token / tp;
    // Every rank's experts receive s·b·k tokens (balanced), split over TP.
    let experts = tok * j.top_k as f64 * c.mlp_flops_per_token / tp;
    let router = 2.0 * tok * h * j.experts as f64;
    let logits = 2.0 * tok * h * j.spec.vocab as f64 / tp;
    let layers = j.spec.layers as usize;
    let (non_expert, expert) = j.params_per_rank();
    for it in 0..j.iterations {
        for _mb in 0..j.microbatches {
            b.t.phase = Phase::Forward;
            b.compute("embedding fwd", ComputeKind::Embedding, 2.0 * act as f64);
            b.coll(GroupKind::Tp, OpKind::AllReduce, act, 0x200);
            for l in 0..layers {
                let tag = 0x1000 + 16 * l as u64;
                b.compute("attention fwd", ComputeKind::Attention, attn);
                b.coll(GroupKind::Tp, OpKind::AllReduce, act, tag);
                if j.is_moe(l) {
                    b.compute("router fwd", ComputeKind::Gemm, router);
                    b.exchange(tag + 2);
                    b.compute("expert fwd", ComputeKind::Gemm, experts);
                    b.coll(GroupKind::Tp, OpKind::AllReduce, routed, tag + 4);
                    b.exchange(tag + 6);
                } else {
                    b.compute("mlp fwd", ComputeKind::Gemm, mlp);
                    b.coll(GroupKind::Tp, OpKind::AllReduce, act, tag + 4);
                }
            }
            b.compute("output layer fwd", ComputeKind::Gemm, logits);
            b.t.compute(Vec::new(), "loss", ComputeKind::Elementwise, 0.0, 12.0 * tok * j.spec.vocab as f64 / tp);
            b.t.phase = Phase::InputGrad;
            b.compute("output layer bwd", ComputeKind::Gemm, 2.0 * logits);
            b.coll(GroupKind::Tp, OpKind::AllReduce, act, 0x400);
            for l in (0..layers).rev() {
                let tag = 0x2000 + 16 * l as u64;
                if j.is_moe(l) {
                    b.exchange(tag + 6);
                    b.compute("expert bwd", ComputeKind::Gemm, 2.0 * experts);
                    b.coll(GroupKind::Tp, OpKind::AllReduce, routed, tag + 4);
                    b.exchange(tag + 2);
                    b.compute("router bwd", ComputeKind::Gemm, 2.0 * router);
                } else {
                    b.compute("mlp bwd", ComputeKind::Gemm, 2.0 * mlp);
                    b.coll(GroupKind::Tp, OpKind::AllReduce, act, tag + 4);
                }
                b.compute("attention bwd", ComputeKind::Attention, 2.0 * attn);
                b.coll(GroupKind::Tp, OpKind::AllReduce, act, tag);
            }
            b.compute("embedding bwd", ComputeKind::Embedding, 2.0 * act as f64);
        }
        b.t.phase = Phase::WeightGrad;
        b.zero1(GroupKind::Dp, non_expert, false, 0x600);
        b.zero1(GroupKind::DpEp, expert, false, 0x640);
        b.t.phase = Phase::Optimizer;
        if j.world() > 1 {
            b.t.grad_norm(Vec::new(), GroupKind::World);
        }
        let edp = (j.dp / j.ep).max(1) as f64;
        b.t.optimizer(Vec::new(), non_expert / j.dp as f64 + expert / edp);
        b.zero1(GroupKind::Dp, non_expert, true, 0x6a0);
        b.zero1(GroupKind::DpEp, expert, true, 0x6e0);
        b.t.end_iteration(it as u32);
    }
    Program { tasks: b.t.tasks }
}
