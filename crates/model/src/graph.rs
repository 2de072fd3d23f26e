//! An emulation of NCCL's topology search (`ncclTopoCompute`) on a
//! [`Cluster`]: per algorithm, how many channels and what per-channel
//! bandwidth NCCL would settle on. NCCL searches the real PCI/NVLink/NIC
//! graph; here the cluster's per-GPU intra-node bandwidth and per-NIC rate
//! stand for it, snapped to NCCL's speed ladders (`speedArrayIntra/Inter` and
//! their sm90/sm100 variants) and duplicated the way `ncclTopoDupChannels`
//! does. When a log prints the search results, use those instead
//! ([`crate::tuner::Graph`] from `SearchGraph`): they are exact. The
//! GPU-to-NIC path type, which decides whether NCCL enables LL128 across
//! nodes, follows the NIC's placement: under the GPU's PCIe switch
//! (rail-aligned: `PIX`), reached over NVLink through a peer GPU (`PXN`), or
//! behind the CPU (Grace superchips, unaligned NICs: `PHB`).

use commlens_core::LinkKind;

use crate::cluster::{Cluster, IntraFabric, LinkClass};
use crate::tuner::tables::N_ALGOS;
use crate::tuner::{CommShape, Graph};

const SPEED_INTRA: [f64; 13] = [40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0];
const SPEED_INTER: [f64; 19] =
    [48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12];
const SM90_SPEED_INTRA: [f64; 11] = [60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0];
const SM90_SPEED_INTER: [f64; 17] =
    [48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12];
const SM100_SPEED_INTRA: [f64; 11] = [90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0];
const SM100_SPEED_INTER: [f64; 18] =
    [96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12];
/// Channels one search may return (`MAXCHANNELS/2`).
const SEARCH_MAX_CHANNELS: u32 = 16;
/// `MAXCHANNELS`.
pub const MAX_CHANNELS: u32 = 32;

fn ladder(sm: u32, inter: bool) -> &'static [f64] {
    match (sm >= 100, sm >= 90, inter) {
        (true, _, false) => &SM100_SPEED_INTRA,
        (true, _, true) => &SM100_SPEED_INTER,
        (false, true, false) => &SM90_SPEED_INTRA,
        (false, true, true) => &SM90_SPEED_INTER,
        (false, false, false) => &SPEED_INTRA,
        (false, false, true) => &SPEED_INTER,
    }
}

/// Highest ladder speed not above `bw` (the slowest rung when none is).
fn snap(bw: f64, sm: u32, inter: bool) -> f64 {
    let l = ladder(sm, inter);
    l.iter().copied().find(|&s| s <= bw + 1e-9).unwrap_or(l[l.len() - 1])
}

/// The ladder rung and channel count that carry the most of `bw` GB/s.
fn best_fit(bw: f64, sm: u32) -> (f64, u32) {
    let mut best = (ladder(sm, false)[ladder(sm, false).len() - 1], 1u32);
    let mut best_total = 0.0;
    for &s in ladder(sm, false) {
        if s > bw + 1e-9 {
            continue;
        }
        let n = ((bw + 1e-9) / s).floor().clamp(1.0, SEARCH_MAX_CHANNELS as f64) as u32;
        let total = n as f64 * s;
        if total > best_total + 1e-9 {
            best_total = total;
            best = (s, n);
        }
    }
    best
}

/// Per-GPU intra-node bandwidth as NCCL's topology rates it, GB/s, and the path type.
pub fn nccl_intra_bw(c: &Cluster, local: u32) -> (f64, LinkKind, LinkClass) {
    let (nominal, class) = c.intra_gb_s(local);
    match class {
        LinkClass::NvLink => {
            // NCCL rates an NVLink below its nominal 25 GB/s (topo.h).
            let per_link_ratio = if c.gpu.nvlink_gb_s_per_link > 0.0 && c.gpu.nccl_nvlink_bw > 0.0 {
                c.gpu.nccl_nvlink_bw / c.gpu.nvlink_gb_s_per_link
            } else {
                0.8
            };
            (nominal * per_link_ratio, LinkKind::Nvl, class)
        }
        LinkClass::Pcie => (nominal, if c.intra.sockets > 1 && local > 2 { LinkKind::Phb } else { LinkKind::Pxb }, class),
        LinkClass::Sys => (nominal, LinkKind::Sys, class),
        LinkClass::Net => (nominal, LinkKind::Net, class),
    }
}

/// The search results and communicator shape for `nranks` ranks spread over `nnodes` nodes.
pub fn graphs_for(c: &Cluster, nranks: u32, nnodes: u32) -> (CommShape, [Option<Graph>; N_ALGOS]) {
    let nnodes = nnodes.clamp(1, nranks.max(1));
    let ppn = (nranks / nnodes).max(1);
    let sm = c.gpu.sm;
    let (intra_bw, type_intra, _) = if ppn > 1 { nccl_intra_bw(c, ppn) } else { (5000.0, LinkKind::Loc, LinkClass::NvLink) };
    let nvlink = type_intra == LinkKind::Nvl;

    let (mut nch, mut bw_intra, mut bw_inter, type_inter);
    if nnodes == 1 {
        // The search keeps the rung that fits the most bandwidth in at most
        // 16 channels (a higher rung wins a tie, as the search tries it first).
        let (speed, n) = best_fit(intra_bw, sm);
        nch = n;
        bw_intra = speed;
        bw_inter = speed;
        type_inter = LinkKind::Pix;
    } else {
        // One channel per NIC the node's ranks use; two when a NIC is fast enough.
        let nics = c.nics.per_node.min(ppn.max(1)).max(1);
        let nic = c.nics.nic_gb_s();
        let speed = snap(nic.min(intra_bw), sm, true);
        nch = nics;
        bw_inter = speed;
        bw_intra = speed;
        type_inter = if c.gpu.nic_behind_cpu() {
            LinkKind::Phb
        } else if c.nics.rail_aligned || ppn == 1 {
            LinkKind::Pix
        } else if sm >= 90 && nvlink {
            LinkKind::Pxn
        } else {
            LinkKind::Phb
        };
        // The intra-node part of the channels must fit too.
        while nch > 1 && nch as f64 * bw_intra > intra_bw * 1.001 {
            nch -= 1;
        }
    }
    // ncclTopoDupChannels: fast channels are split in two to use more SMs.
    let dup_ok = bw_intra >= 25.0 && !(sm >= 90 && bw_intra < 50.0 && nch > 4);
    if dup_ok && nch * 2 <= SEARCH_MAX_CHANNELS * 2 {
        nch *= 2;
        bw_intra /= 2.0;
        bw_inter /= 2.0;
    }
    let latency_inter = 0.0;
    let ring = Graph {
        pattern: 4,
        n_channels: nch,
        bw_intra,
        bw_inter,
        type_intra,
        type_inter,
        same_channels: true,
        latency_inter,
    };
    // Trees use each channel's links in both directions at once (up and down
    // trees), so a one-node tree search finds twice the ring's per-channel rate.
    let tree_intra = if nnodes == 1 { bw_intra * 2.0 } else { snap(intra_bw / nch as f64, sm, false).max(bw_inter) };
    let tree = Graph { pattern: 1, bw_intra: tree_intra, same_channels: false, ..ring.clone() };
    let mut graphs: [Option<Graph>; N_ALGOS] = Default::default();
    graphs[0] = Some(tree);
    graphs[1] = Some(ring.clone());
    graphs[6] = Some(ring.clone());
    let nvls_support = c.intra.nvls && c.intra.fabric == IntraFabric::NvSwitch && sm >= 90 && ppn > 1;
    let nvls_channels = if sm >= 100 { 24 } else { 16 };
    if nvls_support {
        // NVLS: one multicast object per channel; the switch reduces, so each GPU
        // moves its buffer once each way. Observed H100 NVLS AllReduce busbw is
        // ~480 GB/s on 8 GPUs: about 1.3× the NVLink rate NCCL assigns.
        let per_ch = intra_bw * 1.3 / nvls_channels as f64;
        let nvls = Graph {
            pattern: 5,
            n_channels: nvls_channels,
            bw_intra: per_ch,
            bw_inter: if nnodes > 1 { c.nics.nic_gb_s() * c.nics.per_node as f64 / nvls_channels as f64 } else { per_ch },
            type_intra: LinkKind::Nvl,
            type_inter,
            same_channels: true,
            latency_inter,
        };
        graphs[4] = Some(nvls.clone());
        graphs[5] = Some(Graph { pattern: 5, ..nvls });
    }
    let shape = CommShape {
        nranks,
        nnodes,
        min_sm: sm,
        max_sm: sm,
        cpu: c.cpu,
        nvls_support,
        collnet_support: false,
        nvs_count: if c.intra.fabric == IntraFabric::NvSwitch { 4 } else { 0 },
        n_channels: (nch * 2).min(MAX_CHANNELS),
        nvls_channels,
    };
    (shape, graphs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::{Predictor, DEFAULT_VERSION};
    use crate::presets::preset;
    use crate::tuner::NcclEnv;
    use commlens_core::{OpKind, Protocol};

    /// GH200 reaches its NICs through the Grace CPU (NCCL path PHB), so NCCL
    /// keeps LL128 off across nodes there; inside one node (NVLink only) and on
    /// a DGX H100 (NIC under the GPU's PCIe switch) it stays on.
    #[test]
    fn nic_behind_the_cpu_turns_ll128_off_across_nodes() {
        let gh = preset("gh200-slingshot").unwrap();
        let (_, g) = graphs_for(&gh, 16, 4);
        assert_eq!(g[1].as_ref().unwrap().type_inter, LinkKind::Phb);
        let ll128_used = |c: &crate::Cluster, ranks: u32, nodes: u32| {
            let p = Predictor::new(c, ranks, nodes, DEFAULT_VERSION, NcclEnv::default());
            (10..30).any(|e| p.predict(OpKind::AllReduce, 1u64 << e).proto == Some(Protocol::Ll128))
        };
        assert!(!ll128_used(&gh, 16, 4));
        assert!(ll128_used(&gh, 4, 1));
        let h100 = preset("dgx-h100").unwrap();
        assert_eq!(graphs_for(&h100, 16, 2).1[1].as_ref().unwrap().type_inter, LinkKind::Pix);
        assert!(ll128_used(&h100, 16, 2));
    }
}
