//! Engine throughput on a 1024-rank Megatron-like job (TP 8 × PP 4 × DP 32, 1F1B over
//! 8 micro-batches, 4 layers per stage with two TP AllReduces per layer and pass, DP
//! ReduceScatter buckets overlapped with the backward pass, AllGather after), all ranks
//! simulated on the analytical network, then with one DP replica per stage standing in.
//!
//! `cargo run --release -p commlens-sim --example bench_engine [iterations]`

use std::time::Instant;

use commlens_core::{DataType, OpKind, RedOp};
use commlens_model::{predict::DEFAULT_VERSION, presets::preset, tuner::NcclEnv};
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::ComputeCost;
use commlens_sim::engine::{run, EngineOptions};
use commlens_workload::*;

const TP: u32 = 8;
const PP: u32 = 4;
const DP: u32 = 32;
const MICRO: u32 = 8;
const LAYERS: u32 = 4;

struct Stated;
impl ComputeCost for Stated {
    fn time_us(&self, c: &Compute) -> f64 {
        c.time_us.unwrap_or(0.0)
    }
}

fn task(stream: Stream, deps: Vec<u32>, phase: Phase, work: Work) -> Task {
    Task { stream, deps, phase, work }
}

fn comp(name: &str, us: f64, phase: Phase) -> Task {
    task(Stream::Compute, vec![], phase, Work::Compute(Compute { name: name.into(), kind: ComputeKind::Gemm, flops: 0.0, mem_bytes: 0.0, time_us: Some(us) }))
}

fn coll(kind: OpKind, g: GroupKind, bytes: u64, stream: Stream, deps: Vec<u32>, phase: Phase) -> Task {
    let redop = (kind != OpKind::AllGather).then_some(RedOp::Sum);
    task(stream, deps, phase, Work::Coll(CollCall { group: GroupSel::of(g), kind, count: bytes / 2, dtype: DataType::Bfloat16, redop, root: 0, sync: false, tag: 0 }))
}

fn pp(calls: &[(bool, Peer)]) -> Task {
    let calls = calls.iter().map(|&(send, peer)| P2pCall { send, peer, count: 8 << 20, dtype: DataType::Bfloat16, tag: 0 }).collect();
    task(Stream::Compute, vec![], Phase::Forward, Work::P2p { group: GroupSel::of(GroupKind::Pp), calls })
}

/// One pass over the stage's layers: a GEMM then a TP AllReduce, twice per layer.
fn pass(t: &mut Vec<Task>, phase: Phase, us: f64) {
    for _ in 0..LAYERS * 2 {
        t.push(comp(if phase == Phase::Forward { "fwd" } else { "bwd" }, us, phase));
        t.push(coll(OpKind::AllReduce, GroupKind::Tp, 16 << 20, Stream::Compute, vec![], phase));
    }
}

fn stage(s: u32, iterations: u32) -> Program {
    let (first, last) = (s == 0, s == PP - 1);
    let mut t = Vec::new();
    for it in 0..iterations {
        let warm = (PP - s - 1).min(MICRO);
        let steady = MICRO - warm;
        for _ in 0..warm {
            if !first { t.push(pp(&[(false, Peer::Prev)])) }
            pass(&mut t, Phase::Forward, 50.0);
            if !last { t.push(pp(&[(true, Peer::Next)])) }
        }
        if steady > 0 && !first {
            t.push(pp(&[(false, Peer::Prev)]));
        }
        for i in 0..steady {
            pass(&mut t, Phase::Forward, 50.0);
            if !last { t.push(pp(&[(true, Peer::Next), (false, Peer::Next)])) }
            pass(&mut t, Phase::InputGrad, 100.0);
            if !first {
                if i == steady - 1 { t.push(pp(&[(true, Peer::Prev)])) } else { t.push(pp(&[(true, Peer::Prev), (false, Peer::Prev)])) }
            }
        }
        for k in 0..warm {
            if !last { t.push(pp(&[(false, Peer::Next)])) }
            pass(&mut t, Phase::InputGrad, 100.0);
            if !first { t.push(pp(&[(true, Peer::Prev)])) }
            // The last micro-batch's backward releases the gradient buckets, one per layer.
            if k == warm - 1 || warm == 0 {
                let after = t.len() as u32 - 1;
                for _ in 0..LAYERS {
                    t.push(coll(OpKind::ReduceScatter, GroupKind::Dp, 2 << 20, Stream::Comm(0), vec![after], Phase::WeightGrad));
                }
            }
        }
        if warm == 0 {
            let after = t.len() as u32 - 1;
            for _ in 0..LAYERS {
                t.push(coll(OpKind::ReduceScatter, GroupKind::Dp, 2 << 20, Stream::Comm(0), vec![after], Phase::WeightGrad));
            }
        }
        let rs = t.len() as u32 - 1;
        t.push(task(Stream::Compute, vec![rs], Phase::Optimizer, Work::Compute(Compute { name: "optimizer".into(), kind: ComputeKind::Optimizer, flops: 0.0, mem_bytes: 0.0, time_us: Some(300.0) })));
        for _ in 0..LAYERS {
            t.push(coll(OpKind::AllGather, GroupKind::Dp, 2 << 20, Stream::Compute, vec![], Phase::Optimizer));
        }
        t.push(task(Stream::Compute, vec![], Phase::Other, Work::IterationEnd { iter: it }));
    }
    Program { tasks: t }
}

fn job(iterations: u32) -> Workload {
    let world = TP * PP * DP;
    let rank = |t: u32, p: u32, d: u32| t + TP * (d + DP * p);
    let mut w = Workload {
        name: "bench-1024".into(),
        origin: Origin::ModelConf,
        world,
        gpus_per_node: Some(8),
        iterations,
        groups: vec![],
        programs: (0..PP).map(|s| stage(s, iterations)).collect(),
        rank_program: (0..world).map(|r| r / (TP * DP)).collect(),
        membership: vec![vec![]; world as usize],
        representative: vec![],
        notes: vec![],
    };
    let add = |w: &mut Workload, kind: GroupKind, ranks: Vec<u32>| {
        let id = GroupId(w.groups.len() as u32);
        ranks.iter().for_each(|&r| w.membership[r as usize].push(id));
        w.groups.push(Group { kind, tag: 0, name: format!("{}{}", kind.label(), id.0), ranks });
    };
    for p in 0..PP {
        for d in 0..DP {
            add(&mut w, GroupKind::Tp, (0..TP).map(|t| rank(t, p, d)).collect());
        }
        for t in 0..TP {
            add(&mut w, GroupKind::Dp, (0..DP).map(|d| rank(t, p, d)).collect());
        }
    }
    for d in 0..DP {
        for t in 0..TP {
            add(&mut w, GroupKind::Pp, (0..PP).map(|p| rank(t, p, d)).collect());
        }
    }
    w
}

fn main() {
    let iterations: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2);
    let cluster = preset("dgx-h100").expect("preset").with_nodes(128);
    let full = job(iterations);
    let mut reps = full.clone();
    reps.representative = (0..full.world).map(|r| r % TP + TP * DP * (r / (TP * DP))).collect();
    for (label, w) in [("all 1024 ranks", &full), ("32 representatives", &reps)] {
        let mut net = AnalyticalNetwork::new(&cluster, DEFAULT_VERSION, NcclEnv::default());
        let t0 = Instant::now();
        let r = run(w, &Stated, &mut net, &EngineOptions { record: true, progress: None }).expect("runs");
        let dt = t0.elapsed().as_secs_f64();
        let s = &r.stats;
        let calls: usize = r.ranks.iter().map(|x| x.ops.len()).sum();
        println!(
            "{label}: {} tasks, {} rank-level calls, {} network ops, {} events in {:.3} s = {:.2} M tasks/s, {:.2} M calls/s, {:.0} k net ops/s; iteration {:.1} µs (exposed DP {:.1}, TP {:.1}, PP {:.1}, bubble {:.1})",
            s.tasks,
            calls,
            s.net_ops,
            s.events,
            dt,
            s.tasks as f64 / dt / 1e6,
            calls as f64 / dt / 1e6,
            s.net_ops as f64 / dt / 1e3,
            r.summary.mean_iteration_us,
            r.summary.exposed(GroupKind::Dp),
            r.summary.exposed(GroupKind::Tp),
            r.summary.exposed(GroupKind::Pp),
            r.summary.bubble_us,
        );
    }
}
