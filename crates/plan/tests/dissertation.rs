//! The dissertation's worked examples (Singh 2025; `shared/reference/ncclx-and-axonn.md`
//! B.1–B.9), each computed by the planner's models and printed beside the printed figure.

use commlens_plan::axonn::{grids, group_members, layer_comm, Bandwidths, FcLayer};
use commlens_plan::layout::Grid;
use commlens_plan::memory::{best_checkpoint_interval, bubble_time, checkpoint_units, mixed_precision_state_bytes, offloaded_state_bytes};
use commlens_plan::{samo, ted};
use std::collections::BTreeMap;

/// A 2-node table where every intra-node entry is the same, so only eq. 5.7 matters.
fn two_node_bandwidths(beta_inter: f64) -> Bandwidths {
    let mut intra = BTreeMap::new();
    for g1 in 2..=4 {
        for g0 in 1..=4 / g1 {
            intra.insert((g0, g1), 200e9);
        }
    }
    Bandwidths { gpus_per_node: 4, beta_inter, intra, source: vec![] }
}

#[test]
fn eight_gpu_group_example() {
    let g = Grid { gx: 2, gy: 2, gz: 2, gdata: 1 };
    let x = group_members(&g, 0);
    let y = group_members(&g, 1);
    let z = group_members(&g, 2);
    println!("8 GPUs, all dimensions 2: X groups {x:?}, Y groups {y:?}, Z groups {z:?}");
    assert_eq!(x, vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
    assert_eq!(y, vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]);
    assert_eq!(z, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
    // Every rank is in exactly one group of each dimension.
    for groups in [&x, &y, &z] {
        let mut all: Vec<u32> = groups.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
    }
}

#[test]
fn concurrent_rings_over_two_nodes_share_beta_inter() {
    let beta = 100e9;
    let b = two_node_bandwidths(beta);
    // One ring of 8 GPUs over 2 nodes of 4: the X group of a (8, 1, 1, 1) grid.
    let one = b.of_grid(&Grid { gx: 8, gy: 1, gz: 1, gdata: 1 });
    // Two concurrent rings over the same 2 nodes: the Y groups of (2, 4, 1, 1), each spanning
    // both nodes (members 0,2,4,6 and 1,3,5,7).
    let g2 = Grid { gx: 2, gy: 4, gz: 1, gdata: 1 };
    let two = b.of_grid(&g2);
    let y = group_members(&g2, 1);
    println!("Fig. 5.3: one ring {:.0} GB/s = β_inter, two concurrent rings {:.0} GB/s each = β_inter/2 (groups {y:?})", one[0] / 1e9, two[1] / 1e9);
    assert_eq!(one[0], beta);
    assert_eq!(two[1], beta / 2.0);
    assert!(y.iter().all(|g| g.iter().any(|&r| r < 4) && g.iter().any(|&r| r >= 4)), "each ring spans both nodes");
    // Eq. 5.7 saturates at G_node: four concurrent rings (inner 4) get β_inter/4, so do 8.
    assert_eq!(b.of_group(4, 2), beta / 4.0);
    assert_eq!(b.of_group(8, 2), beta / 4.0);
    // Inside a node the table answers.
    assert_eq!(b.of_group(2, 2), 200e9);
}

#[test]
fn power_of_two_layouts_for_32_and_64_gpus() {
    let choose = |n: u64, k: u64| (0..k).fold(1u64, |acc, i| acc * (n - i) / (i + 1));
    for (gpus, printed) in [(32u32, 56usize), (64, 84)] {
        let g = grids(gpus, true);
        let n = gpus.trailing_zeros() as u64;
        println!("{gpus} GPUs: {} power-of-two (G_x, G_y, G_z, G_data) layouts (C(n+3, 3) = {}, dissertation {printed})", g.len(), choose(n + 3, 3));
        assert_eq!(g.len(), printed);
        assert!(g.iter().all(|g| g.world() == gpus));
        let mut uniq = g.clone();
        uniq.sort_by_key(|g| (g.gx, g.gy, g.gz, g.gdata));
        uniq.dedup();
        assert_eq!(uniq.len(), g.len(), "no layout twice");
    }
    // All divisors (not only powers of two) admit more on a non-power-of-two count.
    assert!(grids(48, false).len() > grids(48, true).len());
}

#[test]
fn megatron_and_fsdp_are_special_cases_of_the_4d_model() {
    // X + transposed layers = Megatron: a GPT block's four FC layers give four all-reduces
    // of the m×h activations on the TP group, nothing else (data 1).
    let (h, m, t, beta) = (4096.0, 8192.0, 4u32, 100e9);
    let block = commlens_plan::axonn::block_layers(h, h, 4.0 * h, false);
    let grid = Grid { gx: t, gy: 1, gz: 1, gdata: 1 };
    let betas = [beta, f64::INFINITY, f64::INFINITY, f64::INFINITY];
    let total: f64 = block.iter().map(|l| layer_comm(l, m, &grid, &betas, 2.0).x).sum();
    let ar = 2.0 * (t as f64 - 1.0) / t as f64 * m * h * 2.0 / beta;
    println!("Megatron TP{t} block: {:.3} ms on X = {:.2} all-reduces of m·h", total * 1e3, total / ar);
    assert!((total / ar - 4.0).abs() < 1e-9);
    // Z only = ZeRO-3/FSDP: per layer, an all-gather and a reduce-scatter of the weights.
    let z = 8u32;
    let gz = Grid { gx: 1, gy: 1, gz: z, gdata: 1 };
    let l = FcLayer { k: h, n: 4.0 * h, transposed: false };
    let c = layer_comm(&l, m, &gz, &[beta; 4], 2.0);
    let one_way = (z as f64 - 1.0) / z as f64 * h * 4.0 * h * 2.0 / beta;
    println!("ZeRO-3 over {z}: AG + RS = {:.3} ms = {:.2} × one weight pass", c.z * 1e3, c.z / one_way);
    assert!((c.z / one_way - 2.0).abs() < 1e-9);
    assert_eq!(c.x + c.y + c.data, 0.0);
}

#[test]
fn samo_break_even_and_savings() {
    let p0 = samo::break_even_sparsity();
    let (s8, s9) = (samo::savings_fraction(0.8), samo::savings_fraction(0.9));
    println!("SAMO: break-even sparsity {p0:.4} (dissertation 0.25); savings {:.0} % at p=0.8, {:.0} % at p=0.9 (Fig. 4.2: 66–78 %)", s8 * 100.0, s9 * 100.0);
    assert!((p0 - 0.25).abs() < 1e-9);
    assert!((s8 - 0.66).abs() < 1e-9 && (s9 - 0.78).abs() < 1e-9);
    assert!(samo::savings_fraction(0.1) < 0.0, "below break-even SAMO costs memory");
    // Eq. 4.5: M^SAMO = M^default − (24p − 6)φ.
    for p in [0.0, 0.3, 0.75, 0.95] {
        assert!((samo::samo_bytes_per_param(p) - (20.0 - (24.0 * p - 6.0))).abs() < 1e-12);
    }
}

#[test]
fn ted_larger_base_models_per_machine() {
    let mut rows = Vec::new();
    for (name, printed) in [("perlmutter", 4.0), ("summit", 6.0), ("dgx-a100", 8.0)] {
        let m = ted::machine(name).unwrap();
        let mem = m.gpu_memory_gb * 1e9;
        let g_tensor = m.gpus_per_node as f64;
        // Eq. 7.6 against DeepSpeed-MoE (G_tensor = 1).
        let ratio = ted::max_base_params_limit(mem, g_tensor) / ted::max_base_params_limit(mem, 1.0);
        // Eq. 7.5 at a finite scale (16 experts, 4096 GPUs) approaches it.
        let finite = ted::max_base_params(mem, 16.0, g_tensor, 4096.0) / ted::max_base_params(mem, 16.0, 1.0, 4096.0);
        rows.push(format!("TED on {name}: G_tensor = {g_tensor}, base model {ratio:.1}× DeepSpeed-MoE (eq. 7.6; dissertation {printed}×), {finite:.2}× at 4096 GPUs, 16 experts (eq. 7.5)"));
        assert_eq!(ratio, printed);
        assert!(finite < ratio && finite > 0.9 * ratio);
    }
    rows.iter().for_each(|r| println!("{r}"));
    // Eq. 7.4 with the split of 7.2/7.3 and groups of 7.1/7.7 equals eq. 7.5.
    for (np, e, gt, g) in [(1.3e9, 4.0, 2.0, 8.0), (6.7e9, 32.0, 4.0, 128.0), (13e9, 16.0, 8.0, 256.0)] {
        let a = ted::memory_per_gpu(np, e, gt, g);
        let b = ted::memory_bound(np, e, gt, g);
        assert!((a / b - 1.0).abs() < 1e-12, "{a} vs {b}");
    }
    // The validation run: 8 GPUs, G_tensor 2, 4 experts → G_data^nonexp 4, G_data^exp 1.
    assert_eq!(ted::data_groups(8.0, 2.0, 4.0), (4.0, 1.0));
}

#[test]
fn summit_memory_figures_of_chapter_3() {
    // 12B parameters, 20φ bytes: on G_inter = 6 GPUs 40 GB each.
    let phi = 12e9;
    let per_gpu_6 = mixed_precision_state_bytes(phi) / 6.0;
    let per_gpu_24 = mixed_precision_state_bytes(phi) / 24.0;
    // The offloaded optimizer: 4φ + 16·b_size, b_size = 16 M.
    let offloaded_6 = offloaded_state_bytes(phi / 6.0, 16e6);
    println!(
        "Summit 12B: 20φ = {:.0} GB in all, {:.0} GB/GPU at G_inter 6 (dissertation 40), {:.0} GB/GPU at G_inter 24; with the optimizer offloaded {:.2} GB/GPU at G_inter 6 = {:.1}× smaller (\"about 5×\")",
        mixed_precision_state_bytes(phi) / 1e9,
        per_gpu_6 / 1e9,
        per_gpu_24 / 1e9,
        offloaded_6 / 1e9,
        per_gpu_6 / offloaded_6
    );
    assert_eq!(per_gpu_6, 40e9);
    assert!(per_gpu_6 > 16e9, "does not fit a 16 GB V100 unoptimised at G_inter 6");
    assert!(offloaded_6 < 16e9, "fits once offloaded: why G_inter could drop from 24 to 6");
    let shrink = per_gpu_6 / offloaded_6;
    assert!((4.5..5.0).contains(&shrink), "{shrink}");
    // Fig. 4.3: G_inter = 3, stage forward 1 and backward 2 units → bubble 6 units.
    let bubble = bubble_time(3, 3.0 * 1.0, 3.0 * 2.0);
    println!("Fig. 4.3 bubble: {bubble} units (dissertation 6)");
    assert_eq!(bubble, 6.0);
    // Eq. 3.1: the factor of N/G_inter closest to √N minimises the activation memory.
    for (n, g) in [(48u32, 6u32), (96, 12), (64, 1)] {
        let ac = best_checkpoint_interval(n, g);
        let per_stage = n / g;
        let best_factor = (1..=per_stage).filter(|d| per_stage % d == 0).min_by(|a, b| checkpoint_units(n, g, *a).total_cmp(&checkpoint_units(n, g, *b))).unwrap();
        println!("eq. 3.1: N = {n}, G_inter = {g}: ac = {ac} (√N = {:.1}), best factor by the formula {best_factor}", (n as f64).sqrt());
        assert_eq!(checkpoint_units(n, g, ac), checkpoint_units(n, g, best_factor));
    }
}
