//! NCCL's in-memory topology model as `ncclTopoGetSystemFromXml` builds it
//! (`src/graph/topo.cc`): typed nodes with NCCL ids `(system, local)`, per-node
//! link lists kept sorted by bandwidth, the bandwidth constants of `topo.h`, the
//! CPU-to-CPU (SYS) links, the sort that puts each node's PCI uplink last, and
//! the walk `ncclTopoPrint` does, turned into a [`Topology`] with exactly the
//! nodes and links the log reader gets from the printed dump.

use commlens_core::topo::{LinkKind, NodeKind, Topology};

/// `LOC_BW`: a node to itself, and a NIC without PCI device to its CPU.
pub(super) const LOC_BW: f64 = 5000.0;

/// GB/s per NVLink for a GPU of compute capability `sm` (`ncclTopoNVLinkBw`;
/// SM60 18.0, SM70 20.0, SM80 20.0, SM86 12.0, SM90 20.6, SM100 40.1).
pub(super) fn nvlink_bw(sm: i64) -> f64 {
    match sm {
        s if s >= 100 => 40.1,
        s if s >= 90 => 20.6,
        86 => 12.0,
        s if s >= 80 => 20.0,
        s if s >= 70 => 20.0,
        s if s >= 60 => 18.0,
        _ => 20.0,
    }
}

/// PCIe link bandwidth in GB/s: lanes × per-lane rate (`kvDictPciGen`, in units of
/// 100 Mb/s, matched as a prefix in NCCL's order, 60 when unknown) / 80. A width of
/// 0 counts as 16. Gen4 x16 → 24.0, Gen3 x16 → 12.0.
pub(super) fn pci_bw(width: i64, speed: &str) -> f64 {
    const GEN: [(&str, f64); 11] = [
        ("2.5 GT/s", 15.0),
        ("5 GT/s", 30.0),
        ("8 GT/s", 60.0),
        ("16 GT/s", 120.0),
        ("32 GT/s", 240.0),
        ("2.5 GT/s PCIe", 15.0),
        ("5.0 GT/s PCIe", 30.0),
        ("8.0 GT/s PCIe", 60.0),
        ("16.0 GT/s PCIe", 120.0),
        ("32.0 GT/s PCIe", 240.0),
        ("64.0 GT/s PCIe", 480.0),
    ];
    let rate = GEN
        .iter()
        .find(|(k, _)| speed.starts_with(k))
        .map_or(60.0, |g| g.1);
    let width = if width == 0 { 16 } else { width };
    width as f64 * rate / 80.0
}

/// What a `<cpu>` says about the processor, as far as the SYS bandwidth needs it.
pub(super) struct CpuInfo<'a> {
    pub arch: &'a str,
    pub vendor: Option<&'a str>,
    pub family: i64,
    pub model: i64,
}

/// Bandwidth of the links from this CPU to the other CPUs of its host
/// (`ncclTopoGetInterCpuBw`): POWER 32, ARM 6; Intel by family 6 model: Broadwell
/// and older 6, Skylake (≥ 0x55) 10, Sapphire Rapids (≥ 0x8F) 22, Emerald Rapids and
/// newer (≥ 0xCF, 0xAD–0xAF) 40; AMD by family: Zen 1/2 16, Zen 3/4 (0xAF or 25) 24,
/// Zen 5 (0xBF or 26) 32; Zhaoxin 6, Yongfeng (family 7, model 0x5B) 9; anything
/// else `LOC_BW`.
pub(super) fn inter_cpu_bw(c: &CpuInfo<'_>) -> f64 {
    if c.arch.starts_with("ppc64") {
        return 32.0;
    }
    if c.arch.starts_with("arm64") {
        return 6.0;
    }
    if !c.arch.starts_with("x86_64") {
        return LOC_BW;
    }
    let vendor = c.vendor.unwrap_or("");
    let (f, m) = (c.family, c.model);
    if vendor.starts_with("GenuineIntel") {
        if f == 6 && (m >= 0xCF || (0xAD..=0xAF).contains(&m)) {
            40.0
        } else if f == 6 && m >= 0x8F {
            22.0
        } else if f == 6 && m >= 0x55 {
            10.0
        } else {
            6.0
        }
    } else if vendor.starts_with("AuthenticAMD") {
        match f {
            0xBF | 26 => 32.0,
            0xAF | 25 => 24.0,
            _ => 16.0,
        }
    } else if vendor.starts_with("CentaurHauls") || vendor.starts_with("  Shanghai  ") {
        if f == 7 && m == 0x5B {
            9.0
        } else {
            6.0
        }
    } else {
        LOC_BW
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct GLink {
    pub to: usize,
    pub kind: LinkKind,
    pub bw: f64,
}

#[derive(Debug)]
pub(super) struct GNode {
    pub kind: NodeKind,
    /// NCCL's system id (index of the host hash) and local id (bus id, NUMA id, dev).
    pub sys: u64,
    pub local: u64,
    pub rank: Option<u32>,
    /// GPUs: compute capability (`sm`). CPUs: bandwidth of their SYS links.
    pub sm: i64,
    pub sys_bw: f64,
    /// The node a PCI link leads up to (CPU or PCI switch).
    pub parent: Option<usize>,
    /// Sorted by bandwidth, fastest first, like NCCL's.
    pub links: Vec<GLink>,
}

#[derive(Debug, Default)]
pub(super) struct Graph {
    pub nodes: Vec<GNode>,
}

impl Graph {
    pub fn find(&self, kind: NodeKind, sys: u64, local: u64) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.kind == kind && n.sys == sys && n.local == local)
    }

    /// The node, and whether it was just created.
    pub fn get_or_add(&mut self, kind: NodeKind, sys: u64, local: u64) -> (usize, bool) {
        if let Some(i) = self.find(kind, sys, local) {
            return (i, false);
        }
        self.nodes.push(GNode {
            kind,
            sys,
            local,
            rank: None,
            sm: 0,
            sys_bw: LOC_BW,
            parent: None,
            links: Vec::new(),
        });
        (self.nodes.len() - 1, true)
    }

    pub fn has_link(&self, a: usize, b: usize, kind: LinkKind) -> bool {
        self.nodes[a]
            .links
            .iter()
            .any(|l| l.to == b && l.kind == kind)
    }

    /// `ncclTopoConnectNodes`: a second link of the same kind to the same node adds
    /// its bandwidth; the list stays sorted, a link going after those at least as fast.
    pub fn connect(&mut self, a: usize, b: usize, kind: LinkKind, bw: f64) {
        let links = &mut self.nodes[a].links;
        let mut link = GLink { to: b, kind, bw };
        if let Some(i) = links.iter().position(|l| l.to == b && l.kind == kind) {
            link.bw += links.remove(i).bw;
        }
        let at = links
            .iter()
            .position(|l| l.bw < link.bw)
            .unwrap_or(links.len());
        links.insert(at, link);
    }

    /// The CPU above a node, following PCI parents through PCI switches (`findLocalCpu`).
    pub fn local_cpu(&self, node: usize) -> Option<usize> {
        let mut cur = node;
        for _ in 0..=self.nodes.len() {
            if self.nodes[cur].kind == NodeKind::Cpu {
                return Some(cur);
            }
            cur = self.nodes[cur].parent?;
        }
        None
    }

    /// Joins a PCI child to its parent in both directions (the child's link first,
    /// as NCCL does).
    pub fn attach(&mut self, child: usize, parent: usize, bw: f64) {
        self.connect(child, parent, LinkKind::Pci, bw);
        self.connect(parent, child, LinkKind::Pci, bw);
        if self.nodes[child].parent.is_none() {
            self.nodes[child].parent = Some(parent);
        }
    }

    /// `ncclTopoConnectCpus`: a SYS link from every CPU to every other CPU of its host.
    pub fn connect_cpus(&mut self) {
        let cpus: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].kind == NodeKind::Cpu)
            .collect();
        for &a in &cpus {
            for &b in &cpus {
                if a != b && self.nodes[a].sys == self.nodes[b].sys {
                    let bw = self.nodes[a].sys_bw;
                    self.connect(a, b, LinkKind::Sys, bw);
                }
            }
        }
    }

    /// `ncclTopoSortSystem`: below each CPU, every node's link to its PCI parent
    /// moves to the end of its list.
    pub fn sort(&mut self) {
        let mut seen = vec![false; self.nodes.len()];
        for cpu in 0..self.nodes.len() {
            if self.nodes[cpu].kind != NodeKind::Cpu {
                continue;
            }
            let mut stack: Vec<(usize, Option<usize>)> = vec![(cpu, None)];
            while let Some((n, up)) = stack.pop() {
                if std::mem::replace(&mut seen[n], true) {
                    continue;
                }
                let links = &mut self.nodes[n].links;
                if let Some(i) = up.and_then(|u| links.iter().position(|l| l.to == u)) {
                    let l = links.remove(i);
                    links.push(l);
                }
                for l in self.nodes[n].links.iter().rev() {
                    if l.kind == LinkKind::Pci && Some(l.to) != up {
                        stack.push((l.to, Some(n)));
                    }
                }
            }
        }
    }

    /// The nodes and links `ncclTopoPrint` shows, in its order: each CPU, then
    /// depth first along its links: PCI links lead to the child (not back to the
    /// parent), other links (NVL, SYS, NET, C2C, LOC) name their far node without
    /// descending. The printed ids are `system-local` in hex (`GPU/0-17000`).
    pub fn to_topology(&self, host: &str) -> Topology {
        let mut t = Topology::new(host);
        let mut ids: Vec<Option<usize>> = vec![None; self.nodes.len()];
        let mut seen = vec![false; self.nodes.len()];
        for cpu in 0..self.nodes.len() {
            if self.nodes[cpu].kind != NodeKind::Cpu {
                continue;
            }
            // Explicit stack of (node, parent, next link index) so deep input cannot
            // exhaust the call stack.
            let mut stack: Vec<(usize, Option<usize>, usize)> = Vec::new();
            if !std::mem::replace(&mut seen[cpu], true) {
                self.place(cpu, &mut t, &mut ids);
                stack.push((cpu, None, 0));
            }
            while let Some(top) = stack.last_mut() {
                let (n, prev, i) = *top;
                let Some(l) = self.nodes[n].links.get(i) else {
                    stack.pop();
                    continue;
                };
                top.2 += 1;
                if l.kind == LinkKind::Pci && Some(l.to) == prev {
                    continue;
                }
                let from = self.place(n, &mut t, &mut ids);
                let to = self.place(l.to, &mut t, &mut ids);
                t.add_link(from, to, l.kind, l.bw);
                if l.kind == LinkKind::Pci && !std::mem::replace(&mut seen[l.to], true) {
                    stack.push((l.to, Some(n), 0));
                }
            }
        }
        self.header_bandwidths(&mut t);
        t
    }

    fn place(&self, n: usize, t: &mut Topology, ids: &mut [Option<usize>]) -> usize {
        if let Some(i) = ids[n] {
            return i;
        }
        let g = &self.nodes[n];
        let i = t.node(g.kind, &format!("{:x}-{:x}", g.sys, g.local));
        if t.nodes[i].rank.is_none() {
            t.nodes[i].rank = g.rank;
        }
        ids[n] = Some(i);
        i
    }

    /// `maxBw`/`totalBw` of the `=== System` header, as NCCL computes them for a
    /// communicator inside one host (`ncclTopoSearchInit`): one GPU gives `LOC_BW`
    /// for both; otherwise maxBw is the best GPU-pair bandwidth (the slowest hop
    /// of the pair's route, [`Topology::gpu_pair_bw`]) and totalBw the largest of
    /// each GPU's summed NVLink bandwidth or its PCI link.
    fn header_bandwidths(&self, t: &mut Topology) {
        let gpus: Vec<usize> = t.gpus().map(|(i, _)| i).collect();
        if gpus.len() == 1 {
            t.max_bw_gb_s = LOC_BW;
            t.total_bw_gb_s = LOC_BW;
            return;
        }
        let mut max_bw: f64 = 0.0;
        for &a in &gpus {
            for &b in &gpus {
                if let Some((bw, _)) = t.gpu_pair_bw(a, b) {
                    max_bw = max_bw.max(bw);
                }
            }
        }
        let total = self
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Gpu)
            .map(|g| {
                let nvl: f64 = g
                    .links
                    .iter()
                    .filter(|l| l.kind == LinkKind::Nvl)
                    .map(|l| l.bw)
                    .sum();
                let pci = g
                    .links
                    .iter()
                    .rev()
                    .find(|l| l.kind == LinkKind::Pci)
                    .map_or(0.0, |l| l.bw);
                nvl.max(pci)
            })
            .fold(0.0, f64::max);
        t.max_bw_gb_s = max_bw;
        t.total_bw_gb_s = total;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_follow_nccl() {
        assert_eq!(pci_bw(16, "16.0 GT/s PCIe"), 24.0);
        assert_eq!(pci_bw(16, "8.0 GT/s PCIe"), 12.0);
        assert_eq!(pci_bw(4, "8.0 GT/s PCIe"), 3.0);
        assert_eq!(pci_bw(0, "32 GT/s"), 48.0);
        assert_eq!(pci_bw(16, "Unknown"), 12.0);
        assert_eq!(12.0 * nvlink_bw(80), 240.0);
        assert_eq!(nvlink_bw(86), 12.0);
        assert_eq!(nvlink_bw(90), 20.6);
        let cpu = |arch, vendor, family, model| {
            inter_cpu_bw(&CpuInfo {
                arch,
                vendor: Some(vendor),
                family,
                model,
            })
        };
        assert_eq!(cpu("x86_64", "AuthenticAMD", 143, 49), 16.0);
        assert_eq!(cpu("x86_64", "AuthenticAMD", 25, 1), 24.0);
        assert_eq!(cpu("x86_64", "GenuineIntel", 6, 106), 10.0);
        assert_eq!(cpu("x86_64", "GenuineIntel", 6, 0x4f), 6.0);
        assert_eq!(cpu("x86_64", "GenuineIntel", 6, 0x8f), 22.0);
        assert_eq!(cpu("ppc64le", "", 0, 0), 32.0);
        assert_eq!(cpu("arm64", "", 0, 0), 6.0);
    }

    #[test]
    fn connect_aggregates_and_keeps_bandwidth_order() {
        let mut g = Graph::default();
        let (a, _) = g.get_or_add(NodeKind::Gpu, 0, 1);
        let (b, _) = g.get_or_add(NodeKind::Gpu, 0, 2);
        let (c, _) = g.get_or_add(NodeKind::Cpu, 0, 0);
        g.connect(a, c, LinkKind::Pci, 24.0);
        g.connect(a, b, LinkKind::Nvl, 20.0);
        assert_eq!(g.nodes[a].links[0].to, c);
        g.connect(a, b, LinkKind::Nvl, 20.0);
        assert_eq!((g.nodes[a].links[0].to, g.nodes[a].links[0].bw), (b, 40.0));
        assert_eq!(g.nodes[a].links.len(), 2);
    }
}
