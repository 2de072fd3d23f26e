//! Speed of the planner: every layout of a model on 4,096 GPUs ranked by the analytical
//! (AxoNN) model, then the top 20 re-ranked by the simulator's analytical mode.
//!
//! `cargo run --release -p commlens-plan --example plan_bench [MODEL] [GPUS] [CLUSTER]`
//! (default gpt3-175b 4096 dgx-h100). Prints figures; asserts nothing about wall time.

use commlens_model::presets::preset;
use commlens_plan::rank::{plan, rank_analytically, PlanRequest};
use commlens_workload::models::model_by_name;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model_name = args.first().map_or("gpt3-175b", String::as_str);
    let gpus: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4096);
    let cluster_name = args.get(2).map_or("dgx-h100", String::as_str);
    let model = *model_by_name(model_name).unwrap_or_else(|| panic!("unknown model {model_name}"));
    let base = preset(cluster_name).unwrap_or_else(|| panic!("unknown cluster preset {cluster_name}"));
    let cluster = base.with_nodes(gpus.div_ceil(base.gpus_per_node));
    let gbs = 1536.max(gpus);
    let t = Instant::now();
    let mut req = PlanRequest::new(model, cluster, gpus, gbs);
    let table_s = t.elapsed().as_secs_f64();
    println!("{model_name} on {gpus} GPUs of {cluster_name}, global batch {gbs}, {} threads", rayon::current_num_threads());
    println!("bandwidth table (collective model):            {:8.3} s", table_s);
    let t = Instant::now();
    let (fit, enumerated) = rank_analytically(&req);
    let rank_s = t.elapsed().as_secs_f64();
    println!("enumerate + memory filter + AxoNN model rank:  {rank_s:8.3} s  ({enumerated} layouts, {} fit)", fit.len());
    req.simulate_top = 20;
    let t = Instant::now();
    let p = plan(&req);
    let total_s = t.elapsed().as_secs_f64();
    let simulated = p.rows.iter().take(20).filter(|r| r.simulated.is_some()).count();
    println!("plan with top 20 simulated:                    {total_s:8.3} s  (ranking {:.3} s, simulating {:.3} s; {simulated} of 20 simulated)", p.rank_wall_s, p.simulate_wall_s);
    for r in p.rows.iter().take(20).filter(|r| r.not_simulated.is_some()).take(3) {
        println!("  not simulated: {} ({})", r.layout.label(), r.not_simulated.as_deref().unwrap_or(""));
    }
    for r in p.rows.iter().take(5) {
        println!("  #{:<2} (model #{:<3}) {:<48} {:8.2} s  MFU {:5.1} %  {:5.1} GiB  bottleneck {}", r.rank, r.model_rank, r.layout.label(), r.iteration_s, r.mfu * 100.0, r.memory.total_gib(), r.bottleneck);
    }
}
