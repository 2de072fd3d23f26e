//! Simulator scaling: one iteration of GPT-3 175B (TP8 PP8, Megatron program from the named
//! model, sequence parallelism, distributed optimizer, overlapped gradient reduction, micro
//! batch 1, 16 microbatches per data replica) on `dgx-h100` clusters of 1,024, 10,240 and
//! 102,400 GPUs (DP 16, 160, 1,600) with the analytical network, then 1,024 GPUs with the
//! flow-level network. Per size: wall time of building the workload and of the run, peak RSS
//! (`VmHWM` of `/proc/self/status`, so it only grows: each row is the peak so far) and wall
//! time per GPU, which must not grow faster than linearly (the ratio column stays flat or
//! falls).
//!
//! `cargo run --release -p commlens-sim --example scale_bench`

use std::time::Instant;

use commlens_model::gpu::Precision;
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::Roofline;
use commlens_sim::engine::{self, EngineOptions};
use commlens_sim::flow::{FlowConfig, FlowNetwork};
use commlens_sim::network::Network;
use commlens_workload::megatron::{Layout, ModelJob};
use commlens_workload::models::model_by_name;

const MICROBATCHES: usize = 16;

/// Peak resident set size so far, MiB (0 where /proc is missing).
fn peak_rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn job(dp: usize) -> ModelJob {
    let m = model_by_name("gpt3-175b").expect("model");
    let l = Layout {
        sequence_parallel: true,
        distributed_optimizer: true,
        overlap_grad_reduce: true,
        ..Layout::new(8, 8, dp, 1, MICROBATCHES * dp)
    };
    ModelJob::new(m, &l).expect("layout")
}

/// (build s, run s, iteration ms, simulated ranks).
fn once(dp: usize, flow: bool) -> (f64, f64, f64, u32) {
    let t0 = Instant::now();
    let j = job(dp);
    let w = j.workload().expect("workload");
    let build = t0.elapsed().as_secs_f64();
    let cluster = preset("dgx-h100").expect("preset").with_nodes(w.world / 8);
    let roof = Roofline::new(&cluster.gpu, Precision::Bf16);
    let mut net: Box<dyn Network> = if flow {
        Box::new(FlowNetwork::new(&cluster, FlowConfig::default()))
    } else {
        Box::new(AnalyticalNetwork::new(&cluster, DEFAULT_VERSION, NcclEnv::default()))
    };
    let t1 = Instant::now();
    let r = engine::run(&w, &roof, net.as_mut(), &EngineOptions { record: false, progress: None }).expect("runs");
    (build, t1.elapsed().as_secs_f64(), r.summary.mean_iteration_us / 1e3, r.summary.ranks_simulated)
}

fn main() {
    println!("GPT-3 175B TP8 PP8, {MICROBATCHES} microbatches per replica, dgx-h100, one iteration");
    println!("{:>8} {:>10} {:>8} {:>9} {:>9} {:>10} {:>13} {:>12}", "GPUs", "network", "sim'd", "build s", "run s", "iter ms", "peak RSS MiB", "µs wall/GPU");
    let mut per_gpu = Vec::new();
    for dp in [16usize, 160, 1600] {
        let gpus = 64 * dp;
        let (b, r, it, sim) = once(dp, false);
        let ratio = (b + r) * 1e6 / gpus as f64;
        per_gpu.push(ratio);
        println!("{gpus:>8} {:>10} {sim:>8} {b:>9.3} {r:>9.3} {it:>10.1} {:>13.1} {ratio:>12.2}", "analytical", peak_rss_mib());
    }
    let (b, r, it, sim) = once(16, true);
    println!("{:>8} {:>10} {sim:>8} {b:>9.3} {r:>9.3} {it:>10.1} {:>13.1} {:>12.2}", 1024, "flow", peak_rss_mib(), (b + r) * 1e6 / 1024.0);
    let linear = per_gpu.windows(2).all(|w| w[1] <= w[0] * 1.25);
    println!("wall time per GPU {} with size (1k → 100k: ×{:.2})", if linear { "does not grow" } else { "GROWS" }, per_gpu[2] / per_gpu[0]);
}
