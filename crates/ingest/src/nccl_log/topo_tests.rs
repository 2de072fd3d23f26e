//! Tests of the topology-dump parser: the shared helpers (hand-written dumps,
//! lookups, index checks) and the block structure (the thesis example, block
//! boundaries, a lost header, malformed lines). Node, link and path kinds are
//! tested in `topo_tests_kinds`, fuzzing in `topo_tests_fuzz`, golden real dumps
//! per NCCL version in `topo_tests_real`.
use super::*;
use commlens_core::topo::{LinkKind, NodeKind};

#[path = "topo_tests_fuzz.rs"]
mod fuzz;
#[path = "topo_tests_kinds.rs"]
mod kinds;
#[path = "topo_tests_real.rs"]
mod real;

/// Every index in a topology points at a node.
fn check_indices(t: &Topology) {
    let n = t.nodes.len();
    for l in &t.links {
        assert!(l.from < n && l.to < n, "{l:?}");
    }
    for p in &t.paths {
        assert!(p.from < n && p.to < n, "{p:?}");
    }
}

fn idx(t: &Topology, kind: NodeKind, id: &str) -> usize {
    t.find(kind, id)
        .unwrap_or_else(|| panic!("{kind:?}/{id} missing"))
}

fn link(t: &Topology, from: usize, to: usize) -> Option<(LinkKind, f64)> {
    t.links
        .iter()
        .find(|l| l.from == from && l.to == to)
        .map(|l| (l.kind, l.bw_gb_s))
}

fn path(t: &Topology, from: usize, to: usize) -> Option<(u32, f64, LinkKind)> {
    t.paths
        .iter()
        .find(|p| p.from == from && p.to == to)
        .map(|p| (p.hops, p.bw_gb_s, p.kind))
}

/// Thesis Listing 4.3, as given in the reference (dual socket, NVLink pairs, 2 NICs).
const THESIS: &str = "\
NCCL INFO === System : maxBw 80.0 totalBw 80.0 ===
NCCL INFO CPU/0-0 (1/2/-1)
NCCL INFO + PCI[24.0] - GPU/0-1000 (0)
NCCL INFO           + NVL[80.0] - GPU/0-25000
NCCL INFO + PCI[24.0] - GPU/0-25000 (1)
NCCL INFO           + NVL[80.0] - GPU/0-1000
NCCL INFO + SYS[16.0] - CPU/0-1
NCCL INFO CPU/0-1 (1/2/-1)
NCCL INFO + PCI[24.0] - GPU/0-c1000 (2)
NCCL INFO           + NVL[80.0] - GPU/0-e1000
NCCL INFO + PCI[24.0] - GPU/0-e1000 (3)
NCCL INFO           + NVL[80.0] - GPU/0-c1000
NCCL INFO + SYS[16.0] - CPU/0-0
NCCL INFO + PCI[12.0] - NIC/0-c2000
NCCL INFO           + NET[12.5] - NET/0-0
NCCL INFO + PCI[12.0] - NIC/0-c3000
NCCL INFO           + NET[12.5] - NET/0-1
";

fn messages(text: &str) -> Vec<&[u8]> {
    text.lines()
        .map(|l| l.strip_prefix("NCCL INFO ").unwrap_or(l).as_bytes())
        .collect()
}

fn parse_msgs(msgs: &[&[u8]]) -> (Vec<TopoLine>, Vec<Topology>, u64) {
    let mut p = TopoParser::new();
    let r = msgs.iter().map(|m| p.feed(m)).collect();
    p.finish();
    (r, p.take_blocks(), p.malformed_lines())
}

#[test]
fn thesis_example() {
    let mut msgs = messages(THESIS);
    msgs.push(b"Setting affinity for GPU 0 to 0-15");
    let mut p = TopoParser::new();
    let results: Vec<TopoLine> = msgs.iter().map(|m| p.feed(m)).collect();
    assert!(results[..msgs.len() - 1]
        .iter()
        .all(|&r| r == TopoLine::Consumed));
    // The block ends on a non-topology line: NotTopology, and the block is ready.
    assert_eq!(results[msgs.len() - 1], TopoLine::NotTopology);
    let blocks = p.take_blocks();
    assert_eq!(blocks.len(), 1);
    assert_eq!(p.malformed_lines(), 0);
    let t = &blocks[0];
    check_indices(t);
    assert_eq!(t.host, "");
    assert_eq!((t.max_bw_gb_s, t.total_bw_gb_s), (80.0, 80.0));
    let count = |k: NodeKind| t.nodes.iter().filter(|n| n.kind == k).count();
    assert_eq!(count(NodeKind::Gpu), 4);
    assert_eq!(count(NodeKind::Cpu), 2);
    assert_eq!(count(NodeKind::Nic), 2);
    assert_eq!(count(NodeKind::Net), 2);
    assert_eq!(t.nodes.len(), 10);
    // 4 GPU + 2 NIC PCI links, 4 NVL (both directions), 2 SYS, 2 NET.
    assert_eq!(t.links.len(), 14);
    let g: Vec<usize> = ["0-1000", "0-25000", "0-c1000", "0-e1000"]
        .iter()
        .map(|id| idx(t, NodeKind::Gpu, id))
        .collect();
    for (rank, &gi) in g.iter().enumerate() {
        assert_eq!(t.nodes[gi].rank, Some(rank as u32));
    }
    assert_eq!(t.nodes[g[2]].bus_id, Some(0xc1000));
    let (c0, c1) = (idx(t, NodeKind::Cpu, "0-0"), idx(t, NodeKind::Cpu, "0-1"));
    assert_eq!(link(t, c0, g[0]), Some((LinkKind::Pci, 24.0)));
    assert_eq!(link(t, c1, g[3]), Some((LinkKind::Pci, 24.0)));
    assert_eq!(link(t, g[0], g[1]), Some((LinkKind::Nvl, 80.0)));
    assert_eq!(link(t, g[1], g[0]), Some((LinkKind::Nvl, 80.0)));
    assert_eq!(link(t, c0, c1), Some((LinkKind::Sys, 16.0)));
    assert_eq!(link(t, c1, c0), Some((LinkKind::Sys, 16.0)));
    let nic = idx(t, NodeKind::Nic, "0-c3000");
    assert_eq!(link(t, c1, nic), Some((LinkKind::Pci, 12.0)));
    assert_eq!(
        link(t, nic, idx(t, NodeKind::Net, "0-1")),
        Some((LinkKind::Net, 12.5))
    );
    assert_eq!(t.net_bw_gb_s(), Some(12.5));
    assert!(t.paths.is_empty());
    // The thesis's bottleneck rule, through core.
    assert_eq!(t.gpu_pair_bw(g[0], g[1]), Some((80.0, LinkKind::Nvl)));
    assert_eq!(t.gpu_pair_bw(g[2], g[3]), Some((80.0, LinkKind::Nvl)));
    assert_eq!(t.gpu_pair_bw(g[0], g[2]), Some((16.0, LinkKind::Sys)));
    assert_eq!(t.gpu_pair_bw(g[1], g[3]), Some((16.0, LinkKind::Sys)));
}

#[test]
fn block_boundaries() {
    // A second header closes the first block: BlockDone on the header.
    let mut msgs = messages(THESIS);
    msgs.extend(messages(THESIS));
    let (r, blocks, bad) = parse_msgs(&msgs);
    assert_eq!(r.iter().filter(|&&x| x == TopoLine::BlockDone).count(), 1);
    assert_eq!(r[messages(THESIS).len()], TopoLine::BlockDone);
    assert_eq!(blocks.len(), 2, "finish closes the second");
    assert_eq!(blocks[0], blocks[1]);
    assert_eq!(bad, 0);

    // Lines outside a dump are not topology, even dump-like ones without a header.
    let mut p = TopoParser::new();
    for m in [
        &b"+ PCI[24.0] - GPU/0-17000 (0)"[..],
        b"==========",
        b"GPU/0-17000 :GPU/0-17000 (0/5000.0/LOC)",
    ] {
        assert_eq!(p.feed(m), TopoLine::NotTopology);
    }
    p.finish();
    assert!(p.take_blocks().is_empty());

    // A header followed by nothing usable gives no block.
    let (_, blocks, _) = parse_msgs(&[
        b"=== System : maxBw 1.0 totalBw 1.0 ===",
        b"Pattern 4, crossNic 0",
    ]);
    assert!(blocks.is_empty());

    // NCCL messages that start like a node reference end the block.
    let (r, blocks, bad) = parse_msgs(&[
        b"=== System : maxBw 24.0 totalBw 24.0 ===",
        b"CPU/1 (1/2/-1)",
        b"+ PCI[24.0] - GPU/81000 (0)",
        b"NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_2'",
    ]);
    assert_eq!(r[3], TopoLine::NotTopology);
    assert_eq!((blocks.len(), bad), (1, 0));
}

#[test]
fn lost_header_opens_a_block_at_a_root_line() {
    let (r, blocks, bad) = parse_msgs(&[
        b"CPU/0-2 (1/2/-1)",
        b"+ PCI[24.0] - GPU/0-26000 (0)",
        b"==========================================",
        b"GPU/0-26000 :GPU/0-26000 (0/5000.0/LOC) CPU/0-2 (1/24.0/PHB)",
        b"CPU/0-2 (1/2/-1)",
        b"+ PCI[24.0] - GPU/0-26000 (0)",
    ]);
    assert_eq!(r[0], TopoLine::Consumed);
    assert_eq!(
        r[4],
        TopoLine::BlockDone,
        "a root after the paths starts a new block"
    );
    assert_eq!((blocks.len(), bad), (2, 0));
    assert_eq!(blocks[0].max_bw_gb_s, 0.0);
    assert_eq!(blocks[0].paths.len(), 2);
    // A loose root-like line needs the full CPU suffix to start a block.
    let mut p = TopoParser::new();
    assert_eq!(p.feed(b"CPU/0-2"), TopoLine::NotTopology);
    assert_eq!(p.feed(b"CPU/0-2 (1/2)"), TopoLine::NotTopology);
}

#[test]
fn malformed_lines_are_counted_and_do_not_end_the_block() {
    let (r, blocks, bad) = parse_msgs(&[
        b"=== System : maxBw 24.0 totalBw 24.0 ===",
        b"CPU/0-1 (1/2/-1)",
        b"+ PCI[24.0] - GPU/0-26000 (0)",
        b"+ PCI[24.0] - GPU/0-41", // cut short: no rank suffix
        b"              + NVL[20.0] - GPU/0-26000", // hangs off the damaged line
        b"+ PCI[24.0] - GPU/0-61000 (2", // suffix cut, id whole: kept
        b"+ PCI[24.",              // cut inside the edge
        b"\x00\xff\x13garbage",
        b"",
        b"+ SYS[16.0] - CPU/0-0",
        b"====",
        b"GPU/0-26000 :GPU/0-26000 (0/5000.0/LOC) GPU/0-61000 (3/16.0/SY",
        b"GPU/0-61000 :GPU/0-26000 (3/16.0/SYS) junk) GPU/0-61000 (0/5000.0/LOC)",
        b"+ PCI[24.0] - GPU/0-81000 (3)", // an edge among path lines
        b"Channel 00/02 :    0   1",
    ]);
    assert_eq!(r.iter().filter(|&&x| x == TopoLine::NotTopology).count(), 1);
    assert_eq!(*r.last().unwrap(), TopoLine::NotTopology);
    assert_eq!(bad, 8);
    assert_eq!(blocks.len(), 1);
    let t = &blocks[0];
    check_indices(t);
    assert!(t.find(NodeKind::Gpu, "0-41").is_none());
    assert!(t.find(NodeKind::Gpu, "0-81000").is_none());
    let g61 = idx(t, NodeKind::Gpu, "0-61000");
    assert_eq!(t.nodes[g61].rank, None);
    assert_eq!(
        link(t, idx(t, NodeKind::Cpu, "0-1"), g61),
        Some((LinkKind::Pci, 24.0))
    );
    assert_eq!(
        link(
            t,
            idx(t, NodeKind::Cpu, "0-1"),
            idx(t, NodeKind::Cpu, "0-0")
        ),
        Some((LinkKind::Sys, 16.0))
    );
    // Truncated tail dropped, the complete entries kept; the junk line keeps its head.
    let g26 = idx(t, NodeKind::Gpu, "0-26000");
    assert_eq!(path(t, g26, g26), Some((0, 5000.0, LinkKind::Loc)));
    assert_eq!(path(t, g26, g61), None);
    assert_eq!(path(t, g61, g26), Some((3, 16.0, LinkKind::Sys)));
    assert_eq!(path(t, g61, g61), None);

    // A damaged header still opens a block.
    let (_, blocks, bad) = parse_msgs(&[
        b"=== System stone:1:1 [1] NCCL INFO",
        b"CPU/0 (1/1/2)",
        b"+ PCI[24.0] - GPU/F000 (8)",
    ]);
    assert_eq!((blocks.len(), bad), (1, 1));
}
