//! Hardware topology as NCCL models it: CPUs (NUMA domains), GPUs, NICs,
//! network endpoints, NVSwitches and PCI switches, joined by typed links with
//! a bandwidth in GB/s, plus NCCL's precomputed GPU-to-node paths when logged.
//!
//! The graph answers one question for the analyses: what is the slowest link
//! between two GPUs (thesis eq. 4.12)?

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeKind {
    Cpu,
    Gpu,
    Nic,
    Net,
    NvSwitch,
    PciSwitch,
    Other,
}

impl NodeKind {
    /// Decodes the node type NCCL prints (`GPU`, `CPU`, `NIC`, `NET`, `NVS`, `PCI`).
    pub fn from_name(name: &[u8]) -> NodeKind {
        match name {
            b"CPU" => NodeKind::Cpu,
            b"GPU" => NodeKind::Gpu,
            b"NIC" => NodeKind::Nic,
            b"NET" => NodeKind::Net,
            b"NVS" => NodeKind::NvSwitch,
            b"PCI" => NodeKind::PciSwitch,
            _ => NodeKind::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Cpu => "CPU",
            NodeKind::Gpu => "GPU",
            NodeKind::Nic => "NIC",
            NodeKind::Net => "NET",
            NodeKind::NvSwitch => "NVS",
            NodeKind::PciSwitch => "PCI",
            NodeKind::Other => "OTHER",
        }
    }
}

/// Link and path types. Links use LOC, NVL, NVB, C2C, PCI, SYS, NET; NCCL's
/// path types add PIX, PXB, PXN, PHB and DIS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum LinkKind {
    Loc,
    Nvl,
    Nvb,
    C2c,
    Pix,
    Pxb,
    Pxn,
    Pci,
    Phb,
    Sys,
    Net,
    Dis,
    Other,
}

impl LinkKind {
    pub fn from_name(name: &[u8]) -> LinkKind {
        match name {
            b"LOC" => LinkKind::Loc,
            b"NVL" => LinkKind::Nvl,
            b"NVB" => LinkKind::Nvb,
            b"C2C" => LinkKind::C2c,
            b"PIX" => LinkKind::Pix,
            b"PXB" => LinkKind::Pxb,
            b"PXN" => LinkKind::Pxn,
            b"PCI" => LinkKind::Pci,
            b"PHB" => LinkKind::Phb,
            b"SYS" => LinkKind::Sys,
            b"NET" => LinkKind::Net,
            b"DIS" => LinkKind::Dis,
            _ => LinkKind::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Loc => "LOC",
            LinkKind::Nvl => "NVL",
            LinkKind::Nvb => "NVB",
            LinkKind::C2c => "C2C",
            LinkKind::Pix => "PIX",
            LinkKind::Pxb => "PXB",
            LinkKind::Pxn => "PXN",
            LinkKind::Pci => "PCI",
            LinkKind::Phb => "PHB",
            LinkKind::Sys => "SYS",
            LinkKind::Net => "NET",
            LinkKind::Dis => "DIS",
            LinkKind::Other => "OTHER",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopoNode {
    pub kind: NodeKind,
    /// Identifier as printed after the slash: `0-17000`, `F000`, `0-1`.
    pub id: String,
    /// Bus id for GPUs, NICs and PCI switches (hex after the optional `dom-`).
    pub bus_id: Option<u64>,
    /// Rank printed in parentheses after a GPU (`GPU/0-17000 (0)`).
    pub rank: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopoLink {
    pub from: usize,
    pub to: usize,
    pub kind: LinkKind,
    pub bw_gb_s: f64,
}

/// NCCL's precomputed path from a GPU to another node
/// (`GPU/0-17000 :GPU/0-65000 (1/240.0/NVL)` or a `Paths from` block).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopoPath {
    pub from: usize,
    pub to: usize,
    pub hops: u32,
    pub bw_gb_s: f64,
    pub kind: LinkKind,
}

/// The topology of one host.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Topology {
    pub host: String,
    pub max_bw_gb_s: f64,
    pub total_bw_gb_s: f64,
    pub nodes: Vec<TopoNode>,
    pub links: Vec<TopoLink>,
    pub paths: Vec<TopoPath>,
}

impl Topology {
    pub fn new(host: &str) -> Topology {
        Topology { host: host.to_string(), ..Topology::default() }
    }

    /// Finds a node by kind and printed id, adding it if absent.
    pub fn node(&mut self, kind: NodeKind, id: &str) -> usize {
        if let Some(i) = self.find(kind, id) {
            return i;
        }
        let bus_id = match kind {
            NodeKind::Gpu | NodeKind::Nic | NodeKind::PciSwitch => parse_bus_id(id),
            _ => None,
        };
        self.nodes.push(TopoNode { kind, id: id.to_string(), bus_id, rank: None });
        self.nodes.len() - 1
    }

    pub fn find(&self, kind: NodeKind, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.kind == kind && n.id.eq_ignore_ascii_case(id))
    }

    pub fn gpus(&self) -> impl Iterator<Item = (usize, &TopoNode)> {
        self.nodes.iter().enumerate().filter(|(_, n)| n.kind == NodeKind::Gpu)
    }

    pub fn gpu_by_bus(&self, bus_id: u64) -> Option<usize> {
        self.gpus().find(|(_, n)| n.bus_id == Some(bus_id)).map(|(i, _)| i)
    }

    /// Adds a link unless the same (from, to, kind) is already present.
    pub fn add_link(&mut self, from: usize, to: usize, kind: LinkKind, bw_gb_s: f64) {
        if !self.links.iter().any(|l| l.from == from && l.to == to && l.kind == kind) {
            self.links.push(TopoLink { from, to, kind, bw_gb_s });
        }
    }

    /// Network bandwidth of this host: the fastest NET link (per-NIC, GB/s).
    pub fn net_bw_gb_s(&self) -> Option<f64> {
        self.links.iter().filter(|l| l.kind == LinkKind::Net).map(|l| l.bw_gb_s).reduce(f64::max)
    }

    /// Bandwidth and link type of the slowest hop between two GPUs of this host.
    ///
    /// Uses NCCL's own path when it was logged; otherwise a direct NVLink, then
    /// the route up through PCI to the CPUs (crossing SYS between sockets), the
    /// minimum along the way (the thesis's bottleneck rule).
    pub fn gpu_pair_bw(&self, a: usize, b: usize) -> Option<(f64, LinkKind)> {
        if a == b {
            return None;
        }
        if let Some(p) = self.paths.iter().find(|p| p.from == a && p.to == b) {
            return Some((p.bw_gb_s, p.kind));
        }
        let direct = self
            .links
            .iter()
            .filter(|l| (l.from == a && l.to == b) || (l.from == b && l.to == a))
            .max_by(|x, y| x.bw_gb_s.total_cmp(&y.bw_gb_s));
        if let Some(l) = direct {
            return Some((l.bw_gb_s, l.kind));
        }
        // Both GPUs reach NVSwitch: the slower of the two NVLink attachments.
        let nvs = |g: usize| {
            self.links
                .iter()
                .filter(|l| l.from == g && self.nodes[l.to].kind == NodeKind::NvSwitch)
                .map(|l| l.bw_gb_s)
                .reduce(f64::max)
        };
        if let (Some(x), Some(y)) = (nvs(a), nvs(b)) {
            return Some((x.min(y), LinkKind::Nvl));
        }
        let (up_a, cpu_a) = self.uplink_to_cpu(a)?;
        let (up_b, cpu_b) = self.uplink_to_cpu(b)?;
        let mut bw = up_a.min(up_b);
        let mut kind = LinkKind::Phb;
        if cpu_a != cpu_b {
            kind = LinkKind::Sys;
            let sys = self
                .links
                .iter()
                .filter(|l| l.kind == LinkKind::Sys && l.from == cpu_a && l.to == cpu_b)
                .map(|l| l.bw_gb_s)
                .reduce(f64::max);
            bw = bw.min(sys?);
        }
        Some((bw, kind))
    }

    /// Minimum PCI bandwidth on the way from `node` up to its CPU, and that CPU.
    fn uplink_to_cpu(&self, node: usize) -> Option<(f64, usize)> {
        let mut cur = node;
        let mut bw = f64::INFINITY;
        for _ in 0..16 {
            if self.nodes[cur].kind == NodeKind::Cpu {
                return Some((bw, cur));
            }
            let up = self.links.iter().find(|l| {
                l.to == cur
                    && l.kind == LinkKind::Pci
                    && matches!(self.nodes[l.from].kind, NodeKind::Cpu | NodeKind::PciSwitch)
            })?;
            bw = bw.min(up.bw_gb_s);
            cur = up.from;
        }
        None
    }
}

/// `0-17000` → 0x17000, `F000` → 0xF000, `0-c1000` → 0xc1000.
pub fn parse_bus_id(id: &str) -> Option<u64> {
    let hex = id.rsplit('-').next()?;
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dual_socket() -> Topology {
        // Thesis Listing 4.3 shape: two sockets, NVLink pairs, SYS between sockets.
        let mut t = Topology::new("h");
        let c0 = t.node(NodeKind::Cpu, "0-0");
        let c1 = t.node(NodeKind::Cpu, "0-1");
        let g = ["0-1000", "0-25000", "0-c1000", "0-e1000"].map(|id| t.node(NodeKind::Gpu, id));
        t.add_link(c0, g[0], LinkKind::Pci, 24.0);
        t.add_link(c0, g[1], LinkKind::Pci, 24.0);
        t.add_link(c1, g[2], LinkKind::Pci, 24.0);
        t.add_link(c1, g[3], LinkKind::Pci, 24.0);
        t.add_link(g[0], g[1], LinkKind::Nvl, 80.0);
        t.add_link(g[2], g[3], LinkKind::Nvl, 80.0);
        t.add_link(c0, c1, LinkKind::Sys, 16.0);
        t.add_link(c1, c0, LinkKind::Sys, 16.0);
        t
    }

    #[test]
    fn pair_bandwidth_follows_the_slowest_hop() {
        let t = dual_socket();
        let g: Vec<usize> = t.gpus().map(|(i, _)| i).collect();
        assert_eq!(t.gpu_pair_bw(g[0], g[1]), Some((80.0, LinkKind::Nvl)));
        assert_eq!(t.gpu_pair_bw(g[0], g[2]), Some((16.0, LinkKind::Sys)));
        assert_eq!(t.gpu_pair_bw(g[2], g[3]), Some((80.0, LinkKind::Nvl)));
        assert_eq!(t.gpu_pair_bw(g[0], g[0]), None);
    }

    #[test]
    fn bus_ids() {
        assert_eq!(parse_bus_id("0-17000"), Some(0x17000));
        assert_eq!(parse_bus_id("F000"), Some(0xF000));
        assert_eq!(parse_bus_id("0-c1000"), Some(0xc1000));
        assert_eq!(parse_bus_id("zz"), None);
        let mut t = Topology::new("h");
        let a = t.node(NodeKind::Gpu, "0-17000");
        assert_eq!(t.node(NodeKind::Gpu, "0-17000"), a);
        assert_eq!(t.gpu_by_bus(0x17000), Some(a));
    }
}
