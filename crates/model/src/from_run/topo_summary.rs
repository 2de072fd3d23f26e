//! One host's topology reduced to what a cluster needs: GPU count, fabric,
//! NVLink and PCIe rates, NICs and their line rates, sockets.

#![allow(unused_imports)]
use std::collections::{BTreeMap, BTreeSet};

use commlens_core::topo::{LinkKind, NodeKind};
use commlens_core::{OpTable, Topology};

use crate::cluster::{Cluster, CpuVendor, IntraFabric, NetTech};
use crate::gpu::{gpu_by_name, pcie_x16_gb_s};
use crate::presets::{preset, preset_for_gpu};

use super::*;

/// What one host's topology says.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TopoSummary {
    pub(super) host: String,
    pub(super) gpus: u32,
    /// Smallest per-GPU sum of NVL link bandwidth among GPUs that have NVLink (NCCL units).
    pub(super) nvl_nccl: f64,
    pub(super) fabric: IntraFabric,
    /// Slowest PCI link into a GPU, GB/s.
    pub(super) gpu_pci: Option<f64>,
    pub(super) cpus: u32,
    /// Slowest CPU–CPU SYS link, GB/s.
    pub(super) sys: Option<f64>,
    /// (count at the fastest rate, Gbit/s, slower ones left out).
    pub(super) nets: Option<(u32, f64, u32)>,
    /// NIC nodes (when the dump shows NICs but no NET under them).
    pub(super) nic_nodes: u32,
    /// Every GPU reaches a NIC through PCI switches only, without its CPU
    /// (NCCL's PIX/PXB: GPUDirect RDMA through a switch); `None` without real NICs.
    pub(super) rail: Option<bool>,
}

impl TopoSummary {
    pub(super) fn label(&self) -> String {
        if self.host.contains("(host_hash") {
            format!("the topology XML {}", self.host)
        } else {
            format!("the topology dump of host {}", self.host)
        }
    }
}

/// Standard line rates, Gbit/s, that NCCL's one-decimal GB/s print is snapped back to.
pub(super) const LINE_RATES: [f64; 15] = [1.0, 2.5, 5.0, 10.0, 20.0, 25.0, 40.0, 50.0, 56.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0];

/// A NET bandwidth as NCCL prints it (GB/s, one decimal) → Gbit/s: the
/// standard rate the printed value can stand for, else `8 × bw`.
pub(super) fn net_gbit(bw_gb_s: f64) -> f64 {
    let (lo, hi) = ((bw_gb_s - 0.05) * 8.0 - 1e-6, (bw_gb_s + 0.05) * 8.0 + 1e-6);
    let exact = bw_gb_s * 8.0;
    LINE_RATES
        .iter()
        .copied()
        .filter(|r| *r >= lo && *r <= hi)
        .min_by(|a, b| (a - exact).abs().total_cmp(&(b - exact).abs()))
        .unwrap_or((exact * 10.0).round() / 10.0)
}

pub(super) fn summarize(t: &Topology) -> TopoSummary {
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
