//! The planner: enumerate, filter by memory, rank by the analytical model, re-rank the top K
//! with the simulator, and say why.
//!
//! Owns [`PlanRequest`], [`Plan`] and its [`PlanRow`]s, and [`plan`]. Per layout (in parallel
//! with rayon): the least recomputation that fits the GPU ([`crate::memory`]), then the
//! analytical iteration ([`crate::estimate`]). Rows sort by the estimate; the first `simulate_top`
//! go through the simulator ([`crate::simulate`]) where a workload program exists, and the
//! final order of those rows is by their simulated time; a top row without a program takes its
//! estimate × the median simulated/estimated ratio of the simulated rows of the same plan (the
//! analytical model put on the simulator's scale, said in the notes); the rest stay in
//! estimate order after them. Every row carries MFU, communication per
//! parallelism (simulated rows: exposed; estimated rows: all of it, the model has no
//! overlap) and its bottleneck.

use crate::axonn::Bandwidths;
use crate::enumerate::{enumerate, Constraints};
use crate::estimate::{estimate, iteration_model_flops, Estimate, EstimateInput};
use crate::layout::Layout;
use crate::memory::{least_recompute_that_fits, Batch, MemoryBreakdown, MemoryOptions, GIB};
use crate::simulate::{simulate, Simulated};
use commlens_model::gpu::Precision;
use commlens_model::Cluster;
use commlens_sim::compute::Roofline;
use commlens_workload::models::ModelSpec;
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;

/// What to plan.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    pub model: ModelSpec,
    pub cluster: Cluster,
    pub gpus: u32,
    /// Sequences per iteration.
    pub global_batch: u32,
    pub constraints: Constraints,
    pub memory: MemoryOptions,
    pub bandwidths: Bandwidths,
    /// Layouts (from the top of the analytical ranking) to re-rank with the simulator.
    pub simulate_top: usize,
    /// Usable bytes per GPU (default: the GPU's memory).
    pub capacity_bytes: f64,
}

impl PlanRequest {
    /// A request with the cluster's bandwidths from the collective model, no constraints,
    /// the GPU's whole memory and the top 10 simulated.
    pub fn new(model: ModelSpec, cluster: Cluster, gpus: u32, global_batch: u32) -> PlanRequest {
        let bandwidths = crate::bandwidth::from_cluster(&cluster);
        let capacity_bytes = cluster.gpu.memory_gib * GIB;
        PlanRequest {
            model,
            cluster,
            gpus,
            global_batch,
            constraints: Constraints::default(),
            memory: MemoryOptions::default(),
            bandwidths,
            simulate_top: 10,
            capacity_bytes,
        }
    }
}

/// One ranked layout.
#[derive(Debug, Clone, Serialize)]
pub struct PlanRow {
    /// 1-based final rank.
    pub rank: usize,
    /// 1-based rank by the analytical model alone.
    pub model_rank: usize,
    pub layout: Layout,
    pub memory: MemoryBreakdown,
    pub estimate: Estimate,
    pub simulated: Option<Simulated>,
    /// Why the row was not simulated (when it was among the top K).
    pub not_simulated: Option<String>,
    /// The time the final rank uses: simulated when there, else estimated.
    pub iteration_s: f64,
    pub mfu: f64,
    /// The largest of compute, bubble and each parallelism's (exposed) communication.
    pub bottleneck: &'static str,
}

impl PlanRow {
    /// (name, seconds) of what the iteration spends, for the bottleneck and the reports:
    /// simulated figures when there, else the estimate's.
    pub fn parts(&self) -> Vec<(&'static str, f64)> {
        match &self.simulated {
            Some(s) => vec![
                ("compute", s.compute_s + s.recompute_s),
                ("bubble", s.bubble_s),
                ("tp", s.exposed_tp_s),
                ("pp", s.exposed_pp_s),
                ("dp", s.exposed_dp_s),
                ("ep", s.exposed_ep_s),
            ],
            None => {
                let e = &self.estimate;
                let mut v = vec![("compute", e.compute_s + e.recompute_s), ("bubble", e.bubble_s)];
                v.extend(e.comm.named());
                v
            }
        }
    }
}

/// The outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub model: String,
    pub cluster: String,
    pub gpus: u32,
    pub global_batch: u32,
    pub capacity_gib: f64,
    /// Layouts enumerated, and how many fit.
    pub enumerated: usize,
    pub fitting: usize,
    pub rows: Vec<PlanRow>,
    pub notes: Vec<String>,
    /// Seconds spent enumerating + ranking analytically, and simulating.
    pub rank_wall_s: f64,
    pub simulate_wall_s: f64,
}

fn bottleneck(parts: &[(&'static str, f64)]) -> &'static str {
    parts.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)).map_or("compute", |p| p.0)
}

/// Enumerates, filters and ranks analytically (no simulation): fitting layouts with their
/// memory and estimate, sorted by estimated iteration time, and the count enumerated.
pub fn rank_analytically(req: &PlanRequest) -> (Vec<(Layout, MemoryBreakdown, Estimate)>, usize) {
    let layouts = enumerate(&req.model, req.gpus, req.cluster.gpus_per_node, req.global_batch, &req.constraints);
    let roof = Roofline::new(&req.cluster.gpu, Precision::Bf16);
    let inp = EstimateInput { model: &req.model, global_batch: req.global_batch, bandwidths: &req.bandwidths, roofline: &roof, wire_bytes: 2.0 };
    let batch = Batch { global: req.global_batch };
    let mut fit: Vec<(Layout, MemoryBreakdown, Estimate)> = layouts
        .par_iter()
        .filter_map(|l| {
            let (l, mem) = least_recompute_that_fits(&req.model, l, batch, &req.memory, req.capacity_bytes)?;
            let e = estimate(&inp, &l);
            Some((l, mem, e))
        })
        .collect();
    fit.sort_by(|a, b| a.2.step_s.total_cmp(&b.2.step_s).then_with(|| a.0.label().cmp(&b.0.label())));
    (fit, layouts.len())
}

/// Plans `req` (see the module notes).
pub fn plan(req: &PlanRequest) -> Plan {
    let t0 = Instant::now();
    let (fit, enumerated) = rank_analytically(req);
    let rank_wall_s = t0.elapsed().as_secs_f64();
    let peak = req.cluster.gpu.peak_tflops(Precision::Bf16) * 1e12;
    let flops = iteration_model_flops(&req.model, req.global_batch);
    let mfu = |t: f64| if t > 0.0 && peak > 0.0 { flops / (req.gpus as f64 * peak * t) } else { 0.0 };
    let t1 = Instant::now();
    let top = req.simulate_top.min(fit.len());
    let sims: Vec<Result<Simulated, String>> = fit[..top]
        .par_iter()
        .map(|(l, _, e)| simulate(&req.model, l, req.global_batch, &req.cluster, e.recompute_s))
        .collect();
    let simulate_wall_s = t1.elapsed().as_secs_f64();
    let mut rows: Vec<PlanRow> = fit
        .into_iter()
        .enumerate()
        .map(|(i, (layout, memory, estimate))| {
            let (simulated, not_simulated) = match sims.get(i) {
                Some(Ok(s)) => (Some(*s), None),
                Some(Err(e)) => (None, Some(e.clone())),
                None => (None, None),
            };
            let iteration_s = simulated.map_or(estimate.step_s, |s| s.iteration_s);
            let mut row = PlanRow {
                rank: 0,
                model_rank: i + 1,
                layout,
                memory,
                estimate,
                simulated,
                not_simulated,
                iteration_s,
                mfu: mfu(iteration_s),
                bottleneck: "compute",
            };
            row.bottleneck = bottleneck(&row.parts());
            row
        })
        .collect();
    // Rows of the top K without a program keep the analytical model's time, put on the
    // simulator's scale: × the median simulated/estimated ratio of the simulated rows.
    let mut ratios: Vec<f64> = rows[..top].iter().filter_map(|r| r.simulated.map(|s| s.iteration_s / r.estimate.step_s)).filter(|x| x.is_finite()).collect();
    ratios.sort_by(f64::total_cmp);
    let scale = ratios.get(ratios.len() / 2).copied();
    if let Some(k) = scale {
        for r in rows[..top].iter_mut().filter(|r| r.simulated.is_none()) {
            r.iteration_s = r.estimate.step_s * k;
            r.mfu = mfu(r.iteration_s);
        }
    }
    rows[..top].sort_by(|a, b| a.iteration_s.total_cmp(&b.iteration_s).then(a.model_rank.cmp(&b.model_rank)));
    for (i, r) in rows.iter_mut().enumerate() {
        r.rank = i + 1;
    }
    let mut notes = req.bandwidths.source.clone();
    let unsimulated: Vec<String> = {
        let mut v: Vec<String> = rows[..top].iter().filter_map(|r| r.not_simulated.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let any_unsimulated = !unsimulated.is_empty();
    for n in unsimulated {
        notes.push(format!("top {top}: {n}"));
    }
    if let (true, Some(k)) = (any_unsimulated, scale) {
        notes.push(format!(
            "top {top}: layouts not simulated are ranked by their estimate × {k:.2}, the median simulated/estimated ratio of the {} simulated ones",
            ratios.len()
        ));
    }
    if rows.is_empty() {
        notes.push(format!(
            "no layout of {} fits {:.1} GiB per GPU on {} GPUs (even with full checkpointing)",
            req.model.name,
            req.capacity_bytes / GIB,
            req.gpus
        ));
    }
    Plan {
        model: req.model.name.to_string(),
        cluster: req.cluster.name.clone(),
        gpus: req.gpus,
        global_batch: req.global_batch,
        capacity_gib: req.capacity_bytes / GIB,
        enumerated,
        fitting: rows.len(),
        rows,
        notes,
        rank_wall_s,
        simulate_wall_s,
    }
}
