//! The simulator's analytical mode on a planned layout: iteration time with compute.
//!
//! Owns [`simulate`]: a Megatron layout becomes `commlens_workload::megatron::ModelJob`
//! (sequence parallelism, distributed optimizer, overlapped gradient reduction), runs through `commlens_sim::engine::run` with the
//! analytical network and the roofline on the cluster's GPU (as `crates/sim/tests/
//! simai_relative.rs` does), and comes back as [`Simulated`]. The Megatron program holds no
//! recomputation, so the estimate's recompute time is added to the simulated iteration; an
//! interleaved layout (`vpp` ≥ 2) runs as plain 1F1B (the engine cannot yet run the
//! interleaved program: its last stage's Send to the first has no peer) and gets the
//! interleaved schedule's effect applied: bubble ÷ vpp, PP traffic × vpp (Narayanan et al.
//! 2021). Other
//! families (DeepSpeed ZeRO, AxoNN 4D, TED) and MoE models are not built as programs here:
//! [`simulate`] says why it cannot, and they keep the analytical model's time.

use crate::layout::{Family, Layout};
use commlens_model::gpu::Precision;
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::tuner::NcclEnv;
use commlens_model::Cluster;
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::Roofline;
use commlens_sim::engine::{self, EngineOptions};
use commlens_workload::megatron::{Layout as JobLayout, ModelJob};
use commlens_workload::models::ModelSpec;
use commlens_workload::GroupKind;
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

/// Why a layout is not simulated, or its simulated iteration.
pub fn simulate(model: &ModelSpec, layout: &Layout, global_batch: u32, cluster: &Cluster, recompute_s: f64) -> Result<Simulated, String> {
    if layout.family != Family::Megatron {
        return Err(format!("{} layouts are not simulated by the planner (it builds Megatron programs only): ranked by the analytical model", layout.family.name()));
    }
    if model.experts > 1 {
        return Err("MoE models have no named-model Megatron program: ranked by the analytical model only".into());
    }
    let jl = JobLayout {
        sequence_parallel: layout.sp,
        distributed_optimizer: layout.zero >= 1,
        overlap_grad_reduce: true,
        ..JobLayout::new(layout.tp as usize, layout.pp as usize, layout.dp as usize, layout.mbs as usize, global_batch as usize)
    };
    let job = ModelJob::new(model, &jl).map_err(|e| e.to_string())?;
    let w = job.workload().map_err(|e| e.to_string())?;
    let gpn = cluster.gpus_per_node.max(1);
    let c = cluster.with_nodes(layout.world().div_ceil(gpn));
    let mut net = AnalyticalNetwork::new(&c, DEFAULT_VERSION, NcclEnv::default());
    let roof = Roofline::new(&c.gpu, Precision::Bf16);
    let run = engine::run(&w, &roof, &mut net, &EngineOptions { record: false, progress: None }).map_err(|e| e.to_string())?;
    let s = run.summary;
    let us = 1e-6;
    // Interleaving, applied to the plain 1F1B run: the bubble ÷ v, the PP traffic × v.
    let v = layout.vpp.max(1) as f64;
    let bubble = s.bubble_us * us / v;
    let pp = s.exposed(GroupKind::Pp) * us * v;
    let interleave_delta = (bubble - s.bubble_us * us) + (pp - s.exposed(GroupKind::Pp) * us);
    Ok(Simulated {
        iteration_s: s.mean_iteration_us * us + recompute_s + interleave_delta,
        compute_s: s.compute_us * us,
        bubble_s: bubble,
        exposed_tp_s: s.exposed(GroupKind::Tp) * us,
        exposed_pp_s: pp,
        exposed_dp_s: (s.exposed(GroupKind::Dp) + s.exposed(GroupKind::DpEp)) * us,
        exposed_ep_s: s.exposed(GroupKind::Ep) * us,
        exposed_total_s: s.exposed_comm_us * us + (pp - s.exposed(GroupKind::Pp) * us),
        recompute_s,
    })
}
