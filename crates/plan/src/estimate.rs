//! The analytical time of one iteration of a layout: compute on the roofline, the pipeline
//! bubble, and communication from AxoNN's model — what the ranking sorts by.
//!
//! Owns [`Estimate`] and [`estimate`]. Communication is eqs. 5.1–5.7 ([`crate::axonn`]) on the
//! layout's grid (Megatron/TED TP = X with alternating layers, ZeRO-3 = Z, data = data), summed
//! over the FC layers a GPU holds (`layers / pp`), with `m` = the tokens of one data-parallel
//! group per batch, plus the embedding's data-parallel gradient. Beyond the printed model
//! (marked as extensions in [`Estimate`]): pipeline point-to-point (`2·m_micro·v` activations of
//! `s·b·h` per stage boundary, ÷ tp with SP, eq. 4.9's four messages per micro-batch split
//! into send and receive), MoE all-to-all (four per MoE layer: dispatch and combine, forward
//! and backward; TED's duplicate-token dropping divides them by G_tensor), and Z terms repeated
//! per micro-batch (a sharded layer is gathered for every micro-batch's forward and backward).
//! Compute: the GPU's local GEMM and attention FLOPs per micro-batch through the simulator's
//! roofline (forward, backward = 2× forward, one more forward under full checkpointing), the
//! logits on the last stage, the optimizer step as memory traffic; the bubble is
//! `(pp − 1)/vpp` stage-micro-batches (eq. 4.6 per micro-batch). Nothing overlaps: the
//! dissertation's model has no overlap, and the simulator re-ranks the top layouts with it.

use crate::axonn::{block_layers, model_comm, Bandwidths, FcLayer, GroupComm};
use crate::layout::{Family, Grid, Layout, Recompute};
use crate::memory::layer_params;
use commlens_sim::compute::Roofline;
use commlens_workload::models::ModelSpec;
use commlens_workload::{Compute, ComputeKind};
use serde::Serialize;

/// Communication time per parallelism, seconds (`tp` is AxoNN's X, `z` ZeRO-3/FSDP or
/// AxoNN's Z).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CommParts {
    pub tp: f64,
    pub y: f64,
    pub z: f64,
    pub dp: f64,
    pub pp: f64,
    pub ep: f64,
}

impl CommParts {
    pub fn total(&self) -> f64 {
        self.tp + self.y + self.z + self.dp + self.pp + self.ep
    }

    /// (name, seconds) pairs in display order.
    pub fn named(&self) -> [(&'static str, f64); 6] {
        [("tp", self.tp), ("y", self.y), ("z", self.z), ("dp", self.dp), ("pp", self.pp), ("ep", self.ep)]
    }
}

/// The analytical iteration of one layout, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Estimate {
    /// Forward and backward compute on the slowest stage.
    pub compute_s: f64,
    /// Recomputed forward passes (checkpointing).
    pub recompute_s: f64,
    pub bubble_s: f64,
    /// Communication per parallelism (AxoNN's model and the extensions).
    pub comm: CommParts,
    /// Eq. 5.6 summed over the layers as printed (one pass of every term per batch).
    pub axonn_printed_s: f64,
    /// Micro-batches per iteration.
    pub microbatches: u32,
    /// compute + recompute + bubble + communication.
    pub step_s: f64,
}

/// What the estimate needs besides the layout.
pub struct EstimateInput<'a> {
    pub model: &'a ModelSpec,
    pub global_batch: u32,
    pub bandwidths: &'a Bandwidths,
    pub roofline: &'a Roofline,
    /// Bytes per activation / gradient element on the wire (bf16: 2).
    pub wire_bytes: f64,
}

fn gemm_us(roof: &Roofline, flops: f64) -> f64 {
    roof.roofline_us(&Compute { name: String::new(), kind: ComputeKind::Gemm, flops, mem_bytes: 0.0, time_us: None })
}

fn attention_us(roof: &Roofline, flops: f64) -> f64 {
    roof.roofline_us(&Compute { name: String::new(), kind: ComputeKind::Attention, flops, mem_bytes: 0.0, time_us: None })
}

fn memory_us(roof: &Roofline, bytes: f64) -> f64 {
    roof.roofline_us(&Compute { name: String::new(), kind: ComputeKind::Optimizer, flops: 0.0, mem_bytes: bytes, time_us: None })
}

/// The FC layers of a block as AxoNN's model sees them (MoE: the expert MLP carries `top_k`
/// tokens per token, so its `m` is scaled through `k`-fold rows, see [`estimate`]).
pub fn model_block(m: &ModelSpec) -> [FcLayer; 4] {
    let kv = m.hidden as f64 * m.kv_heads as f64 / m.heads as f64;
    block_layers(m.hidden as f64, kv, m.ffn as f64, m.gated_mlp)
}

/// The analytical iteration of `l` (see the module notes).
pub fn estimate(inp: &EstimateInput<'_>, l: &Layout) -> Estimate {
    let m = inp.model;
    let roof = inp.roofline;
    let (s, h, v) = (m.seq_len as f64, m.hidden as f64, m.vocab as f64);
    let layers = m.layers as f64;
    let grid = l.grid();
    let pp = l.pp as f64;
    let split = l.batch_split() as f64;
    let micro = (inp.global_batch as f64 / (l.mbs as f64 * split)).max(1.0);
    let tensor = grid.tensor() as f64;
    // GPUs that split one micro-batch's matrix products: TP, AxoNN's whole grid (a data
    // group's micro-batch), none for DeepSpeed (each GPU runs its own micro-batch).
    let work_split = match l.family {
        Family::Axonn => tensor,
        Family::Deepspeed => 1.0,
        Family::Megatron | Family::Ted => l.tp as f64,
    };
    // --- compute: one micro-batch of the data group through the GPU's layers.
    let tokens_mb = l.mbs as f64 * s;
    let lp = layer_params(m);
    let mats = if m.gated_mlp { 3.0 } else { 2.0 };
    let active_expert = if m.experts > 1 { mats * h * m.ffn as f64 * m.top_k as f64 } else { 0.0 };
    let matmul_params = lp.dense - 4.0 * h + active_expert;
    let gemm_fwd = 2.0 * tokens_mb * matmul_params / work_split;
    let attn_fwd = 4.0 * l.mbs as f64 * s * s * h / work_split;
    let lps = layers / pp;
    let fwd_layer = gemm_us(roof, gemm_fwd) + attention_us(roof, attn_fwd);
    let bwd_layer = gemm_us(roof, 2.0 * gemm_fwd) + attention_us(roof, 2.0 * attn_fwd);
    let logits_fwd = 2.0 * tokens_mb * h * v / work_split;
    let logits = gemm_us(roof, logits_fwd) + gemm_us(roof, 2.0 * logits_fwd);
    let stage_us = lps * (fwd_layer + bwd_layer) + logits;
    let recompute_layer = match l.recompute {
        Recompute::None => 0.0,
        Recompute::Selective => attention_us(roof, attn_fwd),
        Recompute::Full => fwd_layer,
    };
    let recompute_us = micro * lps * recompute_layer;
    // Optimizer: ~16 bytes of state traffic per parameter the GPU updates.
    let local_params = (layers * (lp.dense + lp.expert) + v * h) / (tensor * pp);
    let opt_shard = if l.zero >= 1 { l.batch_split().max(1) as f64 } else { 1.0 };
    let optimizer_us = memory_us(roof, 16.0 * local_params / opt_shard);
    let compute_us = micro * stage_us + optimizer_us;
    let bubble_us = (pp - 1.0) / l.vpp.max(1) as f64 * stage_us;
    // --- communication (AxoNN eqs. 5.1–5.7).
    let bw = inp.bandwidths;
    let betas = bw.of_grid(&grid);
    let rows = inp.global_batch as f64 * s / grid.gdata as f64;
    let block = model_block(m);
    let wire = inp.wire_bytes;
    let (attn_part, mlp_part) = block.split_at(2);
    let printed_attn = model_comm(attn_part, lps, rows, &grid, &betas, wire);
    let mut mlp = model_comm(mlp_part, lps, rows * if m.experts > 1 { m.top_k as f64 } else { 1.0 }, &grid, &betas, wire);
    if m.experts > 1 {
        // Experts are split over EP too: their weights' data-parallel and Z terms shrink by
        // E/ep·… — the data term runs over the expert-data group, each GPU holding
        // experts/ep of them.
        let ep = l.ep.max(1) as f64;
        let experts_here = m.experts as f64 / ep;
        let dense_mlp = model_comm(mlp_part, lps, 0.0, &grid, &betas, wire);
        let expert_grid = Grid { gdata: (grid.gdata / l.ep.max(1)).max(1), ..grid };
        let inner = grid.gx * grid.gy * grid.gz * l.ep.max(1);
        let beta_expert_dp = bw.of_group(inner, expert_grid.gdata);
        let expert_betas = [betas[0], betas[1], betas[2], beta_expert_dp];
        let expert = model_comm(mlp_part, lps, 0.0, &expert_grid, &expert_betas, wire);
        mlp.data += experts_here * expert.data - dense_mlp.data;
        mlp.z += experts_here * expert.z - dense_mlp.z;
    }
    let mut printed = printed_attn;
    printed.add(&mlp, 1.0);
    // Embedding gradient (V·h, vocabulary-parallel over X) over data.
    let emb = FcLayer { k: v, n: h, transposed: false };
    let emb_comm = model_comm(&[emb], 1.0, 0.0, &grid, &betas, wire);
    printed.data += emb_comm.data;
    printed.z += emb_comm.z;
    let axonn_printed = printed.total();
    let mut g: GroupComm = printed;
    // Extension: a sharded layer is gathered for every micro-batch's forward and backward.
    if grid.gz > 1 && micro > 1.0 {
        g.z *= micro;
    }
    let mut comm = CommParts { tp: g.x, y: g.y, z: g.z, dp: g.data, pp: 0.0, ep: 0.0 };
    // Extension: pipeline P2P, activations forward and gradients backward per micro-batch.
    if l.pp > 1 {
        let inner = grid.gx * grid.gy * grid.gz * grid.gdata;
        let beta_pp = bw.of_group(inner, l.pp);
        // Megatron scatters the boundary tensor over the TP ranks (s·b·h/tp each).
        let msg = tokens_mb * h * wire / l.tp as f64;
        comm.pp = 2.0 * micro * l.vpp as f64 * msg / beta_pp;
    }
    // Extension: MoE all-to-all, 4 per MoE layer per micro-batch.
    if m.experts > 1 && l.ep > 1 {
        let beta_ep = bw.of_group(grid.gx * grid.gy * grid.gz, l.ep);
        let dtd = if l.family == Family::Ted { l.tp as f64 } else { 1.0 };
        let per_a2a = tokens_mb * m.top_k as f64 * h * wire * (l.ep as f64 - 1.0) / l.ep as f64 / dtd;
        comm.ep = 4.0 * lps * micro * per_a2a / beta_ep;
    }
    let compute_s = compute_us * 1e-6;
    let recompute_s = recompute_us * 1e-6;
    let bubble_s = bubble_us * 1e-6;
    Estimate {
        compute_s,
        recompute_s,
        bubble_s,
        comm,
        axonn_printed_s: axonn_printed,
        microbatches: micro as u32,
        step_s: compute_s + recompute_s + bubble_s + comm.total(),
    }
}

/// Model FLOPs of one iteration (the MFU numerator): `train_flops_per_token` × tokens.
pub fn iteration_model_flops(m: &ModelSpec, global_batch: u32) -> f64 {
    m.train_flops_per_token() * global_batch as f64 * m.seq_len as f64
}
