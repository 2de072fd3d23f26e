//! Every family the planner ranks is simulated from its own framework's program (the one
//! workload model), not only Megatron: DeepSpeed ZeRO 1–3, AxoNN 4D, Megatron interleaved
//! (`vpp` 2, Megatron's interleaved schedule run by the engine) and TED on an MoE model.
//! Checks the figures are consistent with each program's traffic: ZeRO-1's end-of-step
//! reduction is exposed where ZeRO-3's prefetched gathers hide under compute, AxoNN's grid
//! shows up as tensor-parallel traffic, interleaving shrinks the bubble.

use commlens_model::presets::preset;
use commlens_plan::simulate::simulate;
use commlens_plan::{Family, Layout};
use commlens_workload::models::model_by_name;

fn run(model: &str, l: &Layout, gbs: u32) -> commlens_plan::simulate::Simulated {
    let m = model_by_name(model).unwrap();
    let c = preset("dgx-a100").unwrap();
    let s = simulate(m, l, gbs, &c, 0.0).unwrap_or_else(|e| panic!("{l:?}: {e}"));
    println!("{model} {:?} zero {} grid {}x{}x{}x{} tp {} pp {} vpp {} ep {}: {s:?}", l.family, l.zero, l.gx, l.gy, l.gz, l.gdata, l.tp, l.pp, l.vpp, l.ep);
    assert!(s.iteration_s > 0.0 && s.compute_s > 0.0, "{s:?}");
    s
}

#[test]
fn deepspeed_axonn_interleaved_and_ted_layouts_are_simulated() {
    let z1 = run("gpt3-6.7b", &Layout { mbs: 1, ..Layout::deepspeed(1, 16) }, 64);
    let z3 = run("gpt3-6.7b", &Layout { mbs: 1, ..Layout::deepspeed(3, 16) }, 64);
    // Both move their DP traffic (ZeRO-1 reduces at the end of the step, exposed; ZeRO-3
    // prefetches its per-layer gathers under compute, DeepSpeed's overlap_comm default).
    assert!(z1.exposed_dp_s > 0.0 && z3.exposed_dp_s > 0.0, "{z1:?} {z3:?}");
    assert!(z3.exposed_dp_s < z1.exposed_dp_s, "ZeRO-3's gathers overlap compute: {z3:?} vs {z1:?}");

    let ax = run("gpt3-6.7b", &Layout { mbs: 1, ..Layout::axonn(2, 2, 2, 2) }, 64);
    assert!(ax.exposed_tp_s > 0.0, "AxoNN's X/Y/Z collectives are tensor-parallel traffic: {ax:?}");

    let plain = run("gpt3-6.7b", &Layout { mbs: 1, sp: true, zero: 1, ..Layout::megatron(2, 4, 2) }, 64);
    let inter = run("gpt3-6.7b", &Layout { mbs: 1, sp: true, zero: 1, vpp: 2, ..Layout::megatron(2, 4, 2) }, 64);
    assert!(inter.bubble_s < plain.bubble_s, "interleaving shrinks the bubble: {inter:?} vs {plain:?}");

    let ted = Layout { family: Family::Ted, tp: 2, pp: 1, dp: 8, ep: 4, mbs: 1, zero: 1, ..Layout::default() };
    let t = run("mixtral-8x7b", &ted, 64);
    assert!(t.exposed_ep_s > 0.0 || t.exposed_total_s > 0.0, "{t:?}");
}
