//! GPU models: what the collective model and the simulator need to know about
//! a GPU — its compute capability (NCCL's tuning tables are indexed by it),
//! its NVLink generation and link count, memory and peak dense throughput.
//!
//! Facts come from vendor data sheets (NVLink links × per-link rate; dense
//! tensor throughput per precision without sparsity; HBM bandwidth) and from
//! NCCL's `topo.h` (the bandwidth NCCL assigns to one NVLink of a given SM
//! generation). [`Precision`] and [`GpuSpec::peak_tflops`] serve the
//! simulator's roofline (`commlens_sim::compute`).
//!
//! Throughput sources (dense figures; data sheets print sparse ones as 2×):
//! NVIDIA V100 data sheet (SXM2: 15.7 FP32, 125 FP16 tensor); A100 data sheet
//! (19.5 FP32, 156 TF32, 312 BF16); H100 SXM data sheet (67 FP32, 494.5 TF32,
//! 989.5 BF16 — kept as 989 —, 1979 FP8); H200 data sheet (same SXM compute as H100,
//! 4.8 TB/s); GH200 data sheet (H100 compute, 96 GB HBM3 at 4 TB/s); DGX/HGX
//! B200 data sheet per GPU (8 GPUs: 72 PF FP8, 36 PF FP16, 18 PF TF32 sparse,
//! 600 TF FP32, 64 TB/s); GB200 NVL72 data sheet per GPU (÷72: 720 PF FP8,
//! 360 PF FP16, 180 PF TF32 sparse, 5,760 TF FP32, 576 TB/s); Ada whitepaper
//! (RTX 4090: 82.6 FP32 and TF32, 165.2 BF16 and 330.3 FP8 with FP32
//! accumulate; L40S data sheet: 91.6, 183, 362, 733); GA102 whitepaper (RTX
//! 3090: 35.6 FP32/TF32, 71 BF16; A40: 37.4, 74.8, 149.7); AMD Instinct
//! MI250X data sheet (47.9 FP32 vector, 95.7 FP32 matrix, 383 BF16, 3.2768
//! TB/s; no TF32 or FP8) and MI300X data sheet (163.4 FP32, 653.7 TF32,
//! 1307.4 BF16, 2614.9 FP8, 5.3 TB/s). H20 (Hopper for the Chinese market;
//! NVIDIA's HGX H20 product brief as reported): 148 BF16 dense, 296 FP8, 74
//! TF32, 44 FP32, 96 GB HBM3 at 4.0 TB/s, NVLink 900 GB/s bidirectional
//! (18 × 25 GB/s per direction, like the H100), PCIe gen5.

use serde::Serialize;

/// One GPU model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuSpec {
    /// Short name (`H100`, `A100-PCIe`, `RTX4090`).
    pub name: &'static str,
    /// CUDA compute capability × 10 (70, 80, 86, 89, 90, 100); 0 for non-NVIDIA parts.
    pub sm: u32,
    /// NVLink links per GPU (0: none).
    pub nvlink_links: u32,
    /// Nominal one-direction rate of one NVLink, GB/s (NVLink2/3/4: 25, NVLink5: 50).
    pub nvlink_gb_s_per_link: f64,
    /// Bandwidth NCCL assigns to one NVLink of this SM (`topo.h`: SM70 20, SM80 20,
    /// SM86 12, SM90 20.6, SM100 40.1).
    pub nccl_nvlink_bw: f64,
    /// PCIe generation and lanes of the GPU's host link.
    pub pcie_gen: u32,
    pub memory_gib: f64,
    /// Dense BF16/FP16 tensor throughput, TFLOP/s.
    pub peak_tflops_bf16: f64,
    /// HBM bandwidth, GB/s.
    pub hbm_gb_s: f64,
    /// FP32 on the vector units (CUDA cores), TFLOP/s: what element-wise and
    /// optimizer kernels compute on.
    pub peak_tflops_fp32: f64,
    /// Dense FP32-input GEMM throughput on the matrix units (NVIDIA TF32;
    /// AMD CDNA2 FP32 matrix), TFLOP/s; equals `peak_tflops_fp32` where the
    /// GPU has no such path (V100).
    pub peak_tflops_tf32: f64,
    /// Dense FP8 tensor throughput, TFLOP/s; 0 where the GPU has no FP8
    /// (before Hopper/Ada, MI250X).
    pub peak_tflops_fp8: f64,
}

/// The arithmetic a compute step runs in, for [`GpuSpec::peak_tflops`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Precision {
    Fp32,
    Tf32,
    Fp16,
    Bf16,
    Fp8,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
        }
    }

    /// `fp32`/`float32`, `tf32`, `fp16`/`half`, `bf16`/`bfloat16`, `fp8` (`e4m3`, `e5m2`).
    pub fn from_name(s: &str) -> Option<Precision> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "fp32" | "float32" | "float" | "f32" => Precision::Fp32,
            "tf32" => Precision::Tf32,
            "fp16" | "float16" | "half" | "f16" => Precision::Fp16,
            "bf16" | "bfloat16" => Precision::Bf16,
            "fp8" | "float8" | "e4m3" | "e5m2" | "fp8-e4m3" | "fp8-e5m2" => Precision::Fp8,
            _ => return None,
        })
    }
}

impl GpuSpec {
    /// Nominal one-direction NVLink bandwidth of the GPU, GB/s.
    pub fn nvlink_gb_s(&self) -> f64 {
        self.nvlink_links as f64 * self.nvlink_gb_s_per_link
    }

    /// NVLink bandwidth as NCCL's topology search sees it (links × `topo.h` rate).
    pub fn nccl_nvlink_gb_s(&self) -> f64 {
        self.nvlink_links as f64 * self.nccl_nvlink_bw
    }

    /// A superchip GPU joined to its Grace CPU by NVLink-C2C (GH200, GB200):
    /// its NICs hang off the CPU's PCIe root, so NCCL's path from GPU to NIC
    /// goes through the CPU (`PHB`) — NVIDIA: on GH200/GB200 "the NIC was
    /// accessed through a CPU" (NCCL issue 1579); the C2C path type `P2C`
    /// stays off unless `NCCL_PXN_C2C=1` (2.27.5 release notes).
    pub fn nic_behind_cpu(&self) -> bool {
        matches!(self.name, "GH200" | "GB200")
    }

    /// Nominal one-direction PCIe x16 bandwidth of the GPU, GB/s.
    pub fn pcie_gb_s(&self) -> f64 {
        pcie_x16_gb_s(self.pcie_gen)
    }

    /// Dense matrix-unit peak for GEMM-like work in `p`, TFLOP/s. A precision
    /// the GPU lacks runs at the next wider one it has (FP8 → BF16, TF32 →
    /// FP32), as frameworks fall back on such parts.
    pub fn peak_tflops(&self, p: Precision) -> f64 {
        match p {
            Precision::Fp8 if self.peak_tflops_fp8 > 0.0 => self.peak_tflops_fp8,
            Precision::Fp8 | Precision::Fp16 | Precision::Bf16 => self.peak_tflops_bf16,
            Precision::Tf32 if self.peak_tflops_tf32 > 0.0 => self.peak_tflops_tf32,
            Precision::Tf32 | Precision::Fp32 => self.peak_tflops_fp32,
        }
    }
}

/// One-direction PCIe x16 rate NCCL uses for a generation (`gen3` 12, `gen4` 24,
/// `gen5` 48, `gen6` 96 GB/s: lanes × GT/s / 8 × encoding, as `pci_bw` in topo).
pub fn pcie_x16_gb_s(gen: u32) -> f64 {
    match gen {
        0..=3 => 12.0,
        4 => 24.0,
        5 => 48.0,
        _ => 96.0,
    }
}

/// Every model commlens knows, looked up by [`gpu_by_name`].
pub const GPUS: &[GpuSpec] = &[
    GpuSpec { name: "V100", sm: 70, nvlink_links: 6, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.0, pcie_gen: 3, memory_gib: 32.0, peak_tflops_bf16: 125.0, hbm_gb_s: 900.0, peak_tflops_fp32: 15.7, peak_tflops_tf32: 15.7, peak_tflops_fp8: 0.0 },
    GpuSpec { name: "A100", sm: 80, nvlink_links: 12, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.0, pcie_gen: 4, memory_gib: 80.0, peak_tflops_bf16: 312.0, hbm_gb_s: 2039.0, peak_tflops_fp32: 19.5, peak_tflops_tf32: 156.0, peak_tflops_fp8: 0.0 },
    GpuSpec { name: "A100-PCIe", sm: 80, nvlink_links: 0, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.0, pcie_gen: 4, memory_gib: 80.0, peak_tflops_bf16: 312.0, hbm_gb_s: 1935.0, peak_tflops_fp32: 19.5, peak_tflops_tf32: 156.0, peak_tflops_fp8: 0.0 },
    GpuSpec { name: "H100", sm: 90, nvlink_links: 18, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.6, pcie_gen: 5, memory_gib: 80.0, peak_tflops_bf16: 989.0, hbm_gb_s: 3350.0, peak_tflops_fp32: 67.0, peak_tflops_tf32: 494.5, peak_tflops_fp8: 1979.0 },
    GpuSpec { name: "H200", sm: 90, nvlink_links: 18, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.6, pcie_gen: 5, memory_gib: 141.0, peak_tflops_bf16: 989.0, hbm_gb_s: 4800.0, peak_tflops_fp32: 67.0, peak_tflops_tf32: 494.5, peak_tflops_fp8: 1979.0 },
    GpuSpec { name: "H20", sm: 90, nvlink_links: 18, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.6, pcie_gen: 5, memory_gib: 96.0, peak_tflops_bf16: 148.0, hbm_gb_s: 4000.0, peak_tflops_fp32: 44.0, peak_tflops_tf32: 74.0, peak_tflops_fp8: 296.0 },
    GpuSpec { name: "GH200", sm: 90, nvlink_links: 18, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.6, pcie_gen: 5, memory_gib: 96.0, peak_tflops_bf16: 989.0, hbm_gb_s: 4000.0, peak_tflops_fp32: 67.0, peak_tflops_tf32: 494.5, peak_tflops_fp8: 1979.0 },
    GpuSpec { name: "B200", sm: 100, nvlink_links: 18, nvlink_gb_s_per_link: 50.0, nccl_nvlink_bw: 40.1, pcie_gen: 6, memory_gib: 180.0, peak_tflops_bf16: 2250.0, hbm_gb_s: 8000.0, peak_tflops_fp32: 75.0, peak_tflops_tf32: 1125.0, peak_tflops_fp8: 4500.0 },
    GpuSpec { name: "GB200", sm: 100, nvlink_links: 18, nvlink_gb_s_per_link: 50.0, nccl_nvlink_bw: 40.1, pcie_gen: 6, memory_gib: 186.0, peak_tflops_bf16: 2500.0, hbm_gb_s: 8000.0, peak_tflops_fp32: 80.0, peak_tflops_tf32: 1250.0, peak_tflops_fp8: 5000.0 },
    GpuSpec { name: "RTX4090", sm: 89, nvlink_links: 0, nvlink_gb_s_per_link: 0.0, nccl_nvlink_bw: 0.0, pcie_gen: 4, memory_gib: 24.0, peak_tflops_bf16: 165.0, hbm_gb_s: 1008.0, peak_tflops_fp32: 82.6, peak_tflops_tf32: 82.6, peak_tflops_fp8: 330.3 },
    GpuSpec { name: "RTX3090", sm: 86, nvlink_links: 4, nvlink_gb_s_per_link: 14.0625, nccl_nvlink_bw: 12.0, pcie_gen: 4, memory_gib: 24.0, peak_tflops_bf16: 71.0, hbm_gb_s: 936.0, peak_tflops_fp32: 35.6, peak_tflops_tf32: 35.6, peak_tflops_fp8: 0.0 },
    GpuSpec { name: "A40", sm: 86, nvlink_links: 4, nvlink_gb_s_per_link: 14.0625, nccl_nvlink_bw: 12.0, pcie_gen: 4, memory_gib: 48.0, peak_tflops_bf16: 150.0, hbm_gb_s: 696.0, peak_tflops_fp32: 37.4, peak_tflops_tf32: 74.8, peak_tflops_fp8: 0.0 },
    GpuSpec { name: "L40S", sm: 89, nvlink_links: 0, nvlink_gb_s_per_link: 0.0, nccl_nvlink_bw: 0.0, pcie_gen: 4, memory_gib: 48.0, peak_tflops_bf16: 362.0, hbm_gb_s: 864.0, peak_tflops_fp32: 91.6, peak_tflops_tf32: 183.0, peak_tflops_fp8: 733.0 },
    GpuSpec { name: "MI250X", sm: 0, nvlink_links: 8, nvlink_gb_s_per_link: 50.0, nccl_nvlink_bw: 0.0, pcie_gen: 4, memory_gib: 128.0, peak_tflops_bf16: 383.0, hbm_gb_s: 3277.0, peak_tflops_fp32: 47.9, peak_tflops_tf32: 95.7, peak_tflops_fp8: 0.0 },
    GpuSpec { name: "MI300X", sm: 0, nvlink_links: 7, nvlink_gb_s_per_link: 64.0, nccl_nvlink_bw: 0.0, pcie_gen: 5, memory_gib: 192.0, peak_tflops_bf16: 1307.0, hbm_gb_s: 5300.0, peak_tflops_fp32: 163.4, peak_tflops_tf32: 653.7, peak_tflops_fp8: 2614.9 },
];

/// Finds a model by a name as users and tools write it: `H100`, `h100`,
/// `NVIDIA H100 80GB HBM3`, `Tesla V100-SXM2-16GB`, `NVIDIA GeForce RTX 4090`,
/// `NVIDIA A100-PCIE-40GB`, `NVIDIA GH200 480GB`. Longest known name wins, so
/// `GH200` is not read as `H200` and `A100-PCIe` not as `A100`.
pub fn gpu_by_name(name: &str) -> Option<&'static GpuSpec> {
    let norm: String = name
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '_')
        .flat_map(char::to_uppercase)
        .collect();
    let mut best: Option<&'static GpuSpec> = None;
    for g in GPUS {
        let key = g.name.to_uppercase();
        let hit = if key.ends_with("-PCIE") {
            let base = &key[..key.len() - 5];
            norm.contains(base) && norm.contains("PCIE")
        } else {
            norm.contains(&key) && !(key == "H200" && norm.contains("GH200"))
        };
        if hit && best.is_none_or(|b| g.name.len() > b.name.len()) {
            best = Some(g);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_tools_print_them() {
        assert_eq!(gpu_by_name("NVIDIA H100 80GB HBM3").unwrap().name, "H100");
        assert_eq!(gpu_by_name("Tesla V100-SXM2-16GB").unwrap().name, "V100");
        assert_eq!(gpu_by_name("NVIDIA GeForce RTX 4090").unwrap().name, "RTX4090");
        assert_eq!(gpu_by_name("NVIDIA GeForce RTX 3090").unwrap().name, "RTX3090");
        assert_eq!(gpu_by_name("NVIDIA A100-PCIE-40GB").unwrap().name, "A100-PCIe");
        assert_eq!(gpu_by_name("NVIDIA A100-SXM4-80GB").unwrap().name, "A100");
        assert_eq!(gpu_by_name("NVIDIA GH200 120GB").unwrap().name, "GH200");
        assert_eq!(gpu_by_name("h200").unwrap().name, "H200");
        assert_eq!(gpu_by_name("NVIDIA H20").unwrap().name, "H20");
        assert_eq!(gpu_by_name("NVIDIA H200 141GB HBM3e").unwrap().name, "H200");
        assert!(gpu_by_name("Radeon 7").is_none());
    }

    #[test]
    fn peaks_per_precision() {
        let h100 = gpu_by_name("H100").unwrap();
        assert_eq!(h100.peak_tflops(Precision::Fp8), 1979.0);
        assert_eq!(h100.peak_tflops(Precision::Bf16), 989.0);
        assert_eq!(h100.peak_tflops(Precision::Tf32), 494.5);
        let a100 = gpu_by_name("A100").unwrap();
        assert_eq!(a100.peak_tflops(Precision::Fp8), 312.0, "no FP8 on Ampere: BF16 rate");
        assert_eq!(gpu_by_name("V100").unwrap().peak_tflops(Precision::Tf32), 15.7);
        for g in GPUS {
            assert!(g.peak_tflops_fp32 > 0.0 && g.peak_tflops_tf32 >= g.peak_tflops_fp32, "{}", g.name);
            assert!(g.peak_tflops_bf16 >= g.peak_tflops_tf32 && g.hbm_gb_s > 0.0, "{}", g.name);
            assert!(g.peak_tflops_fp8 == 0.0 || g.peak_tflops_fp8 >= g.peak_tflops_bf16, "{}", g.name);
        }
        assert_eq!(Precision::from_name("BF16"), Some(Precision::Bf16));
        assert_eq!(gpu_by_name("AMD Instinct MI300X").unwrap().name, "MI300X");
    }

    #[test]
    fn nvlink_totals() {
        let h100 = gpu_by_name("H100").unwrap();
        assert_eq!(h100.nvlink_gb_s(), 450.0);
        assert!((h100.nccl_nvlink_gb_s() - 370.8).abs() < 1e-9);
        assert_eq!(gpu_by_name("A100").unwrap().nccl_nvlink_gb_s(), 240.0);
    }
}
