//! The analytical backend: the collective model's time alone, processor sharing of NICs and
//! NVLink by count, the bandwidth knob, link usage.

mod engine_util;

use commlens_core::OpKind;
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::tuner::NcclEnv;
use commlens_model::Predictor;
use commlens_sim::analytical::{tests_size, AnalyticalNetwork};
use commlens_sim::engine::{run, EngineOptions};
use commlens_sim::network::{NetOp, Network};
use commlens_workload::GroupKind;
use engine_util::*;

fn op(id: u64, kind: OpKind, bytes: u64, ranks: Vec<u32>) -> NetOp {
    NetOp { id, kind, bytes, ranks, group_kind: GroupKind::Dp, root: 0 }
}

fn predicted(nranks: u32, nnodes: u32, kind: OpKind, size: u64) -> f64 {
    Predictor::new(&cluster(4), nranks, nnodes, DEFAULT_VERSION, NcclEnv::default()).predict(kind, size).time_us
}

/// Runs every op to completion; returns (id, completion) in completion order.
fn drain(net: &mut AnalyticalNetwork) -> Vec<(u64, f64)> {
    let mut out = Vec::new();
    while let Some(t) = net.next_completion() {
        for id in net.advance(t) {
            out.push((id, t));
        }
    }
    out
}

#[test]
fn a_lone_allreduce_takes_the_predictors_time() {
    // 16 ranks on 2 nodes, 256 MiB, through the engine.
    let bytes = 256u64 << 20;
    let w = workload(16, vec![prog(vec![coll(OpKind::AllReduce, GroupKind::Dp, bytes)])], vec![0; 16], vec![(GroupKind::Dp, vec![(0..16).collect()])]);
    let r = run(&w, &Stated, &mut analytical(4), &EngineOptions::default()).unwrap();
    let want = predicted(16, 2, OpKind::AllReduce, bytes);
    assert!(want > 1000.0, "a big operation: {want} µs");
    assert!((r.summary.total_us - want).abs() < 1e-9 * want, "{} vs {want}", r.summary.total_us);
    // AllGather: NCCL's count is per rank, the model's size the whole buffer.
    let mut net = analytical(4);
    net.start(0.0, op(1, OpKind::AllGather, 4 << 20, (0..8).collect()));
    let want = predicted(8, 1, OpKind::AllGather, tests_size(OpKind::AllGather, 4 << 20, 8));
    assert_eq!(tests_size(OpKind::AllGather, 4 << 20, 8), 32 << 20);
    let got = drain(&mut net);
    assert_eq!(got.len(), 1);
    assert!((got[0].1 - want).abs() < 1e-9 * want);
    // A Send between nodes: the model's point-to-point time.
    net.start(100_000.0, op(2, OpKind::Send, 64 << 20, vec![3, 11]));
    let want = 100_000.0 + predicted(2, 2, OpKind::Send, 64 << 20);
    let got = drain(&mut net);
    assert!((got[0].1 - want).abs() < 1e-9 * want, "{got:?} vs {want}");
}

#[test]
fn concurrent_operations_on_the_same_nics_take_twice_as_long() {
    let bytes = 1u64 << 30;
    let alone = predicted(2, 2, OpKind::AllReduce, bytes);
    // Two operations over GPU 0 of nodes 0 and 1 (two streams of one DP group), together.
    let mut net = analytical(4);
    net.start(0.0, op(1, OpKind::AllReduce, bytes, vec![0, 8]));
    net.start(0.0, op(2, OpKind::AllReduce, bytes, vec![0, 8]));
    let got = drain(&mut net);
    assert_eq!(got.len(), 2);
    for (_, t) in &got {
        let ratio = t / alone;
        assert!(ratio > 1.95 && ratio <= 2.0, "ratio {ratio}");
    }
    // Link usage: both nodes' NICs busy the whole time; bytes counted; node 2 untouched.
    let u = net.link_usage();
    let nic0 = u.iter().find(|l| l.name == "node0 NIC").expect("node0 NIC");
    assert!((nic0.busy_us - got[1].1).abs() < 1e-6, "{nic0:?}");
    assert!(nic0.bytes > 0.0 && nic0.capacity_gb_s > 0.0);
    assert!(u.iter().all(|l| !l.name.contains("node2")));

    // Whole nodes: two 16-rank operations over nodes 0 and 1 hold every NIC of both.
    let alone16 = predicted(16, 2, OpKind::AllReduce, bytes);
    let mut net = analytical(4);
    net.start(0.0, op(1, OpKind::AllReduce, bytes, (0..16).collect()));
    net.start(0.0, op(2, OpKind::AllReduce, bytes, (0..16).collect()));
    for (_, t) in drain(&mut net) {
        let ratio = t / alone16;
        assert!(ratio > 1.95 && ratio <= 2.0, "ratio {ratio}");
    }

    // Rail-aligned rings of different GPUs ({0, 8} on NIC 0, {1, 9} on NIC 1) do not share.
    let mut net = analytical(4);
    net.start(0.0, op(1, OpKind::AllReduce, bytes, vec![0, 8]));
    net.start(0.0, op(2, OpKind::AllReduce, bytes, vec![1, 9]));
    for (_, t) in drain(&mut net) {
        assert!((t - alone).abs() < 1e-9 * alone);
    }

    // An intra-node operation on the same GPU does not slow the inter-node one.
    let mut net = analytical(4);
    net.start(0.0, op(1, OpKind::AllReduce, bytes, vec![0, 8]));
    net.start(0.0, op(2, OpKind::AllReduce, bytes, (0..8).collect()));
    let got = drain(&mut net);
    let inter = got.iter().find(|g| g.0 == 1).unwrap().1;
    assert!((inter - alone).abs() < 1e-9 * alone);
    // Two intra-node operations on overlapping GPUs share their NVLink ports.
    let alone8 = predicted(8, 1, OpKind::AllReduce, bytes);
    let mut net = analytical(4);
    net.start(0.0, op(1, OpKind::AllReduce, bytes, (0..8).collect()));
    net.start(0.0, op(2, OpKind::AllReduce, bytes, (0..8).collect()));
    for (_, t) in drain(&mut net) {
        assert!(t / alone8 > 1.9, "{t} vs {alone8}");
    }

    // A second operation arriving half-way stretches only the remaining half.
    let mut net = analytical(4);
    net.start(0.0, op(1, OpKind::AllReduce, bytes, vec![0, 8]));
    let lat = predicted(2, 2, OpKind::AllReduce, 0);
    let half = lat + (alone - lat) / 2.0;
    assert!(net.advance(half).is_empty());
    net.start(half, op(2, OpKind::AllReduce, bytes, vec![0, 8]));
    let got = drain(&mut net);
    assert_eq!(got[0].0, 1);
    let want = half + (alone - lat) / 2.0 * 2.0;
    assert!((got[0].1 - want).abs() < 1e-6 * want, "{} vs {want}", got[0].1);
}

#[test]
fn scaling_the_network_divides_the_bandwidth_part() {
    let bytes = 1u64 << 30;
    let alone = predicted(16, 2, OpKind::AllReduce, bytes);
    let lat = predicted(16, 2, OpKind::AllReduce, 0);
    let mut net = AnalyticalNetwork::new(&cluster(4), DEFAULT_VERSION, NcclEnv::default()).with_scale(2.0);
    net.start(0.0, op(1, OpKind::AllReduce, bytes, (0..16).collect()));
    let got = drain(&mut net);
    let want = lat + (alone - lat) / 2.0;
    assert!((got[0].1 - want).abs() < 1e-9 * want, "{} vs {want}", got[0].1);
}

#[test]
fn a_single_rank_or_empty_operation_completes_at_once() {
    let mut net = analytical(1);
    net.start(5.0, op(7, OpKind::AllReduce, 1 << 20, vec![3]));
    assert_eq!(net.next_completion(), Some(5.0));
    assert_eq!(net.advance(5.0), vec![7]);
    assert_eq!(net.next_completion(), None);
}
