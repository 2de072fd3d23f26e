//! A cluster as text for people: what it is, what each GPU can move inside
//! and across nodes, and where every figure came from. (As JSON, a
//! [`Cluster`] serialises itself.)

use std::fmt::Write;

use crate::cluster::{Cluster, IntraFabric, LinkClass, NetTech, NetworkShape};

/// Display name of a network technology.
pub fn tech_label(t: NetTech) -> &'static str {
    match t {
        NetTech::InfiniBand => "InfiniBand",
        NetTech::RoCE => "RoCE",
        NetTech::Slingshot => "Slingshot",
        NetTech::Efa => "EFA",
        NetTech::Tcpx => "GPUDirect-TCPX",
        NetTech::Socket => "TCP sockets",
    }
}

fn shape_label(s: NetworkShape) -> &'static str {
    match s {
        NetworkShape::RailFatTree => "rail-optimised fat-tree",
        NetworkShape::HpnDualPlane => "HPN dual-plane",
        NetworkShape::SpineLeaf => "spine-leaf",
        NetworkShape::Dragonfly => "dragonfly",
    }
}

fn fabric_label(f: IntraFabric) -> &'static str {
    match f {
        IntraFabric::NvSwitch => "NVSwitch",
        IntraFabric::NvLinkMesh => "NVLink mesh",
        IntraFabric::NvLinkPairs => "NVLink bridges between GPU pairs",
        IntraFabric::Pcie => "PCIe only",
    }
}

/// `450`, `12.5`, `370.8`, `0.125`: a figure without trailing zeros.
pub fn num(x: f64) -> String {
    let s = if x.abs() >= 100.0 { format!("{x:.1}") } else { format!("{x:.3}") };
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

fn pct(x: f64) -> String {
    format!("{} %", num(x * 100.0))
}

/// `8x 400 Gbit/s InfiniBand (50 GB/s each, 400 GB/s per node), rail-aligned`.
pub fn nics_line(c: &Cluster) -> String {
    let n = &c.nics;
    format!(
        "{}x {} Gbit/s {} ({} GB/s each, {} GB/s per node), {}",
        n.per_node,
        num(n.gbit_s),
        tech_label(n.tech),
        num(n.nic_gb_s()),
        num(n.node_gb_s()),
        if n.rail_aligned { "rail-aligned" } else { "not rail-aligned" }
    )
}

/// A human summary of a cluster, one fact per line.
pub fn render_cluster(c: &Cluster) -> String {
    let mut o = String::new();
    let g = &c.gpu;
    let i = &c.intra;
    let w = &mut o;
    let _ = writeln!(w, "Cluster {}", c.name);
    let _ = writeln!(
        w,
        "  size        {} node{} x {} GPUs = {} GPUs",
        c.nodes,
        if c.nodes == 1 { "" } else { "s" },
        c.gpus_per_node,
        c.gpus()
    );
    let sm = if g.sm > 0 { format!("sm_{}", g.sm) } else { "not NVIDIA".to_string() };
    let _ = writeln!(
        w,
        "  GPU         {} ({sm}), {} GB, {} TFLOP/s dense BF16, HBM {} GB/s",
        g.name,
        num(g.memory_gib),
        num(g.peak_tflops_bf16),
        num(g.hbm_gb_s)
    );

    // Inside a node.
    let mut intra = fabric_label(i.fabric).to_string();
    if i.fabric != IntraFabric::Pcie && i.nvlink_gb_s > 0.0 {
        let nccl = if g.nvlink_gb_s_per_link > 0.0 && g.nccl_nvlink_bw > 0.0 {
            format!(", NCCL rates it {} GB/s", num(i.nvlink_gb_s * g.nccl_nvlink_bw / g.nvlink_gb_s_per_link))
        } else {
            String::new()
        };
        let _ = write!(intra, ", NVLink {} GB/s per GPU one direction{nccl}", num(i.nvlink_gb_s));
        if i.nvls {
            intra.push_str(", NVLS");
        }
        if i.nvlink_domain > 1 {
            let _ = write!(intra, ", NVLink domain of {} GPUs", i.nvlink_domain);
        }
    }
    let _ = writeln!(w, "  intra-node  {intra}");
    let _ = writeln!(w, "  PCIe        gen{} x16, {} GB/s per GPU one direction", g.pcie_gen, num(i.pcie_gb_s));
    let _ = writeln!(
        w,
        "  sockets     {} (NUMA domains){}",
        i.sockets,
        if i.sockets > 1 { format!(", {} GB/s between them (SYS)", num(i.sys_gb_s)) } else { String::new() }
    );
    let _ = writeln!(w, "  CPU         {}", c.cpu.name());

    // Across nodes.
    let _ = writeln!(w, "  NICs        {}", nics_line(c));
    let n = &c.network;
    let over = if n.oversubscription > 1.0 {
        format!("{}:1 oversubscribed above {} node{} per leaf", num(n.oversubscription), n.nodes_per_leaf, if n.nodes_per_leaf == 1 { "" } else { "s" })
    } else {
        format!("non-blocking, {} nodes per leaf", n.nodes_per_leaf)
    };
    let _ = writeln!(w, "  network     {}, {over}", shape_label(n.shape));
    let _ = writeln!(
        w,
        "  latency     {} µs NIC to NIC through one switch, +{} µs per extra tier ({} µs across this cluster)",
        num(n.latency_us),
        num(n.hop_latency_us),
        num(c.net_latency_us(c.nodes))
    );

    // Per-GPU bottlenecks.
    let (bw, class) = c.intra_gb_s(c.gpus_per_node);
    if c.gpus_per_node > 1 {
        // Efficiencies apply to the rate NCCL's topology gives the link, as the model uses it.
        let (rated, _, _) = crate::graph::nccl_intra_bw(c, c.gpus_per_node);
        let _ = writeln!(
            w,
            "  per GPU     inside a node: {} GB/s over {} ({} GB/s at {} efficiency of NCCL's {} GB/s)",
            num(bw),
            class.name(),
            num(rated * c.eff(class)),
            pct(c.eff(class)),
            num(rated)
        );
    } else {
        let _ = writeln!(w, "  per GPU     inside a node: one GPU, nothing to share");
    }
    let job_nodes = c.nodes.max(2);
    let node_net = c.node_net_gb_s(job_nodes);
    let share = node_net / c.gpus_per_node.max(1) as f64;
    // A GPU's traffic to its NIC crosses PCIe (and SYS when NICs are not beside it).
    let (limit, limit_class) = if share > i.pcie_gb_s {
        (i.pcie_gb_s, LinkClass::Pcie)
    } else {
        (share, LinkClass::Net)
    };
    let scope = if c.nodes > 1 { format!("across {} nodes", c.nodes) } else { "across nodes (for 2 such nodes)".to_string() };
    let _ = writeln!(
        w,
        "  per GPU     {scope}: {} GB/s ({} GB/s of NICs per node{} / {} GPUs), bound by {} ({} GB/s at {} efficiency)",
        num(limit),
        num(node_net),
        if node_net < c.nics.node_gb_s() { " after oversubscription" } else { "" },
        c.gpus_per_node,
        limit_class.name(),
        num(limit * c.eff(limit_class)),
        pct(c.eff(limit_class))
    );
    let e = &c.efficiency;
    let _ = writeln!(
        w,
        "  efficiency  NVLink {}, PCIe {}, SYS {}, NET {} of nominal",
        pct(e.nvlink),
        pct(e.pcie),
        pct(e.sys),
        pct(e.net)
    );
    if !c.provenance.is_empty() {
        let _ = writeln!(w, "  from");
        for p in &c.provenance {
            let _ = writeln!(w, "    - {p}");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::preset;

    #[test]
    fn dgx_h100_summary() {
        let c = preset("dgx-h100").unwrap().with_nodes(4);
        let s = render_cluster(&c);
        println!("{s}");
        assert!(s.contains("4 nodes x 8 GPUs = 32 GPUs"));
        assert!(s.contains("H100 (sm_90), 80 GB, 989 TFLOP/s"));
        assert!(s.contains("NVSwitch, NVLink 450 GB/s per GPU one direction, NCCL rates it 370.8 GB/s, NVLS"));
        assert!(s.contains("gen5 x16, 48 GB/s"));
        assert!(s.contains("8x 400 Gbit/s InfiniBand (50 GB/s each, 400 GB/s per node), rail-aligned"));
        let nv = c.efficiency.nvlink;
        assert!(s.contains(&format!("inside a node: 450 GB/s over NVLink ({} GB/s at {} efficiency of NCCL's 370.8 GB/s)", num(370.8 * nv), pct(nv))), "{s}");
        assert!(s.contains("across 4 nodes: 48 GB/s"), "PCIe gen5 bounds the 50 GB/s NIC share");
        assert!(s.contains("- preset dgx-h100"));
    }

    #[test]
    fn pcie_box_and_oversubscription() {
        let mut c = preset("rtx4090-pcie").unwrap();
        c.network.oversubscription = 2.0;
        c.network.nodes_per_leaf = 1;
        let s = render_cluster(&c);
        println!("{s}");
        assert!(s.contains("1 node x 8 GPUs = 8 GPUs"));
        assert!(s.contains("intra-node  PCIe only\n"));
        assert!(s.contains("2 (NUMA domains), 16 GB/s between them (SYS)"));
        assert!(s.contains("1x 100 Gbit/s TCP sockets (12.5 GB/s each, 12.5 GB/s per node), not rail-aligned"));
        assert!(s.contains("2:1 oversubscribed above 1 node per leaf"));
        assert!(s.contains("across nodes (for 2 such nodes): 0.781 GB/s (6.25 GB/s of NICs per node after oversubscription / 8 GPUs)"));
        assert!(s.contains("inside a node: 16 GB/s over SYS"));
    }

    #[test]
    fn figures() {
        assert_eq!(num(450.0), "450");
        assert_eq!(num(370.8), "370.8");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(num(0.125), "0.125");
        assert_eq!(num(2.0), "2");
    }
}
