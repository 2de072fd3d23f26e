//! The flow-level network against the collective model and against hand-computable sharing:
//! a lone AllReduce in a node at the model's bus bandwidth, two AllReduces on the same NICs at
//! half each, rail-optimised AllReduce over all rails, a 2:1 oversubscription halving
//! cross-leaf throughput, deterministic ECMP, communicators on part of an NVLink mesh on
//! their own links.

use std::collections::HashMap;

use commlens_core::OpKind;
use commlens_model::predict::{bus_factor, Predictor, DEFAULT_VERSION};
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;
use commlens_model::Cluster;
use commlens_sim::flow::{ecmp_hash, FlowConfig, FlowNetwork};
use commlens_sim::network::{NetOp, Network};
use commlens_workload::GroupKind;

fn op(id: u64, kind: OpKind, bytes: u64, ranks: Vec<u32>) -> NetOp {
    NetOp { id, kind, bytes, ranks, group_kind: GroupKind::Dp, root: 0 }
}

/// Runs the network dry like an engine would; completion time per op.
fn drain(net: &mut FlowNetwork) -> HashMap<u64, f64> {
    let mut done = HashMap::new();
    let mut guard = 0;
    while let Some(t) = net.next_completion() {
        for id in net.advance(t) {
            done.insert(id, t);
        }
        guard += 1;
        assert!(guard < 1_000_000, "network does not finish");
    }
    done
}

fn bandwidth_only() -> FlowConfig {
    FlowConfig { latency: false, ..FlowConfig::default() }
}

const GIB: u64 = 1 << 30;

#[test]
fn lone_allreduce_in_a_node_matches_the_model() {
    for name in ["dgx-a100", "dgx-h100", "dgx-v100"] {
        let c = preset(name).unwrap();
        let mut net = FlowNetwork::new(&c, FlowConfig::default());
        net.start(0.0, op(1, OpKind::AllReduce, GIB, (0..8).collect()));
        let t = drain(&mut net)[&1];
        let busbw = GIB as f64 / (t * 1e3) * bus_factor(OpKind::AllReduce, 8);
        let p = Predictor::new(&c, 8, 1, DEFAULT_VERSION, NcclEnv::default()).predict(OpKind::AllReduce, GIB);
        let ratio = busbw / p.busbw_gb_s;
        println!("{name}: 1 GiB AllReduce in one node: flow {busbw:.1} GB/s busbw, model {:.1} ({:?}), ratio {ratio:.3}", p.busbw_gb_s, p.algo);
        assert!((0.9..=1.1).contains(&ratio), "{name}: ratio {ratio}");
    }
}

fn two_nodes() -> Cluster {
    preset("dgx-h100").unwrap().with_nodes(2)
}

#[test]
fn two_allreduces_on_the_same_nics_get_half_each() {
    let c = two_nodes();
    let ranks: Vec<u32> = (0..16).collect();
    let mut net = FlowNetwork::new(&c, bandwidth_only());
    net.start(0.0, op(1, OpKind::AllReduce, GIB, ranks.clone()));
    let alone = drain(&mut net)[&1];
    let mut net = FlowNetwork::new(&c, bandwidth_only());
    net.start(0.0, op(1, OpKind::AllReduce, GIB, ranks.clone()));
    net.start(0.0, op(2, OpKind::AllReduce, GIB, ranks));
    let d = drain(&mut net);
    println!("2 nodes × 8 H100, 1 GiB AllReduce: alone {alone:.0} µs, two at once {:.0} and {:.0} µs", d[&1], d[&2]);
    for id in [1, 2] {
        assert!((d[&id] / alone - 2.0).abs() < 1e-6, "{} vs {alone}", d[&id]);
    }
    // One starting halfway: the first runs alone for half its bytes, then shares.
    let mut net = FlowNetwork::new(&c, bandwidth_only());
    net.start(0.0, op(1, OpKind::AllReduce, GIB, (0..16).collect()));
    let _ = net.advance(alone / 2.0);
    net.start(alone / 2.0, op(2, OpKind::AllReduce, GIB, (0..16).collect()));
    let d = drain(&mut net);
    assert!((d[&1] - 1.5 * alone).abs() < 1e-6 * alone, "{} vs {}", d[&1], 1.5 * alone);
    assert!((d[&2] - 2.0 * alone).abs() < 1e-6 * alone, "{} vs {}", d[&2], 2.0 * alone);
}

#[test]
fn rail_optimised_allreduce_uses_every_rail() {
    let c = two_nodes();
    let mut net = FlowNetwork::new(&c, bandwidth_only());
    net.start(0.0, op(1, OpKind::AllReduce, GIB, (0..16).collect()));
    let t = drain(&mut net)[&1];
    let usage = net.link_usage();
    for node in 0..2 {
        let tx: Vec<f64> = (0..8)
            .map(|i| usage.iter().find(|u| u.name == format!("node{node}.nic{i}.tx")).map_or(0.0, |u| u.bytes))
            .collect();
        let (lo, hi) = tx.iter().fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        println!("node{node} NIC tx bytes per rail: {:?}", tx.iter().map(|b| (b / 1e6).round()).collect::<Vec<_>>());
        assert!(lo > 0.0 && (hi - lo) <= 1e-9 * hi, "node{node}: {tx:?}");
    }
    // The node's 8 NICs are the bottleneck: busbw = 8 × 400 Gb/s × 0.96 = 384 GB/s when the
    // model decomposes as a ring (tree and NVLS-tree move less per node and go faster).
    let class = usage.iter().find(|u| u.name == "class:nic-tx").unwrap();
    let node_bytes = class.bytes / 2.0;
    let node_rate = node_bytes / (t * 1e3);
    println!("per-node NIC rate {node_rate:.1} GB/s over {t:.0} µs");
    assert!(node_rate <= 384.0 * 1.000001 && node_rate > 0.9 * 384.0, "{node_rate}");
}

#[test]
fn oversubscription_halves_cross_leaf_throughput() {
    let mut times = Vec::new();
    for over in [1.0, 2.0] {
        let mut c = two_nodes();
        c.network.nodes_per_leaf = 1;
        c.network.oversubscription = over;
        let mut net = FlowNetwork::new(&c, bandwidth_only());
        // Rank i of node 0 → rank i of node 1, every rail, as Send/Recv pairs.
        for i in 0..8u32 {
            net.start(0.0, op(i as u64, OpKind::Send, GIB, vec![i, 8 + i]));
        }
        let d = drain(&mut net);
        times.push(d.values().cloned().fold(0.0, f64::max));
        let mut c2 = c.clone();
        c2.network.nodes_per_leaf = 2;
        let mut same_leaf = FlowNetwork::new(&c2, bandwidth_only());
        same_leaf.start(0.0, op(1, OpKind::Send, GIB, vec![0, 8]));
        let t_same = drain(&mut same_leaf)[&1];
        println!("oversubscription {over}: cross-leaf {:.0} µs, same leaf {t_same:.0} µs", times.last().unwrap());
    }
    let ratio = times[1] / times[0];
    assert!((ratio - 2.0).abs() < 1e-6, "{ratio}");
}

#[test]
fn ecmp_is_deterministic_and_spreads() {
    assert_eq!(ecmp_hash(3, 77, 12), ecmp_hash(3, 77, 12));
    let mut c = preset("dgx-h100").unwrap().with_nodes(4);
    c.network.nodes_per_leaf = 2; // 2 uplinks per rail leaf, nodes 0–1 and 2–3 on different leaves
    let run = || {
        let mut net = FlowNetwork::new(&c, bandwidth_only());
        for id in 0..64u64 {
            net.start(0.0, op(id, OpKind::Send, 1 << 20, vec![0, 16]));
        }
        let d = drain(&mut net);
        let mut u: Vec<(String, u64)> = net.link_usage().into_iter().map(|u| (u.name, u.bytes as u64)).collect();
        u.sort();
        let mut dv: Vec<(u64, u64)> = d.into_iter().map(|(k, v)| (k, v.to_bits())).collect();
        dv.sort();
        (u, dv)
    };
    let (a, ta) = run();
    let (b, tb) = run();
    assert_eq!(a, b);
    assert_eq!(ta, tb);
    let spines: Vec<&(String, u64)> = a.iter().filter(|(n, _)| n.starts_with("leaf0.rail0>spine")).collect();
    println!("64 sends node0→node2 over rail 0: uplinks {spines:?}");
    assert_eq!(spines.len(), 2, "both spines used by different operations");
}

#[test]
fn alltoall_bytes_are_conserved() {
    let c = two_nodes();
    let mut net = FlowNetwork::new(&c, FlowConfig::default());
    let s = 16u64 << 20;
    net.start(0.0, op(1, OpKind::AllToAll, s, (0..16).collect()));
    drain(&mut net);
    let u = net.link_usage();
    let tx = u.iter().find(|u| u.name == "class:nic-tx").unwrap().bytes;
    // Each of 16 ranks sends S/16 to each of the 8 ranks of the other node.
    let expect = 16.0 * 8.0 * (s as f64 / 16.0);
    assert!((tx - expect).abs() < 1e-6 * expect, "{tx} vs {expect}");
}

#[test]
fn zero_bytes_and_single_rank_complete_at_once() {
    let c = two_nodes();
    let mut net = FlowNetwork::new(&c, FlowConfig::default());
    net.start(5.0, op(1, OpKind::AllReduce, 0, (0..16).collect()));
    net.start(5.0, op(2, OpKind::AllReduce, 1 << 20, vec![3]));
    assert_eq!(net.next_completion(), Some(5.0));
    let mut d = net.advance(5.0);
    d.sort();
    assert_eq!(d, vec![1, 2]);
    assert_eq!(net.next_completion(), None);
}

#[test]
fn every_reported_completion_completes_something() {
    // Latencies differ per call (sizes, group shapes), so activations fall between
    // completions; the look-ahead must still name a time at which an operation ends.
    let c = preset("dgx-h100").unwrap().with_nodes(4);
    let mut net = FlowNetwork::new(&c, FlowConfig::default());
    let mut id = 0;
    for (i, bytes) in [1u64 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 28].into_iter().enumerate() {
        for ranks in [(0..8).collect::<Vec<u32>>(), (0..32).collect(), (0..4).map(|n| n * 8 + i as u32).collect()] {
            net.start(i as f64 * 3.0, op(id, OpKind::AllReduce, bytes, ranks));
            id += 1;
        }
        net.start(i as f64 * 3.0, op(id, OpKind::Send, bytes, vec![1, 9]));
        id += 1;
    }
    let mut n = 0;
    while let Some(t) = net.next_completion() {
        let done = net.advance(t);
        assert!(!done.is_empty(), "nothing completed at {t}");
        n += done.len();
    }
    assert_eq!(n as u64, id);
}

/// On an NVLink mesh a communicator gets the links to its own GPUs only: a lone AllReduce over
/// the first `k` GPUs of a GH200 quad (full mesh) or a DGX-1V (hybrid cube-mesh) runs at the
/// model's rate for `k` GPUs (`Cluster::intra_gb_s`, `commlens_model::mesh`), a 2-GPU one on a
/// GH200 quad at a third of the 4-GPU one's bus bandwidth, and two 2-GPU AllReduces sharing a
/// GPU but not a pair of GPUs each keep their own links.
#[test]
fn mesh_communicators_get_their_own_links() {
    for (name, ks) in [("gh200-slingshot", vec![2u32, 3, 4]), ("dgx-v100", vec![2, 3, 4, 5, 6, 7, 8])] {
        let c = preset(name).unwrap();
        let mut busbw = HashMap::new();
        for &k in &ks {
            let mut net = FlowNetwork::new(&c, FlowConfig::default());
            net.start(0.0, op(1, OpKind::AllReduce, GIB, (0..k).collect()));
            let t = drain(&mut net)[&1];
            let bw = GIB as f64 / (t * 1e3) * bus_factor(OpKind::AllReduce, k);
            let p = Predictor::new(&c, k, 1, DEFAULT_VERSION, NcclEnv::default()).predict(OpKind::AllReduce, GIB);
            let ratio = bw / p.busbw_gb_s;
            println!("{name}: 1 GiB AllReduce over {k} GPUs: flow {bw:.1} GB/s busbw, model {:.1}, ratio {ratio:.3}", p.busbw_gb_s);
            assert!((0.9..=1.1).contains(&ratio), "{name} {k}: ratio {ratio}");
            busbw.insert(k, bw);
        }
        if name == "gh200-slingshot" {
            let third = busbw[&2] / busbw[&4];
            assert!((third - 1.0 / 3.0).abs() < 0.05, "2 of 4 GPUs: {third:.3} of the 4-GPU busbw");
        }
    }
    let c = preset("gh200-slingshot").unwrap();
    let mut net = FlowNetwork::new(&c, bandwidth_only());
    net.start(0.0, op(1, OpKind::AllReduce, GIB, vec![0, 1]));
    let alone = drain(&mut net)[&1];
    let mut net = FlowNetwork::new(&c, bandwidth_only());
    net.start(0.0, op(1, OpKind::AllReduce, GIB, vec![0, 1]));
    net.start(0.0, op(2, OpKind::AllReduce, GIB, vec![0, 2]));
    let d = drain(&mut net);
    for id in [1, 2] {
        assert!((d[&id] / alone - 1.0).abs() < 1e-6, "{} vs {alone}", d[&id]);
    }
}
