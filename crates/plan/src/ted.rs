//! DeepSpeed-TED (Singh 2025, ch. 7): tensor × expert × data parallelism for MoE models, its
//! memory model and the machines the dissertation sizes it on.
//!
//! Owns eqs. 7.1–7.7: the non-expert and expert parameter split of a base model with `E`
//! experts on every other layer (`NP_exp = (E/3)·NP_base`, `NP_nonexp = (2/3)·NP_base`), the
//! group sizes (`G_tensor·G_expert·G_data^exp = G_tensor·G_data^nonexp = G`, `G_expert = E`),
//! the ZeRO-1 memory bound (7.4, 7.5) and the largest base model it allows (7.6), against
//! DeepSpeed-MoE (no tensor parallelism: `G_tensor = 1`); also [`Machine`], the dissertation's
//! systems (GPUs per node, memory), since G_tensor is bounded by a node.

/// A system of the dissertation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Machine {
    pub name: &'static str,
    pub gpus_per_node: u32,
    pub gpu_memory_gb: f64,
    /// Advertised dense half-precision peak per GPU, Tflop/s.
    pub peak_tflops: f64,
}

/// Summit (V100 16 GB, 6 per node), Perlmutter (A100 40 GB, 4), DGX-A100 (A100 40 GB, 8),
/// ThetaGPU (DGX-A100 nodes), Frontier (MI250X GCDs 64 GB, 8), Alps (GH200 96 GB, 4).
pub const MACHINES: &[Machine] = &[
    Machine { name: "summit", gpus_per_node: 6, gpu_memory_gb: 16.0, peak_tflops: 125.0 },
    Machine { name: "perlmutter", gpus_per_node: 4, gpu_memory_gb: 40.0, peak_tflops: 312.0 },
    Machine { name: "dgx-a100", gpus_per_node: 8, gpu_memory_gb: 40.0, peak_tflops: 312.0 },
    Machine { name: "thetagpu", gpus_per_node: 8, gpu_memory_gb: 40.0, peak_tflops: 312.0 },
    Machine { name: "frontier", gpus_per_node: 8, gpu_memory_gb: 64.0, peak_tflops: 191.5 },
    Machine { name: "alps", gpus_per_node: 4, gpu_memory_gb: 96.0, peak_tflops: 989.0 },
];

pub fn machine(name: &str) -> Option<&'static Machine> {
    MACHINES.iter().find(|m| m.name.eq_ignore_ascii_case(name.trim()))
}

/// Eqs. 7.2, 7.3: (expert, non-expert) parameters of a base model with `experts` experts on
/// every other layer.
pub fn split_params(np_base: f64, experts: f64) -> (f64, f64) {
    (experts / 3.0 * np_base, 2.0 / 3.0 * np_base)
}

/// TED's group sizes on `gpus` GPUs (eq. 7.1, 7.7): G_data^nonexp and G_data^exp.
pub fn data_groups(gpus: f64, g_tensor: f64, experts: f64) -> (f64, f64) {
    let nonexp = gpus / g_tensor;
    (nonexp, nonexp / experts)
}

/// Eq. 7.4: bytes per GPU under ZeRO-1, `(4 + 12/G_data^nonexp)·NP_gpu^nonexp +
/// (4 + 12/G_data^exp)·NP_gpu^exp`, with the parameters per GPU of each kind.
pub fn memory_per_gpu(np_base: f64, experts: f64, g_tensor: f64, gpus: f64) -> f64 {
    let (exp, nonexp) = split_params(np_base, experts);
    let (d_non, d_exp) = data_groups(gpus, g_tensor, experts);
    // Non-expert blocks are split by G_tensor, experts by G_tensor·G_expert (G_expert = E).
    let np_gpu_non = nonexp / g_tensor;
    let np_gpu_exp = exp / (g_tensor * experts);
    (4.0 + 12.0 / d_non) * np_gpu_non + (4.0 + 12.0 / d_exp) * np_gpu_exp
}

/// Eq. 7.5's right-hand side: `4·NP_base·(1/G_tensor + (E + 2)/G)`.
pub fn memory_bound(np_base: f64, experts: f64, g_tensor: f64, gpus: f64) -> f64 {
    4.0 * np_base * (1.0 / g_tensor + (experts + 2.0) / gpus)
}

/// The largest base model `m_gpu` bytes per GPU hold (eq. 7.5 solved for NP_base).
pub fn max_base_params(m_gpu: f64, experts: f64, g_tensor: f64, gpus: f64) -> f64 {
    m_gpu / (4.0 * (1.0 / g_tensor + (experts + 2.0) / gpus))
}

/// Eq. 7.6: the bound as G grows, `(G_tensor/4)·M_gpu`.
pub fn max_base_params_limit(m_gpu: f64, g_tensor: f64) -> f64 {
    g_tensor / 4.0 * m_gpu
}
