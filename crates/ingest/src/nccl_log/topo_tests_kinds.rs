//! Tests of the topology-dump parser: node and link kinds (NVSwitch, C2C),
//! case-insensitive ids, and the path types of `Paths from` chains.
use super::*;

#[test]
fn nvswitch_c2c_and_case_insensitive_ids() {
    let (_, blocks, bad) = parse_msgs(&[
        b"=== System : maxBw 450.0 totalBw 450.0 ===",
        b"CPU/0-0 (2/0/0)",
        b"+ PCI[64.0] - GPU/0-1b000 (0)",
        b"                + NVL[450.0] - NVS/0-0",
        b"                + C2C[360.0] - CPU/0-0",
        b"+ PCI[64.0] - GPU/0-43000 (1)",
        b"                + NVL[300.0] - NVS/0-0",
        b"==========================================",
        b"GPU/0-1B000 :GPU/0-43000 (2/300.0/NVL)",
    ]);
    assert_eq!(bad, 0);
    let t = &blocks[0];
    assert_eq!(
        t.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::NvSwitch)
            .count(),
        1
    );
    let (a, b) = (
        idx(t, NodeKind::Gpu, "0-1b000"),
        idx(t, NodeKind::Gpu, "0-43000"),
    );
    assert_eq!(
        t.nodes.len(),
        4,
        "GPU/0-1B000 in the path line is GPU/0-1b000"
    );
    assert_eq!(
        link(t, a, idx(t, NodeKind::Cpu, "0-0")),
        Some((LinkKind::C2c, 360.0))
    );
    assert_eq!(path(t, a, b), Some((2, 300.0, LinkKind::Nvl)));
    assert_eq!(
        t.gpu_pair_bw(b, a),
        Some((300.0, LinkKind::Nvl)),
        "via NVSwitch, no path logged"
    );
}

#[test]
fn chain_kinds_follow_nccl_path_types() {
    let (_, blocks, bad) = parse_msgs(&[
        b"=== System : maxBw 20.0 totalBw 20.0 ===",
        b"CPU/0 (1/1/2)",
        b"+ PCI[24.0] - PCI/1000 (1)",
        b"              + PCI[24.0] - PCI/2000 (1)",
        b"                            + PCI[24.0] - GPU/3000 (0)",
        b"              + PCI[24.0] - GPU/4000 (1)",
        b"+ PCI[24.0] - GPU/5000 (2)",
        b"              + NVL[20.0] - GPU/4000",
        b"==========================================",
        b"Paths from GPU/4000 :",
        b" (5000.000000)",
        b"--PCI->PCI/1000--PCI->PCI/2000--PCI->GPU/3000 (24.000000)",
        b"--PCI->PCI/1000--PCI->CPU/0 (24.000000)",
        b"--NVL->GPU/5000 (20.000000)",
        b"Paths from GPU/3000 :",
        b"--PCI->PCI/2000--PCI->PCI/1000--PCI->GPU/4000 (24.000000)",
        b"--PCI->PCI/2000--PCI->PCI/1000--PCI->GPU/4000--NVL->GPU/5000 (20.000000)",
        b"--PCI->PCI/2000 (24.000000)",
    ]);
    assert_eq!(bad, 0);
    let t = &blocks[0];
    let n = |k, id| idx(t, k, id);
    let (g3, g4, g5) = (
        n(NodeKind::Gpu, "3000"),
        n(NodeKind::Gpu, "4000"),
        n(NodeKind::Gpu, "5000"),
    );
    assert_eq!(path(t, g4, g4), Some((0, 5000.0, LinkKind::Loc)));
    assert_eq!(path(t, g4, g3), Some((3, 24.0, LinkKind::Pxb)));
    assert_eq!(
        path(t, g4, n(NodeKind::Cpu, "0")),
        Some((2, 24.0, LinkKind::Phb))
    );
    assert_eq!(path(t, g4, g5), Some((1, 20.0, LinkKind::Nvl)));
    assert_eq!(
        path(t, g3, g5),
        Some((4, 20.0, LinkKind::Pxb)),
        "the worse of PXB and NVB"
    );
    assert_eq!(
        path(t, g3, n(NodeKind::PciSwitch, "2000")),
        Some((1, 24.0, LinkKind::Pix))
    );
    assert_eq!(t.paths.len(), 7);
    // A chain without its `Paths from` line cannot be placed.
    let (_, _, bad) = parse_msgs(&[
        b"=== System : maxBw 1.0 totalBw 1.0 ===",
        b"CPU/0 (1/1/2)",
        b"--PCI->CPU/0 (1.0)",
    ]);
    assert_eq!(bad, 1);
}
