//! The roofline per compute kind: a step takes the longer of its arithmetic at the GPU's peak
//! and its memory traffic at the GPU's HBM bandwidth, each scaled by an efficiency that rises
//! with the work's size, plus a launch floor. Also SimAI-CP-Model's rule for moving a time
//! measured on one GPU to another.
//!
//! Efficiency curves: `e(w) = e_max · w / (w + w_half)` with `w_half = peak · τ`, the work the
//! GPU would finish in `τ` at peak. A tiny step is latency-bound (`e → 0`), a large one tends to
//! `e_max`. Written out, the time is `(w + peak·τ) / (peak · e_max)`: the curve is the same as
//! a fixed start-up cost `τ / e_max` (filling the SMs with one wave of tiles, pipeline ramp)
//! plus streaming at `e_max` of peak. `peak` grows with the GPU, so a bigger GPU needs more work
//! to reach the same fraction, as it does in practice (more SMs to fill).

use commlens_model::gpu::{GpuSpec, Precision};
use commlens_workload::{Compute, ComputeKind};

use super::ComputeCost;

/// Fixed cost of one step on top of its roofline, µs: a kernel launch as the GPU sees it
/// back to back (CUDA launch throughput ~1–2 µs per kernel when the CPU keeps ahead).
pub const DEFAULT_LAUNCH_US: f64 = 2.0;

/// Efficiency constants of one compute kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KindCurve {
    /// Fraction of peak FLOP/s a large instance reaches.
    pub compute_max: f64,
    /// Start-up time scale of the arithmetic, µs (`w_half = peak × τ`).
    pub compute_tau_us: f64,
    /// Fraction of HBM bandwidth a large instance reaches.
    pub mem_max: f64,
    /// Start-up time scale of the memory traffic, µs.
    pub mem_tau_us: f64,
    /// Runs on the matrix units at the chosen precision (else FP32 vector units).
    pub tensor: bool,
}

/// The curve of a kind, with why its constants are what they are.
pub fn curve(kind: ComputeKind) -> KindCurve {
    match kind {
        // cuBLAS/cuBLASLt reach ~70–80 % of dense peak on large BF16 GEMMs (A100 ~230–250 of
        // 312 TFLOP/s, H100 ~700–800 of 989 in NVIDIA's and public GEMM sweeps); 0.75 is the
        // middle. τ = 3 µs: a 1 GFLOP GEMM on an H100 (1 µs at peak) then runs ~5 µs (≈ 20 %),
        // a 100 GFLOP one ~140 µs (≈ 73 %), the shape of published GEMM-size sweeps.
        ComputeKind::Gemm => KindCurve { compute_max: 0.75, compute_tau_us: 3.0, mem_max: 0.85, mem_tau_us: 2.0, tensor: true },
        // FlashAttention-2 reports 50–73 % of A100 peak forward and 40–60 % backward, less on
        // H100 without FA-3; 0.55 stands for a forward/backward mix. Softmax and the causal
        // mask make its ramp longer than a GEMM's (τ = 5 µs).
        ComputeKind::Attention => KindCurve { compute_max: 0.55, compute_tau_us: 5.0, mem_max: 0.8, mem_tau_us: 3.0, tensor: true },
        // Streaming kernels (copy, GeLU, LayerNorm, residual add) reach 85–90 % of HBM peak on
        // large tensors (STREAM-like figures on A100/H100); small ones are launch-bound.
        ComputeKind::Elementwise => KindCurve { compute_max: 0.6, compute_tau_us: 2.0, mem_max: 0.85, mem_tau_us: 2.0, tensor: false },
        // Row gathers touch partial cache lines and scatter: ~60 % of HBM bandwidth.
        ComputeKind::Embedding => KindCurve { compute_max: 0.5, compute_tau_us: 2.0, mem_max: 0.6, mem_tau_us: 2.0, tensor: false },
        // Fused multi-tensor Adam streams params, grads and two moments (~16–20 B per
        // parameter) at ~80 % of HBM; several multi_tensor_apply launches make τ longer.
        ComputeKind::Optimizer => KindCurve { compute_max: 0.5, compute_tau_us: 4.0, mem_max: 0.8, mem_tau_us: 4.0, tensor: false },
        // Unknown work: between a GEMM and a streaming kernel.
        ComputeKind::Other => KindCurve { compute_max: 0.5, compute_tau_us: 3.0, mem_max: 0.7, mem_tau_us: 3.0, tensor: true },
    }
}

/// Whether a step is limited by arithmetic or by memory traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Compute,
    Memory,
}

/// The roofline on one GPU at one precision.
#[derive(Debug, Clone)]
pub struct Roofline {
    pub gpu: GpuSpec,
    pub precision: Precision,
    pub launch_us: f64,
    /// The GPU the workload's stated times (`Compute::time_us`) were measured on. `None`: they
    /// are taken as they are (measured on the simulated GPU).
    pub measured_on: Option<GpuSpec>,
}

impl Roofline {
    pub fn new(gpu: &GpuSpec, precision: Precision) -> Roofline {
        Roofline { gpu: gpu.clone(), precision, launch_us: DEFAULT_LAUNCH_US, measured_on: None }
    }

    /// Stated times were measured on `known`; when it is another GPU than the simulated one,
    /// they are rescaled ([`Roofline::rescale`]).
    pub fn measured_on(mut self, known: &GpuSpec) -> Roofline {
        self.measured_on = Some(known.clone());
        self
    }

    pub fn with_launch_us(mut self, us: f64) -> Roofline {
        self.launch_us = us.max(0.0);
        self
    }

    /// Peak FLOP per µs a kind computes at on `gpu` (matrix units at the precision, or the
    /// FP32 vector units).
    fn peak_flop_per_us(gpu: &GpuSpec, precision: Precision, k: &KindCurve) -> f64 {
        let tflops = if k.tensor { gpu.peak_tflops(precision) } else { gpu.peak_tflops_fp32 };
        tflops * 1e6
    }

    fn hbm_bytes_per_us(gpu: &GpuSpec) -> f64 {
        gpu.hbm_gb_s * 1e3
    }

    /// Arithmetic time of `flops` of `kind` on `gpu` along the efficiency curve, µs.
    fn compute_us(gpu: &GpuSpec, precision: Precision, kind: ComputeKind, flops: f64) -> f64 {
        let k = curve(kind);
        let peak = Self::peak_flop_per_us(gpu, precision, &k);
        if flops <= 0.0 || peak <= 0.0 {
            return 0.0;
        }
        // flops / (peak · e(flops)) with e = e_max · w / (w + peak·τ)
        (flops + peak * k.compute_tau_us) / (peak * k.compute_max)
    }

    /// Memory time of `bytes` of `kind` on `gpu` along the efficiency curve, µs.
    fn memory_us(gpu: &GpuSpec, kind: ComputeKind, bytes: f64) -> f64 {
        let k = curve(kind);
        let bw = Self::hbm_bytes_per_us(gpu);
        if bytes <= 0.0 || bw <= 0.0 {
            return 0.0;
        }
        (bytes + bw * k.mem_tau_us) / (bw * k.mem_max)
    }

    /// The roofline time of `c`, ignoring any stated time, µs. A step with neither FLOPs nor
    /// bytes is 0: the source could not size it, and inventing a launch would add time to
    /// markers.
    pub fn roofline_us(&self, c: &Compute) -> f64 {
        if c.flops <= 0.0 && c.mem_bytes <= 0.0 {
            return 0.0;
        }
        let t = Self::compute_us(&self.gpu, self.precision, c.kind, c.flops).max(Self::memory_us(&self.gpu, c.kind, c.mem_bytes));
        t + self.launch_us
    }

    /// Whether `c` is compute- or memory-bound on `gpu`: by its arithmetic intensity against
    /// the GPU's achievable ridge point when it states both FLOPs and bytes (SimAI-CP-Model
    /// classifies kernels, e.g. a KV-cache GEMM as memory-bound), else by its kind.
    pub fn bound(gpu: &GpuSpec, precision: Precision, c: &Compute) -> Bound {
        if c.flops > 0.0 && c.mem_bytes > 0.0 {
            let k = curve(c.kind);
            let tc = c.flops / (Self::peak_flop_per_us(gpu, precision, &k) * k.compute_max);
            let tm = c.mem_bytes / (Self::hbm_bytes_per_us(gpu) * k.mem_max);
            return if tc >= tm { Bound::Compute } else { Bound::Memory };
        }
        match c.kind {
            ComputeKind::Gemm | ComputeKind::Attention | ComputeKind::Other => Bound::Compute,
            ComputeKind::Elementwise | ComputeKind::Embedding | ComputeKind::Optimizer => Bound::Memory,
        }
    }

    /// SimAI-CP-Model's rule, written the right way round: a time measured on `known` moves to
    /// the simulated GPU as `t × FLOPS_known / FLOPS_new` when compute-bound and
    /// `t × BW_known / BW_new` when memory-bound. (The NSDI '25 paper prints the ratios
    /// inverted, `FLOPS_new / FLOPS_known × t`, which would make a faster GPU slower.)
    pub fn rescale(&self, t_us: f64, c: &Compute, known: &GpuSpec) -> f64 {
        if known.name == self.gpu.name {
            return t_us;
        }
        let k = curve(c.kind);
        let ratio = match Self::bound(known, self.precision, c) {
            Bound::Compute => {
                let new = Self::peak_flop_per_us(&self.gpu, self.precision, &k);
                let old = Self::peak_flop_per_us(known, self.precision, &k);
                if new > 0.0 && old > 0.0 { old / new } else { 1.0 }
            }
            Bound::Memory => {
                if self.gpu.hbm_gb_s > 0.0 && known.hbm_gb_s > 0.0 { known.hbm_gb_s / self.gpu.hbm_gb_s } else { 1.0 }
            }
        };
        t_us * ratio
    }
}

impl ComputeCost for Roofline {
    fn time_us(&self, c: &Compute) -> f64 {
        match (c.time_us, &self.measured_on) {
            (Some(t), Some(known)) if t.is_finite() && t >= 0.0 => self.rescale(t, c, known),
            (Some(t), None) if t.is_finite() && t >= 0.0 => t,
            _ => self.roofline_us(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commlens_model::gpu::gpu_by_name;

    fn step(kind: ComputeKind, flops: f64, bytes: f64) -> Compute {
        Compute { name: "s".into(), kind, flops, mem_bytes: bytes, time_us: None }
    }

    #[test]
    fn efficiency_rises_with_size() {
        let r = Roofline::new(gpu_by_name("H100").unwrap(), Precision::Bf16).with_launch_us(0.0);
        let eff = |f: f64| f / (r.roofline_us(&step(ComputeKind::Gemm, f, 0.0)) * 989e6);
        let (small, big) = (eff(1e9), eff(1e12));
        assert!(small < 0.3 && big > 0.74 && big < 0.75, "{small} {big}");
    }

    #[test]
    fn empty_step_is_free() {
        let r = Roofline::new(gpu_by_name("A100").unwrap(), Precision::Bf16);
        assert_eq!(r.time_us(&step(ComputeKind::Other, 0.0, 0.0)), 0.0);
    }
}
