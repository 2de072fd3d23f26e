//! Named clusters as vendors ship them. Each states its GPUs, intra-node
//! fabric, NICs (count × line rate, overridable with `--nic`), network and
//! CPU; figures are the vendors' published nominal rates.
//!
//! `hgx-h20` (8x H20, NVSwitch gen3 + NVLS, 8x 200G RoCE by default, as SimAI's H20
//! design study chose 200 Gbit/s per GPU) resolves by name but is not yet in [`PRESETS`],
//! whose length the CLI's `cluster list` test pins; listing it is a one-line change there.

use crate::cluster::{
    Cluster, CpuVendor, Efficiency, IntraFabric, IntraNode, NetTech, Network, NetworkShape, Nics,
};
use crate::gpu::{gpu_by_name, pcie_x16_gb_s};

/// Every preset: name and a one-line description.
pub const PRESETS: &[(&str, &str)] = &[
    ("dgx-v100", "NVIDIA DGX-1V: 8x V100-SXM2 (hybrid cube-mesh NVLink2), 4x 100G EDR InfiniBand, 2x Intel Xeon"),
    ("dgx-a100", "NVIDIA DGX A100: 8x A100-SXM4 (NVSwitch gen2, 600 GB/s bidirectional), 8x 200G HDR InfiniBand, 2x AMD EPYC"),
    ("dgx-h100", "NVIDIA DGX H100: 8x H100-SXM5 (NVSwitch gen3 + NVLS, 900 GB/s bidirectional), 8x 400G NDR InfiniBand, 2x Intel Xeon"),
    ("hgx-h200", "HGX H200: 8x H200 (NVSwitch gen3 + NVLS), 8x 400G NDR InfiniBand, 2x Intel Xeon"),
    ("hgx-b200", "HGX B200: 8x B200 (NVSwitch gen4 + NVLS, 1.8 TB/s bidirectional), 8x 400G ConnectX-7, 2x Intel Xeon"),
    ("gb200-nvl72", "GB200 NVL72: 72 Blackwell GPUs in one NVLink domain, 4 per compute tray, 4x 400G per tray, Grace CPUs"),
    ("gh200-slingshot", "HPE Cray EX GH200 (e.g. CSCS Alps): 4x GH200 per node (NVLink mesh), 4x 200G Slingshot-11, Grace CPUs"),
    ("pcie-a100", "8x A100-PCIe on PCIe gen4 (no NVLink), 2 sockets, 2x 200G HDR InfiniBand"),
    ("rtx4090-pcie", "8x GeForce RTX 4090 on PCIe gen4 (no NVLink, no P2P through the root complex), 2 sockets, 1x 100G Ethernet"),
    ("rtx3090-pcie", "8x GeForce RTX 3090 on PCIe gen4, 2 sockets, 1x 100G Ethernet"),
    ("a3-mega", "Google Cloud A3 Mega: 8x H100 (NVSwitch), 8x 200G GPUDirect-TCPXO, 2x Intel Xeon"),
    ("hgx-h20", "HGX H20: 8x H20 (NVSwitch gen3 + NVLS, 900 GB/s bidirectional), 8x 200G RoCE (SimAI's H20 design)"),
];

struct Spec {
    gpu: &'static str,
    gpus_per_node: u32,
    fabric: IntraFabric,
    nvlink_gb_s: Option<f64>,
    nvls: bool,
    nvlink_domain: u32,
    sockets: u32,
    sys_gb_s: f64,
    nics: u32,
    gbit: f64,
    tech: NetTech,
    rail_aligned: bool,
    shape: NetworkShape,
    nodes_per_leaf: u32,
    cpu: CpuVendor,
}

/// Builds a named preset with one node; `None` for an unknown name.
pub fn preset(name: &str) -> Option<Cluster> {
    let key = name.trim().to_ascii_lowercase();
    let s = match key.as_str() {
        "dgx-v100" | "dgx1" | "dgx-1" => Spec {
            gpu: "V100", gpus_per_node: 8, fabric: IntraFabric::NvLinkMesh, nvlink_gb_s: None, nvls: false,
            nvlink_domain: 8, sockets: 2, sys_gb_s: 10.0, nics: 4, gbit: 100.0, tech: NetTech::InfiniBand,
            rail_aligned: false, shape: NetworkShape::SpineLeaf, nodes_per_leaf: 16, cpu: CpuVendor::Intel,
        },
        "dgx-a100" => Spec {
            gpu: "A100", gpus_per_node: 8, fabric: IntraFabric::NvSwitch, nvlink_gb_s: None, nvls: false,
            nvlink_domain: 8, sockets: 2, sys_gb_s: 16.0, nics: 8, gbit: 200.0, tech: NetTech::InfiniBand,
            rail_aligned: true, shape: NetworkShape::RailFatTree, nodes_per_leaf: 20, cpu: CpuVendor::Amd,
        },
        "dgx-h100" => Spec {
            gpu: "H100", gpus_per_node: 8, fabric: IntraFabric::NvSwitch, nvlink_gb_s: None, nvls: true,
            nvlink_domain: 8, sockets: 2, sys_gb_s: 22.0, nics: 8, gbit: 400.0, tech: NetTech::InfiniBand,
            rail_aligned: true, shape: NetworkShape::RailFatTree, nodes_per_leaf: 32, cpu: CpuVendor::Intel,
        },
        "hgx-h200" => Spec {
            gpu: "H200", gpus_per_node: 8, fabric: IntraFabric::NvSwitch, nvlink_gb_s: None, nvls: true,
            nvlink_domain: 8, sockets: 2, sys_gb_s: 22.0, nics: 8, gbit: 400.0, tech: NetTech::InfiniBand,
            rail_aligned: true, shape: NetworkShape::RailFatTree, nodes_per_leaf: 32, cpu: CpuVendor::Intel,
        },
        "hgx-b200" => Spec {
            gpu: "B200", gpus_per_node: 8, fabric: IntraFabric::NvSwitch, nvlink_gb_s: None, nvls: true,
            nvlink_domain: 8, sockets: 2, sys_gb_s: 40.0, nics: 8, gbit: 400.0, tech: NetTech::InfiniBand,
            rail_aligned: true, shape: NetworkShape::RailFatTree, nodes_per_leaf: 32, cpu: CpuVendor::Intel,
        },
        "gb200-nvl72" => Spec {
            gpu: "GB200", gpus_per_node: 4, fabric: IntraFabric::NvSwitch, nvlink_gb_s: None, nvls: true,
            nvlink_domain: 72, sockets: 2, sys_gb_s: 40.0, nics: 4, gbit: 400.0, tech: NetTech::InfiniBand,
            rail_aligned: true, shape: NetworkShape::RailFatTree, nodes_per_leaf: 18, cpu: CpuVendor::Arm,
        },
        // Per-GPU NVLink: the GH200's Hopper GPU has 18 NVLink4 links, NVIDIA's "900 GB/s"
        // (H100/GH200 data sheets) bidirectional, 450 GB/s each way; in the quad nodes 6 links
        // (150 GB/s each way) join each pair, and `mesh::ring_share` counts the pairs a
        // communicator reaches.
        "gh200-slingshot" | "alps" => Spec {
            gpu: "GH200", gpus_per_node: 4, fabric: IntraFabric::NvLinkMesh, nvlink_gb_s: None, nvls: false,
            nvlink_domain: 4, sockets: 4, sys_gb_s: 100.0, nics: 4, gbit: 200.0, tech: NetTech::Slingshot,
            rail_aligned: true, shape: NetworkShape::Dragonfly, nodes_per_leaf: 8, cpu: CpuVendor::Arm,
        },
        "pcie-a100" => Spec {
            gpu: "A100-PCIe", gpus_per_node: 8, fabric: IntraFabric::Pcie, nvlink_gb_s: Some(0.0), nvls: false,
            nvlink_domain: 1, sockets: 2, sys_gb_s: 16.0, nics: 2, gbit: 200.0, tech: NetTech::InfiniBand,
            rail_aligned: false, shape: NetworkShape::SpineLeaf, nodes_per_leaf: 16, cpu: CpuVendor::Amd,
        },
        "rtx4090-pcie" => Spec {
            gpu: "RTX4090", gpus_per_node: 8, fabric: IntraFabric::Pcie, nvlink_gb_s: Some(0.0), nvls: false,
            nvlink_domain: 1, sockets: 2, sys_gb_s: 16.0, nics: 1, gbit: 100.0, tech: NetTech::Socket,
            rail_aligned: false, shape: NetworkShape::SpineLeaf, nodes_per_leaf: 16, cpu: CpuVendor::Amd,
        },
        "rtx3090-pcie" => Spec {
            gpu: "RTX3090", gpus_per_node: 8, fabric: IntraFabric::Pcie, nvlink_gb_s: Some(0.0), nvls: false,
            nvlink_domain: 1, sockets: 2, sys_gb_s: 10.0, nics: 1, gbit: 100.0, tech: NetTech::Socket,
            rail_aligned: false, shape: NetworkShape::SpineLeaf, nodes_per_leaf: 16, cpu: CpuVendor::Intel,
        },
        "hgx-h20" => Spec {
            gpu: "H20", gpus_per_node: 8, fabric: IntraFabric::NvSwitch, nvlink_gb_s: None, nvls: true,
            nvlink_domain: 8, sockets: 2, sys_gb_s: 22.0, nics: 8, gbit: 200.0, tech: NetTech::RoCE,
            rail_aligned: true, shape: NetworkShape::RailFatTree, nodes_per_leaf: 32, cpu: CpuVendor::Intel,
        },
        "a3-mega" => Spec {
            gpu: "H100", gpus_per_node: 8, fabric: IntraFabric::NvSwitch, nvlink_gb_s: None, nvls: true,
            nvlink_domain: 8, sockets: 2, sys_gb_s: 22.0, nics: 8, gbit: 200.0, tech: NetTech::Tcpx,
            rail_aligned: true, shape: NetworkShape::RailFatTree, nodes_per_leaf: 32, cpu: CpuVendor::Intel,
        },
        _ => return None,
    };
    let gpu = gpu_by_name(s.gpu).expect("preset GPUs are in the table").clone();
    let canonical = PRESETS
        .iter()
        .find(|(n, _)| *n == key)
        .map(|(n, _)| *n)
        .unwrap_or(match key.as_str() {
            "dgx1" | "dgx-1" => "dgx-v100",
            "alps" => "gh200-slingshot",
            "hgx-h20" => "hgx-h20",
            _ => "preset",
        });
    Some(Cluster {
        name: canonical.to_string(),
        nodes: 1,
        gpus_per_node: s.gpus_per_node,
        intra: IntraNode {
            fabric: s.fabric,
            nvlink_gb_s: s.nvlink_gb_s.unwrap_or_else(|| gpu.nvlink_gb_s()),
            nvls: s.nvls,
            nvlink_domain: s.nvlink_domain,
            pcie_gb_s: pcie_x16_gb_s(gpu.pcie_gen),
            sockets: s.sockets,
            sys_gb_s: s.sys_gb_s,
        },
        nics: Nics { per_node: s.nics, gbit_s: s.gbit, tech: s.tech, rail_aligned: s.rail_aligned },
        network: Network {
            shape: s.shape,
            oversubscription: 1.0,
            nodes_per_leaf: s.nodes_per_leaf,
            latency_us: s.tech.default_latency_us(),
            hop_latency_us: 0.5,
        },
        cpu: s.cpu,
        efficiency: Efficiency::default(),
        provenance: vec![format!("preset {canonical}")],
        gpu,
    })
}

/// The preset that matches a GPU model best, for runs that name only their GPUs.
pub fn preset_for_gpu(gpu_name: &str) -> Option<&'static str> {
    let g = gpu_by_name(gpu_name)?;
    Some(match g.name {
        "V100" => "dgx-v100",
        "A100" => "dgx-a100",
        "A100-PCIe" => "pcie-a100",
        "H100" => "dgx-h100",
        "H200" => "hgx-h200",
        "H20" => "hgx-h20",
        "B200" => "hgx-b200",
        "GB200" => "gb200-nvl72",
        "GH200" => "gh200-slingshot",
        "RTX4090" | "L40S" => "rtx4090-pcie",
        "RTX3090" | "A40" => "rtx3090-pcie",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_preset_builds_and_states_its_nics() {
        for (name, desc) in PRESETS {
            let c = preset(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(c.name, *name);
            assert!(c.nics.per_node >= 1 && c.nics.gbit_s >= 100.0, "{name}");
            assert!(desc.contains('x'), "{name}: description states counts");
            assert!(c.gpus_per_node >= 4);
        }
        assert!(preset("nope").is_none());
    }

    #[test]
    fn hgx_h20_builds_and_takes_other_nics() {
        let mut c = preset("hgx-h20").unwrap();
        assert_eq!((c.name.as_str(), c.gpu.name, c.gpus_per_node), ("hgx-h20", "H20", 8));
        assert_eq!((c.nics.per_node, c.nics.gbit_s), (8, 200.0));
        assert_eq!(c.intra.nvlink_gb_s, 450.0);
        c.set_nics("8x400g").unwrap();
        assert_eq!(c.nics.gbit_s, 400.0);
        assert_eq!(preset_for_gpu("NVIDIA H20"), Some("hgx-h20"));
    }

    #[test]
    fn nic_override() {
        let mut c = preset("dgx-h100").unwrap();
        c.set_nics("4x200g").unwrap();
        assert_eq!(c.nics.node_gb_s(), 100.0);
        assert!(c.provenance.iter().any(|p| p.contains("--nic")));
    }
}
