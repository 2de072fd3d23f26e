//! Hardware topology as NCCL models it: CPUs (NUMA domains), GPUs, NICs,
//! network endpoints, NVSwitches and PCI switches, joined by typed links with
//! a bandwidth in GB/s, plus NCCL's precomputed GPU-to-node paths when logged.
//!
//! The graph answers one question for the analyses: what is the slowest link
//! between two GPUs (thesis eq. 4.12)?

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
    /// Lookup indexes derived from the fields above (never serialized, never
    /// compared): they keep building (`node`, `add_link`) and the GPU-pair
    /// queries linear in the graph instead of quadratic.
    #[serde(skip)]
    index: TopoIndex,
}

/// Derived lookups of a [`Topology`]: which (from, to, kind) links and which
/// (kind, id) nodes exist, extended incrementally (the fields are public, so
/// each index remembers how many entries it covers and is rebuilt when they
/// shrank), and the GPU-pair index, built on the first query for the graph's
/// current sizes. The node and link sets are hashed with Fx (small integer
/// keys; no untrusted-input hashing concern for a parser's own graph) and
/// node ids are packed into [`NodeKey`]: building a dump's graph looked up
/// every node and link through SipHash and an allocated lower-case copy.
#[derive(Default)]
struct TopoIndex {
    links: FxHashSet<(usize, usize, LinkKind)>,
    links_covered: usize,
    nodes: FxHashMap<NodeKey, usize>,
    nodes_covered: usize,
    pairs: Mutex<Option<Arc<PairIndex>>>,
}

/// A node's kind and its id compared ignoring ASCII case: an id of at most
/// 15 bytes lower-cased into one number (its length in the top byte, so ids
/// of different lengths differ), so that a lookup allocates nothing; a
/// longer id (none printed by NCCL) as a lower-cased string.
#[derive(Clone, PartialEq, Eq, Hash)]
enum NodeKey {
    Short(NodeKind, u128),
    Long(NodeKind, String),
}

impl NodeKey {
    fn new(kind: NodeKind, id: &str) -> NodeKey {
        let b = id.as_bytes();
        if b.len() > 15 {
            return NodeKey::Long(kind, id.to_ascii_lowercase());
        }
        let mut k = [0u8; 16];
        for (d, s) in k.iter_mut().zip(b) {
            *d = s.to_ascii_lowercase();
        }
        k[15] = b.len() as u8;
        NodeKey::Short(kind, u128::from_le_bytes(k))
    }
}

impl Clone for TopoIndex {
    fn clone(&self) -> Self {
        TopoIndex {
            links: self.links.clone(),
            links_covered: self.links_covered,
            nodes: self.nodes.clone(),
            nodes_covered: self.nodes_covered,
            pairs: Mutex::new(self.pairs.lock().map(|p| p.clone()).unwrap_or(None)),
        }
    }
}

impl PartialEq for TopoIndex {
    /// Derived data: two topologies are equal by their graph alone.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for TopoIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TopoIndex")
    }
}

/// Everything [`Topology::gpu_pair_bw`] looks up, keyed, for the graph sizes
/// it was built from (a later change of sizes rebuilds it).
struct PairIndex {
    sizes: (usize, usize, usize),
    /// NCCL's logged path (the first one printed per ordered pair).
    paths: HashMap<(usize, usize), (f64, LinkKind)>,
    /// Fastest direct link per direction, keyed (from, to) (the last of equals, as `max_by`).
    direct: HashMap<(usize, usize), (f64, LinkKind)>,
    /// Best logged path from a node to any NET node (NCCL's GPU → NIC route).
    to_net: HashMap<usize, f64>,
    /// Fastest NVLink from a node to an NVSwitch.
    nvs: HashMap<usize, f64>,
    /// Fastest SYS link from one CPU to another.
    sys: HashMap<(usize, usize), f64>,
    /// The PCI link up into a node (the first listed): (bw, parent).
    up: HashMap<usize, (f64, usize)>,
}

impl PairIndex {
    fn build(t: &Topology) -> PairIndex {
        let mut paths = HashMap::new();
        let mut to_net: HashMap<usize, f64> = HashMap::new();
        for p in &t.paths {
            paths.entry((p.from, p.to)).or_insert((p.bw_gb_s, p.kind));
            if t.nodes[p.to].kind == NodeKind::Net {
                let e = to_net.entry(p.from).or_insert(p.bw_gb_s);
                *e = e.max(p.bw_gb_s);
            }
        }
        let mut direct: HashMap<(usize, usize), (f64, LinkKind)> = HashMap::new();
        let mut nvs: HashMap<usize, f64> = HashMap::new();
        let mut sys: HashMap<(usize, usize), f64> = HashMap::new();
        let mut up: HashMap<usize, (f64, usize)> = HashMap::new();
        for l in &t.links {
            let e = direct.entry((l.from, l.to)).or_insert((l.bw_gb_s, l.kind));
            if l.bw_gb_s.total_cmp(&e.0).is_ge() {
                *e = (l.bw_gb_s, l.kind);
            }
            if t.nodes[l.to].kind == NodeKind::NvSwitch {
                let e = nvs.entry(l.from).or_insert(l.bw_gb_s);
                *e = e.max(l.bw_gb_s);
            }
            if l.kind == LinkKind::Sys {
                let e = sys.entry((l.from, l.to)).or_insert(l.bw_gb_s);
                *e = e.max(l.bw_gb_s);
            }
            if l.kind == LinkKind::Pci && matches!(t.nodes[l.from].kind, NodeKind::Cpu | NodeKind::PciSwitch) {
                up.entry(l.to).or_insert((l.bw_gb_s, l.from));
            }
        }
        PairIndex { sizes: t.sizes(), paths, direct, to_net, nvs, sys, up }
    }
}

impl Topology {
    pub fn new(host: &str) -> Topology {
        Topology { host: host.to_string(), ..Topology::default() }
    }

    /// Finds a node by kind and printed id, adding it if absent.
    pub fn node(&mut self, kind: NodeKind, id: &str) -> usize {
        self.index_nodes();
        let key = NodeKey::new(kind, id);
        if let Some(&i) = self.index.nodes.get(&key) {
            return i;
        }
        let bus_id = match kind {
            NodeKind::Gpu | NodeKind::Nic | NodeKind::PciSwitch => parse_bus_id(id),
            _ => None,
        };
        self.nodes.push(TopoNode { kind, id: id.to_string(), bus_id, rank: None });
        // The index covered every node before this one, and this key was absent.
        let i = self.nodes.len() - 1;
        self.index.nodes.insert(key, i);
        self.index.nodes_covered = self.nodes.len();
        i
    }

    pub fn find(&self, kind: NodeKind, id: &str) -> Option<usize> {
        if self.index.nodes_covered == self.nodes.len() {
            return self.index.nodes.get(&NodeKey::new(kind, id)).copied();
        }
        self.nodes.iter().position(|n| n.kind == kind && n.id.eq_ignore_ascii_case(id))
    }

    /// Brings the node index up to date with `nodes` (first match per id wins).
    fn index_nodes(&mut self) {
        let ix = &mut self.index;
        if ix.nodes_covered > self.nodes.len() {
            ix.nodes.clear();
            ix.nodes_covered = 0;
        }
        for (i, n) in self.nodes.iter().enumerate().skip(ix.nodes_covered) {
            ix.nodes.entry(NodeKey::new(n.kind, &n.id)).or_insert(i);
        }
        ix.nodes_covered = self.nodes.len();
    }

    fn sizes(&self) -> (usize, usize, usize) {
        (self.nodes.len(), self.links.len(), self.paths.len())
    }

    pub fn gpus(&self) -> impl Iterator<Item = (usize, &TopoNode)> {
        self.nodes.iter().enumerate().filter(|(_, n)| n.kind == NodeKind::Gpu)
    }

    pub fn gpu_by_bus(&self, bus_id: u64) -> Option<usize> {
        self.gpus().find(|(_, n)| n.bus_id == Some(bus_id)).map(|(i, _)| i)
    }

    /// Adds a link unless the same (from, to, kind) is already present.
    pub fn add_link(&mut self, from: usize, to: usize, kind: LinkKind, bw_gb_s: f64) {
        let ix = &mut self.index;
        if ix.links_covered > self.links.len() {
            ix.links.clear();
            ix.links_covered = 0;
        }
        for l in &self.links[ix.links_covered..] {
            ix.links.insert((l.from, l.to, l.kind));
        }
        if ix.links.insert((from, to, kind)) {
            self.links.push(TopoLink { from, to, kind, bw_gb_s });
        }
        ix.links_covered = self.links.len();
    }

    /// The GPU-pair index for the graph as it is now (built once per size).
    fn pair_index(&self) -> Arc<PairIndex> {
        let mut slot = self.index.pairs.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Some(p) if p.sizes == self.sizes() => p.clone(),
            _ => {
                let p = Arc::new(PairIndex::build(self));
                *slot = Some(p.clone());
                p
            }
        }
    }

    /// Network bandwidth of this host: the fastest NET link (per-NIC, GB/s).
    pub fn net_bw_gb_s(&self) -> Option<f64> {
        self.links.iter().filter(|l| l.kind == LinkKind::Net).map(|l| l.bw_gb_s).reduce(f64::max)
    }

    /// Network bandwidth one GPU reaches: its best logged path to a NET node
    /// (NCCL's own GPU → NIC route, so a NIC behind a slow PCIe or SYS hop
    /// counts at that hop's speed), else the host's fastest NIC.
    pub fn gpu_net_bw(&self, gpu: usize) -> Option<f64> {
        self.pair_index().to_net.get(&gpu).copied().or_else(|| self.net_bw_gb_s())
    }

    /// Bandwidth and link type of the slowest hop between two GPUs of this host,
    /// in the slower direction: a link of 20 GB/s one way and 240 the other is
    /// a 20 GB/s pair, since a collective's ring or tree uses both directions.
    ///
    /// Uses NCCL's own paths when they were logged; otherwise a direct NVLink, then
    /// the route up through PCI to the CPUs (crossing SYS between sockets), the
    /// minimum along the way (the thesis's bottleneck rule). A direction that was
    /// not listed (one GPU's links missing from the dump) does not count.
    pub fn gpu_pair_bw(&self, a: usize, b: usize) -> Option<(f64, LinkKind)> {
        if a == b {
            return None;
        }
        // Keyed lookups (built once per graph size), so a full GPU × GPU
        // table costs O(links + GPUs²), not O(links × GPUs²).
        let ix = self.pair_index();
        let slower = |x: Option<&(f64, LinkKind)>, y: Option<&(f64, LinkKind)>| match (x, y) {
            (Some(&p), Some(&q)) => Some(if q.0 < p.0 { q } else { p }),
            (Some(&p), None) | (None, Some(&p)) => Some(p),
            (None, None) => None,
        };
        if let Some(p) = slower(ix.paths.get(&(a, b)), ix.paths.get(&(b, a))) {
            return Some(p);
        }
        if let Some(d) = slower(ix.direct.get(&(a, b)), ix.direct.get(&(b, a))) {
            return Some(d);
        }
        // Both GPUs reach NVSwitch: the slower of the two NVLink attachments.
        if let (Some(x), Some(y)) = (ix.nvs.get(&a), ix.nvs.get(&b)) {
            return Some((x.min(*y), LinkKind::Nvl));
        }
        let (up_a, cpu_a) = self.uplink_to_cpu(&ix, a)?;
        let (up_b, cpu_b) = self.uplink_to_cpu(&ix, b)?;
        let mut bw = up_a.min(up_b);
        let mut kind = LinkKind::Phb;
        if cpu_a != cpu_b {
            kind = LinkKind::Sys;
            bw = bw.min(*ix.sys.get(&(cpu_a, cpu_b))?);
        }
        Some((bw, kind))
    }

    /// Minimum PCI bandwidth on the way from `node` up to its CPU, and that CPU.
    fn uplink_to_cpu(&self, ix: &PairIndex, node: usize) -> Option<(f64, usize)> {
        let mut cur = node;
        let mut bw = f64::INFINITY;
        for _ in 0..16 {
            if self.nodes[cur].kind == NodeKind::Cpu {
                return Some((bw, cur));
            }
            let &(up_bw, parent) = ix.up.get(&cur)?;
            bw = bw.min(up_bw);
            cur = parent;
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

    /// 256 NVLink-connected GPUs (65k links) and 300 CPUs joined by SYS:
    /// the node, link and pair indexes give every link and pair, duplicates
    /// dropped. Their speed is not asserted (no timed tests); when every
    /// query and every link scanned the graph this test took seconds to
    /// minutes, so a regression shows as a slow test run.
    #[test]
    fn large_graphs_keep_every_link_and_pair() {
        let mut t = Topology::new("big");
        let cpu = t.node(NodeKind::Cpu, "0-0");
        let gpus: Vec<usize> = (0..256).map(|g| t.node(NodeKind::Gpu, &format!("0-{:x}000", g + 1))).collect();
        for &g in &gpus {
            t.add_link(cpu, g, LinkKind::Pci, 24.0);
            for &h in &gpus {
                if g != h {
                    t.add_link(g, h, LinkKind::Nvl, 80.0);
                    t.add_link(g, h, LinkKind::Nvl, 80.0); // duplicate: dropped
                }
            }
        }
        assert_eq!(t.links.len(), 256 + 256 * 255);
        assert_eq!(t.node(NodeKind::Gpu, "0-1000"), gpus[0]);
        assert_eq!(t.find(NodeKind::Gpu, "0-1000"), Some(gpus[0]));
        let mut n = 0;
        for &a in &gpus {
            for &b in &gpus {
                n += usize::from(t.gpu_pair_bw(a, b) == Some((80.0, LinkKind::Nvl)));
            }
        }
        assert_eq!(n, 256 * 255);
        let cpus: Vec<usize> = (0..300).map(|c| t.node(NodeKind::Cpu, &format!("1-{c}"))).collect();
        for &a in &cpus {
            for &b in &cpus {
                if a != b {
                    t.add_link(a, b, LinkKind::Sys, 16.0);
                }
            }
        }
        // The pair index follows later changes to the graph.
        let mut u = dual_socket();
        let g: Vec<usize> = u.gpus().map(|(i, _)| i).collect();
        let before = u.gpu_pair_bw(g[0], g[2]);
        u.add_link(g[0], g[2], LinkKind::Nvl, 99.0);
        assert_ne!(u.gpu_pair_bw(g[0], g[2]), before);
        assert_eq!(u.gpu_pair_bw(g[0], g[2]), Some((99.0, LinkKind::Nvl)));
        // Indexes are not part of equality.
        let v = dual_socket();
        assert!(v.gpu_pair_bw(g[0], g[1]).is_some());
        assert_eq!(v.clone(), dual_socket());
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
