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

/// `node_ref` (its name read as one run of upper-case letters) against the
/// reading it replaced (`upper_word`, then letters only): every string of
/// up to 6 bytes over an alphabet of letters, digits and the separators.
#[test]
fn node_ref_reads_names_as_upper_word_did() {
    use crate::nccl_log::topo_lex::{node_ref, upper_word};
    let reference = |s: &[u8]| -> Option<(NodeKind, Vec<u8>, Vec<u8>)> {
        let (name, rest) = upper_word(s)?;
        if !name.iter().all(u8::is_ascii_uppercase) {
            return None;
        }
        let rest = rest.strip_prefix(b"/")?;
        // The id, as node_ref reads it (unchanged).
        let r = node_ref([b"X/", rest].concat().as_slice()).map(|r| (r.id.to_vec(), r.rest.to_vec()));
        let (id, tail) = r?;
        Some((NodeKind::from_name(name), id, tail))
    };
    let alphabet = b"GPUC0a/- 9";
    let mut s = Vec::new();
    for len in 0..=6u32 {
        for mut code in 0..(alphabet.len() as u64).pow(len) {
            s.clear();
            for _ in 0..len {
                s.push(alphabet[(code % alphabet.len() as u64) as usize]);
                code /= alphabet.len() as u64;
            }
            let got = node_ref(&s).map(|r| (r.kind, r.id.to_vec(), r.rest.to_vec()));
            assert_eq!(got, reference(&s), "{:?}", String::from_utf8_lossy(&s));
        }
    }
    // Names of 8 and 9 letters.
    assert!(node_ref(b"ABCDEFGH/0").is_some());
    assert!(node_ref(b"ABCDEFGHI/0").is_none());
    assert!(node_ref(b"ABCDEFG1/0").is_none());
}

/// Distinct ids of up to 15 bytes get distinct keys; longer ones none.
#[test]
fn id_keys_tell_ids_apart() {
    use crate::nccl_log::topo_block::id_key;
    let ids: Vec<&[u8]> = vec![b"", b"0", b"00", b"0\0", b"0-17000", b"0-1700", b"F000", b"f000", b"0123456789abcde"];
    let keys: Vec<u128> = ids.iter().map(|id| id_key(id).unwrap()).collect();
    for i in 0..keys.len() {
        for j in 0..keys.len() {
            assert_eq!(keys[i] == keys[j], i == j, "{:?} {:?}", ids[i], ids[j]);
        }
    }
    assert_eq!(id_key(b"0123456789abcdef"), None);
}
