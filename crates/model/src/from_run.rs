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

#![allow(unused_imports)]
use std::collections::{BTreeMap, BTreeSet};

use commlens_core::topo::{LinkKind, NodeKind};
use commlens_core::{OpTable, Topology};

use crate::cluster::{Cluster, CpuVendor, IntraFabric, NetTech};
use crate::gpu::{gpu_by_name, pcie_x16_gb_s};
use crate::presets::{preset, preset_for_gpu};

mod facts;
mod topo_summary;
#[cfg(test)]
mod tests;

pub use facts::{NicLines, RunFacts};
use facts::*;
use topo_summary::*;

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
