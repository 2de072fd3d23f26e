//! Clusters from what a run already tells: the topology dump or
//! `NCCL_TOPO_DUMP_FILE` XML (GPUs, NVLink, PCIe, CPUs, NICs and their speed),
//! the `# Rank … on HOST device … [bus] GPU NAME` lines of nccl-tests, the
//! init lines (ranks, nodes) and the network plugin's lines (transport, link
//! layer, NIC devices and speeds). What the run does not say comes from the
//! preset matching its GPU, and `provenance` says which fact came from where.
//!
//! No I/O here: the caller reads files and hands in [`RunFacts`], filling them
//! from an [`OpTable`] ([`facts_from_table`]), from log lines
//! ([`RunFacts::note_log_line`]), from topology XML text
//! ([`RunFacts::note_topo_xml`]) and from what else it read (nccl-tests
//! headers: ranks, hosts, GPU names).
//!
//! # Units
//!
//! Topology bandwidths are NCCL's: an NVLink counts `nccl_nvlink_bw` GB/s
//! (20 on SM80, 20.6 on SM90), which the cluster turns back into the nominal
//! rate (`× nvlink_gb_s_per_link / nccl_nvlink_bw`); a NET node's bandwidth is
//! its line rate in GB/s (`speed / 8000`, printed with one decimal: 12.5 for
//! 100 Gbit/s, 3.1 for 25 Gbit/s), snapped back to a standard Ethernet or
//! InfiniBand rate.

use std::collections::{BTreeMap, BTreeSet};

use commlens_core::topo::{LinkKind, NodeKind};
use commlens_core::{OpTable, Topology};

use crate::cluster::{Cluster, CpuVendor, IntraFabric, NetTech};
use crate::gpu::{gpu_by_name, pcie_x16_gb_s};
use crate::presets::{preset, preset_for_gpu};

/// Facts about a run, gathered by the caller from whatever it read.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    /// Ranks of the job (world size).
    pub ranks: u32,
    /// Distinct hosts.
    pub hosts: Vec<String>,
    /// GPU names as printed (`NVIDIA H100 80GB HBM3`).
    pub gpu_names: Vec<String>,
    /// Topology of each host that logged one.
    pub topologies: Vec<Topology>,
    /// Network transport named in the run (`NET/IB`, `NET/OFI`, `NET/Socket`).
    pub net: Option<NetTech>,
    /// Where `net` was read (for provenance); empty when unknown.
    pub net_from: String,
    /// Nodes of the job as NCCL counted them (`nNodes` of the init lines); 0 when unknown.
    pub nodes: u32,
    /// GPUs seen per host (devices of a log, `# Rank … on HOST` lines of nccl-tests).
    pub gpus_per_host: BTreeMap<String, u32>,
    /// Compute capability × 10 from a topology XML (`<gpu sm="80">`); 0 when unknown.
    pub gpu_sm: u32,
    /// CPU vendor from the topology (`CPU/0-0 (1/1/2)` in a dump, `vendor=` in XML).
    pub cpu: Option<CpuVendor>,
    /// Where `cpu` was read.
    pub cpu_from: String,
    /// NIC devices the network plugin listed at init.
    pub nic_lines: NicLines,
    /// (host, rank) of nccl-tests' `# Rank N … on HOST device D [bus] NAME`
    /// lines, one GPU each (also counted into `gpus_per_host`; the printed bus
    /// is no identity: it is the bus number alone, the same on every GH200).
    pub bench_devices: BTreeSet<(String, u32)>,
}

/// NICs named by the network plugin's init lines: used when no topology
/// shows NET nodes (NCCL drops them from the dump of a one-node communicator).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NicLines {
    /// Devices of the longest `NET/IB : Using [0]mlx5_0:1/RoCE [1]…` line, or
    /// `N` of `NET/OFI Selected Provider is cxi (found N nics)`.
    pub count: u32,
    /// Device names of that `Using` line.
    pub names: Vec<String>,
    /// Device name → line rate in Gbit/s (`NET/IB : Made virtual device [0]
    /// name=mlx5_0 speed=100000`, `NET/IB: [0] mlx5_0:uverbs0:1/RoCE … speed=100000`).
    pub speeds: BTreeMap<String, f64>,
    /// The line that gave `count`.
    pub from: String,
}

impl NicLines {
    /// Line rate of the listed devices, Gbit/s: the fastest listed name with a
    /// known speed, else the fastest speed seen at all.
    pub fn gbit_s(&self) -> Option<f64> {
        let listed = self.names.iter().filter_map(|n| self.speeds.get(n)).copied().reduce(f64::max);
        listed.or_else(|| self.speeds.values().copied().reduce(f64::max))
    }
}

impl RunFacts {
    /// Adds what another source said: lists are joined, counts take the
    /// larger value, and optional facts keep the first one known.
    pub fn merge(&mut self, o: RunFacts) {
        self.ranks = self.ranks.max(o.ranks);
        for h in o.hosts {
            if !self.hosts.contains(&h) {
                self.hosts.push(h);
            }
        }
        self.gpu_names.extend(o.gpu_names);
        self.topologies.extend(o.topologies);
        if self.net.is_none() {
            self.net = o.net;
            self.net_from = o.net_from;
        }
        self.nodes = self.nodes.max(o.nodes);
        for (h, n) in o.gpus_per_host {
            let e = self.gpus_per_host.entry(h).or_default();
            *e = (*e).max(n);
        }
        if self.gpu_sm == 0 {
            self.gpu_sm = o.gpu_sm;
        }
        if self.cpu.is_none() {
            self.cpu = o.cpu;
            self.cpu_from = o.cpu_from;
        }
        if o.nic_lines.count > self.nic_lines.count {
            self.nic_lines.count = o.nic_lines.count;
            self.nic_lines.names = o.nic_lines.names;
            self.nic_lines.from = o.nic_lines.from;
        }
        for (n, s) in o.nic_lines.speeds {
            self.nic_lines.speeds.entry(n).or_insert(s);
        }
        for d in o.bench_devices {
            self.note_bench_device(d.0, d.1);
        }
    }

    /// One GPU of an nccl-tests device line.
    fn note_bench_device(&mut self, host: String, rank: u32) {
        if self.bench_devices.insert((host.clone(), rank)) {
            let n = self.bench_devices.iter().filter(|d| d.0 == host).count() as u32;
            let e = self.gpus_per_host.entry(host).or_default();
            *e = (*e).max(n);
        }
    }

    /// `#  Rank  0 Group  0 Pid 64904 on mew0 device  0 [0000:17:00] NVIDIA A100 80GB PCIe`
    /// (nccl-tests; any prefix before `#`): rank, host, bus and GPU name.
    fn note_rank_line(&mut self, line: &str) -> bool {
        let Some(hash) = line.find('#') else { return false };
        let t = line[hash + 1..].trim_start();
        let Some(rest) = t.strip_prefix("Rank ") else { return false };
        let Some(rank) = rest.split_whitespace().next().and_then(|r| r.parse::<u32>().ok()) else { return false };
        let Some((_, after_on)) = rest.split_once(" on ") else { return false };
        let mut it = after_on.split_whitespace();
        let (Some(host), Some("device"), Some(_dev)) = (it.next(), it.next(), it.next()) else { return false };
        let Some((_bus, name)) = after_on.split_once('[').and_then(|(_, b)| b.split_once(']')) else { return false };
        let name = name.trim();
        self.ranks = self.ranks.max(rank + 1);
        if !self.hosts.iter().any(|h| h == host) {
            self.hosts.push(host.to_string());
        }
        if !name.is_empty() && !self.gpu_names.iter().any(|n| n == name) {
            self.gpu_names.push(name.to_string());
        }
        self.note_bench_device(host.to_string(), rank);
        true
    }

    /// Takes what one line of an NCCL debug log says about the hardware: the
    /// network (`Using network IB`, `NET/OFI Selected Provider is cxi (found 4
    /// nics)`), the link layer and devices of the IB plugin (`NET/IB : Using
    /// [0]mlx5_0:1/RoCE …`), device speeds (`Made virtual device … speed=…`)
    /// and the CPU of a topology dump (`CPU/0-0 (1/1/2)`: arch/vendor/model);
    /// also nccl-tests' `# Rank … on HOST device … [bus] NAME` lines (ranks,
    /// hosts, GPUs per host, GPU names). `from` names the input for provenance. Other lines are ignored, so a
    /// caller may feed every line.
    pub fn note_log_line(&mut self, line: &str, from: &str) {
        let Some(at) = line.find("NCCL INFO ") else {
            self.note_rank_line(line);
            return;
        };
        let msg = line[at + "NCCL INFO ".len()..].trim_end();
        if let Some(name) = msg.strip_prefix("Using network ") {
            let name = name.trim();
            let tech = match name {
                "IB" => Some(if self.net == Some(NetTech::RoCE) { NetTech::RoCE } else { NetTech::InfiniBand }),
                "Socket" => Some(NetTech::Socket),
                n if n.contains("TCPX") || n.contains("FasTrak") => Some(NetTech::Tcpx),
                // aws-ofi-nccl: the provider line (before this one) decided.
                n if n.contains("Libfabric") || n.contains("OFI") => {
                    Some(self.net.filter(|t| matches!(t, NetTech::Slingshot | NetTech::Efa)).unwrap_or(NetTech::Efa))
                }
                _ => None,
            };
            if let Some(t) = tech {
                if self.net != Some(t) {
                    self.net = Some(t);
                    self.net_from = format!("`Using network {name}` in {from}");
                }
            }
        } else if let Some(rest) = msg.strip_prefix("NET/OFI Selected Provider is ") {
            let provider = rest.split_whitespace().next().unwrap_or("");
            let tech = if provider.eq_ignore_ascii_case("efa") { NetTech::Efa } else { NetTech::Slingshot };
            self.net = Some(tech);
            self.net_from = format!("aws-ofi-nccl provider `{provider}` in {from}");
            let found = rest
                .split_once("(found ")
                .and_then(|(_, r)| r.split_whitespace().next())
                .and_then(|n| n.parse::<u32>().ok());
            if let Some(n) = found {
                if n > self.nic_lines.count {
                    self.nic_lines.count = n;
                    self.nic_lines.names.clear();
                    self.nic_lines.from = format!("`NET/OFI Selected Provider is {provider} (found {n} nics)` in {from}");
                }
            }
        } else if let Some(rest) = msg.strip_prefix("NET/IB : Using ") {
            let mut names = Vec::new();
            let mut roce = false;
            for tok in rest.split(';').next().unwrap_or("").split_whitespace() {
                let Some((idx, dev)) = tok.strip_prefix('[').and_then(|t| t.split_once(']')) else { continue };
                if idx.is_empty() || !idx.bytes().all(|b| b.is_ascii_digit()) {
                    continue;
                }
                let name = dev.split(':').next().unwrap_or(dev);
                roce |= dev.ends_with("/RoCE");
                names.push(name.to_string());
            }
            if roce {
                self.net = Some(NetTech::RoCE);
                self.net_from = format!("`NET/IB : Using …/RoCE` in {from}");
            }
            if names.len() as u32 > self.nic_lines.count {
                self.nic_lines.count = names.len() as u32;
                self.nic_lines.from = format!("`NET/IB : Using {}` in {from}", names.join(" "));
                self.nic_lines.names = names;
            }
        } else if msg.starts_with("NET/IB") && msg.contains(" speed=") {
            // `NET/IB : Made virtual device [0] name=mlx5_0 speed=100000 ndevs=1`
            // `NET/IB: [0] mlx5_0:uverbs0:1/RoCE provider=Mlx5 speed=100000 …`
            let field = |key: &str| msg.split_whitespace().find_map(|t| t.strip_prefix(key));
            let name = field("name=").map(str::to_string).or_else(|| {
                let after = msg.split_once("] ")?.1;
                Some(after.split(':').next()?.to_string())
            });
            let speed = field("speed=").and_then(|s| s.parse::<f64>().ok());
            if let (Some(n), Some(s)) = (name, speed) {
                if s > 0.0 && !n.is_empty() {
                    self.nic_lines.speeds.insert(n, s / 1000.0);
                }
            }
        } else if msg.starts_with("CPU/") {
            if let Some(v) = cpu_from_dump_root(msg) {
                if self.cpu.is_none() {
                    self.cpu = Some(v);
                    self.cpu_from = format!("the topology dump in {from} (`{}`)", msg.trim());
                }
            }
        }
    }

    /// Takes the CPU vendor (`<cpu arch="x86_64" vendor="GenuineIntel">`) and
    /// the GPUs' compute capability (`<gpu sm="80">`) from an NCCL topology XML.
    pub fn note_topo_xml(&mut self, text: &str, from: &str) {
        for tag in text.split('<').skip(1) {
            let tag = tag.split('>').next().unwrap_or("");
            let attr = |key: &str| xml_attr(tag, key);
            if tag.starts_with("cpu ") && self.cpu.is_none() {
                let vendor = attr("vendor").and_then(CpuVendor::from_name);
                let arch = attr("arch").and_then(|a| match a {
                    "aarch64" | "arm64" => Some(CpuVendor::Arm),
                    "ppc64" | "ppc64le" | "power" => Some(CpuVendor::Power),
                    _ => None,
                });
                if let Some(v) = arch.or(vendor) {
                    self.cpu = Some(v);
                    self.cpu_from = format!(
                        "the topology XML {from} (arch {}, vendor {})",
                        attr("arch").unwrap_or("?"),
                        attr("vendor").unwrap_or("?")
                    );
                }
            } else if tag.starts_with("gpu ") && self.gpu_sm == 0 {
                if let Some(sm) = attr("sm").and_then(|s| s.parse().ok()) {
                    self.gpu_sm = sm;
                }
            }
        }
    }
}

/// The value of `key="…"` (or `'…'`) in the text of one XML tag.
fn xml_attr<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = tag;
    while let Some(i) = rest.find(key) {
        let before_ok = i == 0 || rest.as_bytes()[i - 1].is_ascii_whitespace();
        let after = rest[i + key.len()..].trim_start();
        if before_ok {
            if let Some(v) = after.strip_prefix('=') {
                let v = v.trim_start();
                let q = v.chars().next()?;
                if q == '"' || q == '\'' {
                    return v[1..].split(q).next();
                }
            }
        }
        rest = &rest[i + key.len()..];
    }
    None
}

/// `CPU/0-0 (1/1/2)`: NCCL's arch (1 x86, 2 POWER, 3 ARM) and vendor (x86:
/// 1 Intel, 2 AMD, 3 Zhaoxin) codes of a dump's root line.
fn cpu_from_dump_root(msg: &str) -> Option<CpuVendor> {
    let (_, codes) = msg.split_once(" (")?;
    let codes = codes.strip_suffix(')')?;
    let mut it = codes.split('/').map(|x| x.trim().parse::<i64>());
    let (arch, vendor) = (it.next()?.ok()?, it.next()?.ok()?);
    match (arch, vendor) {
        (1, 1) => Some(CpuVendor::Intel),
        (1, 2) => Some(CpuVendor::Amd),
        (2, _) => Some(CpuVendor::Power),
        (3, _) => Some(CpuVendor::Arm),
        _ => None,
    }
}

/// What one host's topology says.
#[derive(Debug, Clone, PartialEq)]
struct TopoSummary {
    host: String,
    gpus: u32,
    /// Smallest per-GPU sum of NVL link bandwidth among GPUs that have NVLink (NCCL units).
    nvl_nccl: f64,
    fabric: IntraFabric,
    /// Slowest PCI link into a GPU, GB/s.
    gpu_pci: Option<f64>,
    cpus: u32,
    /// Slowest CPU–CPU SYS link, GB/s.
    sys: Option<f64>,
    /// (count at the fastest rate, Gbit/s, slower ones left out).
    nets: Option<(u32, f64, u32)>,
    /// NIC nodes (when the dump shows NICs but no NET under them).
    nic_nodes: u32,
    /// Every GPU reaches a NIC through PCI switches only, without its CPU
    /// (NCCL's PIX/PXB: GPUDirect RDMA through a switch); `None` without real NICs.
    rail: Option<bool>,
}

impl TopoSummary {
    fn label(&self) -> String {
        if self.host.contains("(host_hash") {
            format!("the topology XML {}", self.host)
        } else {
            format!("the topology dump of host {}", self.host)
        }
    }
}

/// Standard line rates, Gbit/s, that NCCL's one-decimal GB/s print is snapped back to.
const LINE_RATES: [f64; 15] = [1.0, 2.5, 5.0, 10.0, 20.0, 25.0, 40.0, 50.0, 56.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0];

/// A NET bandwidth as NCCL prints it (GB/s, one decimal) → Gbit/s: the
/// standard rate the printed value can stand for, else `8 × bw`.
fn net_gbit(bw_gb_s: f64) -> f64 {
    let (lo, hi) = ((bw_gb_s - 0.05) * 8.0 - 1e-6, (bw_gb_s + 0.05) * 8.0 + 1e-6);
    let exact = bw_gb_s * 8.0;
    LINE_RATES
        .iter()
        .copied()
        .filter(|r| *r >= lo && *r <= hi)
        .min_by(|a, b| (a - exact).abs().total_cmp(&(b - exact).abs()))
        .unwrap_or((exact * 10.0).round() / 10.0)
}

fn summarize(t: &Topology) -> TopoSummary {
    let gpus: Vec<usize> = t.gpus().map(|(i, _)| i).collect();
    let has_nvs = t.nodes.iter().enumerate().any(|(i, n)| {
        n.kind == NodeKind::NvSwitch && t.links.iter().any(|l| l.kind == LinkKind::Nvl && (l.to == i || l.from == i))
    });
    let mut nvl_min = f64::INFINITY;
    let mut max_peers = 0usize;
    for &g in &gpus {
        let out: Vec<_> = t.links.iter().filter(|l| l.from == g && l.kind == LinkKind::Nvl).collect();
        let sum: f64 = out.iter().map(|l| l.bw_gb_s).sum();
        if sum > 0.0 {
            nvl_min = nvl_min.min(sum);
        }
        let peers: BTreeSet<usize> =
            out.iter().filter(|l| t.nodes[l.to].kind == NodeKind::Gpu).map(|l| l.to).collect();
        max_peers = max_peers.max(peers.len());
    }
    let nvl_nccl = if nvl_min.is_finite() { nvl_min } else { 0.0 };
    let fabric = if has_nvs {
        IntraFabric::NvSwitch
    } else if max_peers >= 2 {
        IntraFabric::NvLinkMesh
    } else if max_peers == 1 {
        IntraFabric::NvLinkPairs
    } else {
        IntraFabric::Pcie
    };
    let gpu_pci = gpus
        .iter()
        .filter_map(|&g| {
            t.links
                .iter()
                .filter(|l| {
                    l.to == g
                        && l.kind == LinkKind::Pci
                        && matches!(t.nodes[l.from].kind, NodeKind::Cpu | NodeKind::PciSwitch)
                })
                .map(|l| l.bw_gb_s)
                .reduce(f64::min)
        })
        .reduce(f64::min);
    let cpus = t.nodes.iter().filter(|n| n.kind == NodeKind::Cpu).count() as u32;
    let sys = t
        .links
        .iter()
        .filter(|l| l.kind == LinkKind::Sys && t.nodes[l.from].kind == NodeKind::Cpu && t.nodes[l.to].kind == NodeKind::Cpu)
        .map(|l| l.bw_gb_s)
        .reduce(f64::min);
    // NET nodes with their rate and whether their NIC is a real PCI device
    // (a NIC hung off its CPU by a LOC-bandwidth link is NCCL's virtual one,
    // holding e.g. the socket transport's bridge and tunnel interfaces).
    let mut nets: Vec<(f64, bool)> = Vec::new();
    for (i, n) in t.nodes.iter().enumerate() {
        if n.kind != NodeKind::Net {
            continue;
        }
        let into: Vec<_> = t.links.iter().filter(|l| l.kind == LinkKind::Net && (l.to == i || l.from == i)).collect();
        let Some(bw) = into.iter().map(|l| l.bw_gb_s).reduce(f64::max) else { continue };
        let real = into.iter().any(|l| {
            let nic = if l.to == i { l.from } else { l.to };
            t.nodes[nic].kind == NodeKind::Nic
                && !t.links.iter().any(|u| u.to == nic && u.kind == LinkKind::Pci && u.bw_gb_s >= 1000.0)
        });
        nets.push((net_gbit(bw), real));
    }
    if nets.iter().any(|n| n.1) {
        nets.retain(|n| n.1);
    }
    let nets = nets.iter().map(|n| n.0).reduce(f64::max).map(|top| {
        let at_top = nets.iter().filter(|n| (n.0 - top).abs() < 1e-9).count() as u32;
        (at_top, top, nets.len() as u32 - at_top)
    });
    // PCI switches above a node, up to (not including) its CPU.
    let switches_above = |n: usize| -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        let mut cur = n;
        for _ in 0..16 {
            let Some(up) = t.links.iter().find(|l| {
                l.to == cur && l.kind == LinkKind::Pci && t.nodes[l.from].kind == NodeKind::PciSwitch
            }) else {
                break;
            };
            if !out.insert(up.from) {
                break;
            }
            cur = up.from;
        }
        out
    };
    let real_nics: Vec<usize> = t
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, n)| {
            n.kind == NodeKind::Nic
                && !t.links.iter().any(|u| u.to == *i && u.kind == LinkKind::Pci && u.bw_gb_s >= 1000.0)
        })
        .map(|(i, _)| i)
        .collect();
    let nic_switches: Vec<BTreeSet<usize>> = real_nics.iter().map(|&n| switches_above(n)).collect();
    let rail = (!real_nics.is_empty() && !gpus.is_empty()).then(|| {
        gpus.iter().all(|&g| {
            let mine = switches_above(g);
            nic_switches.iter().any(|s| !s.is_disjoint(&mine))
        })
    });
    TopoSummary {
        rail,
        host: t.host.clone(),
        gpus: gpus.len() as u32,
        nvl_nccl,
        fabric,
        gpu_pci,
        cpus,
        sys,
        nets,
        nic_nodes: t.nodes.iter().filter(|n| n.kind == NodeKind::Nic).count() as u32,
    }
}

/// The preset for a compute capability when the run names no GPU (a topology
/// XML alone): the vendors' usual part of that generation.
fn preset_for_sm(sm: u32, nvswitch: bool) -> Option<&'static str> {
    Some(match sm {
        70 => "dgx-v100",
        80 if nvswitch => "dgx-a100",
        80 => "pcie-a100",
        86 => "rtx3090-pcie",
        89 => "rtx4090-pcie",
        90 => "dgx-h100",
        100 => "hgx-b200",
        _ => return None,
    })
}

/// Memory of a GPU as its printed name states it (`Tesla V100-SXM2-16GB`,
/// `NVIDIA A100 80GB PCIe`); `None` for superchips, whose name counts the CPU's memory.
fn memory_from_name(name: &str) -> Option<f64> {
    let up = name.to_ascii_uppercase();
    if up.contains("GH200") || up.contains("GB200") {
        return None;
    }
    up.split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(|tok| tok.strip_suffix("GB").and_then(|n| n.parse::<f64>().ok()))
        .filter(|g| *g >= 4.0 && *g <= 1024.0)
}

/// Builds the cluster a run ran on. `fallback` names the preset used for what
/// the run does not tell when its GPU matches none (default `dgx-a100`).
///
/// Order: the preset of the run's GPU (by name, else by the XML's `sm` and
/// whether the topology has NVSwitches, else `fallback`); then nodes and GPUs
/// per node from hosts, `nNodes`, ranks and the topologies; then the
/// topologies' fabric, NVLink, PCIe, sockets, SYS and NICs; then the NIC
/// devices of the plugin's lines where no topology shows NET nodes; then
/// transport and CPU. Every fact taken from the run adds a provenance line.
pub fn cluster_from_facts(facts: &RunFacts, fallback: Option<&str>) -> Result<Cluster, String> {
    let summaries: Vec<TopoSummary> = facts.topologies.iter().map(summarize).filter(|s| s.gpus > 0).collect();
    // The host with the most GPUs stands for all.
    let main = summaries.iter().max_by_key(|s| s.gpus).cloned();
    let mut prov = Vec::new();

    // GPU and base preset.
    let named = facts.gpu_names.iter().find_map(|n| gpu_by_name(n).map(|g| (n, g)));
    let nvswitch = main.as_ref().is_some_and(|m| m.fabric == IntraFabric::NvSwitch);
    let (base, why) = if let Some(p) = named.and_then(|(n, _)| preset_for_gpu(n)) {
        (p, "its GPU".to_string())
    } else if let Some(p) = (facts.gpu_sm > 0).then(|| preset_for_sm(facts.gpu_sm, nvswitch)).flatten() {
        (p, format!("sm_{} in the topology XML", facts.gpu_sm))
    } else {
        (fallback.unwrap_or("dgx-a100"), "no GPU named by the run".to_string())
    };
    let mut c = preset(base).ok_or_else(|| format!("unknown cluster preset '{base}'"))?;
    c.provenance = vec![format!("preset {} for what the run does not tell ({why})", c.name)];
    if let Some((printed, g)) = named {
        if g.name != c.gpu.name {
            c.gpu = g.clone();
        }
        let mut distinct: Vec<&str> = facts.gpu_names.iter().map(|s| s.trim()).collect();
        distinct.sort();
        distinct.dedup();
        let mixed = if distinct.len() > 1 { format!(" (the run names {} models)", distinct.len()) } else { String::new() };
        prov.push(format!("GPU {} from the name `{}`{mixed}", g.name, printed.trim()));
        if let Some(m) = memory_from_name(printed) {
            if m != c.gpu.memory_gib {
                c.gpu.memory_gib = m;
                prov.push(format!("GPU memory {m} GB from the name `{}`", printed.trim()));
            }
        }
    }

    // Nodes and GPUs per node.
    let base_gpus_per_node = c.gpus_per_node;
    let topo_hosts: BTreeSet<&str> = facts.topologies.iter().map(|t| t.host.as_str()).collect();
    let hosts = facts.hosts.len() as u32;
    let nodes = facts.nodes.max(hosts).max(1);
    c.nodes = nodes;
    if facts.nodes > hosts {
        prov.push(format!("{nodes} nodes from the init lines (nNodes)"));
    } else if hosts > 0 {
        prov.push(format!("{nodes} node{} from the hosts of the run", if nodes == 1 { "" } else { "s" }));
    } else if !topo_hosts.is_empty() {
        c.nodes = topo_hosts.len() as u32;
        prov.push(format!("{} node{} from the topologies", c.nodes, if c.nodes == 1 { "" } else { "s" }));
    }
    if let Some(m) = &main {
        c.gpus_per_node = m.gpus;
        prov.push(format!("{} GPUs per node from {}", m.gpus, m.label()));
    } else if let Some(max) = facts.gpus_per_host.values().copied().max().filter(|n| *n > 0) {
        c.gpus_per_node = max;
        prov.push(format!("{max} GPUs per node from the devices per host"));
    } else if facts.ranks > 0 {
        c.gpus_per_node = facts.ranks.div_ceil(c.nodes).max(1);
        prov.push(format!("{} GPUs per node from {} ranks on {} nodes", c.gpus_per_node, facts.ranks, c.nodes));
    }

    // More hosts than the ranks fill: the same machine under two names
    // (nccl-tests' `localhost` beside NCCL's host name), or hosts without GPUs.
    if facts.ranks > 0 {
        let fit = facts.ranks.div_ceil(c.gpus_per_node.max(1)).max(1);
        if c.nodes > fit {
            prov.push(format!(
                "{fit} node{} for {} ranks of {} GPUs per node, not the {} host names seen",
                if fit == 1 { "" } else { "s" },
                facts.ranks,
                c.gpus_per_node,
                c.nodes
            ));
            c.nodes = fit;
        }
    }

    // A preset's NVLink domain that is its node follows the node's GPU count.
    if c.intra.fabric != IntraFabric::Pcie && c.intra.nvlink_domain == base_gpus_per_node {
        c.intra.nvlink_domain = c.gpus_per_node;
    }

    // What the topology of the main host says.
    if let Some(m) = &main {
        let from = m.label();
        c.intra.fabric = m.fabric;
        if m.fabric == IntraFabric::Pcie {
            c.intra.nvlink_gb_s = 0.0;
            c.intra.nvls = false;
            c.intra.nvlink_domain = 1;
            prov.push(format!("fabric pcie (no NVLink between the GPUs) from {from}"));
        } else {
            let per_link_ratio = if c.gpu.nccl_nvlink_bw > 0.0 { c.gpu.nvlink_gb_s_per_link / c.gpu.nccl_nvlink_bw } else { 1.0 };
            c.intra.nvlink_gb_s = round2(m.nvl_nccl * per_link_ratio);
            if m.fabric != IntraFabric::NvSwitch {
                c.intra.nvls = false;
                c.intra.nvlink_domain = if m.fabric == IntraFabric::NvLinkPairs { 2 } else { c.gpus_per_node };
            } else {
                c.intra.nvlink_domain = c.intra.nvlink_domain.max(c.gpus_per_node);
            }
            prov.push(format!(
                "fabric {} and NVLink {} GB/s per GPU ({} GB/s in NCCL units) from {from}",
                m.fabric.name(),
                fmt_num(c.intra.nvlink_gb_s),
                fmt_num(m.nvl_nccl)
            ));
        }
        if let Some(bw) = m.gpu_pci {
            let gen = match bw {
                b if b >= 90.0 => 6,
                b if b >= 40.0 => 5,
                b if b >= 20.0 => 4,
                _ => 3,
            };
            c.gpu.pcie_gen = gen;
            c.intra.pcie_gb_s = if (bw - pcie_x16_gb_s(gen)).abs() < 0.5 { pcie_x16_gb_s(gen) } else { bw };
            prov.push(format!("PCIe gen{gen} ({} GB/s per GPU) from {from}", fmt_num(bw)));
        }
        if m.cpus > 0 {
            c.intra.sockets = m.cpus;
            prov.push(format!("{} CPU socket{} (NUMA domains) from {from}", m.cpus, if m.cpus == 1 { "" } else { "s" }));
        }
        if let Some(sys) = m.sys {
            c.intra.sys_gb_s = sys;
            prov.push(format!("SYS {} GB/s between sockets from {from}", fmt_num(sys)));
        }
        if let Some((count, gbit, slower)) = m.nets {
            c.nics.per_node = count;
            c.nics.gbit_s = gbit;
            let left = if slower > 0 { format!(", {slower} slower left out") } else { String::new() };
            prov.push(format!("NICs {count}x {} Gbit/s from the NET nodes of {from}{left}", fmt_num(gbit)));
        }
        // Hosts that differ from the main one.
        for s in summaries.iter().filter(|s| s.host != m.host) {
            if s.gpus != m.gpus || s.fabric != m.fabric || (s.nvl_nccl - m.nvl_nccl).abs() > 1e-6 || s.nets != m.nets {
                let nvl = if s.fabric == IntraFabric::Pcie {
                    String::new()
                } else {
                    format!(", NVLink {} GB/s in NCCL units", fmt_num(s.nvl_nccl))
                };
                prov.push(format!(
                    "note: host {} differs ({} GPU{}, {}{nvl}); {} stands for all",
                    s.host,
                    s.gpus,
                    if s.gpus == 1 { "" } else { "s" },
                    s.fabric.name(),
                    m.host
                ));
            }
        }
    }

    // NICs from the plugin's lines when no topology shows NET nodes.
    let topo_nets = summaries.iter().any(|s| s.nets.is_some());
    if !topo_nets && facts.nic_lines.count > 0 {
        c.nics.per_node = facts.nic_lines.count;
        let speed = match facts.nic_lines.gbit_s() {
            Some(g) => {
                c.nics.gbit_s = g;
                format!("{} Gbit/s from the device speeds", fmt_num(g))
            }
            None => format!("{} Gbit/s from the preset", fmt_num(c.nics.gbit_s)),
        };
        prov.push(format!("{} NIC{} from {}, {speed}", facts.nic_lines.count, if facts.nic_lines.count == 1 { "" } else { "s" }, facts.nic_lines.from));
    } else if !topo_nets && main.as_ref().is_some_and(|m| m.nic_nodes > 0) {
        let m = main.as_ref().expect("checked");
        prov.push(format!(
            "note: {} shows {} NIC{} without NET nodes (NCCL leaves them out of a one-node communicator); NIC figures from the preset",
            m.label(),
            m.nic_nodes,
            if m.nic_nodes == 1 { "" } else { "s" }
        ));
    }
    match main.as_ref().and_then(|m| m.rail.map(|r| (r, m.label()))) {
        Some((rail, from)) => {
            c.nics.rail_aligned = rail;
            let how = if rail {
                "rail-aligned: every GPU shares a PCI switch with a NIC"
            } else {
                "not rail-aligned: some GPU reaches its NICs only through the CPU"
            };
            prov.push(format!("{how}, from {from}"));
        }
        None if c.nics.rail_aligned && c.nics.per_node * 2 < c.gpus_per_node => {
            c.nics.rail_aligned = false;
            prov.push(format!("not rail-aligned: {} NICs for {} GPUs per node", c.nics.per_node, c.gpus_per_node));
        }
        None => {}
    }

    if let Some(net) = facts.net {
        c.nics.tech = net;
        c.network.latency_us = net.default_latency_us();
        let from = if facts.net_from.is_empty() { "the run".to_string() } else { facts.net_from.clone() };
        prov.push(format!("network {} from {from}", net.name()));
    }
    if let Some(cpu) = facts.cpu {
        c.cpu = cpu;
        let from = if facts.cpu_from.is_empty() { "the run".to_string() } else { facts.cpu_from.clone() };
        prov.push(format!("CPU {} from {from}", cpu.name()));
    }

    c.name = "from run".to_string();
    c.provenance.extend(prov);
    Ok(c)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `240`, `12.5`, `370.8`: a figure without trailing zeros.
fn fmt_num(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Gathers [`RunFacts`] from a table: hosts, ranks (devices, or the largest
/// communicator's `nranks`), nodes (`nNodes`), GPUs per host (distinct
/// devices of each host), topologies, and the transport of the network
/// connections (`via NET/IB/0`, `NET/Socket/1`).
pub fn facts_from_table(t: &OpTable) -> RunFacts {
    let mut hosts: Vec<String> = t.processes.iter().map(|p| p.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    // A GPU: its bus id on its host; without one, its process and ordinal.
    type GpuKey = (u32, Option<u64>, Option<u32>);
    let mut per_host: BTreeMap<String, BTreeSet<GpuKey>> = BTreeMap::new();
    for d in &t.devices {
        let p = &t.processes[d.proc.ix()];
        let key = match d.bus_id {
            Some(b) => (0, Some(b), None),
            None => (p.pid, None, d.cuda_dev),
        };
        per_host.entry(p.host.clone()).or_default().insert(key);
    }
    let gpus_per_host = per_host.into_iter().map(|(h, s)| (h, s.len() as u32)).collect();
    let ranks = (t.devices.len() as u32).max(t.comms.iter().filter_map(|c| c.nranks).max().unwrap_or(0));
    let nodes = t.comms.iter().filter_map(|c| c.n_nodes).max().unwrap_or(0);
    let mut net = None;
    let mut net_from = String::new();
    'conns: for c in &t.comms {
        for conn in &c.connections {
            let Some(rest) = conn.transport.strip_prefix("NET/") else { continue };
            let name = rest.split('/').next().unwrap_or("");
            let tech = match name {
                "IB" => Some(NetTech::InfiniBand),
                "Socket" => Some(NetTech::Socket),
                n if n.contains("TCPX") || n.contains("FasTrak") => Some(NetTech::Tcpx),
                _ => None,
            };
            if let Some(tech) = tech {
                net = Some(tech);
                net_from = format!("the connections (`via {}`)", conn.transport);
                break 'conns;
            }
        }
    }
    RunFacts {
        ranks,
        hosts,
        gpu_names: Vec::new(),
        topologies: t.topologies.clone(),
        net,
        net_from,
        nodes,
        gpus_per_host,
        ..RunFacts::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commlens_core::topo::LinkKind;
    use commlens_ingest::inputs::load_inputs;
    use commlens_ingest::nccl_log::ReadOptions;
    use commlens_ingest::nccl_tests::read_nccl_tests;
    use commlens_ingest::topo_xml::read_topo_xml;
    use std::path::{Path, PathBuf};

    /// What the CLI gathers from one log: the table, its lines, its nccl-tests header.
    fn facts_of_log(path: &Path) -> RunFacts {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let mut f = RunFacts::default();
        for line in std::fs::read_to_string(path).unwrap().lines() {
            f.note_log_line(line, &name);
        }
        let loaded = load_inputs(&[path.to_path_buf()], &ReadOptions::default()).unwrap();
        f.merge(facts_from_table(&loaded.table));
        if let Ok(b) = read_nccl_tests(path) {
            for r in b.runs {
                f.gpu_names.extend(r.gpu_models);
                f.ranks = f.ranks.max(r.ranks);
            }
        }
        f
    }

    fn facts_of_xml(path: &Path) -> RunFacts {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let mut f = RunFacts { topologies: vec![read_topo_xml(path).unwrap()], ..RunFacts::default() };
        f.note_topo_xml(&std::fs::read_to_string(path).unwrap(), &name);
        f
    }

    fn real(name: &str) -> Option<PathBuf> {
        let p = commlens_testdata::real_dir("nccl-logs")?.join(name);
        if p.is_file() {
            Some(p)
        } else {
            eprintln!("skipped: {} not found", p.display());
            None
        }
    }

    fn has(c: &Cluster, what: &str) -> bool {
        c.provenance.iter().any(|p| p.contains(what))
    }

    #[test]
    fn net_rates_snap_back_to_line_rates() {
        assert_eq!(net_gbit(12.5), 100.0);
        assert_eq!(net_gbit(3.1), 25.0);
        assert_eq!(net_gbit(7.0), 56.0);
        assert_eq!(net_gbit(1.2), 10.0);
        assert_eq!(net_gbit(0.1), 1.0);
        assert_eq!(net_gbit(50.0), 400.0);
        assert_eq!(net_gbit(25.0), 200.0);
        assert_eq!(net_gbit(30.0), 240.0);
    }

    #[test]
    fn log_lines_give_network_nics_and_cpu() {
        let mut f = RunFacts::default();
        for l in [
            "mew0:1:2 [1] NCCL INFO NET/IB: [0] mlx5_0:uverbs0:1/RoCE provider=Mlx5 speed=100000 context=0x1 ar=0",
            "mew0:1:2 [1] NCCL INFO NET/IB : Made virtual device [1] name=mlx5_1 speed=200000 ndevs=1",
            "mew0:1:2 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eno8303:192.168.0.3<0>",
            "mew0:1:2 [1] NCCL INFO Using network IB",
            "mew0:1:2 [0] NCCL INFO CPU/0-0 (1/2/-1)",
            "mew0:1:2 [0] NCCL INFO not a fact",
        ] {
            f.note_log_line(l, "x.log");
        }
        assert_eq!(f.net, Some(NetTech::RoCE));
        assert_eq!(f.nic_lines.count, 2);
        assert_eq!(f.nic_lines.names, ["mlx5_0", "mlx5_1"]);
        assert_eq!(f.nic_lines.gbit_s(), Some(200.0));
        assert_eq!(f.cpu, Some(CpuVendor::Amd));

        let mut g = RunFacts::default();
        g.note_log_line("x:1:2 [1] NCCL INFO NET/OFI Selected Provider is cxi (found 4 nics)", "a.log");
        g.note_log_line("x:1:2 [1] NCCL INFO Using network AWS Libfabric", "a.log");
        assert_eq!((g.net, g.nic_lines.count), (Some(NetTech::Slingshot), 4));
        let mut h = RunFacts::default();
        h.note_log_line("x:1:2 [1] NCCL INFO NET/IB : Using [0]mlx5_2:1/IB [RO]; OOB ib0:10.0.0.1<0>", "a.log");
        h.note_log_line("x:1:2 [1] NCCL INFO Using network IB", "a.log");
        assert_eq!((h.net, h.nic_lines.count), (Some(NetTech::InfiniBand), 1));
        let mut r = RunFacts::default();
        for l in [
            " 0: #  Rank  0 Group  0 Pid  51455 on  nid005896 device  0 [0x01] NVIDIA GH200 120GB",
            " 0: #  Rank  1 Group  0 Pid  51456 on  nid005896 device  0 [0x01] NVIDIA GH200 120GB",
            "run(), common.cu:998, #  Rank  2 Group  0 Pid 98893 on     gdr116 device  0 [0000:08:00] Tesla V100-SXM2-16GB",
            "#   Rank  3 Pid 1111460 on oneflow-27 device  3 [0x12] NVIDIA GeForce RTX 3090",
            "# Rank is not a device line",
        ] {
            r.note_log_line(l, "b.out");
        }
        assert_eq!(r.ranks, 4);
        assert_eq!(r.hosts, ["nid005896", "gdr116", "oneflow-27"]);
        assert_eq!(r.gpus_per_host["nid005896"], 2);
        assert_eq!(r.gpu_names.len(), 3);
        let mut s = RunFacts::default();
        s.note_log_line("x:1:2 [1] NCCL INFO Using network Socket", "a.log");
        assert_eq!(s.net, Some(NetTech::Socket));
        assert_eq!(s.nic_lines.count, 0);
    }

    #[test]
    fn xml_attributes() {
        let mut f = RunFacts::default();
        f.note_topo_xml(
            "<system version=\"1\">\n <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n <pci busid='0000:01:00.0'>\n <gpu dev=\"0\" sm=\"89\" rank=\"0\"/>",
            "t.xml",
        );
        assert_eq!((f.cpu, f.gpu_sm), (Some(CpuVendor::Amd), 89));
        let mut g = RunFacts::default();
        g.note_topo_xml("<cpu numaid=\"0\" arch=\"aarch64\" vendor=\"\"/>", "t.xml");
        assert_eq!(g.cpu, Some(CpuVendor::Arm));
    }

    /// An 8-GPU NVSwitch host with 8 NICs at 400G (NCCL units, H100).
    fn nvswitch_host() -> Topology {
        let mut t = Topology::new("h100a");
        let cpu = [t.node(NodeKind::Cpu, "0-0"), t.node(NodeKind::Cpu, "0-1")];
        t.add_link(cpu[0], cpu[1], LinkKind::Sys, 22.0);
        let nvs = t.node(NodeKind::NvSwitch, "0-0");
        for i in 0..8u32 {
            let g = t.node(NodeKind::Gpu, &format!("0-{:x}000", 0x10 + i));
            let gsw = t.node(NodeKind::PciSwitch, &format!("0-{:x}000", 0x50 + i / 2));
            t.add_link(cpu[(i / 4) as usize], gsw, LinkKind::Pci, 48.0);
            t.add_link(gsw, g, LinkKind::Pci, 48.0);
            t.add_link(g, nvs, LinkKind::Nvl, 370.8);
            t.add_link(nvs, g, LinkKind::Nvl, 370.8);
            let sw = t.node(NodeKind::PciSwitch, &format!("0-{:x}000", 0x50 + i / 2));
            t.add_link(cpu[(i / 4) as usize], sw, LinkKind::Pci, 48.0);
            let nic = t.node(NodeKind::Nic, &format!("0-{:x}000", 0x90 + i));
            t.add_link(sw, nic, LinkKind::Pci, 48.0);
            let net = t.node(NodeKind::Net, &format!("0-{i}"));
            t.add_link(nic, net, LinkKind::Net, 50.0);
        }
        t
    }

    #[test]
    fn nvswitch_topology_with_h100_names() {
        let facts = RunFacts {
            ranks: 16,
            hosts: vec!["h100a".into(), "h100b".into()],
            gpu_names: vec!["NVIDIA H100 80GB HBM3".into()],
            topologies: vec![nvswitch_host()],
            net: Some(NetTech::InfiniBand),
            ..RunFacts::default()
        };
        let c = cluster_from_facts(&facts, None).unwrap();
        assert_eq!((c.nodes, c.gpus_per_node), (2, 8));
        assert_eq!(c.intra.fabric, IntraFabric::NvSwitch);
        assert!((c.intra.nvlink_gb_s - 450.0).abs() < 0.01, "{}", c.intra.nvlink_gb_s);
        assert!(c.intra.nvls, "NVLS stays from the preset");
        assert_eq!((c.gpu.pcie_gen, c.intra.pcie_gb_s), (5, 48.0));
        assert_eq!((c.intra.sockets, c.intra.sys_gb_s), (2, 22.0));
        assert_eq!((c.nics.per_node, c.nics.gbit_s), (8, 400.0));
        assert!(c.nics.rail_aligned);
        assert!(has(&c, "NVLink 450 GB/s per GPU (370.8 GB/s in NCCL units) from the topology dump of host h100a"));
        assert!(has(&c, "NICs 8x 400 Gbit/s"));
        assert!(has(&c, "rail-aligned: every GPU shares a PCI switch with a NIC"));
        assert!(c.provenance[0].starts_with("preset dgx-h100"));
    }

    #[test]
    fn names_ranks_and_hosts_only_keep_the_old_meaning() {
        let facts = RunFacts {
            ranks: 4,
            hosts: vec!["a".into(), "b".into()],
            gpu_names: vec!["Tesla V100-SXM2-16GB".into()],
            ..RunFacts::default()
        };
        let c = cluster_from_facts(&facts, None).unwrap();
        assert_eq!((c.nodes, c.gpus_per_node, c.gpu.name), (2, 2, "V100"));
        assert_eq!(c.gpu.memory_gib, 16.0);
        assert_eq!(c.intra.nvlink_domain, 2, "the preset's node-wide domain follows the node");
        assert_eq!(c.intra.fabric, IntraFabric::NvLinkMesh);
        let aliases = RunFacts {
            ranks: 8,
            hosts: vec!["localhost".into(), "hostname".into()],
            gpus_per_host: [("localhost".to_string(), 8)].into_iter().collect(),
            ..RunFacts::default()
        };
        let c = cluster_from_facts(&aliases, None).unwrap();
        assert_eq!((c.nodes, c.gpus_per_node), (1, 8));
        assert!(has(&c, "1 node for 8 ranks of 8 GPUs per node, not the 2 host names seen"));
        let none = cluster_from_facts(&RunFacts::default(), Some("dgx-h100")).unwrap();
        assert_eq!((none.nodes, none.gpus_per_node, none.gpu.name), (1, 8, "H100"));
        assert!(cluster_from_facts(&RunFacts::default(), Some("nope")).is_err());
    }

    #[test]
    fn timez_a100_pcie_pair_joined_by_nvlink_bridge() {
        let Some(p) = real("timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log") else { return };
        let c = cluster_from_facts(&facts_of_log(&p), None).unwrap();
        println!("{:#?}", c.provenance);
        assert_eq!((c.nodes, c.gpus_per_node), (1, 2));
        assert_eq!(c.gpu.name, "A100-PCIe");
        assert_eq!(c.gpu.memory_gib, 80.0);
        assert_eq!(c.intra.fabric, IntraFabric::NvLinkPairs);
        assert_eq!(c.intra.nvlink_gb_s, 300.0, "240 NCCL units = 12 links x 25 GB/s");
        assert!(!c.intra.nvls);
        assert_eq!((c.gpu.pcie_gen, c.intra.pcie_gb_s, c.intra.sockets), (4, 24.0, 1));
        assert_eq!(c.nics.tech, NetTech::RoCE);
        assert_eq!((c.nics.per_node, c.nics.gbit_s), (2, 100.0), "from the IB plugin's lines: the dump has no NET");
        assert_eq!(c.cpu, CpuVendor::Intel);
        assert!(has(&c, "NVLink 300 GB/s per GPU (240 GB/s in NCCL units) from the topology dump of host mew0"));
        assert!(has(&c, "GPU A100-PCIe from the name `NVIDIA A100 80GB PCIe`"));
    }

    #[test]
    fn timez_topology_xml_alone() {
        let Some(p) = real("timez-zx-nccl-tests-nccl_topo_dump_normal.xml") else { return };
        let c = cluster_from_facts(&facts_of_xml(&p), None).unwrap();
        println!("{:#?}", c.provenance);
        assert!(c.provenance[0].contains("preset pcie-a100") && c.provenance[0].contains("sm_80"));
        assert_eq!((c.nodes, c.gpus_per_node), (1, 2));
        assert_eq!((c.intra.fabric, c.intra.nvlink_gb_s), (IntraFabric::NvLinkPairs, 300.0));
        assert_eq!((c.nics.per_node, c.nics.gbit_s), (2, 100.0), "two ports at speed=100000");
        assert_eq!(c.cpu, CpuVendor::Intel);
        assert!(has(&c, "from the topology XML"));
    }

    #[test]
    fn sugarlxn_rtx4090_pcie_only() {
        let Some(x) = real("sugarlxn-nccl_test-nccl_topo.xml") else { return };
        let c = cluster_from_facts(&facts_of_xml(&x), None).unwrap();
        println!("{:#?}", c.provenance);
        assert_eq!(c.gpu.name, "RTX4090");
        assert_eq!((c.gpus_per_node, c.intra.fabric, c.intra.nvlink_gb_s), (4, IntraFabric::Pcie, 0.0));
        assert_eq!((c.gpu.pcie_gen, c.intra.sockets, c.intra.sys_gb_s), (4, 4, 16.0));
        assert_eq!((c.nics.per_node, c.nics.gbit_s), (1, 1.0), "the one real NIC, not the 15 virtual interfaces");
        assert_eq!(c.cpu, CpuVendor::Amd);

        let Some(l) = real("sugarlxn-nccl_test-nccl_trace-4xRTX4090-PCIe-2.28.9.log") else { return };
        let c = cluster_from_facts(&facts_of_log(&l), None).unwrap();
        println!("{:#?}", c.provenance);
        assert_eq!((c.nodes, c.gpus_per_node, c.intra.fabric), (1, 4, IntraFabric::Pcie));
        assert_eq!((c.nics.tech, c.nics.per_node, c.nics.gbit_s), (NetTech::Socket, 1, 1.0));
        assert_eq!((c.cpu, c.intra.sockets), (CpuVendor::Amd, 4));
        assert!(!c.intra.nvls && c.intra.nvlink_domain == 1);
    }

    #[test]
    fn panlichen_rtx3090_dual_socket_two_hosts() {
        let Some(p) = real("panlichen-nccl-tests-log-RTX3090-PCIe-dualsocket-GRAPH-2.18.1.log") else { return };
        let f = facts_of_log(&p);
        let c = cluster_from_facts(&f, None).unwrap();
        println!("{:#?}", c.provenance);
        assert_eq!((c.nodes, c.gpus_per_node), (2, 8));
        assert_eq!(c.gpu.name, "RTX3090");
        assert_eq!((c.intra.fabric, c.intra.sockets, c.intra.sys_gb_s), (IntraFabric::Pcie, 2, 10.0));
        assert_eq!(c.gpu.pcie_gen, 4);
        assert_eq!((c.nics.per_node, c.nics.gbit_s), (1, 56.0), "NET[7.0]: a 56G FDR port");
        assert!(!c.nics.rail_aligned);
        assert_eq!(c.cpu, CpuVendor::Intel);
    }

    #[test]
    fn ssbandjl_two_v100_nodes_over_two_25g_ports() {
        let Some(p) = real("ssbandjl-nccl-tests-run_with_mpi_2node_4gpu_trace-4xV100-2node-IB-2.26.6-modified.log") else {
            return;
        };
        let mut f = facts_of_log(&p);
        // The trace log names no GPU: its sibling from the same two hosts does.
        if let Some(q) = real("ssbandjl-nccl-tests-run_with_mpi_all_gather_2node_4gpu-4xV100-IB-2.26.6.log") {
            f.merge(facts_of_log(&q));
        }
        let c = cluster_from_facts(&f, None).unwrap();
        println!("{:#?}", c.provenance);
        assert_eq!((c.nodes, c.gpus_per_node, c.gpu.name), (2, 2, "V100"));
        assert_eq!(c.intra.fabric, IntraFabric::Pcie, "the two GPUs of each host share no NVLink");
        assert_eq!((c.gpu.pcie_gen, c.intra.sockets), (3, 2));
        assert_eq!((c.nics.per_node, c.nics.gbit_s), (2, 25.0));
        assert!(!c.nics.rail_aligned, "GPU and NIC meet only at the CPU");
        assert!(matches!(c.nics.tech, NetTech::InfiniBand | NetTech::RoCE));
    }
}
