//! Tests of cluster building: real logs, XML, nccl-tests headers, hand-made facts.

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
        commlens_testdata::skip("real-log check", &format!("{} not found", p.display()));
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
