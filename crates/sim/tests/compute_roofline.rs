//! The roofline: compute-bound GEMMs against memory-bound element-wise steps, stated times
//! moved between GPUs with SimAI-CP-Model's rule the right way round, and a kernel table in
//! front of the roofline.

use commlens_model::gpu::{gpu_by_name, Precision};
use commlens_sim::compute::{Bound, ComputeCost, KernelCost, KernelTable, Roofline, DEFAULT_LAUNCH_US};
use commlens_workload::{Compute, ComputeKind};

fn step(name: &str, kind: ComputeKind, flops: f64, bytes: f64, time_us: Option<f64>) -> Compute {
    Compute { name: name.into(), kind, flops, mem_bytes: bytes, time_us }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-12)
}

#[test]
fn gemm_is_compute_bound_elementwise_memory_bound() {
    let h100 = gpu_by_name("H100").unwrap();
    let r = Roofline::new(h100, Precision::Bf16);
    // 8192³ BF16 GEMM: 1.1 TFLOP over 3 × 128 MiB of operands.
    let n = 8192.0f64;
    let gemm = step("gemm", ComputeKind::Gemm, 2.0 * n * n * n, 3.0 * n * n * 2.0, None);
    assert_eq!(Roofline::bound(h100, Precision::Bf16, &gemm), Bound::Compute);
    let t = r.time_us(&gemm);
    // (flops + peak·τ) / (peak · 0.75) + launch, peak 989 TFLOP/s, τ 3 µs.
    let peak = 989e6;
    let expect = (gemm.flops + peak * 3.0) / (peak * 0.75) + DEFAULT_LAUNCH_US;
    assert!(close(t, expect, 1e-9), "{t} vs {expect}");
    let achieved = gemm.flops / t / 1e6;
    assert!((700.0..745.0).contains(&achieved), "large GEMM at {achieved} TFLOP/s of 989");
    // 1 GiB through a GeLU: 2 flops per element, 4 B in and out per BF16 pair.
    let bytes = (1u64 << 30) as f64;
    let gelu = step("gelu", ComputeKind::Elementwise, bytes / 2.0 * 8.0, 2.0 * bytes, None);
    assert_eq!(Roofline::bound(h100, Precision::Bf16, &gelu), Bound::Memory);
    let t = r.time_us(&gelu);
    let expect = (gelu.mem_bytes + 3350e3 * 2.0) / (3350e3 * 0.85) + DEFAULT_LAUNCH_US;
    assert!(close(t, expect, 1e-9), "{t} vs {expect}");
    // FP8 doubles the GEMM's arithmetic rate on an H100, not the GeLU's.
    let r8 = Roofline::new(h100, Precision::Fp8);
    assert!(r8.time_us(&gemm) < 0.55 * r.time_us(&gemm));
    assert_eq!(r8.time_us(&gelu), r.time_us(&gelu));
    // A small GEMM is latency-bound: far below peak.
    let small = step("g", ComputeKind::Gemm, 2.0 * 256.0 * 256.0 * 256.0, 3.0 * 256.0 * 256.0 * 2.0, None);
    let eff = small.flops / r.time_us(&small) / peak;
    assert!(eff < 0.01, "{eff}");
    println!("H100 BF16: 8192³ GEMM {achieved:.0} TFLOP/s; 1 GiB GeLU {:.0} GB/s; 256³ GEMM {:.2} % of peak", 2.0 * bytes / r.time_us(&gelu) / 1e3, eff * 100.0);
}

#[test]
fn stated_times_win_and_move_between_gpus_the_right_way() {
    let (a100, h100) = (gpu_by_name("A100").unwrap(), gpu_by_name("H100").unwrap());
    let gemm = step("mlp fwd", ComputeKind::Gemm, 0.0, 0.0, Some(1000.0));
    let norm = step("layernorm", ComputeKind::Elementwise, 0.0, 0.0, Some(1000.0));
    // Same GPU (or none stated): the stated time as it is.
    let same = Roofline::new(a100, Precision::Bf16);
    assert_eq!(same.time_us(&gemm), 1000.0);
    assert_eq!(same.clone().measured_on(a100).time_us(&gemm), 1000.0);
    // Measured on an A100, simulated on an H100: time × FLOPS_A100 / FLOPS_H100 for the
    // compute-bound GEMM (312 / 989), × BW_A100 / BW_H100 for the memory-bound norm
    // (2039 / 3350). The paper's printed ratios (new / known) would give 3170 and 1643 µs.
    let moved = Roofline::new(h100, Precision::Bf16).measured_on(a100);
    let g = moved.time_us(&gemm);
    let m = moved.time_us(&norm);
    assert!(close(g, 1000.0 * 312.0 / 989.0, 1e-12), "{g}");
    assert!(close(m, 1000.0 * 2039.0 / 3350.0, 1e-12), "{m}");
    assert!(g < 1000.0 && m < 1000.0, "a faster GPU never takes longer");
    // And back: H100 → A100 takes longer.
    let back = Roofline::new(a100, Precision::Bf16).measured_on(h100);
    assert!(close(back.time_us(&gemm), 1000.0 * 989.0 / 312.0, 1e-12));
    // A GEMM with stated FLOPs and bytes is classified by its intensity: a KV-cache style
    // GEMV (2 flops per 2-byte weight) is memory-bound even though it is a GEMM.
    let gemv = step("kv gemv", ComputeKind::Gemm, 1e9, 1e9, Some(100.0));
    assert_eq!(Roofline::bound(a100, Precision::Bf16, &gemv), Bound::Memory);
    assert!(close(moved.time_us(&gemv), 100.0 * 2039.0 / 3350.0, 1e-12));
    println!("A100 → H100: GEMM 1000 → {g:.1} µs, LayerNorm 1000 → {m:.1} µs");
}

#[test]
fn kernel_table_before_roofline() {
    let h100 = gpu_by_name("H100").unwrap();
    let table = KernelTable::from_samples([("sm90_gemm_128x256", 10.0), ("sm90_gemm_128x256", 12.0), ("sm90_gemm_128x256", 50.0)]);
    let cost = KernelCost::new(table, Roofline::new(h100, Precision::Bf16));
    let hit = step("sm90_gemm_128x256", ComputeKind::Gemm, 1e12, 0.0, Some(999.0));
    assert_eq!(cost.time_us(&hit), 12.0, "the measured median wins over everything");
    let normalised = step("sm90_gemm_64x128", ComputeKind::Gemm, 1e12, 0.0, None);
    assert_eq!(cost.time_us(&normalised), 12.0, "same kernel, other tile digits");
    let miss = step("flash_fwd", ComputeKind::Attention, 1e12, 0.0, None);
    assert_eq!(cost.time_us(&miss), cost.roofline.time_us(&miss));
    // Traces from an A100 used for an H100: the median moves by the same rule.
    let mut t2 = KernelTable::from_samples([("k", 100.0)]);
    t2.gpu = Some("NVIDIA A100-SXM4-80GB".into());
    let cost = KernelCost::new(t2, Roofline::new(h100, Precision::Bf16));
    assert!(close(cost.time_us(&step("k", ComputeKind::Gemm, 0.0, 0.0, None)), 100.0 * 312.0 / 989.0, 1e-12));
}
