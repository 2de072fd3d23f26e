//! The cluster description: the one type the collective model, the simulator
//! and the planner share. A cluster is `nodes` identical nodes of
//! `gpus_per_node` GPUs, an intra-node fabric (NVSwitch, NVLink mesh or
//! bridges, or PCIe only), NICs with a speed and a rail placement, and an
//! inter-node network with a shape, an oversubscription and latencies.
//!
//! Built from named presets (`presets`), from a small TOML file (`toml_file`)
//! or from what a run tells (`from_run`). Every figure is a nominal hardware
//! rate; achieved fractions live in [`Efficiency`], one per link class, so
//! calibration touches physical parameters only.

use serde::Serialize;

use crate::gpu::GpuSpec;

/// How the GPUs of one node talk to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum IntraFabric {
    /// Every GPU's NVLinks go to NVSwitches: full bandwidth between any pair.
    NvSwitch,
    /// NVLinks wired directly between GPUs (DGX-1 hybrid cube mesh, GH200 quads).
    NvLinkMesh,
    /// NVLink bridges between pairs of GPUs; other pairs use PCIe.
    NvLinkPairs,
    /// No NVLink: PCIe (through switches and, across sockets, the CPU interconnect).
    Pcie,
}

impl IntraFabric {
    pub fn name(self) -> &'static str {
        match self {
            IntraFabric::NvSwitch => "nvswitch",
            IntraFabric::NvLinkMesh => "nvlink-mesh",
            IntraFabric::NvLinkPairs => "nvlink-pairs",
            IntraFabric::Pcie => "pcie",
        }
    }

    pub fn from_name(s: &str) -> Option<IntraFabric> {
        Some(match s.to_ascii_lowercase().as_str() {
            "nvswitch" | "nvs" => IntraFabric::NvSwitch,
            "nvlink-mesh" | "mesh" | "nvlink" => IntraFabric::NvLinkMesh,
            "nvlink-pairs" | "nvlink-bridge" | "bridge" | "pairs" => IntraFabric::NvLinkPairs,
            "pcie" | "pci" => IntraFabric::Pcie,
            _ => return None,
        })
    }
}

/// The network technology behind the NICs (decides latencies and NCCL's transport).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NetTech {
    InfiniBand,
    RoCE,
    /// HPE Slingshot through the aws-ofi-nccl plugin.
    Slingshot,
    /// AWS EFA through aws-ofi-nccl.
    Efa,
    /// Google GPUDirect-TCPX(O).
    Tcpx,
    /// NCCL's socket transport over TCP.
    Socket,
}

impl NetTech {
    pub fn name(self) -> &'static str {
        match self {
            NetTech::InfiniBand => "infiniband",
            NetTech::RoCE => "roce",
            NetTech::Slingshot => "slingshot",
            NetTech::Efa => "efa",
            NetTech::Tcpx => "tcpx",
            NetTech::Socket => "socket",
        }
    }

    pub fn from_name(s: &str) -> Option<NetTech> {
        Some(match s.to_ascii_lowercase().as_str() {
            "infiniband" | "ib" => NetTech::InfiniBand,
            "roce" | "ethernet-rdma" => NetTech::RoCE,
            "slingshot" | "ofi" | "cxi" => NetTech::Slingshot,
            "efa" => NetTech::Efa,
            "tcpx" | "tcpxo" | "gpudirect-tcpx" => NetTech::Tcpx,
            "socket" | "tcp" | "ethernet" => NetTech::Socket,
            _ => return None,
        })
    }

    /// One-way NIC-to-NIC latency through one switch, µs (typical published figures:
    /// IB ~1.5–2, RoCE ~2–3, Slingshot ~2–3 through libfabric, EFA ~10–15 (SRD),
    /// TCPX ~15–20, kernel TCP ~25–40).
    pub fn default_latency_us(self) -> f64 {
        match self {
            NetTech::InfiniBand => 2.0,
            NetTech::RoCE => 3.0,
            NetTech::Slingshot => 3.5,
            NetTech::Efa => 12.0,
            NetTech::Tcpx => 20.0,
            NetTech::Socket => 30.0,
        }
    }
}

/// The shape of the inter-node network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NetworkShape {
    /// Rail-optimised fat-tree: NIC i of every node on rail switch i (DGX SuperPOD).
    RailFatTree,
    /// Alibaba HPN: dual-plane, dual-ToR, 2-tier rails (SimAI's reference network).
    HpnDualPlane,
    /// Generic spine-leaf; `oversubscription` applies above the leaf.
    SpineLeaf,
    /// Dragonfly (Slingshot systems): all-to-all between groups.
    Dragonfly,
}

impl NetworkShape {
    pub fn name(self) -> &'static str {
        match self {
            NetworkShape::RailFatTree => "rail-fat-tree",
            NetworkShape::HpnDualPlane => "hpn-dual-plane",
            NetworkShape::SpineLeaf => "spine-leaf",
            NetworkShape::Dragonfly => "dragonfly",
        }
    }

    pub fn from_name(s: &str) -> Option<NetworkShape> {
        Some(match s.to_ascii_lowercase().as_str() {
            "rail-fat-tree" | "rail" | "rail-optimized" | "rail-optimised" | "fat-tree" => NetworkShape::RailFatTree,
            "hpn" | "hpn-dual-plane" | "dual-plane" => NetworkShape::HpnDualPlane,
            "spine-leaf" | "leaf-spine" | "clos" => NetworkShape::SpineLeaf,
            "dragonfly" => NetworkShape::Dragonfly,
            _ => return None,
        })
    }
}

/// CPU vendor of the hosts (NCCL's LL bandwidth cap and net overhead depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CpuVendor {
    Intel,
    Amd,
    /// Arm hosts (Grace).
    Arm,
    Power,
}

impl CpuVendor {
    pub fn name(self) -> &'static str {
        match self {
            CpuVendor::Intel => "intel",
            CpuVendor::Amd => "amd",
            CpuVendor::Arm => "arm",
            CpuVendor::Power => "power",
        }
    }

    pub fn from_name(s: &str) -> Option<CpuVendor> {
        Some(match s.to_ascii_lowercase().as_str() {
            "intel" | "genuineintel" | "x86" => CpuVendor::Intel,
            "amd" | "authenticamd" => CpuVendor::Amd,
            "arm" | "grace" | "aarch64" | "arm64" => CpuVendor::Arm,
            "power" | "ppc64" | "ppc64le" => CpuVendor::Power,
            _ => return None,
        })
    }
}

/// The GPUs of one node and how they are joined.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntraNode {
    pub fabric: IntraFabric,
    /// One-direction NVLink bandwidth per GPU, GB/s nominal (0 without NVLink).
    pub nvlink_gb_s: f64,
    /// NVLink SHARP (NVLS) multicast available (NVSwitch gen 3+).
    pub nvls: bool,
    /// GPUs in one NVLink domain (the node, or 72 for GB200 NVL72).
    pub nvlink_domain: u32,
    /// One-direction PCIe bandwidth of each GPU, GB/s nominal.
    pub pcie_gb_s: f64,
    /// CPU sockets (NUMA domains); PCIe traffic between GPUs of different
    /// sockets crosses the CPU interconnect.
    pub sockets: u32,
    /// CPU-to-CPU (SYS) bandwidth, GB/s (NCCL's QPI/xGMI figure).
    pub sys_gb_s: f64,
}

/// The NICs of one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Nics {
    pub per_node: u32,
    /// Line rate of one NIC, Gbit/s.
    pub gbit_s: f64,
    pub tech: NetTech,
    /// NIC i serves GPU i (rail-aligned, GPUDirect RDMA through a PCIe switch).
    pub rail_aligned: bool,
}

impl Nics {
    /// One NIC's one-direction rate, GB/s.
    pub fn nic_gb_s(&self) -> f64 {
        self.gbit_s / 8.0
    }

    /// All NICs of a node together, GB/s one direction.
    pub fn node_gb_s(&self) -> f64 {
        self.per_node as f64 * self.nic_gb_s()
    }
}

/// The inter-node network.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Network {
    pub shape: NetworkShape,
    /// Bandwidth ratio down/up at the leaf (1.0: non-blocking).
    pub oversubscription: f64,
    /// Nodes under one leaf (or rail) switch group before traffic goes up a tier.
    pub nodes_per_leaf: u32,
    /// One-way NIC-to-NIC latency through one switch, µs.
    pub latency_us: f64,
    /// Extra latency per additional switch tier, µs.
    pub hop_latency_us: f64,
}

/// Achieved fraction of each nominal link rate for large transfers. One value
/// per link class, the same for every cluster: these are the only knobs the
/// model's bandwidth calibration may turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Efficiency {
    pub nvlink: f64,
    pub pcie: f64,
    pub sys: f64,
    pub net: f64,
    /// Measured latency over NCCL's tuner latency for the low-latency
    /// protocols (LL, LL128): NCCL's constants rank algorithms; calls take
    /// longer (proxy progress, flag polling).
    pub latency_scale: f64,
    /// The same for Simple.
    pub latency_scale_simple: f64,
    /// Fixed cost of one call seen from the host (kernel launch, stream sync), µs.
    pub launch_us: f64,
}

impl Default for Efficiency {
    fn default() -> Self {
        // Fractions of the rate NCCL's topology gives the link (NVLink: 20 of
        // the nominal 25 GB/s per link already; PCIe gen4 x16: 24; NET: line
        // rate). NVLink rings reach ~97 % of NCCL's figure, PCIe ~83 % (20 of
        // 24 GB/s between two GPUs), RDMA networks ~96 % of line rate.
        // Latency: 12 µs per call plus 1.7× (LL, LL128) or 1.5× (Simple)
        // NCCL's figure. All seven are global, fitted once on the public
        // nccl-tests tables (crates/cli/tests/predict_fidelity.rs), never per file.
        Efficiency {
            nvlink: 0.95,
            pcie: 0.83,
            sys: 0.8,
            net: 0.96,
            latency_scale: 1.7,
            latency_scale_simple: 1.5,
            launch_us: 12.0,
        }
    }
}

/// A cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cluster {
    /// Preset name, file name or `from run`.
    pub name: String,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub gpu: GpuSpec,
    pub intra: IntraNode,
    pub nics: Nics,
    pub network: Network,
    pub cpu: CpuVendor,
    pub efficiency: Efficiency,
    /// Where each fact came from (`preset dgx-h100`, `--nic 8x400g`, `topology dump of host a`).
    pub provenance: Vec<String>,
}

impl Cluster {
    pub fn gpus(&self) -> u64 {
        self.nodes as u64 * self.gpus_per_node as u64
    }

    /// The same cluster with another node count.
    pub fn with_nodes(&self, nodes: u32) -> Cluster {
        Cluster { nodes: nodes.max(1), ..self.clone() }
    }

    /// Replaces the NICs from a `COUNTxSPEED` spec: `8x400g`, `4x200`, `1x100gbe`.
    pub fn set_nics(&mut self, spec: &str) -> Result<(), String> {
        let (count, speed) = parse_nic_spec(spec)?;
        self.nics.per_node = count;
        self.nics.gbit_s = speed;
        self.provenance.push(format!("NICs {count}x{speed}G from --nic {spec}"));
        Ok(())
    }

    /// Whether GPUs `a` and `b` (local indices) share an NVLink path.
    pub fn nvlink_between(&self, a: u32, b: u32) -> bool {
        match self.intra.fabric {
            IntraFabric::NvSwitch => self.intra.nvlink_gb_s > 0.0,
            IntraFabric::NvLinkMesh => crate::mesh::pair_share(self, a, b) > 0.0,
            IntraFabric::NvLinkPairs => self.intra.nvlink_gb_s > 0.0 && a / 2 == b / 2,
            IntraFabric::Pcie => false,
        }
    }

    /// Nominal one-direction bandwidth each GPU has to the rest of its node
    /// for a ring over `local` GPUs of the node, GB/s, and the link class.
    /// On an NVLink mesh only the links to the communicator's own GPUs count
    /// ([`crate::mesh::ring_share`]); a mesh ring that cannot stay on NVLink
    /// falls back to PCIe (SYS across sockets), as NCCL's does.
    pub fn intra_gb_s(&self, local: u32) -> (f64, LinkClass) {
        let nv = self.intra.nvlink_gb_s;
        let mesh_share = crate::mesh::ring_share(self, local);
        match self.intra.fabric {
            IntraFabric::NvSwitch if nv > 0.0 => (nv, LinkClass::NvLink),
            IntraFabric::NvLinkMesh if mesh_share.is_some() => (nv * mesh_share.unwrap_or(1.0), LinkClass::NvLink),
            IntraFabric::NvLinkPairs if nv > 0.0 && local <= 2 => (nv, LinkClass::NvLink),
            _ => {
                // GPUs fill one socket's PCIe tree first (4 per socket on 8-GPU servers).
                let per_socket = (self.gpus_per_node / self.intra.sockets.max(1)).max(4);
                if self.intra.sockets > 1 && local > per_socket {
                    let sys = self.intra.sys_gb_s.min(self.intra.pcie_gb_s);
                    (sys, LinkClass::Sys)
                } else {
                    (self.intra.pcie_gb_s, LinkClass::Pcie)
                }
            }
        }
    }

    /// Achieved fraction of a link class's nominal rate.
    pub fn eff(&self, class: LinkClass) -> f64 {
        match class {
            LinkClass::NvLink => self.efficiency.nvlink,
            LinkClass::Pcie => self.efficiency.pcie,
            LinkClass::Sys => self.efficiency.sys,
            LinkClass::Net => self.efficiency.net,
        }
    }

    /// The network bandwidth a node can use across `nodes` nodes, GB/s one
    /// direction: all its NICs, divided by the oversubscription once the job
    /// leaves one leaf group.
    pub fn node_net_gb_s(&self, nodes: u32) -> f64 {
        let mut bw = self.nics.node_gb_s();
        if nodes > self.network.nodes_per_leaf.max(1) && self.network.oversubscription > 1.0 {
            bw /= self.network.oversubscription;
        }
        bw
    }

    /// One-way network latency between two nodes of a `nodes`-node job, µs.
    pub fn net_latency_us(&self, nodes: u32) -> f64 {
        let tiers = if nodes <= self.network.nodes_per_leaf.max(1) {
            0.0
        } else if nodes <= self.network.nodes_per_leaf.max(1).saturating_mul(32) {
            2.0
        } else {
            4.0
        };
        self.network.latency_us + tiers * self.network.hop_latency_us
    }
}

/// Link classes the model times transfers on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum LinkClass {
    NvLink,
    Pcie,
    Sys,
    Net,
}

impl LinkClass {
    pub fn name(self) -> &'static str {
        match self {
            LinkClass::NvLink => "NVLink",
            LinkClass::Pcie => "PCIe",
            LinkClass::Sys => "SYS",
            LinkClass::Net => "NET",
        }
    }
}

/// Parses `8x400g`, `8x400`, `4x200gbe`, `1x100G`, `8x3.2t`? (Tbit) into (count, Gbit/s).
pub fn parse_nic_spec(spec: &str) -> Result<(u32, f64), String> {
    let s = spec.trim().to_ascii_lowercase();
    let (count, speed) = s
        .split_once('x')
        .ok_or_else(|| format!("--nic {spec}: expected COUNTxSPEED such as 8x400g"))?;
    let count: u32 = count
        .trim()
        .parse()
        .map_err(|_| format!("--nic {spec}: NIC count '{count}' is not a whole number"))?;
    let speed = speed.trim().trim_end_matches("bps").trim_end_matches("be").trim_end_matches("b");
    let (num, mult) = if let Some(t) = speed.strip_suffix('t') {
        (t, 1000.0)
    } else if let Some(g) = speed.strip_suffix('g') {
        (g, 1.0)
    } else {
        (speed, 1.0)
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("--nic {spec}: speed '{num}' is not a number of Gbit/s"))?;
    if count == 0 || count > 64 || !(v > 0.0 && v <= 100_000.0) {
        return Err(format!("--nic {spec}: expected 1–64 NICs of 1–100000 Gbit/s"));
    }
    Ok((count, v * mult))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nic_specs() {
        assert_eq!(parse_nic_spec("8x400g").unwrap(), (8, 400.0));
        assert_eq!(parse_nic_spec("4X200").unwrap(), (4, 200.0));
        assert_eq!(parse_nic_spec("1x100gbe").unwrap(), (1, 100.0));
        assert_eq!(parse_nic_spec("8x0.8t").unwrap(), (8, 800.0));
        assert!(parse_nic_spec("400g").is_err());
        assert!(parse_nic_spec("0x400g").is_err());
        assert!(parse_nic_spec("8xfast").is_err());
    }
}
