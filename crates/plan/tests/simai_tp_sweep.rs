//! SimAI's TP sweep (NSDI '25 Fig. 11, `shared/reference/simulation.md` §6.2) reproduced by the
//! planner's ranking: best TP on 8-GPU hosts (`dgx-h100`) at 1024 GPUs is 4 for GPT-3 13B and
//! 8 for LLaMA-65B and GPT-3 175B.
//!
//! The planner ranks every Megatron layout with SimAI's fixed degrees (PP of its Table 3: 13B
//! 1, 65B 2, 175B 8; micro-batch 1; sequence parallelism; no interleaving) and the batches of
//! `crates/sim/tests/simai_relative.rs` (GPT-3 paper token batches, LLaMA 4M tokens), filtered
//! by the plan's own memory model, top layouts re-ranked by the simulator. Two optimizer
//! settings are planned and both printed:
//! - **without the distributed optimizer** (Megatron's default: 18 bytes per parameter, the
//!   setting SimAI's TP rule corresponds to): asserted to give 4 / 8 / 8;
//! - **with the distributed optimizer free** (`zero` 0 or 1): printed;
//! - **that, with SimAI's TP rule** (TP > 2 for 13B, > 4 for 65B/175B): asserted 4 / 8 / 8.
//!
//! What holds under the memory model alone, asserted: 13B picks TP 4 with either optimizer;
//! 175B picks TP 8 with Megatron's default optimizer (TP 4 does not fit at PP 8); LLaMA-65B
//! in SimAI's shape (FFN 28672, 78 B parameters) fits no TP ≤ 8 at PP 2 with 18 bytes per
//! parameter. With the optimizer sharded, TP 4 fits for 65B and 175B and our simulator runs
//! it faster (65B: within 1 %, with full checkpointing; 175B: by ~14 %), so the paper's 8
//! there rests on its TP rule, not on memory: printed, not asserted.

use commlens_model::presets::preset;
use commlens_plan::rank::{plan, PlanRequest};
use commlens_plan::{Constraints, Plan};
use commlens_workload::models::model_by_name;

fn plan_tp(model: &str, pp: u32, gbs: u32, zero: Option<u8>) -> Plan {
    let m = *model_by_name(model).unwrap();
    let base = preset("dgx-h100").unwrap();
    let cluster = base.with_nodes(1024 / base.gpus_per_node);
    let mut req = PlanRequest::new(m, cluster, 1024, gbs);
    let mut c = Constraints::parse(&format!("family=megatron,pp={pp},mbs=1,sp=true,vpp=1")).unwrap();
    c.zero = zero;
    req.constraints = c;
    req.simulate_top = 16;
    plan(&req)
}

fn show(p: &Plan, label: &str) {
    println!("{} ({label}): {} layouts, {} fit", p.model, p.enumerated, p.fitting);
    for r in p.rows.iter().take(8) {
        let sim = r.simulated.map_or("not simulated".to_string(), |s| format!("sim {:7.3} s", s.iteration_s));
        println!(
            "  #{} {:<44} est {:7.3} s  {sim}  mem {:5.1} GiB  MFU {:4.1} %  bottleneck {}",
            r.rank,
            r.layout.label(),
            r.estimate.step_s,
            r.memory.total_gib(),
            r.mfu * 100.0,
            r.bottleneck
        );
    }
}

#[test]
fn best_tp_on_8_gpu_hosts_at_1024_gpus() {
    // (model, SimAI's PP, global batch, paper's best TP, SimAI's lower TP bound)
    let cases = [("gpt3-13b", 1, 1024, 4, 4), ("llama-65b", 2, 1024, 8, 8), ("gpt3-175b", 8, 1536, 8, 8)];
    let best = |p: &Plan| p.rows.first().map(|r| r.layout.tp);
    let mut lines = Vec::new();
    for (model, pp, gbs, paper, min_tp) in cases {
        let plain = plan_tp(model, pp, gbs, Some(0));
        show(&plain, "Megatron's default optimizer, 18 B/param");
        let free = plan_tp(model, pp, gbs, None);
        show(&free, "distributed optimizer free");
        // SimAI's own rule on top of the plan's ranking: TP below its bound excluded.
        let ruled: Vec<_> = free.rows.iter().filter(|r| r.layout.tp >= min_tp).collect();
        let ruled_best = ruled.iter().min_by(|a, b| a.iteration_s.total_cmp(&b.iteration_s)).map(|r| r.layout.tp);
        for p in [&plain, &free] {
            for r in p.rows.iter().filter(|r| r.rank <= 3) {
                assert!(r.simulated.is_some(), "{model}: {} not simulated", r.layout.label());
            }
        }
        let fmt = |t: Option<u32>| t.map_or("none fits".to_string(), |t| t.to_string());
        lines.push(format!(
            "T1 best TP {model:10} plan, 18 B/param: {:>9}   plan, dist-opt free: {:>9}   plan + SimAI's TP rule: {:>9}   paper: {paper}",
            fmt(best(&plain)),
            fmt(best(&free)),
            fmt(ruled_best)
        ));
        // What holds, asserted:
        assert_eq!(ruled_best, Some(paper), "{model}: plan's ranking under SimAI's TP rule");
        match model {
            // 13B: the memory model alone (either optimizer) gives the paper's TP.
            "gpt3-13b" => {
                assert_eq!(best(&plain), Some(paper), "{model}: 18 B/param");
                assert_eq!(best(&free), Some(paper), "{model}: distributed optimizer free");
            }
            // 175B: the paper's TP under Megatron's default optimizer.
            "gpt3-175b" => assert_eq!(best(&plain), Some(paper), "{model}: 18 B/param"),
            // 65B (SimAI's shape: FFN 28672, 78 B parameters): at PP 2 no TP ≤ 8 holds 18 B per
            // parameter on 80 GB, so SimAI's run must have sharded the optimizer.
            _ => assert!(plain.rows.is_empty(), "{model}: 18 B/param should not fit at PP {pp}"),
        }
    }
    for l in lines {
        println!("{l}");
    }
}
