//! GPU models: what the collective model and the simulator need to know about
//! a GPU — its compute capability (NCCL's tuning tables are indexed by it),
//! its NVLink generation and link count, memory and peak dense throughput.
//!
//! Facts come from vendor data sheets (NVLink links × per-link rate; dense
//! BF16 tensor throughput without sparsity) and from NCCL's `topo.h` (the
//! bandwidth NCCL assigns to one NVLink of a given SM generation).

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

    /// Nominal one-direction PCIe x16 bandwidth of the GPU, GB/s.
    pub fn pcie_gb_s(&self) -> f64 {
        pcie_x16_gb_s(self.pcie_gen)
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
    GpuSpec { name: "V100", sm: 70, nvlink_links: 6, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.0, pcie_gen: 3, memory_gib: 32.0, peak_tflops_bf16: 125.0, hbm_gb_s: 900.0 },
    GpuSpec { name: "A100", sm: 80, nvlink_links: 12, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.0, pcie_gen: 4, memory_gib: 80.0, peak_tflops_bf16: 312.0, hbm_gb_s: 2039.0 },
    GpuSpec { name: "A100-PCIe", sm: 80, nvlink_links: 0, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.0, pcie_gen: 4, memory_gib: 80.0, peak_tflops_bf16: 312.0, hbm_gb_s: 1935.0 },
    GpuSpec { name: "H100", sm: 90, nvlink_links: 18, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.6, pcie_gen: 5, memory_gib: 80.0, peak_tflops_bf16: 989.0, hbm_gb_s: 3350.0 },
    GpuSpec { name: "H200", sm: 90, nvlink_links: 18, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.6, pcie_gen: 5, memory_gib: 141.0, peak_tflops_bf16: 989.0, hbm_gb_s: 4800.0 },
    GpuSpec { name: "GH200", sm: 90, nvlink_links: 18, nvlink_gb_s_per_link: 25.0, nccl_nvlink_bw: 20.6, pcie_gen: 5, memory_gib: 96.0, peak_tflops_bf16: 989.0, hbm_gb_s: 4000.0 },
    GpuSpec { name: "B200", sm: 100, nvlink_links: 18, nvlink_gb_s_per_link: 50.0, nccl_nvlink_bw: 40.1, pcie_gen: 6, memory_gib: 180.0, peak_tflops_bf16: 2250.0, hbm_gb_s: 8000.0 },
    GpuSpec { name: "GB200", sm: 100, nvlink_links: 18, nvlink_gb_s_per_link: 50.0, nccl_nvlink_bw: 40.1, pcie_gen: 6, memory_gib: 186.0, peak_tflops_bf16: 2500.0, hbm_gb_s: 8000.0 },
    GpuSpec { name: "RTX4090", sm: 89, nvlink_links: 0, nvlink_gb_s_per_link: 0.0, nccl_nvlink_bw: 0.0, pcie_gen: 4, memory_gib: 24.0, peak_tflops_bf16: 165.0, hbm_gb_s: 1008.0 },
    GpuSpec { name: "RTX3090", sm: 86, nvlink_links: 4, nvlink_gb_s_per_link: 14.0625, nccl_nvlink_bw: 12.0, pcie_gen: 4, memory_gib: 24.0, peak_tflops_bf16: 71.0, hbm_gb_s: 936.0 },
    GpuSpec { name: "A40", sm: 86, nvlink_links: 4, nvlink_gb_s_per_link: 14.0625, nccl_nvlink_bw: 12.0, pcie_gen: 4, memory_gib: 48.0, peak_tflops_bf16: 150.0, hbm_gb_s: 696.0 },
    GpuSpec { name: "L40S", sm: 89, nvlink_links: 0, nvlink_gb_s_per_link: 0.0, nccl_nvlink_bw: 0.0, pcie_gen: 4, memory_gib: 48.0, peak_tflops_bf16: 362.0, hbm_gb_s: 864.0 },
    GpuSpec { name: "MI250X", sm: 0, nvlink_links: 8, nvlink_gb_s_per_link: 50.0, nccl_nvlink_bw: 0.0, pcie_gen: 4, memory_gib: 128.0, peak_tflops_bf16: 383.0, hbm_gb_s: 3277.0 },
    GpuSpec { name: "MI300X", sm: 0, nvlink_links: 7, nvlink_gb_s_per_link: 64.0, nccl_nvlink_bw: 0.0, pcie_gen: 5, memory_gib: 192.0, peak_tflops_bf16: 1307.0, hbm_gb_s: 5300.0 },
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
        assert!(gpu_by_name("Radeon 7").is_none());
    }

    #[test]
    fn nvlink_totals() {
        let h100 = gpu_by_name("H100").unwrap();
        assert_eq!(h100.nvlink_gb_s(), 450.0);
        assert!((h100.nccl_nvlink_gb_s() - 370.8).abs() < 1e-9);
        assert_eq!(gpu_by_name("A100").unwrap().nccl_nvlink_gb_s(), 240.0);
    }
}
