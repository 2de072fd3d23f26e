//! Invariants of the flow decompositions (`commlens_model::flows`): bytes
//! conserved, no self flows, acyclic steps, exact flow counts, node-major
//! rings, PXN routing, tree neighbourhoods, AllToAll volumes, NVLS switch
//! flows, point-to-point pieces.

use commlens_core::{Algorithm, OpKind, Protocol};
use commlens_model::cluster::{Cluster, LinkClass};
use commlens_model::flows::{decompose, decompose_p2p, dtree, CollSpec, FlowPlan, Hop, Placement, SWITCH};
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;

fn h100(nodes: u32) -> Cluster {
    preset("dgx-h100").unwrap().with_nodes(nodes)
}

fn plan(c: &Cluster, kind: OpKind, bytes: u64, n: u32, algo: Algorithm, ch: u32) -> FlowPlan {
    let p = decompose(&CollSpec::new(kind, bytes, n, algo, Protocol::Simple, ch), c, &NcclEnv::default());
    p.validate().unwrap_or_else(|e| panic!("{kind:?} {algo:?} n={n}: {e}"));
    p
}

#[test]
fn ring_allreduce_conserves_bytes() {
    let c = h100(2);
    // S a multiple of n × channels × chunks: every rank sends exactly 2(n−1)/n·S.
    let s = 16u64 << 20;
    let p = plan(&c, OpKind::AllReduce, s, 16, Algorithm::Ring, 4);
    let want = 2 * 15 * s / 16;
    assert!(p.sent_per_rank().iter().all(|&b| b == want));
    assert!(p.received_per_rank().iter().all(|&b| b == want));
    // An odd size: blocks differ by a byte; per rank within 2 bytes, total exact.
    let s = 1_000_003u64;
    let p = plan(&c, OpKind::AllReduce, s, 16, Algorithm::Ring, 4);
    let exact = 2.0 * 15.0 / 16.0 * s as f64;
    for b in p.sent_per_rank() {
        assert!((b as f64 - exact).abs() <= 2.0, "{b} vs {exact}");
    }
    assert_eq!(p.sent_per_rank().iter().sum::<u64>(), 2 * 15 * s);
}

#[test]
fn ring_allgather_and_reducescatter_send_n_minus_1_blocks() {
    let c = h100(3);
    for kind in [OpKind::AllGather, OpKind::ReduceScatter] {
        let b = 3_000_001u64; // per-rank block
        let p = plan(&c, kind, b, 24, Algorithm::Ring, 2);
        assert_eq!(p.steps, 23);
        assert!(p.sent_per_rank().iter().all(|&x| x == 23 * b), "{kind:?}");
        assert!(p.received_per_rank().iter().all(|&x| x == 23 * b), "{kind:?}");
    }
}

#[test]
fn ring_flow_count_is_ranks_times_steps_times_channels_times_chunks() {
    let c = h100(4);
    let n = 32u32;
    // 256 MiB: 8 MiB blocks, 2 MiB per channel part, 512 KiB slots → 4 chunks.
    let spec = CollSpec::new(OpKind::AllReduce, 256 << 20, n, Algorithm::Ring, Protocol::Simple, 4).with_pxn(false);
    let p = decompose(&spec, &c, &NcclEnv::default());
    p.validate().unwrap();
    assert_eq!(p.chunks, 4);
    assert_eq!(p.flows.len() as u64, n as u64 * 2 * (n as u64 - 1) * 4 * 4);
    // NCCL_BUFFSIZE = 16 MiB: 2 MiB slots, one chunk per part.
    let env = NcclEnv { buffsize: Some(16 << 20), ..Default::default() };
    let p = decompose(&spec, &c, &env);
    assert_eq!(p.chunks, 1);
    assert_eq!(p.flows.len() as u64, n as u64 * 2 * (n as u64 - 1) * 4);
}

#[test]
fn node_major_ring_crosses_each_node_boundary_once_per_step() {
    for nodes in [2u32, 3, 5] {
        let c = h100(nodes);
        let n = nodes * 8;
        let p = plan(&c, OpKind::AllReduce, 64 << 20, n, Algorithm::Ring, 4);
        let mut per = std::collections::HashMap::new();
        for f in p.flows.iter().filter(|f| f.link == LinkClass::Net) {
            *per.entry((f.chunk, f.step, f.channel)).or_insert(0u32) += 1;
        }
        assert_eq!(per.len() as u32, p.chunks * p.steps * p.channels);
        assert!(per.values().all(|&k| k == nodes), "{nodes} nodes: one network flow out of every node per ring step");
    }
}

#[test]
fn pxn_is_an_nvlink_hop_then_a_network_hop() {
    let c = h100(2);
    let p = plan(&c, OpKind::AllReduce, 16 << 20, 16, Algorithm::Ring, 2);
    let pl = Placement::new(&c, 16, true);
    let mut seen = 0;
    for (i, f) in p.flows.iter().enumerate() {
        if f.hop == Hop::PxnFromProxy {
            let first = p.flows[i - 1];
            assert_eq!(first.hop, Hop::PxnToProxy);
            assert_eq!(first.link, LinkClass::NvLink);
            assert_eq!(pl.node(first.src), pl.node(first.dst), "first hop stays in the node");
            assert_eq!(first.dst, f.src);
            assert_eq!(f.link, LinkClass::Net);
            assert_eq!(pl.rail(pl.local(f.src)), pl.rail(pl.local(f.dst)), "second hop on the destination's rail");
            assert_eq!(f.deps.iter().collect::<Vec<_>>(), vec![i as u32 - 1]);
            assert_eq!((first.step, first.chunk, first.channel), (f.step, f.chunk, f.channel));
            seen += 1;
        }
    }
    assert!(seen > 0);
    // Proxies forward; payload per rank is unchanged by PXN.
    assert!(p.forwarded_per_rank().iter().any(|&b| b > 0));
    assert!(p.sent_per_rank().iter().all(|&b| b == 2 * 15 * (16 << 20) / 16));
    // Without PXN the network flow leaves from the ring's last GPU directly.
    let spec = CollSpec::new(OpKind::AllReduce, 16 << 20, 16, Algorithm::Ring, Protocol::Simple, 2).with_pxn(false);
    let q = decompose(&spec, &c, &NcclEnv::default());
    assert!(q.flows.iter().all(|f| f.hop == Hop::Direct));
    assert_eq!(q.bytes_per_link().net, p.bytes_per_link().net);
}

#[test]
fn tree_flows_join_tree_neighbours_only() {
    for (nodes, n) in [(4u32, 32u32), (5, 40), (3, 22)] {
        let c = h100(nodes);
        let p = plan(&c, OpKind::AllReduce, 32 << 20, n, Algorithm::Tree, 4);
        assert_eq!(p.channels, 4);
        assert_eq!(p.flows.len() as u64, 2 * (n as u64 - 1) * 4 * p.chunks as u64, "up and down, every rank but the root");
        let pl = Placement::new(&c, n, true);
        let nn = pl.nnodes();
        for f in &p.flows {
            let (a, b) = (pl.node(f.src), pl.node(f.dst));
            if a != b {
                let which = usize::from(f.channel as u32 >= p.channels / 2);
                assert!(dtree(nn, a)[which].is_neighbour(b), "{a}->{b} not neighbours in tree {which}");
                assert_eq!(pl.local(f.src), pl.local(f.dst), "node heads share a local index");
            } else {
                // Chain neighbours: adjacent in the channel's rotation of the node.
                let size = pl.node_size(a);
                let pos = |r: u32| (pl.local(r) + size - f.channel as u32 % size) % size;
                assert_eq!(pos(f.src).abs_diff(pos(f.dst)), 1);
            }
        }
        // Each channel part crosses 2(n − 1) edges: total = 2(n − 1)·S.
        assert_eq!(p.total_bytes(), 2 * (n as u64 - 1) * (32 << 20));
    }
    // One channel asked for: trees run on channel pairs.
    let p = plan(&h100(2), OpKind::AllReduce, 1 << 20, 16, Algorithm::Tree, 1);
    assert_eq!(p.channels, 2);
}

#[test]
fn alltoall_every_rank_sends_n_minus_1_counts() {
    let c = h100(2);
    let count = 1u64 << 20;
    let p = plan(&c, OpKind::AllToAll, count, 16, Algorithm::Ring, 4);
    assert!(p.sent_per_rank().iter().all(|&b| b == 15 * count));
    assert!(p.received_per_rank().iter().all(|&b| b == 15 * count));
    let direct = p.flows.iter().filter(|f| f.hop != Hop::PxnFromProxy).count();
    assert_eq!(direct, 16 * 15, "one flow per ordered pair");
    // Off-rail inter-node pairs (7 of 8 per source and destination node) go through PXN.
    let pxn = p.flows.iter().filter(|f| f.hop == Hop::PxnFromProxy).count();
    assert_eq!(pxn, 2 * 8 * 7);
    assert!((0..4).all(|c| p.flows.iter().any(|f| f.channel == c)), "spread over channels");
    // Network pieces: 1 MiB in 128 KiB chunks.
    let net = p.flows.iter().find(|f| f.link == LinkClass::Net).unwrap();
    assert_eq!(p.pieces(net), 8);
}

#[test]
fn p2p_pairs_one_flow_each_chunked_by_the_env() {
    let c = h100(2);
    let pairs = [(0u32, 8u32, 1u64 << 20), (3, 3, 100), (1, 2, 4096)];
    let p = decompose_p2p(&pairs, 16, &c, 2, &NcclEnv::default());
    p.validate().unwrap();
    assert_eq!(p.flows.len(), 2, "the self pair is a local copy");
    assert_eq!(p.pieces(&p.flows[0]), 8);
    let env = NcclEnv { p2p_net_chunksize: Some(1 << 20), ..Default::default() };
    let p = decompose_p2p(&pairs, 16, &c, 2, &env);
    assert_eq!(p.pieces(&p.flows[0]), 1);
    // nccl-tests sendrecv: every rank to the next.
    let p = plan(&c, OpKind::SendRecv, 1 << 20, 16, Algorithm::Ring, 2);
    assert!(p.sent_per_rank().iter().all(|&b| b == 1 << 20));
}

#[test]
fn nvls_goes_through_the_switch() {
    let c = h100(1);
    let s = 8u64 << 20;
    let p = plan(&c, OpKind::AllReduce, s, 8, Algorithm::Nvls, 4);
    assert!(p.flows.iter().all(|f| (f.src == SWITCH) != (f.dst == SWITCH) && f.link == LinkClass::NvLink));
    assert!(p.sent_per_rank().iter().all(|&b| b == s));
    assert!(p.received_per_rank().iter().all(|&b| b == s));
    assert_eq!(p.steps, 2);
    // The switch's result waits for every contribution of its channel and chunk.
    let back = p.flows.iter().find(|f| f.src == SWITCH).unwrap();
    assert_eq!(back.deps.len(), 8);
    // Two nodes: NVLS-Tree; network flows stay on a rail.
    let c = h100(2);
    let p = plan(&c, OpKind::AllReduce, s, 16, Algorithm::NvlsTree, 2);
    let pl = Placement::new(&c, 16, true);
    let net: Vec<_> = p.flows.iter().filter(|f| f.link == LinkClass::Net).collect();
    assert!(!net.is_empty());
    assert!(net.iter().all(|f| pl.local(f.src) == pl.local(f.dst) && f.hop == Hop::Direct));
    // Each GPU's slice crosses the two-node tree once each way.
    assert_eq!(p.bytes_per_link().net, 2 * s);
    let p = plan(&h100(1), OpKind::AllGather, 1 << 20, 8, Algorithm::Nvls, 2);
    assert!(p.received_per_rank().iter().all(|&b| b == 7 << 20));
}

#[test]
fn every_plan_validates_on_varied_clusters() {
    let clusters = [
        (h100(1), 8u32),
        (h100(3), 24),
        (h100(2), 12), // partial second node
        (preset("pcie-a100").unwrap().with_nodes(2), 16),
        (preset("dgx-v100").unwrap().with_nodes(2), 16),
        (preset("gb200-nvl72").unwrap().with_nodes(4), 16),
    ];
    let kinds = [OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::Broadcast, OpKind::Reduce, OpKind::AllToAll];
    let algos = [Algorithm::Ring, Algorithm::Tree, Algorithm::Nvls, Algorithm::NvlsTree, Algorithm::CollNetDirect, Algorithm::Pat];
    for (c, n) in &clusters {
        for kind in kinds {
            for algo in algos {
                for bytes in [1u64, 1000, 3 << 20] {
                    let p = plan(c, kind, bytes, *n, algo, 3);
                    assert!(!p.flows.is_empty(), "{kind:?} {algo:?}");
                    let links = p.bytes_per_link();
                    assert_eq!(links.nvlink + links.pcie + links.sys + links.net, p.total_bytes());
                }
            }
        }
    }
    // PCIe cluster: no NVLink flows, socket crossings on SYS.
    let c = preset("pcie-a100").unwrap();
    let p = plan(&c, OpKind::AllReduce, 1 << 20, 8, Algorithm::Ring, 1);
    assert_eq!(p.bytes_per_link().nvlink, 0);
    assert!(p.bytes_per_link().sys > 0);
}
