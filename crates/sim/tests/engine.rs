//! The engine on hand-built workloads: rendezvous, pipelines, overlap, deadlocks,
//! determinism, representatives.

mod engine_util;

use commlens_core::OpKind;
use commlens_sim::engine::{run, EngineOptions, SimError};
use commlens_workload::{GroupKind, Peer, Stream, Work};
use engine_util::*;

fn opts() -> EngineOptions<'static> {
    EngineOptions::default()
}

#[test]
fn allreduce_completes_at_last_arrival_plus_network_time() {
    let w = workload(
        2,
        vec![
            prog(vec![compute("a", 10.0), coll(OpKind::AllReduce, GroupKind::Tp, 1 << 20), iter_end(0)]),
            prog(vec![compute("b", 30.0), coll(OpKind::AllReduce, GroupKind::Tp, 1 << 20), iter_end(0)]),
        ],
        vec![0, 1],
        vec![(GroupKind::Tp, vec![vec![0, 1]])],
    );
    let mut net = FixedNet::new(5.0);
    let r = run(&w, &Stated, &mut net, &opts()).unwrap();
    assert_eq!(net.started.len(), 1, "one network operation for the group");
    assert_eq!(net.started[0].0, 30.0);
    assert_eq!(net.started[0].1.ranks, vec![0, 1]);
    for (rank, arrive) in [(0, 10.0), (1, 30.0)] {
        let o = &r.rank(rank).unwrap().ops[0];
        assert_eq!((o.arrive_us, o.start_us, o.end_us), (arrive, 30.0, 35.0), "rank {rank}");
        assert_eq!(r.rank(rank).unwrap().iteration_end_us, vec![35.0]);
    }
    assert_eq!(r.summary.total_us, 35.0);
    // Rank 0 computes 10, waits 20 (bubble), communicates 5 exposed.
    let b = &r.rank(0).unwrap().breakdown;
    assert_eq!((b.compute_us, b.exposed_comm_us, b.bubble_us), (10.0, 5.0, 20.0));
    assert_eq!(b.exposed(GroupKind::Tp), 5.0);
    // The summary is the slowest rank's (the tie goes to the lowest rank).
    assert_eq!(r.summary.slowest_rank, 0);
    assert_eq!(r.summary.iteration_us, vec![35.0]);
}

#[test]
fn one_f_one_b_pipeline_has_the_textbook_bubble() {
    let (p, m, f, b) = (4u32, 8u32, 10.0, 20.0);
    let programs = (0..p).map(|s| prog(one_f_one_b(s, p, m, f, b, 1 << 20))).collect();
    let w = workload(p, programs, (0..p).collect(), vec![(GroupKind::Pp, vec![(0..p).collect()])]);
    // A network that takes no time: the schedule alone decides.
    let r = run(&w, &Stated, &mut FixedNet::new(0.0), &opts()).unwrap();
    let total = (m + p - 1) as f64 * (f + b);
    assert!((r.summary.total_us - total).abs() < 1e-9, "{} vs {total}", r.summary.total_us);
    assert!((r.summary.compute_us - m as f64 * (f + b)).abs() < 1e-9);
    assert!((r.summary.bubble_us - (p - 1) as f64 * (f + b)).abs() < 1e-9, "{:?}", r.summary);
    // Every stage idles (p − 1)(f + b) over the job.
    for rr in &r.ranks {
        assert!((rr.breakdown.bubble_us - (p - 1) as f64 * (f + b)).abs() < 1e-9, "rank {}: {:?}", rr.rank, rr.breakdown);
    }
    // With 5 µs transfers the pipeline gets longer and the PP time shows as exposed.
    let r5 = run(&w, &Stated, &mut FixedNet::new(5.0), &opts()).unwrap();
    assert!(r5.summary.total_us > total + 5.0);
    assert!(r5.summary.exposed(GroupKind::Pp) > 0.0);
    let s = &r5.summary;
    assert!((s.compute_us + s.exposed_comm_us + s.bubble_us - s.total_us).abs() < 1e-6);
}

#[test]
fn communication_on_its_own_stream_hides_under_compute() {
    // t0 compute 20; t1 AllReduce on a comm stream after t0 (50 µs); t2 compute 100;
    // t3 end of iteration after t1.
    let tasks = vec![
        compute("fwd", 20.0),
        on(coll(OpKind::AllReduce, GroupKind::Dp, 1 << 20), Stream::Comm(0), &[0]),
        compute("bwd", 100.0),
        on(iter_end(0), Stream::Compute, &[1]),
    ];
    let groups = vec![(GroupKind::Dp, vec![vec![0, 1]])];
    let w = workload(2, vec![prog(tasks.clone())], vec![0, 0], groups.clone());
    let r = run(&w, &Stated, &mut FixedNet::new(50.0), &opts()).unwrap();
    assert_eq!(r.summary.total_us, 120.0);
    assert_eq!(r.summary.exposed(GroupKind::Dp), 0.0);
    assert_eq!(r.summary.comm_us, 50.0);
    assert_eq!(r.summary.bubble_us, 0.0);
    // The same on the compute stream serialises: 20 + 50 + 100, 50 exposed.
    let mut serial = tasks;
    serial[1].stream = Stream::Compute;
    let w = workload(2, vec![prog(serial)], vec![0, 0], groups.clone());
    let r = run(&w, &Stated, &mut FixedNet::new(50.0), &opts()).unwrap();
    assert_eq!(r.summary.total_us, 170.0);
    assert_eq!(r.summary.exposed(GroupKind::Dp), 50.0);
    // A sync collective on the comm stream holds back later compute-stream work.
    let mut synced = vec![compute("fwd", 20.0), on(coll(OpKind::AllReduce, GroupKind::Dp, 8), Stream::Comm(0), &[0]), compute("bwd", 100.0)];
    if let Work::Coll(c) = &mut synced[1].work {
        c.sync = true;
    }
    let w = workload(2, vec![prog(synced)], vec![0, 0], groups);
    let r = run(&w, &Stated, &mut FixedNet::new(50.0), &opts()).unwrap();
    assert_eq!(r.summary.total_us, 170.0);
}

#[test]
fn a_member_that_never_arrives_is_named() {
    let w = workload(
        3,
        vec![prog(vec![compute("x", 1.0), coll(OpKind::AllReduce, GroupKind::Tp, 64)]), prog(vec![compute("y", 1.0)])],
        vec![0, 0, 1],
        vec![(GroupKind::Tp, vec![vec![0, 1, 2]])],
    );
    let e = run(&w, &Stated, &mut FixedNet::new(1.0), &opts()).unwrap_err();
    match &e {
        SimError::Stall { rank, task, waits_for, stuck_ranks } => {
            assert_eq!((*rank, *task, *stuck_ranks), (0, 1, 2));
            assert!(waits_for.contains("rank(s) 2 never arrived"), "{waits_for}");
            assert!(waits_for.contains("rank 2 finished its program"), "{waits_for}");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("rank 0 is stuck at task 1"), "{e}");
}

#[test]
fn an_unmatched_recv_and_a_missing_peer_are_named() {
    let w = workload(
        2,
        vec![prog(vec![p2p(GroupKind::Pp, &[(false, Peer::Next, 1024)])]), prog(vec![compute("idle", 5.0)])],
        vec![0, 1],
        vec![(GroupKind::Pp, vec![vec![0, 1]])],
    );
    match run(&w, &Stated, &mut FixedNet::new(1.0), &opts()).unwrap_err() {
        SimError::Stall { rank, task, waits_for, .. } => {
            assert_eq!((rank, task), (0, 0));
            assert!(waits_for.contains("unmatched Recv from rank 1"), "{waits_for}");
        }
        other => panic!("{other:?}"),
    }
    // A one-member group has no neighbour (Next and Prev wrap around a ring of two or more).
    let w = workload(
        2,
        vec![prog(vec![compute("c", 1.0), p2p(GroupKind::Pp, &[(true, Peer::Prev, 1024)])])],
        vec![0, 0],
        vec![(GroupKind::Pp, vec![vec![0], vec![1]])],
    );
    match run(&w, &Stated, &mut FixedNet::new(1.0), &opts()).unwrap_err() {
        SimError::Peer { rank, task, msg } => {
            assert_eq!((rank, task), (0, 1));
            assert!(msg.contains("Send to Prev"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    // The ring wraps: the first member's Send to Prev reaches the last member's Recv from Next.
    let w = workload(
        3,
        vec![
            prog(vec![p2p(GroupKind::Pp, &[(true, Peer::Prev, 1024)])]),
            prog(vec![compute("idle", 1.0)]),
            prog(vec![p2p(GroupKind::Pp, &[(false, Peer::Next, 1024)])]),
        ],
        vec![0, 1, 2],
        vec![(GroupKind::Pp, vec![vec![0, 1, 2]])],
    );
    let r = run(&w, &Stated, &mut FixedNet::new(1.0), &opts()).expect("wrapped pair matches");
    assert_eq!(r.ranks[0].ops.len() + r.ranks[2].ops.len(), 2);
    // Circular wait: both ranks receive first.
    let w = workload(
        2,
        vec![
            prog(vec![p2p(GroupKind::Pp, &[(false, Peer::Next, 8)]), p2p(GroupKind::Pp, &[(true, Peer::Next, 8)])]),
            prog(vec![p2p(GroupKind::Pp, &[(false, Peer::Prev, 8)]), p2p(GroupKind::Pp, &[(true, Peer::Prev, 8)])]),
        ],
        vec![0, 1],
        vec![(GroupKind::Pp, vec![vec![0, 1]])],
    );
    match run(&w, &Stated, &mut FixedNet::new(1.0), &opts()).unwrap_err() {
        SimError::Stall { rank, waits_for, stuck_ranks, .. } => {
            assert_eq!((rank, stuck_ranks), (0, 2));
            assert!(waits_for.contains("unmatched Recv from rank 1 (rank 1 stopped at task 0"), "{waits_for}");
        }
        other => panic!("{other:?}"),
    }
}

/// TP × PP × DP with 1F1B and a DP gradient reduction overlapped on a comm stream.
fn hybrid(tp: u32, pp: u32, dp: u32, m: u32) -> commlens_workload::Workload {
    let world = tp * pp * dp;
    let rank = |t: u32, p: u32, d: u32| t + tp * (d + dp * p);
    let mut programs = Vec::new();
    for s in 0..pp {
        let mut tasks = Vec::new();
        for t in one_f_one_b(s, pp, m, 40.0, 80.0, 8 << 20) {
            let is_compute = matches!(t.work, Work::Compute(_));
            tasks.push(t);
            if is_compute {
                tasks.push(coll(OpKind::AllReduce, GroupKind::Tp, 4 << 20));
            }
        }
        let last = tasks.len() as u32 - 1;
        tasks.push(on(coll(OpKind::AllReduce, GroupKind::Dp, 64 << 20), Stream::Comm(0), &[last]));
        tasks.push(on(coll(OpKind::AllReduce, GroupKind::Mp, 8), Stream::Compute, &[last + 1]));
        tasks.push(iter_end(0));
        programs.push(prog(tasks));
    }
    let mut rank_program = vec![0; world as usize];
    let (mut tps, mut pps, mut dps, mut mps) = (vec![], vec![], vec![], vec![]);
    for p in 0..pp {
        for d in 0..dp {
            tps.push((0..tp).map(|t| rank(t, p, d)).collect());
            for t in 0..tp {
                rank_program[rank(t, p, d) as usize] = p;
            }
        }
        for t in 0..tp {
            dps.push((0..dp).map(|d| rank(t, p, d)).collect());
        }
    }
    for d in 0..dp {
        for t in 0..tp {
            pps.push((0..pp).map(|p| rank(t, p, d)).collect());
        }
        mps.push((0..pp).flat_map(|p| (0..tp).map(move |t| rank(t, p, d))).collect());
    }
    workload(world, programs, rank_program, vec![(GroupKind::Tp, tps), (GroupKind::Pp, pps), (GroupKind::Dp, dps), (GroupKind::Mp, mps)])
}

#[test]
fn same_input_same_output() {
    let w = hybrid(2, 4, 4, 6);
    let a = run(&w, &Stated, &mut analytical(4), &opts()).unwrap();
    let b = run(&w, &Stated, &mut analytical(4), &opts()).unwrap();
    assert_eq!(a, b);
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    // Without records the summary is the same.
    let c = run(&w, &Stated, &mut analytical(4), &EngineOptions { record: false, progress: None }).unwrap();
    assert_eq!(a.summary, c.summary);
    assert!(c.ranks.iter().all(|r| r.ops.is_empty() && r.compute.is_empty()));
    // Progress reaches the total.
    let last = std::cell::Cell::new((0, 0));
    let cb = |d: u64, t: u64| last.set((d, t));
    run(&w, &Stated, &mut analytical(4), &EngineOptions { record: false, progress: Some(&cb) }).unwrap();
    assert_eq!(last.get().0, last.get().1);
    assert_eq!(last.get().1, a.stats.tasks);
}

#[test]
fn representatives_give_the_iteration_time_of_all_ranks() {
    // 1024 ranks: TP 8 (one node), PP 4, DP 32. Every pipeline stage's DP replicas behave
    // alike: replica 0 stands in for the others.
    let (tp, pp, dp) = (8, 4, 32);
    let full = hybrid(tp, pp, dp, 4);
    let mut reps = full.clone();
    reps.representative = (0..1024u32).map(|r| r % tp + tp * dp * (r / (tp * dp))).collect();
    let a = run(&full, &Stated, &mut analytical(128), &opts()).unwrap();
    let b = run(&reps, &Stated, &mut analytical(128), &opts()).unwrap();
    assert_eq!(a.ranks.len(), 1024);
    assert_eq!(b.ranks.len(), 32);
    assert!(b.ranks.iter().all(|r| r.represents == 32));
    let (ta, tb) = (a.summary.mean_iteration_us, b.summary.mean_iteration_us);
    assert!((ta - tb).abs() <= 1e-9 * ta, "{ta} vs {tb}");
    assert_eq!(a.summary.exposed_us, b.summary.exposed_us);
    for rb in &b.ranks {
        assert_eq!(rb.end_us, a.rank(rb.rank).unwrap().end_us, "rank {}", rb.rank);
    }
}
