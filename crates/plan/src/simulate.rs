//! The simulator's analytical mode on a planned layout: iteration time with compute.
//!
//! Owns [`simulate`]: the layout becomes the per-rank program of its framework from the one
//! workload model (`commlens-workload`) and runs through `commlens_sim::engine::run` with
//! the analytical network and the roofline on the cluster's GPU (as `crates/sim/tests/
//! simai_relative.rs` does), and comes back as [`Simulated`].
//! - Megatron: `megatron::ModelJob` (sequence parallelism, distributed optimizer,
//!   overlapped gradient reduction) with `virtual_stages = vpp`, so interleaved layouts run
//!   Megatron's interleaved schedule itself.
//! - DeepSpeed (ZeRO 0–3, stage 3 standing for FSDP's full shard), AxoNN 4D and TED: a
//!   `ModelConfig` with the model's shape and `framework = deepspeed|axonn|ted`, built by
//!   `commlens_workload::from_model_conf`.
//!
//! No program holds activation recomputation, so the estimate's recompute time is added to
//! the simulated iteration. A layout its front end refuses (MoE under Megatron's named-model
//! path, DeepSpeed with TP) says why and keeps the analytical model's time.

use crate::layout::{Family, Layout};
use commlens_model::gpu::Precision;
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::tuner::NcclEnv;
use commlens_model::Cluster;
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::Roofline;
use commlens_sim::engine::{self, EngineOptions};
use commlens_workload::megatron::{workload_with, Framework, Layout as JobLayout, ModelConfig, ModelJob};
use commlens_workload::models::ModelSpec;
use commlens_workload::{GroupKind, Workload};
use serde::Serialize;

/// One simulated iteration, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Simulated {
    /// Mean iteration (with the estimate's recomputation added).
    pub iteration_s: f64,
    pub compute_s: f64,
    pub bubble_s: f64,
    /// Exposed (not overlapped) communication per parallelism.
    pub exposed_tp_s: f64,
    pub exposed_pp_s: f64,
    pub exposed_dp_s: f64,
    pub exposed_ep_s: f64,
    pub exposed_total_s: f64,
    /// Recomputation added from the estimate.
    pub recompute_s: f64,
}

/// The program of `layout`, from its framework's front end.
fn program(model: &ModelSpec, layout: &Layout, global_batch: u32) -> Result<Workload, String> {
    if layout.family == Family::Megatron {
        if model.experts > 1 {
            return Err("MoE models have no named-model Megatron program: ranked by the analytical model only".into());
        }
        let jl = JobLayout {
            sequence_parallel: layout.sp,
            distributed_optimizer: layout.zero >= 1,
            overlap_grad_reduce: true,
            ..JobLayout::new(layout.tp as usize, layout.pp as usize, layout.dp as usize, layout.mbs as usize, global_batch as usize)
        };
        let mut job = ModelJob::new(model, &jl).map_err(|e| e.to_string())?;
        job.config.virtual_stages = layout.vpp.max(1) as usize;
        job.config.validate().map_err(|e| e.to_string())?;
        return workload_with(&job.config, &job.options).map_err(|e| e.to_string());
    }
    let mut c = ModelConfig::default();
    c.apply_shape(model);
    c.micro_batch = layout.mbs as u64;
    c.global_batch = Some(global_batch as u64);
    c.num_microbatches = None;
    c.iterations = 1;
    match layout.family {
        Family::Deepspeed => {
            c.framework = Framework::DeepSpeed;
            c.zero_stage = layout.zero as u64;
            c.dp = layout.dp as u64;
        }
        Family::Axonn => {
            c.framework = Framework::Axonn;
            (c.gx, c.gy, c.gz, c.dp) = (layout.gx as u64, layout.gy as u64, layout.gz as u64, layout.gdata as u64);
        }
        Family::Ted => {
            c.framework = Framework::Ted;
            (c.tp, c.ep, c.dp) = (layout.tp as u64, layout.ep as u64, layout.dp as u64);
            c.drop_duplicate_tokens = true;
        }
        Family::Megatron => unreachable!("handled above"),
    }
    c.validate().map_err(|e| format!("{} layout: {e}", layout.family.name()))?;
    commlens_workload::from_model_conf(&c).map_err(|e| format!("{} layout: {e}", layout.family.name()))
}

/// Why a layout is not simulated, or its simulated iteration.
pub fn simulate(model: &ModelSpec, layout: &Layout, global_batch: u32, cluster: &Cluster, recompute_s: f64) -> Result<Simulated, String> {
    let w = program(model, layout, global_batch)?;
    let gpn = cluster.gpus_per_node.max(1);
    let c = cluster.with_nodes(layout.world().div_ceil(gpn));
    let mut net = AnalyticalNetwork::new(&c, DEFAULT_VERSION, NcclEnv::default());
    let roof = Roofline::new(&c.gpu, Precision::Bf16);
    let run = engine::run(&w, &roof, &mut net, &EngineOptions { record: false, progress: None }).map_err(|e| e.to_string())?;
    let s = run.summary;
    let us = 1e-6;
    // Every data-parallel flavour (Megatron's DP and expert DP, HSDP replicas) and every
    // tensor-parallel one (AxoNN's X/Y/Z grid) under one heading.
    let sum = |kinds: &[GroupKind]| kinds.iter().map(|&k| s.exposed(k)).sum::<f64>() * us;
    Ok(Simulated {
        iteration_s: s.mean_iteration_us * us + recompute_s,
        compute_s: s.compute_us * us,
        bubble_s: s.bubble_us * us,
        exposed_tp_s: sum(&[GroupKind::Tp, GroupKind::TensorX, GroupKind::TensorY, GroupKind::TensorZ]),
        exposed_pp_s: sum(&[GroupKind::Pp]),
        exposed_dp_s: sum(&[GroupKind::Dp, GroupKind::DpEp, GroupKind::DpReplica]),
        exposed_ep_s: sum(&[GroupKind::Ep]),
        exposed_total_s: s.exposed_comm_us * us,
        recompute_s,
    })
}
