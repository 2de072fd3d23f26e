//! Clusters from what a run already tells: the topology dump or
//! `NCCL_TOPO_DUMP_FILE` XML (GPUs, NVLink, PCIe, NICs and their speed), the
//! `# Rank … on HOST device … [bus] GPU NAME` lines of nccl-tests, and the
//! init lines (ranks, nodes). What the run does not say comes from the preset
//! matching its GPU, and `provenance` says which fact came from where.

use commlens_core::{OpTable, Topology};

use crate::cluster::{Cluster, NetTech};
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
}

/// Builds the cluster a run ran on. `fallback` names the preset used for what
/// the run does not tell when its GPU matches none (default `dgx-a100`).
pub fn cluster_from_facts(facts: &RunFacts, fallback: Option<&str>) -> Result<Cluster, String> {
    let gpu_preset = facts.gpu_names.iter().find_map(|g| preset_for_gpu(g));
    let name = gpu_preset.or(fallback).unwrap_or("dgx-a100");
    let mut c = preset(name).ok_or_else(|| format!("unknown cluster preset '{name}'"))?;
    let hosts = facts.hosts.len().max(1) as u32;
    c.nodes = hosts;
    if facts.ranks > 0 {
        c.gpus_per_node = facts.ranks.div_ceil(hosts).max(1);
    }
    if let Some(net) = facts.net {
        c.nics.tech = net;
        c.network.latency_us = net.default_latency_us();
    }
    c.name = "from run".to_string();
    Ok(c)
}

/// Gathers [`RunFacts`] from a table (hosts, ranks, topologies).
pub fn facts_from_table(t: &OpTable) -> RunFacts {
    let mut hosts: Vec<String> = t.processes.iter().map(|p| p.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    RunFacts {
        ranks: t.devices.len() as u32,
        hosts,
        gpu_names: Vec::new(),
        topologies: t.topologies.clone(),
        net: None,
    }
}
