//! The seeds' alternative collective algorithms in closed α-β-γ form, timed on
//! the same [`Cluster`] as NCCL's model so the two can be compared: textbook
//! ring, recursive doubling / halving, Rabenseifner, binomial broadcast
//! (`bandwidth-and-cost-models.md` §4), PCCL's two-level AllGather /
//! ReduceScatter (Singh, ch. 6), NCCLX's host-driven Bruck and recursive
//! doubling, its low-latency AllToAll (LogP), and zero-copy versus copy-based
//! point-to-point (NCCLX §4.2).
//!
//! This module owns the parameters ([`AlphaBeta`]: α, β, γ of a job on a
//! cluster) and the formulas ([`alt_time_us`]). Conventions:
//! * `size` is the nccl-tests size: the buffer for AllReduce, Broadcast and
//!   Send/Recv; the whole output (AllGather) or input (ReduceScatter); a rank's
//!   whole send buffer for AllToAll (the table's `n`, the LogP `S`);
//! * α: 1 µs inside a node, `Cluster::net_latency_us` + 2 µs of software
//!   (verbs post and completion) across nodes; an algorithm spanning nodes
//!   pays the network α on every step;
//! * β: the slowest link class the algorithm crosses, at achieved bandwidth
//!   (nominal × `Cluster::eff`); intra-node per GPU as NCCL rates it (the
//!   Predictor's figure), network per node shared by the GPUs that drive it at
//!   once (AxoNN eq. 5.7: `β_inter / min(G_node, concurrent groups)`): a flat
//!   ring's channels use the whole node's NICs (1 group), every GPU of the node
//!   talks across at once in recursive doubling, Bruck and AllToAll (`ppn`
//!   groups), a lone sender gets its own NIC;
//! * γ: 3 HBM bytes touched per reduced byte; a copy touches 2.

use commlens_core::OpKind;
use serde::Serialize;

use crate::cluster::{Cluster, LinkClass};
use crate::graph::nccl_intra_bw;
use crate::predict::bus_factor;

/// Per-message latency between GPUs of a node (NVLink or PCIe, no launch), µs.
pub const ALPHA_INTRA_US: f64 = 1.0;
/// Software added to the wire latency of a network message (post + completion), µs.
pub const NET_SW_OVERHEAD_US: f64 = 2.0;
/// HBM bytes touched per reduced byte (read two operands, write one).
pub const HBM_BYTES_PER_REDUCED_BYTE: f64 = 3.0;
/// HBM bytes touched per copied byte.
pub const HBM_BYTES_PER_COPIED_BYTE: f64 = 2.0;
/// One host↔kernel synchronisation of a CTran collective ("always less than a microsecond"), µs.
pub const NCCLX_SYNC_US: f64 = 1.0;
/// Host work per step of a CTran host-driven algorithm (prepare and post the
/// step's RDMA, poll its completion), µs. Assumed: NCCLX gives no number.
pub const NCCLX_STEP_US: f64 = 2.0;
/// `T_c` of the low-latency AllToAll: per-peer preparation on the one CPU
/// thread after the paper's fixes (inlining, WR chaining), µs. Assumed.
pub const NCCLX_LL_PEER_US: f64 = 0.5;
/// Channels one point-to-point peer uses (`NCCL_NCHANNELS_PER_NET_PEER` default).
pub const P2P_CHANNELS_PER_PEER: f64 = 2.0;
/// `NCCL_P2P_NET_CHUNKSIZE` and `NCCL_P2P_NVL_CHUNKSIZE` defaults.
pub const P2P_NET_CHUNK: f64 = 131_072.0;
pub const P2P_NVL_CHUNK: f64 = 524_288.0;

/// An alternative algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum AltAlgo {
    /// Textbook ring (AllGather, ReduceScatter, AllReduce).
    AlphaBetaRing,
    /// Recursive doubling AllGather, recursive halving ReduceScatter,
    /// binomial-tree Broadcast (power-of-two ranks for AG/RS).
    RecursiveDoubling,
    /// Rabenseifner AllReduce: recursive-halving RS then recursive-doubling AG.
    Rabenseifner,
    /// PCCL: inter-node recursive doubling/halving on the M concurrent
    /// sub-communicators, intra-node ring, a local shuffle.
    PcclTwoLevel,
    /// NCCLX CTran host-driven Bruck AllGather (any rank count).
    NcclxBruck,
    /// NCCLX CTran host-driven recursive doubling AllGather and recursive
    /// vector-halving distance-doubling ReduceScatter.
    NcclxRecursiveDoubling,
    /// NCCLX low-latency host-driven AllToAll (LogP).
    NcclxLowLatencyAllToAll,
    /// CTran zero-copy Send/Recv: one handshake, one RDMA from user buffer to user buffer.
    ZeroCopyP2p,
    /// NCCL's copy-based Send/Recv through FIFO slots, chunk-pipelined.
    CopyP2p,
}

impl AltAlgo {
    pub const ALL: [AltAlgo; 9] = [
        AltAlgo::AlphaBetaRing,
        AltAlgo::RecursiveDoubling,
        AltAlgo::Rabenseifner,
        AltAlgo::PcclTwoLevel,
        AltAlgo::NcclxBruck,
        AltAlgo::NcclxRecursiveDoubling,
        AltAlgo::NcclxLowLatencyAllToAll,
        AltAlgo::ZeroCopyP2p,
        AltAlgo::CopyP2p,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AltAlgo::AlphaBetaRing => "ring-ab",
            AltAlgo::RecursiveDoubling => "rd",
            AltAlgo::Rabenseifner => "rabenseifner",
            AltAlgo::PcclTwoLevel => "pccl",
            AltAlgo::NcclxBruck => "ncclx-bruck",
            AltAlgo::NcclxRecursiveDoubling => "ncclx-rd",
            AltAlgo::NcclxLowLatencyAllToAll => "ncclx-a2a-ll",
            AltAlgo::ZeroCopyP2p => "zero-copy",
            AltAlgo::CopyP2p => "copy",
        }
    }

    /// Reads a name as users write it (case, `_` and spaces ignored).
    pub fn from_name(s: &str) -> Option<AltAlgo> {
        let k: String = s.trim().to_ascii_lowercase().chars().map(|c| if c == '_' || c == ' ' { '-' } else { c }).collect();
        Some(match k.as_str() {
            "ring-ab" | "ring" | "alpha-beta-ring" | "ab-ring" => AltAlgo::AlphaBetaRing,
            "rd" | "recursive-doubling" | "rh" | "recursive-halving" | "binomial" => AltAlgo::RecursiveDoubling,
            "rabenseifner" | "rab" => AltAlgo::Rabenseifner,
            "pccl" | "pccl-two-level" | "two-level" | "hierarchical" => AltAlgo::PcclTwoLevel,
            "ncclx-bruck" | "bruck" | "ctran-bruck" => AltAlgo::NcclxBruck,
            "ncclx-rd" | "ncclx-recursive-doubling" | "ctran-rd" => AltAlgo::NcclxRecursiveDoubling,
            "ncclx-a2a-ll" | "ncclx-alltoall-ll" | "ncclx-a2a" | "a2a-ll" => AltAlgo::NcclxLowLatencyAllToAll,
            "zero-copy" | "zerocopy" | "ctran-p2p" => AltAlgo::ZeroCopyP2p,
            "copy" | "copy-based" | "copy-p2p" => AltAlgo::CopyP2p,
            _ => return None,
        })
    }

    /// Whether the algorithm implements a collective (for some rank count).
    pub fn serves(self, kind: OpKind) -> bool {
        use OpKind::*;
        match self {
            AltAlgo::AlphaBetaRing => matches!(kind, AllGather | ReduceScatter | AllReduce),
            AltAlgo::RecursiveDoubling => matches!(kind, AllGather | ReduceScatter | Broadcast),
            AltAlgo::Rabenseifner => kind == AllReduce,
            AltAlgo::PcclTwoLevel | AltAlgo::NcclxRecursiveDoubling => matches!(kind, AllGather | ReduceScatter),
            AltAlgo::NcclxBruck => kind == AllGather,
            AltAlgo::NcclxLowLatencyAllToAll => kind == AllToAll,
            AltAlgo::ZeroCopyP2p | AltAlgo::CopyP2p => matches!(kind, Send | Recv | SendRecv),
        }
    }
}

/// α, β and γ of a job of `nranks` ranks over `nnodes` nodes of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AlphaBeta {
    pub nranks: u32,
    pub nnodes: u32,
    /// Ranks per node (rounded up).
    pub ppn: u32,
    pub alpha_intra_us: f64,
    pub alpha_inter_us: f64,
    /// Achieved per-GPU intra-node bandwidth, GB/s (infinite with one rank per node).
    pub intra_gb_s: f64,
    pub intra_class: LinkClass,
    /// Achieved network bandwidth of a node, GB/s.
    pub node_net_gb_s: f64,
    /// Achieved network bandwidth of one GPU sending alone (its NIC or NICs), GB/s.
    pub gpu_nic_gb_s: f64,
    /// NICs one GPU drives when its node's ranks split them (at least 1).
    pub nics_per_gpu: u32,
    pub hbm_gb_s: f64,
}

/// µs per byte at `gb_s` GB/s.
fn per_byte(gb_s: f64) -> f64 {
    if gb_s.is_finite() && gb_s > 0.0 {
        1.0 / (gb_s * 1e3)
    } else {
        0.0
    }
}

impl AlphaBeta {
    pub fn new(cluster: &Cluster, nranks: u32, nnodes: u32) -> AlphaBeta {
        let nranks = nranks.max(1);
        let nnodes = nnodes.clamp(1, nranks);
        let ppn = nranks.div_ceil(nnodes);
        let (intra_gb_s, intra_class) = if ppn > 1 {
            let (bw, _, class) = nccl_intra_bw(cluster, ppn);
            (bw * cluster.eff(class), class)
        } else {
            (f64::INFINITY, LinkClass::NvLink)
        };
        let node = cluster.node_net_gb_s(nnodes) * cluster.eff(LinkClass::Net);
        let nics = cluster.nics.per_node.max(1);
        AlphaBeta {
            nranks,
            nnodes,
            ppn,
            alpha_intra_us: ALPHA_INTRA_US,
            alpha_inter_us: cluster.net_latency_us(nnodes) + NET_SW_OVERHEAD_US,
            intra_gb_s,
            intra_class,
            node_net_gb_s: node,
            gpu_nic_gb_s: node / nics.min(ppn).max(1) as f64,
            nics_per_gpu: (nics / ppn).max(1),
            hbm_gb_s: cluster.gpu.hbm_gb_s,
        }
    }

    fn multi_node(&self) -> bool {
        self.nnodes > 1
    }

    /// α of a step of an algorithm spanning the whole job.
    pub fn alpha_us(&self) -> f64 {
        if self.multi_node() {
            self.alpha_inter_us
        } else {
            self.alpha_intra_us
        }
    }

    pub fn beta_intra(&self) -> f64 {
        if self.ppn > 1 {
            per_byte(self.intra_gb_s)
        } else {
            0.0
        }
    }

    /// Network β when `groups` GPUs of a node drive the network at once (eq. 5.7).
    pub fn beta_net(&self, groups: u32) -> f64 {
        per_byte(self.node_net_gb_s / groups.clamp(1, self.ppn) as f64)
    }

    /// β of the slowest link class for an algorithm spanning the job with
    /// `groups` concurrent network senders per node.
    pub fn beta(&self, groups: u32) -> f64 {
        let net = if self.multi_node() { self.beta_net(groups) } else { 0.0 };
        self.beta_intra().max(net)
    }

    /// β of one GPU sending alone (point-to-point, a binomial tree's sender).
    pub fn beta_single(&self) -> f64 {
        if self.multi_node() {
            self.beta_intra().max(per_byte(self.gpu_nic_gb_s))
        } else {
            self.beta_intra()
        }
    }

    /// γ: µs per reduced byte.
    pub fn gamma(&self) -> f64 {
        HBM_BYTES_PER_REDUCED_BYTE * per_byte(self.hbm_gb_s)
    }

    /// µs per byte of a local copy (shuffle, rotation, FIFO staging).
    pub fn copy(&self) -> f64 {
        HBM_BYTES_PER_COPIED_BYTE * per_byte(self.hbm_gb_s)
    }
}

/// One alternative algorithm's time for a call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AltPrediction {
    pub algo: AltAlgo,
    pub kind: OpKind,
    pub size_bytes: u64,
    pub nranks: u32,
    pub nnodes: u32,
    pub time_us: f64,
    pub algbw_gb_s: f64,
    pub busbw_gb_s: f64,
    /// The closed form used.
    pub formula: &'static str,
}

fn log2_ceil(p: u32) -> f64 {
    if p <= 1 {
        0.0
    } else {
        (32 - (p - 1).leading_zeros()) as f64
    }
}

/// Time of `algo` for a `kind` call of nccl-tests `size_bytes` over `nranks`
/// ranks on `nnodes` nodes; `None` when the algorithm does not implement the
/// collective (or needs a power-of-two rank count it does not have).
pub fn alt_time_us(algo: AltAlgo, kind: OpKind, size_bytes: u64, nranks: u32, nnodes: u32, cluster: &Cluster) -> Option<AltPrediction> {
    if !algo.serves(kind) {
        return None;
    }
    let ab = AlphaBeta::new(cluster, nranks, nnodes);
    let (time_us, formula) = time(algo, kind, size_bytes as f64, &ab)?;
    let algbw = if time_us > 0.0 { size_bytes as f64 / (time_us * 1e3) } else { 0.0 };
    Some(AltPrediction {
        algo,
        kind,
        size_bytes,
        nranks: ab.nranks,
        nnodes: ab.nnodes,
        time_us,
        algbw_gb_s: algbw,
        busbw_gb_s: algbw * bus_factor(kind, ab.nranks),
        formula,
    })
}

/// Every alternative that implements the call, fastest first.
pub fn compare(kind: OpKind, size_bytes: u64, nranks: u32, nnodes: u32, cluster: &Cluster) -> Vec<AltPrediction> {
    let mut v: Vec<AltPrediction> =
        AltAlgo::ALL.iter().filter_map(|&a| alt_time_us(a, kind, size_bytes, nranks, nnodes, cluster)).collect();
    v.sort_by(|a, b| a.time_us.total_cmp(&b.time_us));
    v
}

fn time(algo: AltAlgo, kind: OpKind, n: f64, ab: &AlphaBeta) -> Option<(f64, &'static str)> {
    let pu = ab.nranks;
    let p = pu as f64;
    let f = (p - 1.0) / p;
    let a = ab.alpha_us();
    let lg = log2_ceil(pu);
    let pow2 = pu.is_power_of_two();
    let g = ab.gamma();
    let all = ab.ppn; // every GPU of a node crosses at once
    let host = 2.0 * NCCLX_SYNC_US;
    use OpKind::*;
    Some(match (algo, kind) {
        (AltAlgo::AlphaBetaRing, AllGather) => ((p - 1.0) * a + f * n * ab.beta(1), "(p−1)α + (p−1)/p·n·β"),
        (AltAlgo::AlphaBetaRing, ReduceScatter) => ((p - 1.0) * a + f * n * (ab.beta(1) + g), "(p−1)α + (p−1)/p·n·(β+γ)"),
        (AltAlgo::AlphaBetaRing, AllReduce) => {
            (2.0 * (p - 1.0) * a + 2.0 * f * n * ab.beta(1) + f * n * g, "2(p−1)α + 2(p−1)/p·n·β + (p−1)/p·n·γ")
        }
        (AltAlgo::RecursiveDoubling, AllGather) if pow2 => (lg * a + f * n * ab.beta(all), "log₂p·α + (p−1)/p·n·β"),
        (AltAlgo::RecursiveDoubling, ReduceScatter) if pow2 => {
            (lg * a + f * n * (ab.beta(all) + g), "log₂p·α + (p−1)/p·n·(β+γ) (recursive halving)")
        }
        (AltAlgo::RecursiveDoubling, Broadcast) => (lg * (a + n * ab.beta_single()), "⌈log₂p⌉·(α + n·β) (binomial tree)"),
        (AltAlgo::Rabenseifner, AllReduce) if pow2 => {
            (2.0 * lg * a + 2.0 * f * n * ab.beta(all) + f * n * g, "2·log₂p·α + 2(p−1)/p·n·β + (p−1)/p·n·γ")
        }
        (AltAlgo::PcclTwoLevel, AllGather | ReduceScatter) => pccl(kind, n, ab),
        (AltAlgo::NcclxBruck, AllGather) => (
            host + lg * (a + NCCLX_STEP_US) + f * n * ab.beta(all) + n * ab.copy(),
            "2·sync + ⌈log₂p⌉(α + T_step) + (p−1)/p·n·β + n·δ (rotation)",
        ),
        (AltAlgo::NcclxRecursiveDoubling, AllGather) if pow2 => {
            (host + lg * (a + NCCLX_STEP_US) + f * n * ab.beta(all), "2·sync + log₂p(α + T_step) + (p−1)/p·n·β")
        }
        (AltAlgo::NcclxRecursiveDoubling, ReduceScatter) if pow2 => (
            host + lg * (a + NCCLX_STEP_US) + f * n * (ab.beta(all) + g),
            "2·sync + log₂p(α + T_step) + (p−1)/p·n·(β+γ)",
        ),
        (AltAlgo::NcclxLowLatencyAllToAll, AllToAll) => {
            (host + a + NCCLX_LL_PEER_US * (p - 1.0) + n * ab.beta(all), "2·sync + α + T_c·(N−1) + S/BW")
        }
        (AltAlgo::ZeroCopyP2p, Send | Recv | SendRecv) => (2.0 * a + n * ab.beta_single(), "2α + n·β (handshake + one RDMA)"),
        (AltAlgo::CopyP2p, Send | Recv | SendRecv) => (copy_p2p(n, ab), "α + 2·c·δ + c·β + (k−1)·(max(c·β, c·δ) + α/ch)"),
        _ => return None,
    })
}

/// PCCL two-level AllGather (inter-node on M concurrent sub-communicators of
/// N ranks with n/M bytes, then intra-node ring over M with n bytes, then a
/// local shuffle) or ReduceScatter (the same in reverse, with reductions).
/// Inter-node: recursive doubling/halving when N is a power of two, else ring.
fn pccl(kind: OpKind, n: f64, ab: &AlphaBeta) -> (f64, &'static str) {
    let (nn, m) = (ab.nnodes, ab.ppn);
    let (nf, mf) = (nn as f64, m as f64);
    let rs = kind == OpKind::ReduceScatter;
    let g = if rs { ab.gamma() } else { 0.0 };
    let intra = if m > 1 { (mf - 1.0) * ab.alpha_intra_us + (mf - 1.0) / mf * n * (ab.beta_intra() + g) } else { 0.0 };
    if nn == 1 {
        return (intra, "intra-node ring: (M−1)α + (M−1)/M·n·β");
    }
    let steps = if nn.is_power_of_two() { log2_ceil(nn) } else { nf - 1.0 };
    let inter = steps * ab.alpha_inter_us + (nf - 1.0) / nf * (n / mf) * (ab.beta_net(m) + g);
    let shuffle = if m > 1 { n * ab.copy() } else { 0.0 };
    let label = if rs {
        "ring RS(M, n) + RH RS(N, n/M) at β_inter·M (eq. 5.7) + n·δ shuffle"
    } else {
        "RD AG(N, n/M) at β_inter·M (eq. 5.7) + ring AG(M, n) + n·δ shuffle"
    };
    (intra + inter + shuffle, label)
}

/// Copy-based point-to-point: chunks of `c` bytes staged through FIFO slots
/// (a copy in on the sender, a copy out on the receiver: the extra HBM
/// passes), pipelined, with the clear-to-send of every chunk on the critical
/// path, overlapped across the peer's channels (`P2P_CHANNELS_PER_PEER` per
/// NIC the GPU drives).
fn copy_p2p(n: f64, ab: &AlphaBeta) -> f64 {
    let a = ab.alpha_us();
    if n <= 0.0 {
        return a;
    }
    let (c, nics) = if ab.multi_node() { (P2P_NET_CHUNK, ab.nics_per_gpu as f64) } else { (P2P_NVL_CHUNK, 1.0) };
    let c = c.min(n);
    let k = (n / c).ceil();
    let (tw, tc) = (c * ab.beta_single(), c * ab.copy());
    let tau = tw.max(tc) + a / (P2P_CHANNELS_PER_PEER * nics);
    a + 2.0 * tc + tw + (k - 1.0) * tau
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{CpuVendor, Efficiency, IntraFabric, IntraNode, NetTech, Network, NetworkShape, Nics};
    use crate::gpu::GpuSpec;
    use crate::predict::{Predictor, DEFAULT_VERSION};
    use crate::presets::preset;
    use crate::tuner::NcclEnv;

    /// 2 nodes × 4 GPUs. NVLink 4 × 25 GB/s rated by NCCL at 20 per link: 80
    /// GB/s × 0.8 = 64 GB/s per GPU. Two 200 Gb/s NICs: 50 GB/s × 0.8 = 40
    /// GB/s per node, 20 per NIC. Network α = 2 µs + 2 µs software = 4 µs.
    /// HBM 1500 GB/s: γ = 3/1.5e6 = 2e-6 µs/B, δ = 2/1.5e6 µs/B.
    fn tiny(nic_gbit: f64) -> Cluster {
        let gpu = GpuSpec {
            name: "T",
            sm: 80,
            nvlink_links: 4,
            nvlink_gb_s_per_link: 25.0,
            nccl_nvlink_bw: 20.0,
            pcie_gen: 4,
            memory_gib: 40.0,
            peak_tflops_bf16: 100.0,
            hbm_gb_s: 1500.0,
            peak_tflops_fp32: 10.0,
            peak_tflops_tf32: 50.0,
            peak_tflops_fp8: 0.0,
        };
        Cluster {
            name: "tiny".into(),
            nodes: 2,
            gpus_per_node: 4,
            gpu,
            intra: IntraNode { fabric: IntraFabric::NvSwitch, nvlink_gb_s: 100.0, nvls: false, nvlink_domain: 4, pcie_gb_s: 24.0, sockets: 1, sys_gb_s: 20.0 },
            nics: Nics { per_node: 2, gbit_s: nic_gbit, tech: NetTech::InfiniBand, rail_aligned: true },
            network: Network { shape: NetworkShape::RailFatTree, oversubscription: 1.0, nodes_per_leaf: 8, latency_us: 2.0, hop_latency_us: 0.5 },
            cpu: CpuVendor::Intel,
            efficiency: Efficiency { nvlink: 0.8, pcie: 0.8, sys: 0.8, net: 0.8, ..Efficiency::default() },
            provenance: vec![],
        }
    }

    fn t(algo: AltAlgo, kind: OpKind, size: u64, p: u32, nodes: u32) -> f64 {
        alt_time_us(algo, kind, size, p, nodes, &tiny(200.0)).unwrap().time_us
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
    }

    #[test]
    fn parameters_of_the_tiny_cluster() {
        let ab = AlphaBeta::new(&tiny(200.0), 8, 2);
        close(ab.intra_gb_s, 64.0);
        close(ab.node_net_gb_s, 40.0);
        close(ab.gpu_nic_gb_s, 20.0);
        close(ab.alpha_inter_us, 4.0);
        close(ab.beta(1), 1.0 / 40_000.0);
        close(ab.beta(4), 1.0 / 10_000.0);
        close(ab.gamma(), 2e-6);
    }

    #[test]
    fn every_formula_by_hand_on_two_nodes_of_four() {
        use AltAlgo::*;
        use OpKind::*;
        let n = 8_000_000u64; // 8 MB; p = 8; (p−1)/p·n = 7e6
        // Ring: 7 steps × 4 µs; 7e6 B at 40 GB/s (one ring per node: the whole NIC set).
        close(t(AlphaBetaRing, AllGather, n, 8, 2), 28.0 + 175.0);
        close(t(AlphaBetaRing, ReduceScatter, n, 8, 2), 28.0 + 175.0 + 7e6 * 2e-6);
        close(t(AlphaBetaRing, AllReduce, n, 8, 2), 56.0 + 350.0 + 14.0);
        // Recursive doubling / halving: 3 steps × 4 µs; the 4 GPUs of a node share 40 GB/s.
        close(t(RecursiveDoubling, AllGather, n, 8, 2), 12.0 + 700.0);
        close(t(RecursiveDoubling, ReduceScatter, n, 8, 2), 12.0 + 700.0 + 14.0);
        close(t(Rabenseifner, AllReduce, n, 8, 2), 24.0 + 1400.0 + 14.0);
        // Binomial broadcast: 3 × (4 µs + 8e6 B on one 20 GB/s NIC).
        close(t(RecursiveDoubling, Broadcast, n, 8, 2), 3.0 * (4.0 + 400.0));
        // PCCL AG: inter RD over N = 2 on n/M = 2e6 B, 4 concurrent sub-communicators
        // (10 GB/s each): 4 + ½·2e6/1e4 = 104; intra ring over 4: 3·1 + ¾·8e6/64e3 = 96.75;
        // shuffle 8e6 × 2/1.5e6.
        let shuffle = 8e6 * 2.0 / 1.5e6;
        close(t(PcclTwoLevel, AllGather, n, 8, 2), 104.0 + 96.75 + shuffle);
        // PCCL RS: intra 3 + 6e6·(1/64e3 + 2e-6) = 108.75; inter 4 + 1e6·(1e-4 + 2e-6) = 106.
        close(t(PcclTwoLevel, ReduceScatter, n, 8, 2), 108.75 + 106.0 + shuffle);
        // NCCLX: 2 syncs of 1 µs, 3 steps × (4 + 2 µs of host work).
        close(t(NcclxBruck, AllGather, n, 8, 2), 2.0 + 18.0 + 700.0 + shuffle);
        close(t(NcclxRecursiveDoubling, AllGather, n, 8, 2), 2.0 + 18.0 + 700.0);
        close(t(NcclxRecursiveDoubling, ReduceScatter, n, 8, 2), 2.0 + 18.0 + 700.0 + 14.0);
        // LogP AllToAll: 2 + α 4 + T_c 0.5 × 7 peers + S 8e6 B at 10 GB/s per GPU.
        close(t(NcclxLowLatencyAllToAll, AllToAll, n, 8, 2), 2.0 + 4.0 + 3.5 + 800.0);
        // Zero-copy: handshake + data α, 8e6 B on one 20 GB/s NIC.
        close(t(ZeroCopyP2p, SendRecv, n, 8, 2), 8.0 + 400.0);
        // Copy-based: 62 chunks of 131072 B; wire 6.5536 µs, staging copy 0.174763 µs,
        // per-chunk interval 6.5536 + 4/2 µs.
        let (tw, tc) = (131_072.0 / 20_000.0, 131_072.0 * 2.0 / 1.5e6);
        close(t(CopyP2p, Send, n, 8, 2), 4.0 + 2.0 * tc + tw + 61.0 * (tw + 2.0));
        // One node of 4: α = 1 µs, β = 1/64e3.
        close(t(AlphaBetaRing, AllGather, n, 4, 1), 3.0 + 0.75 * 8e6 / 64e3);
        close(t(PcclTwoLevel, AllGather, n, 4, 1), 3.0 + 0.75 * 8e6 / 64e3);
        close(t(ZeroCopyP2p, Send, n, 4, 1), 2.0 + 8e6 / 64e3);
    }

    #[test]
    fn names_round_trip_and_coverage() {
        for a in AltAlgo::ALL {
            assert_eq!(AltAlgo::from_name(a.name()), Some(a));
            assert!(OpKind::ALL.iter().any(|&k| a.serves(k)));
        }
        assert_eq!(AltAlgo::from_name("PCCL"), Some(AltAlgo::PcclTwoLevel));
        assert_eq!(AltAlgo::from_name("ncclx_bruck"), Some(AltAlgo::NcclxBruck));
        assert_eq!(AltAlgo::from_name("zero-copy"), Some(AltAlgo::ZeroCopyP2p));
        assert!(AltAlgo::from_name("nope").is_none());
        let c = tiny(200.0);
        assert!(alt_time_us(AltAlgo::Rabenseifner, OpKind::AllGather, 1 << 20, 8, 2, &c).is_none());
        assert!(alt_time_us(AltAlgo::NcclxLowLatencyAllToAll, OpKind::AllReduce, 1 << 20, 8, 2, &c).is_none());
    }

    #[test]
    fn bruck_takes_any_rank_count_recursive_doubling_does_not() {
        let c = preset("dgx-h100").unwrap();
        for (p, nodes) in [(6u32, 2u32), (12, 3), (24, 3), (7, 1)] {
            let b = alt_time_us(AltAlgo::NcclxBruck, OpKind::AllGather, 1 << 20, p, nodes, &c).unwrap();
            assert!(b.time_us > 0.0 && b.formula.contains("log"));
            assert!(alt_time_us(AltAlgo::RecursiveDoubling, OpKind::AllGather, 1 << 20, p, nodes, &c).is_none());
            assert!(alt_time_us(AltAlgo::NcclxRecursiveDoubling, OpKind::AllGather, 1 << 20, p, nodes, &c).is_none());
        }
        // ⌈log₂6⌉ = 3 steps: one more than 4 ranks, as many as 8.
        let steps = |p| {
            let t = alt_time_us(AltAlgo::NcclxBruck, OpKind::AllGather, 0, p, 1, &c).unwrap().time_us;
            (t - 2.0 * NCCLX_SYNC_US) / (ALPHA_INTRA_US + NCCLX_STEP_US)
        };
        close(steps(6), 3.0);
        close(steps(4), 2.0);
        close(steps(8), 3.0);
    }

    #[test]
    fn crossovers_the_dissertation_states() {
        let c = preset("dgx-h100").unwrap();
        let ag = |a, size, p, nodes| alt_time_us(a, OpKind::AllGather, size, p, nodes, &c).unwrap().time_us;
        use AltAlgo::*;
        // Inter-node, few processes: RD wins small messages, ring wins large (bandwidth-bound).
        assert!(ag(RecursiveDoubling, 64 << 10, 16, 2) < ag(AlphaBetaRing, 64 << 10, 16, 2));
        assert!(ag(AlphaBetaRing, 256 << 20, 16, 2) < ag(RecursiveDoubling, 256 << 20, 16, 2));
        // Many processes: RD wins even at 64 MiB (latency-bound: 2047 ring steps).
        assert!(ag(RecursiveDoubling, 64 << 20, 2048, 256) < ag(AlphaBetaRing, 64 << 20, 2048, 256));
        // PCCL (Fig. 6.6 and B.9): ring beats the hierarchy at 32 GPUs with 1 GiB ...
        assert!(ag(AlphaBetaRing, 1 << 30, 32, 4) < ag(PcclTwoLevel, 1 << 30, 32, 4));
        // ... and the hierarchy wins by an order of magnitude at 2048 GPUs with 16–64 MiB.
        for size in [16u64 << 20, 64 << 20] {
            assert!(ag(AlphaBetaRing, size, 2048, 256) > 10.0 * ag(PcclTwoLevel, size, 2048, 256));
        }
        // RS mirrors AG.
        let rs = |a, size, p, nodes| alt_time_us(a, OpKind::ReduceScatter, size, p, nodes, &c).unwrap().time_us;
        assert!(rs(PcclTwoLevel, 16 << 20, 2048, 256) < rs(AlphaBetaRing, 16 << 20, 2048, 256));
    }

    #[test]
    fn copy_based_p2p_costs_up_to_about_twice_cross_host() {
        let c = preset("dgx-h100").unwrap();
        let p2p = |a, size, p, nodes| alt_time_us(a, OpKind::SendRecv, size, p, nodes, &c).unwrap().time_us;
        // 8 or 2 GPUs per node (one or four NICs per GPU).
        for (p, nodes) in [(16u32, 2u32), (4, 2)] {
            for size in [8u64 << 20, 64 << 20, 512 << 20] {
                let ratio = p2p(AltAlgo::CopyP2p, size, p, nodes) / p2p(AltAlgo::ZeroCopyP2p, size, p, nodes);
                assert!((1.3..=2.2).contains(&ratio), "cross-host {p}/{nodes} {size}: {ratio}");
                let intra = p2p(AltAlgo::CopyP2p, size, 8, 1) / p2p(AltAlgo::ZeroCopyP2p, size, 8, 1);
                assert!(intra < ratio, "the staging copy matters less inside a node: {intra}");
            }
        }
        // Small messages: no handshake, the copy-based path is the faster one.
        assert!(p2p(AltAlgo::CopyP2p, 4096, 16, 2) < p2p(AltAlgo::ZeroCopyP2p, 4096, 16, 2));
    }

    #[test]
    fn busbw_never_exceeds_the_clusters_bottleneck() {
        let clusters = [(tiny(200.0), 4u32), (preset("dgx-h100").unwrap(), 8), (preset("dgx-a100").unwrap(), 8), (preset("pcie-a100").unwrap(), 8)];
        for (c, gpn) in &clusters {
            for nodes in [1u32, 2, 4, 16] {
                let p = gpn * nodes;
                let pred = Predictor::new(&c.with_nodes(nodes), p, nodes, DEFAULT_VERSION, NcclEnv::default());
                for kind in OpKind::ALL {
                    let (ceiling, _) = pred.ceiling_algbw(kind, None);
                    for size in [1u64 << 10, 1 << 20, 64 << 20, 4 << 30] {
                        for a in compare(kind, size, p, nodes, c) {
                            assert!(a.algbw_gb_s <= ceiling * (1.0 + 1e-9), "{} {kind:?} {size} on {} × {nodes}: {} > {ceiling}", a.algo.name(), c.name, a.algbw_gb_s);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_hierarchy_can_beat_the_flat_ring_bound_but_not_the_links() {
        // 2 nodes with one 25 Gb/s NIC each side (2 × 25G: 5 GB/s per node):
        // the flat-ring bound charges (p−1)/p of the output to the network,
        // PCCL only (N−1)/N of it; each node must still receive (N−1)/N·n.
        let c = tiny(25.0);
        let pred = Predictor::new(&c, 8, 2, DEFAULT_VERSION, NcclEnv::default());
        let (ring_bound, _) = pred.ceiling_algbw(OpKind::AllGather, None);
        let a = alt_time_us(AltAlgo::PcclTwoLevel, OpKind::AllGather, 1 << 30, 8, 2, &c).unwrap();
        assert!(a.algbw_gb_s > ring_bound);
        let ab = AlphaBeta::new(&c, 8, 2);
        assert!(a.algbw_gb_s <= ab.node_net_gb_s * 2.0);
    }
}
