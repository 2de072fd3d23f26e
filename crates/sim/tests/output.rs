//! The simulated run as a canonical table: ARCHITECTURE.md's invariants, assembled global
//! ranks and logical communicators, model choices on the rows, expansion, compute spans.

mod engine_util;

use commlens_core::{OpKind, OpTable};
use commlens_sim::engine::{run, EngineOptions};
use commlens_sim::output::{summary_text, to_table, to_table_with, TableOptions, EPOCH_BASE_NS};
use commlens_workload::{GroupKind, Peer, Stream, Workload};
use engine_util::*;

/// 16 ranks: TP 2 × PP 2 × DP 4, 3 micro-batches.
fn job() -> Workload {
    let (tp, pp, dp) = (2u32, 2u32, 4u32);
    let rank = |t: u32, p: u32, d: u32| t + tp * (d + dp * p);
    let mut programs = Vec::new();
    for s in 0..pp {
        let mut tasks = vec![coll(OpKind::AllGather, GroupKind::Tp, 1 << 16)];
        tasks.extend(one_f_one_b(s, pp, 3, 30.0, 60.0, 1 << 20));
        let last = tasks.len() as u32 - 1;
        tasks.push(on(coll(OpKind::ReduceScatter, GroupKind::Dp, 8 << 20), Stream::Comm(0), &[last]));
        tasks.push(on(coll(OpKind::AllReduce, GroupKind::Dp, 32 << 20), Stream::Comm(0), &[]));
        tasks.push(on(iter_end(0), Stream::Compute, &[last + 2]));
        programs.push(prog(tasks));
    }
    let mut rp = vec![0; 16];
    let (mut tps, mut pps, mut dps) = (vec![], vec![], vec![]);
    for p in 0..pp {
        for d in 0..dp {
            tps.push((0..tp).map(|t| rank(t, p, d)).collect());
            (0..tp).for_each(|t| rp[rank(t, p, d) as usize] = p);
        }
        for t in 0..tp {
            dps.push((0..dp).map(|d| rank(t, p, d)).collect());
        }
    }
    for d in 0..dp {
        for t in 0..tp {
            pps.push((0..pp).map(|p| rank(t, p, d)).collect());
        }
    }
    workload(16, programs, rp, vec![(GroupKind::Tp, tps), (GroupKind::Pp, pps), (GroupKind::Dp, dps)])
}

fn check_invariants(t: &OpTable) {
    for (d, ops) in t.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        assert!(ops.windows(2).all(|w| w[0].line <= w[1].line), "rank {d} in source order");
        for o in ops {
            assert_eq!(o.dev.ix(), d);
            assert_eq!(t.comms[o.comm.ix()].device, Some(o.dev), "op.dev == comms[op.comm].device");
            assert_eq!(t.devices[o.dev.ix()].proc, o.proc);
            assert_eq!(t.comms[o.comm.ix()].proc, o.proc);
            assert_eq!(o.bytes, o.count * o.dtype.size_bytes().unwrap());
            let g = o.gpu.expect("span");
            assert!(g.start_ns >= EPOCH_BASE_NS && g.start_ns <= g.end_ns);
            assert_eq!(o.cpu_ts_ns, Some(g.start_ns));
        }
    }
}

#[test]
fn the_table_is_assembled_like_a_measured_one() {
    let w = job();
    let r = run(&w, &Stated, &mut analytical(2), &EngineOptions::default()).unwrap();
    let c = cluster(2);
    let (t, spans) = to_table(&w, &r, &c);
    check_invariants(&t);
    assert_eq!(t.devices.len(), 16);
    // Global ranks are the simulated ranks.
    for (i, d) in t.devices.iter().enumerate() {
        assert_eq!(d.global_rank, Some(i as u32));
        assert_eq!(t.processes[d.proc.ix()].pid, i as u32);
        assert_eq!(t.processes[d.proc.ix()].host, format!("node{}", i / 8));
        assert_eq!(d.cuda_dev, Some(i as u32 % 8));
    }
    // One logical communicator per group, plus the world handle.
    assert_eq!(t.logical.len(), w.groups.len() + 1);
    for l in &t.logical {
        assert!(l.members.len() as u32 == l.nranks, "{l:?}");
        let ranks: Vec<u32> = l.members.iter().map(|m| t.global_rank_of(*m).unwrap()).collect();
        if l.nranks < 16 {
            assert!(w.groups.iter().any(|g| g.ranks == ranks), "{} is a group: {ranks:?}", l.name);
        }
    }
    // Every call of every rank is a row, with the model's choice on collectives.
    let n_calls: usize = r.ranks.iter().map(|x| x.ops.len()).sum();
    assert_eq!(t.n_ops(), n_calls);
    let ar = t.ops().find(|o| o.kind == OpKind::AllReduce).unwrap();
    assert!(ar.algo.is_some() && ar.proto.is_some() && ar.channels.is_some());
    // Send/Recv name their peer's communicator rank; both sides share the transfer's end.
    let send = t.ops().find(|o| o.kind == OpKind::Send).unwrap();
    assert_eq!(send.peer, Some(1));
    // Per handle, comm_seq counts 0, 1, …
    for ops in &t.per_rank {
        let mut per: std::collections::BTreeMap<u32, u64> = Default::default();
        for o in ops {
            let n = per.entry(o.comm.0).or_insert(0);
            assert_eq!(o.comm_seq, *n);
            *n += 1;
        }
    }
    // Compute spans: every compute step of every rank, named.
    assert_eq!(spans.per_rank.len(), 16);
    assert_eq!(spans.per_rank[0].spans.len(), r.rank(0).unwrap().compute.len());
    assert!(spans.names.iter().any(|n| n == "fwd") && spans.names.iter().any(|n| n == "bwd"));
    assert!(summary_text(&r).contains("exposed per parallelism (µs): DP"));
}

#[test]
fn representatives_only_unless_expanded() {
    let mut w = job();
    // DP replica 0 of each stage stands in for the others.
    w.representative = (0..16u32).map(|r| r % 2 + 8 * (r / 8)).collect();
    let r = run(&w, &Stated, &mut analytical(2), &EngineOptions::default()).unwrap();
    assert_eq!(r.ranks.len(), 4);
    let c = cluster(2);
    let (small, _) = to_table(&w, &r, &c);
    check_invariants(&small);
    let ranks: Vec<_> = small.devices.iter().map(|d| d.global_rank.unwrap()).collect();
    assert_eq!(ranks, vec![0, 1, 8, 9]);
    let (full, spans) = to_table_with(&w, &r, &c, &TableOptions { expand: true, ..Default::default() });
    check_invariants(&full);
    assert_eq!(full.devices.len(), 16);
    assert_eq!(full.logical.len(), w.groups.len() + 1);
    let ranks: Vec<_> = full.devices.iter().map(|d| d.global_rank.unwrap()).collect();
    assert_eq!(ranks, (0..16).collect::<Vec<_>>());
    // A represented rank has its representative's rows on its own communicators.
    let (a, b) = (&full.per_rank[0], &full.per_rank[4]);
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!((x.kind, x.bytes, x.gpu), (y.kind, y.bytes, y.gpu));
    }
    assert_eq!(spans.per_rank.len(), 16);
}

#[test]
fn a_whole_job_group_serves_as_world() {
    // Two ranks whose only group holds every rank in order: no extra world handle.
    let exchange = |peer: Peer| p2p(GroupKind::World, &[(true, peer, 64), (false, peer, 64)]);
    let w = workload(
        2,
        vec![
            prog(vec![coll(OpKind::AllReduce, GroupKind::World, 1024), exchange(Peer::Next)]),
            prog(vec![coll(OpKind::AllReduce, GroupKind::World, 1024), exchange(Peer::Prev)]),
        ],
        vec![0, 1],
        vec![(GroupKind::World, vec![vec![0, 1]])],
    );
    let r = run(&w, &Stated, &mut FixedNet::new(1.0), &EngineOptions::default()).unwrap();
    let (t, _) = to_table(&w, &r, &cluster(1));
    assert_eq!(t.logical.len(), 1);
    assert_eq!(t.comms.len(), 2);
    check_invariants(&t);
    // The grouped Send/Recv share one opCount after the AllReduce's.
    let seqs: Vec<(OpKind, u64, u64)> = t.per_rank[0].iter().map(|o| (o.kind, o.seq, o.comm_seq)).collect();
    assert_eq!(seqs, vec![(OpKind::AllReduce, 0, 0), (OpKind::Send, 1, 1), (OpKind::Recv, 1, 2)]);
}
