//! Rank placement: which node and local GPU a rank lives on (rank `r` on node
//! `r / gpus_per_node`, GPU `r % gpus_per_node`), the link class between two
//! ranks (network across nodes unless a multi-node NVLink domain joins them;
//! NVLink where `Cluster::nvlink_between` says so; PCIe, or SYS across CPU
//! sockets), NIC rails and PXN proxies, and each channel's node-major ring.

use crate::cluster::{Cluster, IntraFabric, LinkClass};

use super::{NONE, SWITCH};

/// Where ranks live and what joins them.
#[derive(Debug, Clone)]
pub struct Placement<'a> {
    pub cluster: &'a Cluster,
    pub nranks: u32,
    gpn: u32,
    per_socket: u32,
    /// Ranks per multi-node NVLink domain (0: the domain is the node).
    domain: u32,
    pub pxn: bool,
}

impl<'a> Placement<'a> {
    pub fn new(cluster: &'a Cluster, nranks: u32, pxn: bool) -> Placement<'a> {
        let gpn = cluster.gpus_per_node.max(1);
        let sockets = cluster.intra.sockets.max(1);
        let nv = cluster.intra.nvlink_gb_s > 0.0 && cluster.intra.fabric == IntraFabric::NvSwitch;
        let domain = if nv && cluster.intra.nvlink_domain > gpn { cluster.intra.nvlink_domain } else { 0 };
        Placement { cluster, nranks, gpn, per_socket: gpn.div_ceil(sockets).max(1), domain, pxn }
    }

    pub fn gpus_per_node(&self) -> u32 {
        self.gpn
    }

    pub fn node(&self, r: u32) -> u32 {
        r / self.gpn
    }

    pub fn local(&self, r: u32) -> u32 {
        r % self.gpn
    }

    pub fn nnodes(&self) -> u32 {
        self.nranks.div_ceil(self.gpn)
    }

    /// Ranks of the communicator on `node` (the last node may be partial).
    pub fn node_size(&self, node: u32) -> u32 {
        self.nranks.saturating_sub(node * self.gpn).min(self.gpn)
    }

    pub fn rank(&self, node: u32, local: u32) -> u32 {
        node * self.gpn + local
    }

    /// The NIC rail a local GPU uses (GPU `l` of `g` on NIC `l × nics / g`).
    pub fn rail(&self, local: u32) -> u32 {
        let nics = self.cluster.nics.per_node.max(1) as u64;
        (local as u64 * nics / self.gpn as u64) as u32
    }

    /// The link class between two ranks (either may be [`SWITCH`]: NVLink).
    pub fn link(&self, a: u32, b: u32) -> LinkClass {
        if a == SWITCH || b == SWITCH {
            return LinkClass::NvLink;
        }
        if self.node(a) != self.node(b) {
            if self.domain > 0 && a / self.domain == b / self.domain {
                return LinkClass::NvLink;
            }
            return LinkClass::Net;
        }
        let (la, lb) = (self.local(a), self.local(b));
        if self.cluster.nvlink_between(la, lb) {
            LinkClass::NvLink
        } else if self.cluster.intra.sockets > 1 && la / self.per_socket != lb / self.per_socket {
            LinkClass::Sys
        } else {
            LinkClass::Pcie
        }
    }

    /// The PXN proxy for a network transfer: the GPU of `src`'s node on the
    /// rail of `dst`'s NIC, when PXN is on, `src` is on another rail and
    /// reaches that GPU over NVLink.
    pub fn pxn_proxy(&self, src: u32, dst: u32) -> Option<u32> {
        if !self.pxn || !self.cluster.nics.rail_aligned || self.link(src, dst) != LinkClass::Net {
            return None;
        }
        let (ls, ld) = (self.local(src), self.local(dst));
        if self.rail(ls) == self.rail(ld) {
            return None;
        }
        let proxy = self.rank(self.node(src), ld);
        (proxy < self.nranks && proxy != src && self.link(src, proxy) == LinkClass::NvLink).then_some(proxy)
    }

    /// The hop plan from `src` to `dst`: link class and PXN proxy (`NONE` when direct).
    pub(super) fn route(&self, src: u32, dst: u32) -> Route {
        match self.pxn_proxy(src, dst) {
            Some(p) => Route { dst, link: LinkClass::Net, proxy: p },
            None => Route { dst, link: self.link(src, dst), proxy: NONE },
        }
    }

    /// Channel `c`'s ring: node-major (it enters and leaves each node once),
    /// each node's GPUs rotated by `c` so channels enter nodes on different rails.
    pub fn ring_order(&self, c: u32) -> Vec<u32> {
        let mut v = Vec::with_capacity(self.nranks as usize);
        for node in 0..self.nnodes() {
            let size = self.node_size(node);
            for i in 0..size {
                v.push(self.rank(node, (c + i) % size));
            }
        }
        v
    }
}

/// A precomputed hop: destination, link and PXN proxy.
#[derive(Debug, Clone, Copy)]
pub(super) struct Route {
    pub dst: u32,
    pub link: LinkClass,
    pub proxy: u32,
}

impl Route {
    pub fn flows(&self) -> u64 {
        if self.proxy == NONE {
            1
        } else {
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::preset;

    #[test]
    fn placement_links_and_rails() {
        let c = preset("dgx-h100").unwrap().with_nodes(2);
        let pl = Placement::new(&c, 16, true);
        assert_eq!(pl.link(0, 7), LinkClass::NvLink);
        assert_eq!(pl.link(7, 8), LinkClass::Net);
        assert_eq!(pl.pxn_proxy(7, 8), Some(0));
        assert_eq!(pl.pxn_proxy(0, 8), None);
        let pcie = preset("pcie-a100").unwrap().with_nodes(2);
        let pl = Placement::new(&pcie, 16, true);
        assert_eq!(pl.link(0, 3), LinkClass::Pcie);
        assert_eq!(pl.link(0, 4), LinkClass::Sys);
        assert_eq!(pl.pxn_proxy(3, 8), None, "no NVLink, no PXN");
        let nvl72 = preset("gb200-nvl72").unwrap().with_nodes(36);
        let pl = Placement::new(&nvl72, 144, true);
        assert_eq!(pl.link(0, 71), LinkClass::NvLink, "one NVLink domain across trays");
        assert_eq!(pl.link(0, 72), LinkClass::Net);
    }

}
