//! The per-GPU memory model of a layout: what the heaviest GPU holds.
//!
//! Owns [`MemoryBreakdown`] (weights, gradients, optimizer state, activations, communication
//! buffers, runtime) and [`memory`], which fills it for any [`Layout`] family:
//!
//! - **Model state** per parameter the GPU holds, by recipe: Megatron (bf16 weight 2, fp32 main
//!   gradient 4, fp32 master weight and Adam moments 12 = 18 bytes; the distributed optimizer
//!   divides the 12 by DP), DeepSpeed (2 + 2 + 12 = 16, the ZeRO paper's K = 12; ZeRO-1 shards
//!   the 12, ZeRO-2 the gradients too, ZeRO-3/FSDP everything), AxoNN (the dissertation's 20φ:
//!   fp32 and fp16 copies of weights and gradients plus Adam, on the shard of the 3D grid;
//!   SAMO's `24(1−p)φ + 2φ` with a sparsity, eqs. 4.1–4.5), TED (ZeRO-1, `(4 + 12/G_data)`
//!   per parameter, experts with G_data^exp, eq. 7.4).
//! - **Activations** (Korthikanti et al. 2022, Table 2), per layer and micro-batch, bytes:
//!   `s·b·h·(10 + 24/t + 5·a·s/(h·t))` without recomputation, `s·b·h/t·(34 + 5·a·s/h)` with
//!   sequence parallelism, the `5·a·s/h` term dropped under selective recomputation, and
//!   `2·s·b·h` (÷ t with SP) per layer plus one layer's working set under full checkpointing.
//!   The 34 is 11 (attention) + 19 (a 4h GeLU MLP) + 4 (layer norms); other MLPs scale the 19
//!   as `3 + 4·ffn/h` (×1.5 gated). The first pipeline stage holds `min(pp, m)` micro-batches
//!   (`L·(1 + (p−1)/(p·v))` layer-micro-batches interleaved); the last adds the logits
//!   (`4·s·b·V/t`).
//! - **Buffers**: NCCL's per-communicator buffers ([`NCCL_BYTES_PER_COMM`] for each group the
//!   GPU is in), DeepSpeed's reduce bucket (5·10⁸ elements) or ZeRO-3's gathered layer, AxoNN's
//!   all-gathered weights of the current and next layer; a runtime reserve (CUDA context,
//!   cuBLAS workspaces) of [`RUNTIME_BYTES`].
//!
//! The recomputation of a layout is the least that fits ([`least_recompute_that_fits`]).

use crate::layout::{Family, Layout, Recompute};
use commlens_workload::models::ModelSpec;
use serde::Serialize;

/// NCCL buffers of one communicator on one GPU: 16 channels × 2 directions × 8 MiB (the 4 MiB
/// Simple buffer plus LL/LL128), an assumption, not a measurement.
pub const NCCL_BYTES_PER_COMM: f64 = 16.0 * 2.0 * 8.0 * 1048576.0;
/// CUDA context, cuBLAS/cuDNN workspaces and allocator slack: 1 GiB.
pub const RUNTIME_BYTES: f64 = 1073741824.0;
/// DeepSpeed's default `reduce_bucket_size` (elements).
pub const DEEPSPEED_REDUCE_BUCKET: f64 = 5e8;

/// What one GPU holds, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct MemoryBreakdown {
    /// Parameters the GPU owns (its shard), count.
    pub params: f64,
    pub weights: f64,
    pub gradients: f64,
    pub optimizer: f64,
    pub activations: f64,
    pub buffers: f64,
    pub runtime: f64,
}

impl MemoryBreakdown {
    pub fn states(&self) -> f64 {
        self.weights + self.gradients + self.optimizer
    }
    pub fn total(&self) -> f64 {
        self.states() + self.activations + self.buffers + self.runtime
    }
    pub fn total_gib(&self) -> f64 {
        self.total() / GIB
    }
}

pub const GIB: f64 = 1073741824.0;

/// Bytes per parameter of a recipe, before sharding.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateBytes {
    pub weight: f64,
    pub grad: f64,
    pub optimizer: f64,
}

impl StateBytes {
    /// Megatron: bf16 weight, fp32 main gradient, fp32 master + Adam (18).
    pub const MEGATRON: StateBytes = StateBytes { weight: 2.0, grad: 4.0, optimizer: 12.0 };
    /// DeepSpeed ZeRO: fp16/bf16 weight and gradient, fp32 master + Adam (16, K = 12).
    pub const DEEPSPEED: StateBytes = StateBytes { weight: 2.0, grad: 2.0, optimizer: 12.0 };
    /// AxoNN's mixed precision (20φ): θ₁₆ 2 + θ₃₂ 4, ∇θ₁₆ 2 + ∇θ₃₂ 4, Adam 8.
    pub const AXONN: StateBytes = StateBytes { weight: 6.0, grad: 6.0, optimizer: 8.0 };

    pub fn total(&self) -> f64 {
        self.weight + self.grad + self.optimizer
    }
}

/// Options of the memory model.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MemoryOptions {
    /// SAMO's pruned fraction for the AxoNN family (eqs. 4.1–4.5); `None`: dense.
    pub sparsity: Option<f64>,
}

/// The job's batch: global batch (sequences) — fixes the micro-batches per iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Batch {
    pub global: u32,
}

/// Parameter counts of one transformer layer split as the memory model needs them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerParams {
    /// Everything but the experts (attention, norms, router; a dense MLP).
    pub dense: f64,
    /// Expert MLPs (all experts); 0 for a dense model.
    pub expert: f64,
}

pub fn layer_params(m: &ModelSpec) -> LayerParams {
    let all = m.layer_params();
    if m.experts <= 1 {
        return LayerParams { dense: all, expert: 0.0 };
    }
    let expert = m.mlp_params() * m.experts as f64;
    LayerParams { dense: all - expert, expert }
}

/// Activation bytes of one layer for one micro-batch of `b` sequences, with `t`-way tensor
/// splitting (`sp`: the replicated part split too) and recomputation `rc`; `split_all`
/// divides everything by `t` (AxoNN's grid splits the whole layer).
pub fn layer_activation_bytes(m: &ModelSpec, b: f64, t: f64, sp: bool, rc: Recompute) -> f64 {
    let (s, h, a) = (m.seq_len as f64, m.hidden as f64, m.heads as f64);
    let sbh = s * b * h;
    let mlp = (3.0 + 4.0 * m.ffn as f64 / h * if m.gated_mlp { 1.5 } else { 1.0 }) * if m.experts > 1 { m.top_k as f64 } else { 1.0 };
    let linear = 11.0 + mlp + 4.0; // 34 for a GPT layer
    let replicated = 10.0;
    let scores = 5.0 * a * s / h; // per sbh, split by t (heads)
    let working = |keep_scores: bool| {
        let sc = if keep_scores { scores / t } else { 0.0 };
        if sp {
            sbh * (linear / t + sc)
        } else {
            sbh * (replicated + (linear - replicated) / t + sc)
        }
    };
    match rc {
        Recompute::None => working(true),
        Recompute::Selective => working(false),
        Recompute::Full => 2.0 * sbh / if sp { t } else { 1.0 },
    }
}

/// Per-GPU memory of `layout` for `model` (see the module notes).
pub fn memory(model: &ModelSpec, layout: &Layout, batch: Batch, opts: &MemoryOptions) -> MemoryBreakdown {
    let lp = layer_params(model);
    let (s, h, v) = (model.seq_len as f64, model.hidden as f64, model.vocab as f64);
    let emb = v * h;
    let layers = model.layers as f64;
    let rc = layout.recompute;
    let mbs = layout.mbs as f64;
    let microbatches = (batch.global as f64 / (layout.mbs as f64 * layout.batch_split() as f64)).max(1.0);
    let mut out = MemoryBreakdown { runtime: RUNTIME_BYTES, ..Default::default() };
    match layout.family {
        Family::Megatron | Family::Ted => {
            let (tp, pp, dp, ep) = (layout.tp as f64, layout.pp as f64, layout.dp as f64, layout.ep as f64);
            let lps = layers / pp;
            // Experts: sharded over EP (and TP, Megatron's expert tensor parallelism).
            let dense_stage = lps * lp.dense / tp;
            let expert_stage = lps * lp.expert / (tp * ep);
            let emb_shard = emb / tp;
            let untied = if pp == 1.0 && !model.tied_embeddings { emb_shard } else { 0.0 };
            let first_dense = dense_stage + emb_shard + untied;
            let last_dense = dense_stage + emb_shard;
            let expert_dp = (dp / ep).max(1.0);
            let state = |dense: f64| -> (f64, f64, f64) {
                if layout.family == Family::Ted {
                    // Eq. 7.4: (4 + 12/G_data) per parameter, weights and gradients 2 + 2.
                    let w = 2.0 * (dense + expert_stage);
                    (w, w, 12.0 * (dense / dp + expert_stage / expert_dp))
                } else {
                    let r = StateBytes::MEGATRON;
                    let shard = |n: f64, d: f64| if layout.zero >= 1 { n / d } else { n };
                    let opt = r.optimizer * (shard(dense, dp) + shard(expert_stage, expert_dp));
                    (r.weight * (dense + expert_stage), r.grad * (dense + expert_stage), opt)
                }
            };
            let in_flight = if layout.vpp > 1 {
                // Korthikanti: L·(1 + (p−1)/(p·v)) layer-micro-batches on the first stage.
                lps * pp * (1.0 + (pp - 1.0) / (pp * layout.vpp as f64))
            } else {
                lps * pp.min(microbatches)
            };
            let act_layer = layer_activation_bytes(model, mbs, tp, layout.sp, rc);
            let working = if rc == Recompute::Full { layer_activation_bytes(model, mbs, tp, layout.sp, Recompute::Selective) } else { 0.0 };
            let first_act = act_layer * in_flight + working;
            let logits = 4.0 * s * mbs * v / tp;
            let last_act = act_layer * lps + working + logits;
            let (fw, fg, fo) = state(first_dense);
            let (lw, lg, lo) = state(last_dense);
            let first_total = fw + fg + fo + first_act;
            let last_total = lw + lg + lo + last_act;
            let (w, g, o, a, p) = if last_total > first_total {
                (lw, lg, lo, last_act, last_dense + expert_stage)
            } else {
                (fw, fg, fo, first_act, first_dense + expert_stage)
            };
            out.params = p;
            out.weights = w;
            out.gradients = g;
            out.optimizer = o;
            out.activations = a;
            let comms = [layout.tp > 1, layout.pp > 1, layout.dp > 1, layout.ep > 1].iter().filter(|&&x| x).count() as f64;
            out.buffers = comms * NCCL_BYTES_PER_COMM;
        }
        Family::Deepspeed => {
            let dp = layout.dp as f64;
            let n = layers * (lp.dense + lp.expert) + emb * if model.tied_embeddings { 1.0 } else { 2.0 };
            let r = StateBytes::DEEPSPEED;
            let z = layout.zero;
            out.params = if z >= 3 { n / dp } else { n };
            out.weights = r.weight * if z >= 3 { n / dp } else { n };
            out.gradients = r.grad * if z >= 2 { n / dp } else { n };
            out.optimizer = r.optimizer * if z >= 1 { n / dp } else { n };
            let act_layer = layer_activation_bytes(model, mbs, 1.0, false, rc);
            let working = if rc == Recompute::Full { layer_activation_bytes(model, mbs, 1.0, false, Recompute::Selective) } else { 0.0 };
            out.activations = act_layer * layers + working + 4.0 * s * mbs * v;
            // ZeRO-3 gathers a layer (and prefetches the next); ZeRO-1/2 reduce in a bucket.
            let bucket = if z >= 3 { 2.0 * 2.0 * (lp.dense + lp.expert) } else { 2.0 * DEEPSPEED_REDUCE_BUCKET.min(n) };
            out.buffers = bucket + if layout.dp > 1 { NCCL_BYTES_PER_COMM } else { 0.0 };
        }
        Family::Axonn => {
            let g = layout.grid();
            let tensor = g.tensor() as f64;
            let n = layers * (lp.dense + lp.expert) + emb * if model.tied_embeddings { 1.0 } else { 2.0 };
            let local = n / tensor;
            out.params = local;
            match opts.sparsity {
                Some(p) => {
                    // SAMO (eq. 4.4): dense θ₁₆ 2φ, the rest compressed: 24(1−p)φ.
                    out.weights = 2.0 * local + 4.0 * (1.0 - p) * local;
                    out.gradients = 6.0 * (1.0 - p) * local;
                    out.optimizer = 14.0 * (1.0 - p) * local;
                }
                None => {
                    let r = StateBytes::AXONN;
                    out.weights = r.weight * local;
                    out.gradients = r.grad * local;
                    out.optimizer = r.optimizer * local;
                }
            }
            // A micro-batch of a data group is split over Z (rows) and each layer over X.
            let b_local = mbs / g.gz as f64;
            let t = g.gx as f64;
            let act_layer = layer_activation_bytes(model, b_local, t, true, rc);
            let working = if rc == Recompute::Full { layer_activation_bytes(model, b_local, t, true, Recompute::Selective) } else { 0.0 };
            out.activations = act_layer * layers + working + 4.0 * s * b_local * v / t;
            // AG_z gathers W over Z for the current and (overlapped) next layer.
            let widest = (h * model.ffn as f64 * if model.gated_mlp { 2.0 } else { 1.0 }).max(h * h * 3.0);
            let gathered = if g.gz > 1 { 2.0 * 2.0 * widest / (g.gx * g.gy) as f64 } else { 0.0 };
            let comms = [g.gx, g.gy, g.gz, g.gdata].iter().filter(|&&x| x > 1).count() as f64;
            out.buffers = gathered + comms * NCCL_BYTES_PER_COMM;
        }
    }
    out
}

/// The least recomputation under which `layout` fits `capacity` bytes (none, then selective,
/// then full), with its breakdown; `None` when even full checkpointing does not fit.
pub fn least_recompute_that_fits(
    model: &ModelSpec,
    layout: &Layout,
    batch: Batch,
    opts: &MemoryOptions,
    capacity: f64,
) -> Option<(Layout, MemoryBreakdown)> {
    for rc in [Recompute::None, Recompute::Selective, Recompute::Full] {
        let l = Layout { recompute: rc, ..*layout };
        let m = memory(model, &l, batch, opts);
        if m.total() <= capacity {
            return Some((l, m));
        }
    }
    None
}

/// AxoNN's eq. 3.1: activation memory with checkpoints every `ac` layers of a stage of
/// `n / g_inter` layers is ∝ `g_inter · n/(g_inter·ac) + 1 + ac`; its optimum is `ac = √n`,
/// in practice the factor of `n / g_inter` closest to `√n`.
pub fn checkpoint_units(n: u32, g_inter: u32, ac: u32) -> f64 {
    g_inter as f64 * (n as f64 / (g_inter as f64 * ac as f64)) + 1.0 + ac as f64
}

/// The factor of `n / g_inter` closest to `√n` (eq. 3.1's practical optimum).
pub fn best_checkpoint_interval(n: u32, g_inter: u32) -> u32 {
    let per_stage = (n / g_inter.max(1)).max(1);
    let target = (n as f64).sqrt();
    (1..=per_stage)
        .filter(|d| per_stage % d == 0)
        .min_by(|a, b| ((*a as f64) - target).abs().total_cmp(&((*b as f64) - target).abs()))
        .unwrap_or(1)
}

/// Mixed-precision model state of `params` parameters in AxoNN's accounting (20φ bytes).
pub fn mixed_precision_state_bytes(params: f64) -> f64 {
    StateBytes::AXONN.total() * params
}

/// AxoNN's CPU-offloaded optimizer (§3.2.3): θ₁₆ and ∇θ₁₆ stay (4φ), the optimizer streams
/// buckets of `bucket` parameters with a footprint of `16·bucket`.
pub fn offloaded_state_bytes(params: f64, bucket: f64) -> f64 {
    4.0 * params + 16.0 * bucket
}

/// Pipeline bubble (eqs. 4.6–4.7): `(G_inter − 1)·(t_f + t_b)/G_inter` for full-model forward
/// and backward times of one micro-batch.
pub fn bubble_time(g_inter: u32, t_f: f64, t_b: f64) -> f64 {
    (g_inter as f64 - 1.0) * (t_f + t_b) / g_inter as f64
}
