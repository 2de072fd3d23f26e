//! [`RunFacts`]: what a run tells about its hardware, gathered line by line
//! from NCCL logs, nccl-tests headers and topology XML text.

#![allow(unused_imports)]
use std::collections::{BTreeMap, BTreeSet};

use commlens_core::topo::{LinkKind, NodeKind};
use commlens_core::{OpTable, Topology};

use crate::cluster::{Cluster, CpuVendor, IntraFabric, NetTech};
use crate::gpu::{gpu_by_name, pcie_x16_gb_s};
use crate::presets::{preset, preset_for_gpu};

use super::*;

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
pub(super) fn xml_attr<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
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
pub(super) fn cpu_from_dump_root(msg: &str) -> Option<CpuVendor> {
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
