//! How long each generated step takes: the simulator's models on the cluster the generated
//! run describes.
//!
//! Owns [`cluster`] (the `commlens_model::Cluster` that the generator's topology dump, network
//! lines and trace device names describe) and [`Timing`], which times every step with the
//! very functions `commlens-sim` (and through it `commlens-plan`) time them with: compute steps
//! by `commlens_sim::compute::Roofline` (BF16, the workload's stated time when it has one, as
//! the engine does) and collectives and Send/Recv by `commlens_sim::analytical::ModelCache`
//! (the `commlens_model::Predictor` time of the call, NCCL's bytes turned into nccl-tests'
//! size, Send/Recv as one Send between two ranks). One cluster type, one collective model, one
//! workload model: a generated run and a simulated one of the same program differ only by
//! what the generator adds on purpose (CPU gaps, jitter, connection setup, slowdowns, waits
//! of a strictly serial per-rank clock).

use crate::config::{NcclVersion, RunConfig};
use crate::topo;
use commlens_core::OpKind;
use commlens_model::cluster::{CpuVendor, IntraFabric, NetTech};
use commlens_model::gpu::{gpu_by_name, pcie_x16_gb_s, Precision};
use commlens_model::graph::nccl_intra_bw;
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;
use commlens_model::Cluster;
use commlens_sim::analytical::ModelCache;
use commlens_sim::compute::{ComputeCost, Roofline};
use commlens_workload::Compute;

/// The GPU the generated traces name (`traces::kineto_writer`, `traces::nsys_writer`).
const GPU: &str = "NVIDIA A100-SXM4-80GB";

/// The cluster a generated run ran on, as its files describe it: `cfg.nodes()` nodes of
/// `cfg.gpus_per_node` A100-SXM4 GPUs, NVLink between them (a pair, a mesh of 3–4, an
/// NVSwitch beyond 4), PCIe gen4, one socket per 4 GPUs, one 200 Gbit/s InfiniBand NIC per
/// node behind the CPU (not rail-aligned); what the files do not tell (network shape,
/// latencies, efficiencies) is the `dgx-a100` preset's. This is the cluster `commlens cluster
/// show` derives from the generated logs and traces (`tests/cluster.rs`): the NVLink figure is
/// a GPU's links to all its peers (12 × 25 GB/s); on a mesh the collective model gives a
/// communicator the share of them that joins its own GPUs (`commlens_model::mesh`), and the
/// logged graph search says the same (`init`'s `Pattern` lines, from [`Timing::ring_bw`]).
pub fn cluster(cfg: &RunConfig) -> Cluster {
    let mut c = preset("dgx-a100").expect("a built-in preset");
    let gpu = gpu_by_name(GPU).expect("a known GPU").clone();
    let gpn = cfg.gpus_per_node.max(1);
    c.name = "commlens-synth".to_string();
    c.nodes = cfg.nodes().max(1) as u32;
    c.gpus_per_node = gpn as u32;
    // What a GPU's NVLinks carry in the dump (`NVL[..]` summed over its peers), back in nominal
    // GB/s (× 25 / 20 on SM80).
    let nccl_nvlink = (gpn > 1).then(|| topo::gpu_nvlink_bw(gpn));
    // Two GPUs joined to each other alone are NVLink pairs to `from_run`, as to NCCL.
    c.intra.fabric = match gpn {
        2 => IntraFabric::NvLinkPairs,
        3..=4 => IntraFabric::NvLinkMesh,
        _ if gpn > 4 => IntraFabric::NvSwitch,
        _ => IntraFabric::Pcie,
    };
    c.intra.nvlink_gb_s = nccl_nvlink.map_or(0.0, |bw| bw * gpu.nvlink_gb_s_per_link / gpu.nccl_nvlink_bw);
    c.intra.nvlink_domain = if nccl_nvlink.is_some() { gpn as u32 } else { 1 };
    c.intra.nvls = false;
    c.intra.pcie_gb_s = pcie_x16_gb_s(4);
    debug_assert_eq!(c.intra.pcie_gb_s, topo::PCI_BW);
    c.intra.sockets = gpn.div_ceil(4) as u32;
    c.nics.per_node = 1;
    c.nics.gbit_s = topo::NET_BW * 8.0;
    c.nics.tech = NetTech::InfiniBand;
    c.nics.rail_aligned = false;
    c.cpu = CpuVendor::Intel;
    c.provenance = vec!["the topology commlens-synth writes (A100-SXM4 nodes, one 200 Gbit/s InfiniBand NIC each)".to_string()];
    c.gpu = gpu;
    c
}

/// The step durations of one generated run (see the module notes).
pub(crate) struct Timing {
    roofline: Roofline,
    network: ModelCache,
    cluster: Cluster,
}

impl Timing {
    pub(crate) fn new(cfg: &RunConfig, version: NcclVersion) -> Timing {
        let c = cluster(cfg);
        Timing { roofline: Roofline::new(&c.gpu, Precision::Bf16), network: ModelCache::new(&c, version, NcclEnv::default()), cluster: c }
    }

    /// The bandwidth NCCL rates the rings of a communicator with `local` GPUs on a node, GB/s
    /// (NCCL's units, as its graph search logs them): the collective model's
    /// (`commlens_model::graph::nccl_intra_bw`), so the logged search and the timing agree.
    pub(crate) fn ring_bw(&self, local: usize) -> f64 {
        if local > 1 {
            nccl_intra_bw(&self.cluster, local as u32).0
        } else {
            topo::PCI_BW
        }
    }

    /// GPU time of a compute step, µs (the simulator's compute model).
    pub(crate) fn compute_us(&self, c: &Compute) -> f64 {
        self.roofline.time_us(c)
    }

    /// GPU time of a collective, or of one Send/Recv (`kind` Send or Recv, `nranks` 2), with
    /// NCCL's `bytes` over members on `nnodes` nodes, alone on its links, µs.
    pub(crate) fn transfer_us(&mut self, kind: OpKind, bytes: u64, nranks: usize, nnodes: usize) -> f64 {
        self.network.timing(kind, bytes, nranks as u32, nnodes as u32).total_us
    }
}
