//! NVLink mesh wiring: which GPUs of an [`IntraFabric::NvLinkMesh`] node an NVLink joins,
//! what share of a GPU's NVLink bandwidth each pair gets, and what share a ring over the
//! first `local` GPUs of the node can use. `Cluster::intra_gb_s` (and through it NCCL's
//! emulated search, the predictor, the planner and the generator) and the flow simulator's
//! link graph (`commlens-sim`'s `flow::topology`) both take the mesh from here, so a
//! communicator's modelled rate and its simulated links agree.
//!
//! Without an NVSwitch a GPU's NVLinks are wired to its peers directly, so a communicator
//! that holds only some of a node's GPUs cannot use the links to the others:
//! * full mesh (every pair joined; GH200 quads, 4-GPU HGX A100, DGX Station): a GPU's links
//!   are split evenly among its `g − 1` peers, and a communicator of `local` GPUs reaches
//!   `local − 1` of them, so its rings (NCCL lays its channels over several ring orders)
//!   carry `(local − 1)/(g − 1)` of the GPU's NVLink bandwidth;
//! * DGX-1 hybrid cube-mesh (8 V100, 6 NVLink2 links each, not every pair joined; told
//!   apart from a full mesh by having more peers than links): the wiring of `nvidia-smi
//!   topo -m` on a DGX-1V, and ring shares worked out on it for the first `local` GPUs.

use crate::cluster::{Cluster, IntraFabric};

/// NVLinks between local GPUs `a` and `b` of a DGX-1V (`nvidia-smi topo -m`: NV1/NV2; each
/// GPU has 6: two quads 0–3 and 4–7 joined inside, and GPU `i` to GPU `i ± 4`; e.g. GPU 0 to
/// GPUs 3 and 4 by two links, to 1 and 2 by one, none to 5–7, as NVIDIA's DGX-1 white paper
/// and cloud providers' topology pages draw it).
const DGX1_LINKS: [[u8; 8]; 8] = [
    [0, 1, 1, 2, 2, 0, 0, 0],
    [1, 0, 2, 1, 0, 2, 0, 0],
    [1, 2, 0, 2, 0, 0, 1, 0],
    [2, 1, 2, 0, 0, 0, 0, 1],
    [2, 0, 0, 0, 0, 1, 1, 2],
    [0, 2, 0, 0, 1, 0, 2, 1],
    [0, 0, 1, 0, 1, 2, 0, 2],
    [0, 0, 0, 1, 2, 1, 2, 0],
];

/// Links per GPU a ring over GPUs `0..local` of a DGX-1V can fill, out of 6 (index: `local`),
/// worked out as the best packing of NVLink ring orders (each run both ways) on the wiring:
/// 2 GPUs share 1 link; 3 GPUs: ring 0-1-2 both ways, 1 link each way (2); 4 GPUs: rings
/// 0-1-2-3 and 0-3-1-2 both ways (4, GPU 0's links inside the quad); 5 GPUs: GPU 4 reaches
/// only GPU 0 over NVLink, so no NVLink ring (PCIe/SYS); 6 GPUs: every ring passes the single
/// link 4-5 (GPUs 4 and 5 have no other peer but 0 and 1) (2); 7 GPUs: rings 0-4-5-6-2-1-3
/// and 0-4-6-5-1-2-3 both ways (4, all of GPU 4's links); 8 GPUs: rings 0-1-2-6-5-4-7-3,
/// 0-4-6-7-5-1-3-2 and 0-3-2-1-5-6-7-4 both ways use every link once each way (6).
const DGX1_RING_LINKS: [u8; 9] = [0, 0, 1, 2, 4, 0, 2, 4, 6];

/// The kind of NVLink mesh a cluster describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mesh {
    /// Every pair of the node's GPUs joined by an equal share of each GPU's links.
    Full,
    /// DGX-1 hybrid cube-mesh: 8 GPUs of 6 links, wired as [`DGX1_LINKS`].
    HybridCubeMesh,
}

/// The mesh of `c`, `None` when its node is not an NVLink mesh.
pub fn mesh(c: &Cluster) -> Option<Mesh> {
    if c.intra.fabric != IntraFabric::NvLinkMesh || c.intra.nvlink_gb_s <= 0.0 {
        return None;
    }
    // More peers than links: not every pair can be joined. The only such node shipped is
    // the DGX-1 (8 GPUs, 6 links each); any other is treated as a full mesh.
    let links = c.gpu.nvlink_links;
    if c.gpus_per_node == 8 && links > 0 && links < 7 {
        Some(Mesh::HybridCubeMesh)
    } else {
        Some(Mesh::Full)
    }
}

/// The share of a GPU's NVLink bandwidth (one direction) that joins local GPUs `a` and `b`
/// of a mesh node; 0 when no NVLink joins them (or `a == b`, or `c` is not a mesh).
pub fn pair_share(c: &Cluster, a: u32, b: u32) -> f64 {
    let g = c.gpus_per_node;
    if a == b || a >= g || b >= g {
        return 0.0;
    }
    match mesh(c) {
        Some(Mesh::Full) => 1.0 / (g - 1) as f64,
        Some(Mesh::HybridCubeMesh) => DGX1_LINKS[a as usize][b as usize] as f64 / 6.0,
        None => 0.0,
    }
}

/// The share of a GPU's NVLink bandwidth (one direction) that a ring over the first `local`
/// GPUs of a mesh node can use; `None` when no ring over them runs on NVLink alone (or `c`
/// is not a mesh). One GPU (no ring) counts as two.
pub fn ring_share(c: &Cluster, local: u32) -> Option<f64> {
    let g = c.gpus_per_node.max(2);
    let local = local.clamp(2, g);
    match mesh(c)? {
        Mesh::Full => Some((local - 1) as f64 / (g - 1) as f64),
        Mesh::HybridCubeMesh => {
            let links = DGX1_RING_LINKS[local as usize];
            (links > 0).then_some(links as f64 / 6.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::preset;

    /// The wiring table is symmetric, gives every GPU its 6 links, and the ring shares
    /// never exceed what the ring's GPUs have among themselves.
    #[test]
    fn dgx1_wiring_is_consistent() {
        for a in 0..8 {
            assert_eq!(DGX1_LINKS[a].iter().map(|&l| l as u32).sum::<u32>(), 6, "GPU {a}");
            for b in 0..8 {
                assert_eq!(DGX1_LINKS[a][b], DGX1_LINKS[b][a]);
            }
        }
        for local in 2..=8usize {
            let inside = (0..local).map(|a| (0..local).map(|b| DGX1_LINKS[a][b]).sum::<u8>()).min().unwrap();
            assert!(DGX1_RING_LINKS[local] <= inside, "{local} GPUs: {} > {inside}", DGX1_RING_LINKS[local]);
        }
    }

    #[test]
    fn full_mesh_splits_links_among_peers() {
        let gh = preset("gh200-slingshot").unwrap();
        assert_eq!(mesh(&gh), Some(Mesh::Full));
        assert_eq!(ring_share(&gh, 2), Some(1.0 / 3.0));
        assert_eq!(ring_share(&gh, 4), Some(1.0));
        assert_eq!(pair_share(&gh, 0, 3), 1.0 / 3.0);
        let v = preset("dgx-v100").unwrap();
        assert_eq!(mesh(&v), Some(Mesh::HybridCubeMesh));
        assert_eq!(ring_share(&v, 8), Some(1.0));
        assert_eq!(ring_share(&v, 4), Some(4.0 / 6.0));
        assert_eq!(ring_share(&v, 5), None);
        assert_eq!(pair_share(&v, 0, 3), 2.0 / 6.0);
        assert_eq!(pair_share(&v, 0, 5), 0.0);
        assert_eq!(mesh(&preset("dgx-a100").unwrap()), None);
    }
}
