//! The memory model against the workload crate's Megatron estimate and ZeRO's published
//! ratios, and the bandwidth table from the collective model.

use commlens_model::presets::preset;
use commlens_plan::bandwidth::from_cluster;
use commlens_plan::memory::{memory, Batch, MemoryOptions, StateBytes};
use commlens_plan::{Layout, Recompute};
use commlens_workload::megatron::{Layout as JobLayout, ModelJob};
use commlens_workload::models::model_by_name;

#[test]
fn megatron_states_match_the_workload_estimate() {
    let m = model_by_name("gpt3-175b").unwrap();
    for dist in [false, true] {
        let jl = JobLayout { distributed_optimizer: dist, sequence_parallel: true, ..JobLayout::new(8, 8, 16, 1, 1536) };
        let theirs = ModelJob::new(m, &jl).unwrap().memory();
        let ours = memory(m, &Layout { sp: true, zero: u8::from(dist), recompute: Recompute::Selective, ..Layout::megatron(8, 8, 16) }, Batch { global: 1536 }, &MemoryOptions::default());
        println!("175B TP8 PP8 DP16 dist-opt {dist}: states {:.2} GB (workload crate {:.2} GB), params {:.3} G ({:.3} G)", ours.states() / 1e9, theirs.states / 1e9, ours.params / 1e9, theirs.params / 1e9);
        assert!((ours.states() / theirs.states - 1.0).abs() < 1e-9);
    }
}

#[test]
fn zero_stages_shard_as_the_zero_paper_says() {
    // ZeRO (Rajbhandari et al.): 16Ψ without, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N.
    let m = model_by_name("gpt3-13b").unwrap();
    let n = 64.0;
    let states = |z: u8| memory(m, &Layout::deepspeed(z, 64), Batch { global: 64 }, &MemoryOptions::default()).states();
    let psi = states(0) / StateBytes::DEEPSPEED.total();
    for (z, want) in [(0u8, 16.0), (1, 4.0 + 12.0 / n), (2, 2.0 + 14.0 / n), (3, 16.0 / n)] {
        let per_param = states(z) / psi;
        println!("ZeRO-{z}: {per_param:.3} bytes per parameter (ZeRO paper {want:.3})");
        assert!((per_param - want).abs() < 1e-9);
    }
}

#[test]
fn activations_follow_recomputation_and_pipeline_depth() {
    let m = model_by_name("gpt3-13b").unwrap();
    let at = |rc: Recompute, pp: u32| memory(m, &Layout { recompute: rc, ..Layout::megatron(2, pp, 8 / pp) }, Batch { global: 64 }, &MemoryOptions::default()).activations;
    assert!(at(Recompute::None, 1) > at(Recompute::Selective, 1) && at(Recompute::Selective, 1) > at(Recompute::Full, 1));
    // Per GPU the first stage keeps pp micro-batches of its L/pp layers: about the same bytes.
    let (a1, a4) = (at(Recompute::Selective, 1), at(Recompute::Selective, 4));
    println!("13B TP2 selective: activations {:.2} GB at PP1, {:.2} GB at PP4", a1 / 1e9, a4 / 1e9);
    assert!(a4 < a1 && a4 > 0.8 * a1, "logits move off the first stage, layers × in-flight stay");
}

#[test]
fn nvswitch_groups_do_not_share_links_inside_a_node() {
    let b = from_cluster(&preset("dgx-h100").unwrap());
    for g1 in [2u32, 4] {
        let alone = b.intra[&(1, g1)];
        let together = b.intra[&(8 / g1, g1)];
        println!("dgx-h100: one {g1}-GPU AllReduce {:.0} GB/s, {} concurrent {:.0} GB/s", alone / 1e9, 8 / g1, together / 1e9);
        assert!(alone > 0.0 && alone.is_finite());
        assert!((together / alone - 1.0).abs() < 1e-9, "NVSwitch: disjoint GPUs, disjoint ports");
    }
    assert!(b.beta_inter > 0.0 && b.beta_inter < b.intra[&(1, 8)] * 8.0);
}
