//! The link graph of a [`Cluster`] and routing over it.
//!
//! Links are one-directional with an achieved capacity (nominal rate × the cluster's
//! [`commlens_model::cluster::Efficiency`] for the link's class):
//! * intra-node: per GPU an up and a down link to the NVSwitch (NCCL's rated NVLink bandwidth,
//!   as the collective model uses it; a multi-node NVLink domain shares one switch); on an
//!   NVLink mesh one link per ordered pair of joined GPUs carrying the pair's share of the
//!   GPU's rate (`commlens_model::mesh::pair_share`: a full mesh splits it evenly among the
//!   peers, a DGX-1 by its wiring; pairs the mesh does not join go over PCIe), so a
//!   communicator on part of the node gets the links to its own GPUs only, as
//!   `Cluster::intra_gb_s` rates it; NVLink pairs (bridges) plus PCIe; PCIe as an up and down
//!   link per GPU and, across CPU sockets, one link per ordered socket pair (SYS);
//! * NICs: a transmit and a receive link per NIC (the NIC ↔ leaf cable), GPU `l` of `g` on
//!   NIC `l × nics / g` (the collective model's rail rule, `flows::Placement::rail`);
//! * fabric: leaves of `nodes_per_leaf` nodes — one per rail in a rail-optimised fat-tree (and
//!   the HPN dual-plane, approximated as rails), one per node group otherwise — each with
//!   `round(ports / oversubscription)` up and down links to the spines carrying
//!   `ports × NIC / oversubscription` in total. Traffic leaving its leaf picks one spine by
//!   ECMP: a deterministic hash of (source, destination, operation id).
//!
//! PXN: with rail-aligned NICs, a transfer to another node's GPU on a different rail first
//! crosses NVLink to the local GPU on the destination's rail and leaves through that GPU's NIC
//! (NCCL's default `NCCL_PXN_DISABLE=0`), as the collective model's placement does.

use commlens_model::cluster::{Cluster, IntraFabric, NetworkShape};
use commlens_model::graph::nccl_intra_bw;
use commlens_model::mesh::pair_share;

/// What a link is (for names and per-class totals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LinkKind {
    NvlUp,
    NvlDown,
    NvlPair,
    PcieUp,
    PcieDown,
    Sys,
    NicTx,
    NicRx,
    LeafUp,
    LeafDown,
}

impl LinkKind {
    pub const ALL: [LinkKind; 10] = [
        LinkKind::NvlUp,
        LinkKind::NvlDown,
        LinkKind::NvlPair,
        LinkKind::PcieUp,
        LinkKind::PcieDown,
        LinkKind::Sys,
        LinkKind::NicTx,
        LinkKind::NicRx,
        LinkKind::LeafUp,
        LinkKind::LeafDown,
    ];

    /// Name of the class in `link_usage` totals.
    pub fn class(self) -> &'static str {
        match self {
            LinkKind::NvlUp => "nvlink-up",
            LinkKind::NvlDown => "nvlink-down",
            LinkKind::NvlPair => "nvlink-pair",
            LinkKind::PcieUp => "pcie-up",
            LinkKind::PcieDown => "pcie-down",
            LinkKind::Sys => "sys",
            LinkKind::NicTx => "nic-tx",
            LinkKind::NicRx => "nic-rx",
            LinkKind::LeafUp => "leaf-up",
            LinkKind::LeafDown => "leaf-down",
        }
    }
}

/// One directed link.
#[derive(Debug, Clone, Copy)]
pub struct Link {
    pub kind: LinkKind,
    /// Node (or leaf) and indices inside it, for the name.
    pub a: u32,
    pub b: u32,
    pub c: u32,
    /// Achieved capacity, bytes per µs (= GB/s × 1000).
    pub cap: f64,
}

/// The cluster's links and how ranks map onto them (global rank `r` on node `r / gpus_per_node`).
#[derive(Debug, Clone)]
pub struct Topology {
    pub links: Vec<Link>,
    pub gpn: u32,
    pub nodes: u32,
    nics: u32,
    fabric: IntraFabric,
    sockets: u32,
    /// Ranks sharing one NVLink switch across nodes (0: the node).
    domain: u32,
    rail_aligned: bool,
    per_rail_leaves: bool,
    nodes_per_leaf: u32,
    spines: u32,
    /// Per GPU count `k`: what a GPU's rings over the first `k` GPUs of a mesh node carry,
    /// bytes per µs (`commlens_model::mesh::ring_share` of the GPU's NVLink rate; 0 where no
    /// ring stays on NVLink); empty off a mesh.
    mesh_rings: Vec<f64>,
    nvl_base: u32,
    pair_base: u32,
    pcie_base: u32,
    sys_base: u32,
    nic_base: u32,
    leaf_base: u32,
}

impl Topology {
    pub fn new(c: &Cluster) -> Topology {
        let gpn = c.gpus_per_node.max(1);
        let nodes = c.nodes.max(1);
        let nics = c.nics.per_node.max(1);
        let sockets = c.intra.sockets.max(1);
        let eff = &c.efficiency;
        let mut links = Vec::new();
        let push = |links: &mut Vec<Link>, kind, a, b, cc, gb_s: f64| {
            links.push(Link { kind, a, b, c: cc, cap: (gb_s * 1e3).max(1e-9) });
        };
        let has_nvl = c.intra.nvlink_gb_s > 0.0 && c.intra.fabric != IntraFabric::Pcie;
        // NCCL's rated NVLink bandwidth per GPU (links × topo.h rate), as the model times it.
        let nvl = if has_nvl { nccl_intra_bw(c, gpn.max(2)).0 * eff.nvlink } else { 0.0 };
        // Bridges: the pair's nominal rate at NCCL's 20-of-25 per-link ratio.
        let nvl = if c.intra.fabric == IntraFabric::NvLinkPairs { c.intra.nvlink_gb_s * 0.8 * eff.nvlink } else { nvl };
        let nvl_base = links.len() as u32;
        if has_nvl && c.intra.fabric == IntraFabric::NvSwitch {
            for n in 0..nodes {
                for g in 0..gpn {
                    push(&mut links, LinkKind::NvlUp, n, g, 0, nvl);
                    push(&mut links, LinkKind::NvlDown, n, g, 0, nvl);
                }
            }
        }
        let pair_base = links.len() as u32;
        let mesh = has_nvl && c.intra.fabric == IntraFabric::NvLinkMesh;
        if has_nvl && c.intra.fabric == IntraFabric::NvLinkPairs {
            for n in 0..nodes {
                for g in 0..gpn {
                    push(&mut links, LinkKind::NvlPair, n, g, g ^ 1, nvl);
                }
            }
        }
        // A mesh: a link per ordered pair (`gpn²` per node, indexed by pair; a pair the mesh
        // does not join keeps a zero-share slot that no route uses).
        let mut unjoined = false;
        if mesh {
            for n in 0..nodes {
                for a in 0..gpn {
                    for b in 0..gpn {
                        let share = pair_share(c, a, b);
                        unjoined |= a != b && share == 0.0;
                        push(&mut links, LinkKind::NvlPair, n, a, b, nvl * share);
                    }
                }
            }
        }
        let pcie_base = links.len() as u32;
        let sys_base;
        let pcie_needed = !has_nvl || c.intra.fabric == IntraFabric::NvLinkPairs || unjoined;
        if pcie_needed {
            for n in 0..nodes {
                for g in 0..gpn {
                    push(&mut links, LinkKind::PcieUp, n, g, 0, c.intra.pcie_gb_s * eff.pcie);
                    push(&mut links, LinkKind::PcieDown, n, g, 0, c.intra.pcie_gb_s * eff.pcie);
                }
            }
            sys_base = links.len() as u32;
            for n in 0..nodes {
                for s in 0..sockets {
                    for t in 0..sockets {
                        push(&mut links, LinkKind::Sys, n, s, t, c.intra.sys_gb_s * eff.sys);
                    }
                }
            }
        } else {
            sys_base = links.len() as u32;
        }
        let nic_base = links.len() as u32;
        let nic = c.nics.nic_gb_s() * eff.net;
        for n in 0..nodes {
            for i in 0..nics {
                push(&mut links, LinkKind::NicTx, n, i, 0, nic);
                push(&mut links, LinkKind::NicRx, n, i, 0, nic);
            }
        }
        let per_rail_leaves = matches!(c.network.shape, NetworkShape::RailFatTree | NetworkShape::HpnDualPlane);
        let npl = c.network.nodes_per_leaf.max(1);
        let groups = nodes.div_ceil(npl);
        let leaves = if per_rail_leaves { groups * nics } else { groups };
        let ports = if per_rail_leaves { npl } else { npl * nics } as f64;
        let over = c.network.oversubscription.max(1e-6);
        // Physical uplinks: one per `oversubscription` down ports, at least one; together
        // they carry the leaf's down capacity divided by the oversubscription.
        let spines = ((ports / over).round() as u32).max(1);
        let per_uplink = ports * nic / over / spines as f64;
        let leaf_base = links.len() as u32;
        for l in 0..leaves {
            for s in 0..spines {
                push(&mut links, LinkKind::LeafUp, l, s, 0, per_uplink);
                push(&mut links, LinkKind::LeafDown, l, s, 0, per_uplink);
            }
        }
        let nv_switch = has_nvl && c.intra.fabric == IntraFabric::NvSwitch;
        let domain = if nv_switch && c.intra.nvlink_domain > gpn { c.intra.nvlink_domain } else { 0 };
        Topology {
            links,
            gpn,
            nodes,
            nics,
            fabric: if has_nvl { c.intra.fabric } else { IntraFabric::Pcie },
            sockets,
            domain,
            rail_aligned: c.nics.rail_aligned,
            per_rail_leaves,
            nodes_per_leaf: npl,
            spines,
            mesh_rings: if mesh { (0..=gpn).map(|k| commlens_model::mesh::ring_share(c, k).map_or(0.0, |s| s * nvl * 1e3)).collect() } else { Vec::new() },
            nvl_base,
            pair_base,
            pcie_base,
            sys_base,
            nic_base,
            leaf_base,
        }
    }

    /// Ranks the link graph holds.
    pub fn ranks(&self) -> u64 {
        self.nodes as u64 * self.gpn as u64
    }

    pub fn node(&self, r: u32) -> u32 {
        r / self.gpn
    }

    pub fn local(&self, r: u32) -> u32 {
        r % self.gpn
    }

    /// The NIC of a local GPU.
    pub fn rail(&self, local: u32) -> u32 {
        (local as u64 * self.nics as u64 / self.gpn as u64) as u32
    }

    /// The node of `r`, or its NVLink domain where one spans nodes.
    pub fn locality(&self, r: u32) -> u32 {
        r.checked_div(self.domain).unwrap_or_else(|| self.node(r))
    }

    /// Whether two ranks talk over NVLink (or PCIe) rather than the network.
    pub fn same_domain(&self, a: u32, b: u32) -> bool {
        self.node(a) == self.node(b) || (self.domain > 0 && a / self.domain == b / self.domain)
    }

    fn nvl_up(&self, r: u32) -> u32 {
        self.nvl_base + 2 * r
    }

    /// NVLink (or PCIe) hops between two ranks of one node or NVLink domain.
    pub fn intra(&self, a: u32, b: u32, out: &mut Vec<u32>) {
        let (n, la, lb) = (self.node(a), self.local(a), self.local(b));
        match self.fabric {
            IntraFabric::NvSwitch => {
                out.push(self.nvl_up(a));
                out.push(self.nvl_up(b) + 1);
            }
            IntraFabric::NvLinkMesh if self.mesh_link(a, b).is_some() => out.extend(self.mesh_link(a, b)),
            IntraFabric::NvLinkPairs if la ^ 1 == lb => out.push(self.pair_base + n * self.gpn + la),
            _ => {
                out.push(self.pcie_base + 2 * (n * self.gpn + la));
                let per = self.gpn.div_ceil(self.sockets).max(1);
                let (sa, sb) = ((la / per).min(self.sockets - 1), (lb / per).min(self.sockets - 1));
                if sa != sb {
                    out.push(self.sys_base + (n * self.sockets + sa) * self.sockets + sb);
                }
                out.push(self.pcie_base + 2 * (n * self.gpn + lb) + 1);
            }
        }
    }

    /// What a GPU's rings over `k` GPUs of one mesh node carry, bytes per µs; 0 off a mesh
    /// or where the ring cannot stay on NVLink.
    pub fn mesh_ring(&self, k: usize) -> f64 {
        self.mesh_rings.get(k).copied().unwrap_or(0.0)
    }

    /// The NVLink from `a` to `b` of one mesh node; `None` off a mesh, across nodes, or where
    /// the mesh does not join them.
    pub fn mesh_link(&self, a: u32, b: u32) -> Option<u32> {
        if self.fabric != IntraFabric::NvLinkMesh || a == b || self.node(a) != self.node(b) {
            return None;
        }
        let (n, la, lb) = (self.node(a), self.local(a), self.local(b));
        let l = self.pair_base + (n * self.gpn + la) * self.gpn + lb;
        (self.links[l as usize].cap > 1e-6).then_some(l)
    }

    /// The GPU → NVSwitch link of `r` (NVLS); `None` without an NVSwitch.
    pub fn switch_up(&self, r: u32) -> Option<u32> {
        (self.fabric == IntraFabric::NvSwitch).then(|| self.nvl_up(r))
    }

    pub fn switch_down(&self, r: u32) -> Option<u32> {
        (self.fabric == IntraFabric::NvSwitch).then(|| self.nvl_up(r) + 1)
    }

    fn leaf(&self, node: u32, nic: u32) -> u32 {
        let g = node / self.nodes_per_leaf;
        if self.per_rail_leaves {
            g * self.nics + nic
        } else {
            g
        }
    }

    /// Every link from rank `src` to rank `dst` (appended to `out`); `op` seeds ECMP.
    pub fn route(&self, src: u32, dst: u32, op: u64, out: &mut Vec<u32>) {
        if src == dst {
            return;
        }
        if self.same_domain(src, dst) {
            self.intra(src, dst, out);
            return;
        }
        let (ns, nd, ls, ld) = (self.node(src), self.node(dst), self.local(src), self.local(dst));
        let rail_d = self.rail(ld);
        let mut rail_s = self.rail(ls);
        if self.rail_aligned && rail_s != rail_d && self.fabric != IntraFabric::Pcie {
            // PXN: over NVLink to the local GPU on the destination's rail.
            let proxy = ns * self.gpn + ld;
            let before = out.len();
            self.intra(src, proxy, out);
            let nvlink_only = out[before..].iter().all(|&l| matches!(self.links[l as usize].kind, LinkKind::NvlUp | LinkKind::NvlDown | LinkKind::NvlPair));
            if nvlink_only {
                rail_s = rail_d;
            } else {
                out.truncate(before);
            }
        }
        out.push(self.nic_base + 2 * (ns * self.nics + rail_s));
        let (la, lb) = (self.leaf(ns, rail_s), self.leaf(nd, rail_d));
        if la != lb {
            let s = (ecmp_hash(src, dst, op) % self.spines as u64) as u32;
            out.push(self.leaf_base + 2 * (la * self.spines + s));
            out.push(self.leaf_base + 2 * (lb * self.spines + s) + 1);
        }
        out.push(self.nic_base + 2 * (nd * self.nics + rail_d) + 1);
    }

    /// A readable name of link `l`.
    pub fn name(&self, l: u32) -> String {
        let k = self.links[l as usize];
        match k.kind {
            LinkKind::NvlUp => format!("node{}.gpu{}>nvswitch", k.a, k.b),
            LinkKind::NvlDown => format!("nvswitch>node{}.gpu{}", k.a, k.b),
            LinkKind::NvlPair => format!("node{}.gpu{}>gpu{}", k.a, k.b, k.c),
            LinkKind::PcieUp => format!("node{}.gpu{}>pcie", k.a, k.b),
            LinkKind::PcieDown => format!("pcie>node{}.gpu{}", k.a, k.b),
            LinkKind::Sys => format!("node{}.socket{}>socket{}", k.a, k.b, k.c),
            LinkKind::NicTx => format!("node{}.nic{}.tx", k.a, k.b),
            LinkKind::NicRx => format!("node{}.nic{}.rx", k.a, k.b),
            LinkKind::LeafUp => format!("{}>spine{}", self.leaf_name(k.a), k.b),
            LinkKind::LeafDown => format!("spine{}>{}", k.b, self.leaf_name(k.a)),
        }
    }

    fn leaf_name(&self, leaf: u32) -> String {
        if self.per_rail_leaves {
            format!("leaf{}.rail{}", leaf / self.nics, leaf % self.nics)
        } else {
            format!("leaf{leaf}")
        }
    }

    /// Spine up-links per leaf.
    pub fn spines(&self) -> u32 {
        self.spines
    }
}

/// ECMP's choice: splitmix64 of (src, dst) mixed with the operation id. Deterministic, so a
/// run repeats exactly; different operations between the same pair may take other spines.
pub fn ecmp_hash(src: u32, dst: u32, op: u64) -> u64 {
    let mut z = ((src as u64) << 32 | dst as u64) ^ op.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
