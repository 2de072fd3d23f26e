//! Node hardware model and the text NCCL prints about it before and during the first init.
//!
//! Owns the per-process preamble (`Bootstrap: Using ...`, `cudaDriverVersion`, `NCCL version`),
//! the network plugin lines of the first communicator, the CPU affinity line and the topology
//! dump (`=== System : maxBw ... ===`, `CPU/0-0 (1/1/2)`, `+ PCI[24.0] - GPU/0-<bus> (<rank>)`,
//! nested `+ NVL[..]` / `+ NET[..]` edges, the `====` separator and the per-GPU path lines).
//!
//! Hardware: one CPU socket per 4 GPUs; nodes of up to 4 GPUs have an NVSwitch-less
//! all-to-all NVLink mesh (A100 SXM4 with 4 GPUs: 4 links x 20 GB/s = `NVL[80.0]` per pair),
//! bigger nodes an NVSwitch (`NVL[240.0] - NVS/0-0`). Every node has one 200 Gb/s InfiniBand
//! NIC `mlx5_0` (`NET[25.0]`) behind PCIe Gen4 x16 (`PCI[24.0]`).

use crate::config::{LogFormat, NcclVersion, RunConfig};
use crate::layout::{Comm, Layout, Proc, NIC_BUS_ID};

/// PCIe bandwidth NCCL assumes for Gen4 x16 (GB/s).
pub(crate) const PCI_BW: f64 = 24.0;
/// Network bandwidth of the NIC (GB/s).
pub(crate) const NET_BW: f64 = 25.0;
/// Per-GPU NVLink bandwidth of an NVSwitch node (12 links x 20 GB/s).
const NVS_BW: f64 = 240.0;

/// NVLink bandwidth between two GPUs of a mesh node, `None` for an NVSwitch node or a node
/// with one GPU.
pub(crate) fn mesh_pair_bw(gpus_per_node: usize) -> Option<f64> {
    match gpus_per_node {
        2..=4 => Some(240.0 / (gpus_per_node - 1) as f64),
        _ => None,
    }
}

/// The NVLink bandwidth of one GPU to all its peers in the dump (GB/s, NCCL's units): the
/// mesh pairs summed, or the NVSwitch link (the timing cluster's figure).
pub(crate) fn gpu_nvlink_bw(gpus_per_node: usize) -> f64 {
    match mesh_pair_bw(gpus_per_node) {
        Some(bw) => bw * (gpus_per_node - 1) as f64,
        None if gpus_per_node > 4 => NVS_BW,
        None => PCI_BW,
    }
}

/// Lines of the main thread before the first communicator (every process), in the 2.27 order.
pub(crate) fn preamble(cfg: &RunConfig, ver: &NcclVersion, p: &Proc, driver: u32) -> Vec<String> {
    let sep = if ver.bootstrap_colon_style() {
        "Bootstrap: Using"
    } else {
        "Bootstrap : Using"
    };
    let mut v = vec![
        format!("{sep} eth0:{}<0>", p.ip),
        format!("cudaDriverVersion {driver}"),
    ];
    if p.local_rank == 0 {
        v.push(format!(
            "NCCL version {}+cuda{}",
            cfg.nccl_version, cfg.cuda_version
        ));
    }
    v
}

/// Network plugin lines printed by the init thread of the process's first communicator.
pub(crate) fn net_plugin_lines(p: &Proc) -> Vec<String> {
    vec![
        "NET/Plugin: Could not find: libnccl-net.so. ".to_string(),
        format!("NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:{}<0>", p.ip),
        "Initialized NET plugin IB".to_string(),
    ]
}

/// `Setting affinity for GPU d to <cpu list>`: 32 cores per socket, 4 GPUs per socket.
pub(crate) fn affinity_line(p: &Proc) -> String {
    let socket = p.local_rank / 4;
    let cores: Vec<String> = (socket * 32..socket * 32 + 32)
        .map(|c| c.to_string())
        .collect();
    format!("Setting affinity for GPU {} to {}", p.dev, cores.join(","))
}

/// Topology dump of `comm` as seen from a process on `node`: only the comm's GPUs of that
/// node appear, labelled with their comm rank (NCCL prints `gpu.rank`).
pub(crate) fn topology_dump(
    cfg: &RunConfig,
    ver: &NcclVersion,
    layout: &Layout,
    comm: &Comm,
    node: usize,
) -> Vec<String> {
    let mut gpus: Vec<(u64, usize, usize)> = comm
        .cranks_on(node)
        .iter()
        .map(|&cr| {
            let g = comm.members[cr];
            (layout.procs[g].bus_id, cr, layout.procs[g].local_rank)
        })
        .collect();
    gpus.sort_unstable();
    let pair = mesh_pair_bw(cfg.gpus_per_node);
    let nvswitch = cfg.gpus_per_node > 4;
    let (max_bw, total_bw) = match (pair, nvswitch, gpus.len()) {
        (_, _, 0 | 1) => (PCI_BW, PCI_BW),
        (Some(bw), _, n) => (bw, bw * (n - 1) as f64),
        (None, true, _) => (NVS_BW, NVS_BW),
        (None, false, _) => (PCI_BW, PCI_BW),
    };
    let mut out = vec![format!(
        "=== System : maxBw {max_bw:.1} totalBw {total_bw:.1} ==="
    )];
    let sockets = cfg.gpus_per_node.div_ceil(4).max(1);
    let pci = format!("+ PCI[{PCI_BW:.1}] - ");
    let indent = " ".repeat(pci.len());
    for s in 0..sockets {
        out.push(format!("CPU/0-{s} (1/1/2)"));
        let mut children: Vec<(u64, Vec<String>)> = Vec::new();
        for &(bus, cr, _) in gpus.iter().filter(|g| g.2 / 4 == s) {
            let mut lines = vec![format!("{pci}GPU/0-{bus:x} ({cr})")];
            if nvswitch {
                lines.push(format!("{indent}+ NVL[{NVS_BW:.1}] - NVS/0-0"));
            } else if let Some(bw) = pair {
                for &(other, _, _) in gpus.iter().filter(|g| g.0 != bus) {
                    lines.push(format!("{indent}+ NVL[{bw:.1}] - GPU/0-{other:x}"));
                }
            }
            children.push((bus, lines));
        }
        if s == 0 {
            let suffix = if ver.net_node_suffix() {
                format!(" (0/0/0/{NET_BW:.6})")
            } else {
                String::new()
            };
            children.push((
                NIC_BUS_ID,
                vec![
                    format!("{pci}NIC/0-{NIC_BUS_ID:x}"),
                    format!("{indent}+ NET[{NET_BW:.1}] - NET/0-0{suffix}"),
                ],
            ));
        }
        children.sort_by_key(|c| c.0);
        for (_, lines) in children {
            out.extend(lines);
        }
        for other in (0..sockets).filter(|&o| o != s) {
            out.push(format!("+ SYS[16.0] - CPU/0-{other}"));
        }
    }
    out.push("=".repeat(42));
    for &(bus, _, lr) in &gpus {
        let mut line = format!("GPU/0-{bus:x} :");
        for &(other, _, olr) in &gpus {
            if other == bus {
                line.push_str(&format!("GPU/0-{other:x} (0/5000.0/LOC) "));
            } else if nvswitch {
                line.push_str(&format!("GPU/0-{other:x} (2/{NVS_BW:.1}/NVL) "));
            } else if let Some(bw) = pair {
                line.push_str(&format!("GPU/0-{other:x} (1/{bw:.1}/NVL) "));
            } else if lr / 4 == olr / 4 {
                line.push_str(&format!("GPU/0-{other:x} (2/{PCI_BW:.1}/PHB) "));
            } else {
                line.push_str(&format!("GPU/0-{other:x} (3/16.0/SYS) "));
            }
        }
        for s in 0..sockets {
            if s == lr / 4 {
                line.push_str(&format!("CPU/0-{s} (1/{PCI_BW:.1}/PHB) "));
            } else {
                line.push_str(&format!("CPU/0-{s} (2/16.0/SYS) "));
            }
        }
        out.push(line);
    }
    let net_bw = NET_BW.min(PCI_BW);
    let mut line = "NET/0-0 :".to_string();
    for &(bus, _, lr) in &gpus {
        let (hops, kind) = if lr / 4 == 0 { (3, "PHB") } else { (4, "SYS") };
        line.push_str(&format!("GPU/0-{bus:x} ({hops}/{net_bw:.1}/{kind}) "));
    }
    for s in 0..sockets {
        let (hops, kind) = if s == 0 { (2, "PHB") } else { (3, "SYS") };
        line.push_str(&format!("CPU/0-{s} ({hops}/{net_bw:.1}/{kind}) "));
    }
    out.push(line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn four_gpu_mesh_dump() {
        let cfg = RunConfig::default();
        let ver = cfg.validate().unwrap();
        let layout = Layout::build(&cfg, &mut SplitMix64::new(1));
        let dump = topology_dump(&cfg, &ver, &layout, &layout.comms[0], 0);
        assert_eq!(dump[0], "=== System : maxBw 80.0 totalBw 240.0 ===");
        assert_eq!(dump[1], "CPU/0-0 (1/1/2)");
        assert_eq!(dump[2], "+ PCI[24.0] - GPU/0-7000 (0)");
        assert_eq!(dump[3], "              + NVL[80.0] - GPU/0-f000");
        assert!(dump.contains(&"+ PCI[24.0] - NIC/0-e1000".to_string()));
        assert!(dump.contains(&"              + NET[25.0] - NET/0-0".to_string()));
        let sep = dump.iter().position(|l| l.starts_with("=====")).unwrap();
        assert_eq!(
            dump[sep + 1],
            "GPU/0-7000 :GPU/0-7000 (0/5000.0/LOC) GPU/0-f000 (1/80.0/NVL) \
             GPU/0-47000 (1/80.0/NVL) GPU/0-4e000 (1/80.0/NVL) CPU/0-0 (1/24.0/PHB) "
        );
    }

    #[test]
    fn nvswitch_dump_has_two_sockets() {
        let cfg = RunConfig::megatron(8, 1, 1);
        let ver = cfg.validate().unwrap();
        let layout = Layout::build(&cfg, &mut SplitMix64::new(1));
        let dump = topology_dump(&cfg, &ver, &layout, &layout.comms[0], 0);
        assert!(dump.contains(&"CPU/0-1 (1/1/2)".to_string()));
        assert!(dump.iter().any(|l| l.ends_with("+ NVL[240.0] - NVS/0-0")));
        assert_eq!(dump.iter().filter(|l| l.starts_with("GPU/0-")).count(), 8);
    }
}
